"""`tidekeep archives ingest | list | show | datasets`: in-process (on the test run's Spark session)
for the commands that run the job, in a subprocess for help and errors (no Spark is started)."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tidekeep.cli.main import main

CLI = [sys.executable, "-m", "tidekeep.cli.main"]

LOG = ("2024-07-01 12:00:00,000 INFO start\n"
       "2024-07-01 12:00:01,500 ERROR failed\n"
       "\tat a.b.C(C.java:1)\n")


def run(capsys: pytest.CaptureFixture[str], flags: list[str], *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the command in this process; the logging set-up and
    excepthook the CLI changes are put back after, so later tests never log to a closed capture."""
    capsys.readouterr()
    logger, hook = logging.getLogger("tidekeep"), sys.excepthook
    saved = (logger.handlers[:], logger.level, logger.propagate)
    try:
        main([*flags, *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        logger.handlers[:], logger.level, logger.propagate = saved
        sys.excepthook = hook
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.spark
def test_ingest_list_show_datasets(tmp_path: Path, metadata_url: str, spark, capsys) -> None:
    flags = ["--home", str(tmp_path / "ws"), "--metadata-url", metadata_url, "--storage", str(tmp_path / "data")]
    log = tmp_path / "app.log"
    log.write_text(LOG)
    (tmp_path / "plain.txt").write_text("no time here\n")
    assert run(capsys, flags, "init")[0] == 0

    code, out, err = run(capsys, flags, "archives", "ingest", "web", str(log), str(tmp_path / "plain.txt"),
                         "--timezone", "America/New_York", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert (report["dataset"], report["files"], report["messages"], report["messages_without_timestamp"]) == \
        ("web", 2, 3, 1)
    timed = next(a for a in report["archives"] if a["end_ts"] is not None)
    assert (timed["begin_ts"], timed["end_ts"]) == (1719849600000, 1719849601500)  # 12:00 EDT = 16:00 UTC

    code, out, err = run(capsys, flags, "archives", "ingest", "web", str(log))
    assert code == 0, err
    first = out.splitlines()[0]
    assert re.fullmatch(r"ingest [0-9a-f]{32} into web: 1 file\(s\), 2 message\(s\) \(0 without timestamp\), "
                        r"1 archive\(s\), .* -> .*, ratio \d+\.\dx, \d+\.\d s", first), first
    assert "2024-07-01T12:00:00" in out and "2024-07-01T12:00:01.500" in out

    code, out, err = run(capsys, flags, "archives", "list", "--dataset", "web", "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert len(listed) == 3 and listed[-1]["end_ts"] is None  # timestamp-less archives list last
    code, out, _ = run(capsys, flags, "archives", "list")
    assert out.splitlines()[0].split() == ["ID", "DATASET", "BEGIN", "END", "MESSAGES", "RAW", "STORED"]
    assert len(out.splitlines()) == 4

    archive_id = timed["id"]
    code, out, err = run(capsys, flags, "archives", "show", archive_id, "--json")
    assert code == 0 and json.loads(out) == timed
    code, out, _ = run(capsys, flags, "archives", "show", next(a["id"] for a in report["archives"]
                                                                if a["end_ts"] is None))
    assert re.search(r"^end\s+- \(no timestamps: never expires\)$", out, re.M), out

    code, out, err = run(capsys, flags, "archives", "datasets", "--json")
    assert code == 0, err
    [web] = json.loads(out)
    assert (web["dataset"], web["archives"], web["messages"], web["end_ts"]) == ("web", 3, 5, 1719849601500)

    code, out, err = run(capsys, flags, "archives", "show", "0" * 32)
    assert code == 3 and err == f"error: archive {'0' * 32} does not exist\n"


def test_help_and_bad_input_in_a_subprocess(tmp_path: Path) -> None:
    flags = ["--home", str(tmp_path / "ws"), "--metadata-url", f"sqlite:///{tmp_path / 'm.db'}",
             "--storage", str(tmp_path / "data")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *flags, *args], capture_output=True, text=True, env=env, timeout=120,
                              check=False)

    assert cli("init").returncode == 0
    for command in ("ingest", "list", "show", "datasets"):
        shown = cli("archives", command, "--help")
        assert shown.returncode == 0 and "--json" in shown.stdout, shown.stderr
    assert "--timestamp-format" in cli("archives", "ingest", "--help").stdout

    log = tmp_path / "a.log"
    log.write_text(LOG)
    cases = [
        (["web", str(tmp_path / "nope.log")], 3, f"error: input path {str(tmp_path / 'nope.log')!r} does not exist\n"),
        (["web", str(log), "--timezone", "Mars/Base"], 2,
         "error: --timezone: unknown time zone 'Mars/Base' (expected an IANA name such as UTC or America/New_York)\n"),
        (["web", str(log), "--timestamp-format", "%H:%M:%S"], 2, None),
        (["bad name", str(log)], 2, None),
    ]
    for args, code, message in cases:
        done = cli("archives", "ingest", *args)
        assert done.returncode == code, (args, done.stderr)
        assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("error: "), done.stderr
        if message is not None:
            assert done.stderr == message
    assert "not enough fields to place a time" in cli("archives", "ingest", "web", str(log), "--timestamp-format",
                                                      "%H:%M:%S").stderr
    assert not (tmp_path / "data" / "archives").exists()
    listed = cli("archives", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []


def test_every_input_of_both_commands_is_judged_before_any_work_in_a_subprocess(tmp_path: Path, s3_server,
                                                                               s3_bucket: str, pg_url: str) -> None:
    """The CLI's `archives ingest` and `catalog import` refuse, in one line and before anything is
    listed or written, an input URI carrying credentials and a local input (a plain path or a
    file:// URI, here of a file that does not exist) on a cluster master. The storage on S3 and
    the metadata on PostgreSQL, with its password by reference, so the inputs are the only reason."""
    import sqlalchemy as sa

    from tidekeep.spark.credentials import PASSWORD_ENV

    home = tmp_path / "ws"
    flags = ["--home", str(home), "--metadata-url", pg_url, "--storage", s3_server.uri(s3_bucket, "data")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    env[PASSWORD_ENV] = str(sa.make_url(pg_url).password)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *flags, *args], capture_output=True, text=True, env=env, timeout=120,
                              check=False)

    assert cli("init").returncode == 0
    missing = tmp_path / "missing.log"
    keyed = f"s3://{s3_bucket}/logs?endpoint_override={s3_server.endpoint}&secret_key=hunter2"
    for command in (["archives", "ingest", "web"], ["catalog", "import"]):
        done = cli(*command, keyed)
        assert done.returncode == 2 and done.stderr.startswith(
            "error: an input URI carries credentials (the query parameter 'secret_key'); "), done.stderr
        assert len(done.stderr.splitlines()) == 1 and "hunter2" not in done.stderr
        for given in (str(missing), missing.as_uri()):
            done = cli("--set", "spark.master=spark://head:7077", *command, given)
            assert done.returncode == 2, done.stderr
            assert done.stderr == (f"error: input {given!r} is a local path, and the executors of Spark "
                                   "master 'spark://head:7077' would look for it on their own disks; put the inputs "
                                   "where every executor sees them and set spark.shared_filesystem: true if every "
                                   "executor sees the driver's files at the same paths\n")
    listed = cli("archives", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout) == []
    records = cli("catalog", "list", "--json")
    assert records.returncode == 0 and json.loads(records.stdout) == []
