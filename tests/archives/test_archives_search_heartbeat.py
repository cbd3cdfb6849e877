"""Search heartbeats with real searches, real Spark and real processes, on SQLite and PostgreSQL: a
SIGKILLed `tidekeep archives search` stops beating, the archive collector marks its job FAILED
once it has been silent for more than three intervals (not at exactly three) and expiry resumes
without waiting for search.max_runtime; a live search keeps beating and is never failed; a live
search marked FAILED (it looked dead) is not brought back by its heartbeat or its completion.

Time is placed with ManualClocks at explicit distances from the heartbeats read from the store;
the killed search's archive tasks wait at a gate (TIDEKEEP_PAUSE), so it runs until the kill however
slow the machine; the only waiting is polling of the store for what the searching process writes,
bounded by pytest's timeout."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from helpers.procs import worker_env
from tidekeep.archives.expiry import MISSED_HEARTBEATS
from tidekeep.archives.gc import collect_archives
from tidekeep.archives.model import Archive, JobState, SearchJob
from tidekeep.archives.results import result_files
from tidekeep.store.schema_archives import archives
from tidekeep.store.schema_catalog import catalog_records
from tidekeep.units import iso_utc

CLI = [sys.executable, "-m", "tidekeep.cli.main"]
MIN = 60_000
T0 = 1_700_000_000_000
INTERVAL_MS = 200  # the searching process's search.heartbeat_interval


def wait_for(what: str, check: Callable[[], object], alive: subprocess.Popen[str] | None = None) -> object:
    """Poll until check() returns something truthy; fail naming `what` (with the process's output)
    if the process ended first. No deadline of its own: pytest's timeout ends a hang."""
    while True:
        found = check()
        if found:
            return found
        if alive is not None and alive.poll() is not None:
            pytest.fail(f"the search process ended before {what}: {alive.communicate()}")
        time.sleep(0.02)


def archive_state(client: tk.Client) -> tuple[set[str], set[int]]:
    with client.workspace.db.read() as conn:
        return (set(conn.execute(sa.select(archives.c.id)).scalars()),
                set(conn.execute(sa.select(catalog_records.c.id)).scalars()))


def has_file(client: tk.Client, archive: Archive) -> bool:
    return Path(client.workspace.storage.full_path(archive.path)).is_file()


def test_a_sigkilled_search_is_failed_after_its_missed_heartbeats_and_expiry_resumes(
        tmp_path: Path, metadata_url: str) -> None:
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    # the archive tasks wait at the gate, which is never opened: the Spark job runs until the kill
    gate = tmp_path / "search-paused"
    gate.touch()
    env.update({"TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD": "60", "TIDEKEEP_SEARCH_HEARTBEAT_INTERVAL": "200ms",
                "TIDEKEEP_PAUSE": f"search_archive=@{gate}"})
    observer = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        wall = int(time.time() * 1000)
        searched = [make_archive(observer, "app", [(wall - MIN + i, f"hit {i}")]) for i in range(40)]
        search = subprocess.Popen([*CLI, "archives", "search", "app", "hit"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            # the Spark job is running once an archive task waits at the gate; a heartbeat written
            # after that shows the thread beating while the Spark job runs
            wait_for("an archive task at the gate", Path(f"{gate}.reached").exists, alive=search)
            [job] = observer.archives.jobs(state="RUNNING")
            assert isinstance(job, SearchJob) and job.heartbeat_interval_ms == INTERVAL_MS
            seen = job.heartbeat_ms
            assert seen is not None and seen >= job.created_ms
            wait_for("a heartbeat during the Spark job",
                     lambda: (observer.archives.job(job.id).heartbeat_ms or 0) > seen, alive=search)
            # archives of another dataset that expiry reaches only by the running job's grace:
            # `held` ends exactly at the job's lower bound (the job may read it), `gone` 1 ms before
            assert job.lower_bound_ms == job.created_ms - 60 * MIN
            held = make_archive(observer, "old", [(job.lower_bound_ms - 5, "held a"), (job.lower_bound_ms, "held b")])
            gone = make_archive(observer, "old", [(job.lower_bound_ms - 1, "gone")])
            os.killpg(search.pid, signal.SIGKILL)
            search.communicate(timeout=60)
        finally:
            if search.poll() is None:
                os.killpg(search.pid, signal.SIGKILL)
                search.wait(timeout=60)
            gate.unlink()
        assert search.returncode == -signal.SIGKILL
        assert result_files(observer.workspace, job.results_path or "") == []  # no task passed the gate

        dead = observer.archives.job(job.id)
        assert dead.state is JobState.RUNNING and dead.heartbeat_ms is not None and dead.heartbeat_ms > seen
        last = dead.heartbeat_ms
        rows_before, records_before = archive_state(observer)
        assert {held.id, gone.id} <= rows_before
        survivors = [a.id for a in searched]

        clock = tk.ManualClock(last + MISSED_HEARTBEATS * INTERVAL_MS)  # exactly three intervals of silence
        collector = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                               clock=clock, settings={"archive_output.retention_period": 60}, create=True)
        try:
            report = collect_archives(collector.workspace)
            assert observer.archives.job(job.id) == dead  # untouched: still alive by the rule
            assert report.failed_jobs == [] and report.held_back_by_job == job.id
            assert [c["archive_id"] for c in report.candidates] == [gone.id]  # below the job's bound: may go
            assert archive_state(observer)[0] == rows_before - {gone.id} and has_file(observer, held)

            clock.advance(1)
            report = collect_archives(collector.workspace)
        finally:
            collector.close()
        now = last + MISSED_HEARTBEATS * INTERVAL_MS + 1
        assert now - dead.created_ms < 3_600_000  # search.max_runtime (1 h) is far away: not the reason
        failed = observer.archives.job(job.id)
        assert failed.error is not None and failed.error.startswith(f"no heartbeat since {iso_utc(last)} "
                                                                    "(expected every 200ms): its process died")
        assert failed == dataclasses.replace(dead, state=JobState.FAILED, completed_ms=now, error=failed.error)
        assert [f["job_id"] for f in report.failed_jobs] == [job.id] and report.killed_jobs == []
        assert report.held_back_by_job is None and [c["archive_id"] for c in report.candidates] == [held.id]
        # the held-back archive is expired and its file deleted; nothing else changed
        rows, records = archive_state(observer)
        assert rows == rows_before - {held.id, gone.id} == set(survivors)
        assert records == records_before - {held.catalog_record_id, gone.catalog_record_id}
        assert not has_file(observer, held) and not has_file(observer, gone)
        assert all(has_file(observer, a) for a in searched)
        assert [e["target"] for e in observer.audit(limit=1000) if e["action"] == "search_fail"] == [f"search/{job.id}"]
        assert [j.id for j in observer.archives.jobs()] == [job.id]
    finally:
        observer.close()


@pytest.fixture
def beating(tmp_path: Path, metadata_url: str, spark: object) -> tuple[tk.Client, tk.ManualClock]:
    clock = tk.ManualClock(T0)
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                   settings={"archive_output.retention_period": 60, "search.heartbeat_interval": "50ms"}, create=True)
    yield c, clock
    c.close()


def test_a_live_search_keeps_beating_and_is_never_failed(beating: tuple[tk.Client, tk.ManualClock]) -> None:
    """While a real search runs, its clock jumps far beyond three intervals; the heartbeat thread
    writes the new time, and a sweep then finds the job alive and still holding expiry back."""
    client, clock = beating
    fresh = make_archive(client, "app", [(T0 - MIN, "hit fresh")])
    held = make_archive(client, "other", [(T0 - 50 * MIN, "may be read by the search's bound")])
    seen: list[object] = []

    def sweep_mid_search(done: int, total: int) -> None:
        if seen:
            return
        [job] = client.archives.jobs(state="RUNNING")
        clock.advance(15 * MIN)  # a thousand intervals later; `held` is expired but for the search
        wait_for("a heartbeat at the new time", lambda: client.archives.job(job.id).heartbeat_ms == clock.now_ms())
        seen.append(collect_archives(client.workspace))
        seen.append(client.archives.job(job.id))

    job = client.archives.search("app", "hit", progress=sweep_mid_search)
    report, during = seen
    assert report.failed_jobs == [] and report.held_back_by_job == job.id and report.candidates == []
    assert during.state is JobState.RUNNING and held.id in archive_state(client)[0] and has_file(client, held)
    assert job.state is JobState.SUCCEEDED and job.results_count == 1 and job.archives_searched == 1
    assert job.heartbeat_interval_ms == 50 and job.heartbeat_ms is not None and job.heartbeat_ms >= T0 + 15 * MIN
    # the job has ended: its heartbeat thread is gone, and the next sweep deletes what it held back
    assert not [t for t in threading.enumerate() if t.name == f"tidekeep-search-{job.id}-heartbeat"]
    collect_archives(client.workspace)
    assert archive_state(client)[0] == {fresh.id} and not has_file(client, held)


def test_a_live_search_failed_as_dead_is_not_brought_back(beating: tuple[tk.Client, tk.ManualClock],
                                                         tmp_path: Path, metadata_url: str) -> None:
    """A collector whose clock is 15 minutes ahead takes a live search for dead (as it would a
    frozen process) and marks it FAILED. The search's heartbeat thread then stops without writing,
    the search is stopped, and its own ending — which also finds an archive the collector deleted
    meanwhile — is refused: the job stays FAILED with the collector's reason and time."""
    client, clock = beating
    make_archive(client, "app", [(T0 - MIN, "hit fresh")])
    doomed = make_archive(client, "app", [(T0 - 50 * MIN, "hit doomed")])  # the job's bound T0 − 60 min keeps it
    ahead = tk.ManualClock(T0 + 15 * MIN)
    collector = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                           clock=ahead, settings={"archive_output.retention_period": 60}, create=True)
    verdicts: list[SearchJob] = []

    def fail_it(done: int, total: int) -> None:
        if verdicts:
            return
        [job] = client.archives.jobs(state="RUNNING")
        report = collect_archives(collector.workspace)
        assert [f["job_id"] for f in report.failed_jobs] == [job.id]
        assert [c["archive_id"] for c in report.candidates] == [doomed.id]  # no longer held back
        verdicts.append(client.archives.job(job.id))
        clock.advance(MIN)  # a beat now would write a new time: it must not happen
        name = f"tidekeep-search-{job.id}-heartbeat"
        wait_for("the heartbeat thread to stop", lambda: not [t for t in threading.enumerate() if t.name == name])

    try:
        job = client.archives.search("app", "hit", progress=fail_it)
    finally:
        collector.close()
    [verdict] = verdicts
    assert verdict.state is JobState.FAILED and verdict.completed_ms == T0 + 15 * MIN
    assert verdict.error is not None and verdict.error.startswith("no heartbeat since 2023-11-14T22:13:20.000Z")
    assert job.state is JobState.FAILED and job.error == verdict.error and job.completed_ms == verdict.completed_ms
    assert job.heartbeat_ms == verdict.heartbeat_ms == T0  # never beaten back to life
    assert job.archives_searched <= 1  # the doomed archive was gone when its task came to it
