"""`tidekeep archives search|results|jobs|job|cancel`: text and --json output, exit codes, --help,
run in this process (on the test run's Spark session); and a real `tidekeep archives search`
process cancelled midway by `tidekeep archives cancel` from another process."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.archives import make_archive
from helpers.procs import worker_env
from tidekeep.archives.model import JobState
from tidekeep.archives.results import result_files
from tidekeep.cli.main import main
from tidekeep.units import iso_utc

CLI = [sys.executable, "-m", "tidekeep.cli.main"]


class Workspace:
    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.home, self.data, self.capsys = tmp_path / "ws", tmp_path / "data", capsys
        assert self.run("init")[0] == 0
        self.client = tk.connect(home=self.home, storage=str(self.data), create=True)

    def run(self, *args: str) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) of `tidekeep --home ... --storage ... ARGS` in this process;
        the logging set-up and excepthook the CLI changes are put back after."""
        self.capsys.readouterr()
        logger, hook = logging.getLogger("tidekeep"), sys.excepthook
        saved = (logger.handlers[:], logger.level, logger.propagate)
        try:
            with pytest.raises(SystemExit) as done:
                main(["--home", str(self.home), "--storage", str(self.data), *args])
        finally:
            logger.handlers[:], logger.level, logger.propagate = saved
            sys.excepthook = hook
        out, err = self.capsys.readouterr()
        return int(done.value.code or 0), out, err


@pytest.fixture
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str], spark: object) -> Workspace:
    w = Workspace(tmp_path, capsys)
    yield w
    w.client.close()


def test_search_results_jobs_job_and_cancel(ws: Workspace) -> None:
    first = make_archive(ws.client, "web", [(1_717_243_200_000, "GET /a 200"), (1_717_243_201_000, "GET /b\n500")])
    make_archive(ws.client, "web", [(None, "GET untimed"), (None, "POST x")])

    code, out, err = ws.run("archives", "search", "web", "GET", "--json")
    assert (code, err) == (0, "")
    shown = json.loads(out)
    assert shown["job"]["state"] == "SUCCEEDED" and shown["total"] == 3 and shown["pages"] == 1
    assert [r["message"] for r in shown["rows"]] == ["GET /b\n500", "GET /a 200", "GET untimed"]
    job_id = shown["job"]["id"]

    code, out, _ = ws.run("archives", "search", "web", "get*0?", "-i", "--begin", "2024-06-01T12:00:00",
                          "--end", "1717243201000", "--page-size", "1")
    assert code == 0
    lines = out.splitlines()
    assert re.fullmatch(rf"search job {job_id + 1} SUCCEEDED: 1 archive\(s\) searched, 2 result\(s\); "
                        r"created \S+Z, completed \S+Z", lines[0]), lines[0]
    assert lines[2].split() == ["TIMESTAMP", "ARCHIVE", "MESSAGE"]
    assert lines[3].split() == ["2024-06-01T12:00:01.000Z", first.id, "GET", "/b\\n500"]  # one result per line
    assert lines[4:] == ["results 1-1 of 2 (page 1 of 2)",
                         f"next: tidekeep archives results {job_id + 1} --page 2 --page-size 1"]

    code, out, _ = ws.run("archives", "results", str(job_id), "--page", "2", "--page-size", "2")
    assert code == 0
    assert "GET untimed" in out and "results 3-3 of 3 (page 2 of 2)" in out
    assert re.search(r"^-\s+[0-9a-f]{32}\s+GET untimed$", out, re.MULTILINE)  # no timestamp shows as -
    code, out, _ = ws.run("archives", "results", str(job_id + 1), "--page", "2", "--page-size", "1")
    assert out.splitlines()[3].split() == ["2024-06-01T12:00:00.000Z", first.id, "GET", "/a", "200"]
    assert "next:" not in out
    code, out, _ = ws.run("archives", "results", str(job_id), "--json", "--page", "9")
    assert code == 0 and json.loads(out)["rows"] == [] and json.loads(out)["total"] == 3

    code, out, _ = ws.run("archives", "jobs", "--json")
    listed = json.loads(out)
    assert [j["id"] for j in listed] == [job_id + 1, job_id]
    # each search beat at least at its creation, promising search.heartbeat_interval (default 10 s)
    assert all(j["heartbeat_interval_ms"] == 10_000 and j["heartbeat_ms"] >= j["created_ms"] for j in listed)
    code, out, _ = ws.run("archives", "jobs", "--state", "succeeded", "--limit", "1")
    assert code == 0 and out.splitlines()[0].split() == ["ID", "STATE", "DATASET", "QUERY", "CREATED", "COMPLETED",
                                                         "HEARTBEAT", "ARCHIVES", "RESULTS"]
    newest = ws.client.archives.job(job_id + 1)
    assert len(out.splitlines()) == 2 and out.splitlines()[1].split() == [
        str(job_id + 1), "SUCCEEDED", "web", "get*0?", iso_utc(newest.created_ms), iso_utc(newest.completed_ms),
        iso_utc(newest.heartbeat_ms), "1", "2"]
    code, out, _ = ws.run("archives", "jobs", "--state", "RUNNING")
    assert (code, out) == (0, "no search jobs\n")

    code, out, _ = ws.run("archives", "job", str(job_id), "--json")
    assert json.loads(out) == ws.client.archives.job(job_id).to_dict()
    code, out, _ = ws.run("archives", "job", str(job_id + 1))
    assert re.search(r"^time range\s+\[2024-06-01T12:00:00\.000Z, 2024-06-01T12:00:01\.000Z\] \(inclusive\)$", out,
                     re.MULTILINE), out
    assert re.search(r"^options\s+ignore case$", out, re.MULTILINE)
    assert re.search(rf"^heartbeat\s+{re.escape(iso_utc(newest.heartbeat_ms))} \(every 10s\)$", out, re.MULTILINE)

    # cancel: a RUNNING job (created as the search command creates it) ends CANCELLED
    from tidekeep.archives.store import SearchJobStore

    running = SearchJobStore(ws.client.workspace).create("web", "x", regex=False, ignore_case=False, begin_ts=None,
                                                         end_ts=None, retention_minutes=None)
    code, out, _ = ws.run("archives", "job", str(running.id))
    assert re.search(r"^heartbeat\s+-$", out, re.MULTILINE)  # created without a heartbeat promise
    code, out, _ = ws.run("archives", "cancel", str(running.id), "--json")
    assert code == 0 and json.loads(out)["state"] == "CANCELLED"
    assert ws.client.archives.job(running.id).state is JobState.CANCELLED
    code, out, err = ws.run("archives", "cancel", str(running.id))
    assert (code, out, err) == (2, "", f"error: search job {running.id} already ended: CANCELLED\n")


