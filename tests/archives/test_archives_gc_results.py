"""The search-result collector on real stores and files: results expire TTL after their job's
completion (CLP PR #2509), in every final state; RUNNING jobs' results never; rows stay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.archives import make_archive
from tidekeep.archives.gc_results import collect_search_results
from tidekeep.archives.model import JobState, SearchJob, results_dir
from tidekeep.archives.store import SearchJobStore

MIN = 60_000
T0 = 1_700_000_000_000


@pytest.fixture
def rc_client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"results_cache.retention_period": 30}, create=True)
    make_archive(c, "web", [(None, "x")])  # the dataset exists
    yield c
    c.close()


def new_job(client: tk.Client, payload: bytes = b"results") -> SearchJob:
    job = SearchJobStore(client.workspace).create("web", "q", regex=False, ignore_case=False, begin_ts=None,
                                                  end_ts=None, retention_minutes=None)
    directory = Path(client.workspace.storage.full_path(results_dir(job.id)))
    directory.mkdir(parents=True)
    (directory / ("a" * 32 + ".parquet")).write_bytes(payload)
    SearchJobStore(client.workspace).set_results_path(job.id, results_dir(job.id))
    return job


def has_results(client: tk.Client, job: SearchJob) -> bool:
    return Path(client.workspace.storage.full_path(results_dir(job.id))).exists()


def test_results_expire_ttl_after_completion_in_every_final_state(rc_client: tk.Client) -> None:
    clock = rc_client.clock
    assert isinstance(clock, tk.ManualClock)
    jobs = SearchJobStore(rc_client.workspace)
    ok, failed, cancelled, killed, running = (new_job(rc_client) for _ in range(5))
    clock.advance(10 * MIN)  # completion, not creation, starts the clock
    jobs.finish(ok.id, JobState.SUCCEEDED, archives_searched=1, results_count=1)
    jobs.finish(failed.id, JobState.FAILED, archives_searched=1, results_count=0, error="boom")
    jobs.cancel(cancelled.id)
    jobs.finish(killed.id, JobState.KILLED, archives_searched=0, results_count=0, error="max runtime")
    completed = clock.now_ms()
    clock.set(completed + 30 * MIN)  # exactly the TTL: kept
    report = collect_search_results(rc_client.workspace)
    assert report.expired == [] and all(has_results(rc_client, j) for j in (ok, failed, cancelled, killed))
    clock.advance(1)
    report = collect_search_results(rc_client.workspace)
    assert [e["job_id"] for e in report.expired] == [ok.id, failed.id, cancelled.id, killed.id]
    assert {e["state"] for e in report.expired} == {"SUCCEEDED", "FAILED", "CANCELLED", "KILLED"}
    assert report.bytes_freed == 4 * len(b"results")
    assert not any(has_results(rc_client, j) for j in (ok, failed, cancelled, killed))
    assert has_results(rc_client, running)  # RUNNING: never expired, however old
    clock.advance(24 * 60 * MIN)
    assert collect_search_results(rc_client.workspace).expired == [] and has_results(rc_client, running)
    for job in (ok, failed, cancelled, killed):  # the rows stay as history
        assert jobs.get(job.id).results_expired_ms == completed + 30 * MIN + 1
    assert jobs.get(running.id).results_expired_ms is None
    audits = [e for e in rc_client.audit(limit=100) if e["action"] == "search_results_expire"]
    assert sorted(e["target"] for e in audits) == sorted(f"search/{j.id}" for j in (ok, failed, cancelled, killed))
    assert all(json.loads(e["details"])["bytes"] == len(b"results") for e in audits)


def test_dry_run_lists_and_changes_nothing(rc_client: tk.Client) -> None:
    job = new_job(rc_client, b"x" * 100)
    SearchJobStore(rc_client.workspace).finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=5)
    rc_client.clock.advance(45 * MIN)  # type: ignore[attr-defined]
    report = collect_search_results(rc_client.workspace, dry_run=True)
    [entry] = report.expired
    assert entry["job_id"] == job.id and entry["completed_ms"] == T0 and entry["age_ms"] == 45 * MIN
    assert entry["bytes"] == 100 and report.dry_run and "would expire" in report.summary()
    assert has_results(rc_client, job) and SearchJobStore(rc_client.workspace).get(job.id).results_expired_ms is None
    assert [e for e in rc_client.audit() if e["action"] == "search_results_expire"] == []


def test_missing_results_directory_is_fine(rc_client: tk.Client) -> None:
    job = SearchJobStore(rc_client.workspace).create("web", "q", regex=False, ignore_case=False, begin_ts=None,
                                                     end_ts=None, retention_minutes=None)
    SearchJobStore(rc_client.workspace).finish(job.id, JobState.SUCCEEDED, archives_searched=0, results_count=0)
    rc_client.clock.advance(31 * MIN)  # type: ignore[attr-defined]
    report = collect_search_results(rc_client.workspace)
    assert [e["job_id"] for e in report.expired] == [job.id] and report.bytes_freed == 0
    assert SearchJobStore(rc_client.workspace).get(job.id).results_expired_ms is not None


def test_disabled_when_retention_is_null(tmp_path: Path, metadata_url: str) -> None:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"results_cache.retention_period": "null"}, create=True)
    try:
        make_archive(c, "web", [(None, "x")])
        job = new_job(c)
        SearchJobStore(c.workspace).finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=1)
        c.clock.advance(10**9)  # type: ignore[attr-defined]
        report = collect_search_results(c.workspace)
        assert not report.enabled and "disabled" in report.summary() and has_results(c, job)
    finally:
        c.close()