def test_errors_are_one_line_and_exit_non_zero(ws: Workspace) -> None:
    gone = make_archive(ws.client, "web", [(1000, "GET /gone")])
    Path(ws.client.workspace.storage.full_path(gone.path)).unlink()

    code, out, err = ws.run("archives", "search", "web", "GET")
    assert code == 1
    assert out.startswith("search job 1 FAILED: 0 archive(s) searched, 0 result(s)")
    assert err.startswith(f"error: search job 1 failed: archive {gone.id} (file://")
    assert err.endswith("the archive file is missing\n") and err.count("\n") == 1
    code, out, _ = ws.run("archives", "search", "web", "GET", "--json")
    assert code == 1 and json.loads(out)["job"]["state"] == "FAILED"

    for args, expected_code, message in [
        (["archives", "search", "web", ""], 2, "error: invalid search query: it is empty"),
        (["archives", "search", "web", "(", "--regex"], 2, "error: invalid regex query '('"),
        (["archives", "search", "web", "x", "--begin", "2024-02-30"], 2, "error: invalid --begin '2024-02-30'"),
        (["archives", "search", "web", "x", "--page-size", "0"], 2, "error: invalid page size 0"),
        (["archives", "search", "nope", "x"], 3, "error: dataset 'nope' does not exist"),
        (["archives", "results", "77"], 3, "error: search job 77 does not exist"),
        (["archives", "results", "abc"], 2, "error: invalid search job id 'abc'"),
        (["archives", "results", "1", "--page", "0"], 2, "error: invalid page 0"),
        (["archives", "jobs", "--state", "DONE"], 2, "error: invalid job state 'DONE'"),
        (["archives", "jobs", "--limit", "0"], 2, "error: invalid job limit 0"),
        (["archives", "job", "0"], 2, "error: invalid search job id"),
        (["archives", "cancel", "5"], 3, "error: search job 5 does not exist"),
    ]:
        code, out, err = ws.run(*args)
        assert (code, out) == (expected_code, ""), args
        assert err.startswith(message) and err.count("\n") == 1, (args, err)
    assert [j.id for j in ws.client.archives.jobs()] == [2, 1]  # bad input created no job


@pytest.mark.parametrize("command", ["search", "results", "jobs", "job", "cancel"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["archives", command, "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "--json" in out and "Usage: tidekeep archives " + command in out


def test_a_search_process_is_cancelled_from_another_process(tmp_path: Path, metadata_url: str) -> None:
    """A real `tidekeep archives search`, its archive tasks held at a gate (TIDEKEEP_PAUSE), is
    cancelled by `tidekeep archives cancel` while they wait: it stops, exits 1 saying so, and the job
    is CANCELLED with the counts it reached (none: the gate never opened, so only the cancel can have
    ended the Spark job)."""
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    assert subprocess.run([*CLI, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    gate = tmp_path / "search-paused"
    reached = Path(f"{gate}.reached")
    try:
        total = 30
        for i in range(total):
            make_archive(client, "app", [(1000 + i, f"hit {i}"), (5000 + i, f"hit again {i}"), (9000, "miss")])
        gate.touch()
        search = subprocess.Popen([*CLI, "archives", "search", "app", "hit", "--json"], env={
            **env, "TIDEKEEP_PAUSE": f"search_archive=@{gate}"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True)
        try:
            # no deadline of our own: a task reaches the gate or the search exits (pytest's timeout ends a hang)
            while not reached.exists() and search.poll() is None:
                time.sleep(0.05)
            assert reached.exists(), search.communicate()
            jobs = client.archives.jobs()
            assert [j.state for j in jobs] == [JobState.RUNNING]
            job_id = jobs[0].id
            cancel = subprocess.run([*CLI, "archives", "cancel", str(job_id)], env=env, capture_output=True, text=True,
                                    timeout=120)
            assert cancel.returncode == 0, cancel.stderr
            out, err = search.communicate(timeout=300)
        finally:
            gate.unlink(missing_ok=True)
            if search.poll() is None:
                search.kill()
                search.wait()
        assert search.returncode == 1
        assert f"error: search job {job_id} was cancelled\n" in err
        job = client.archives.job(job_id)
        shown = json.loads(out)
        assert shown["job"]["state"] == "CANCELLED" == str(job.state)
        assert shown["job"]["archives_searched"] == job.archives_searched == 0  # stopped before any archive
        assert job.results_count == 0 and result_files(client.workspace, job.results_path or "") == []
        assert client.archives.results(job.id).total == 0
    finally:
        client.close()
