"""The archive collector on real stores and real files (SQLite and PostgreSQL), time placed with a
ManualClock: expiry, running searches holding it back, KILLED searches, the journal replay,
the orphan sweep, the dry run and the audit."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from tidekeep.archives.gc import collect_all, collect_archives
from tidekeep.archives.model import Archive, JobState, SearchJob
from tidekeep.archives.store import ArchiveStore, SearchJobStore
from tidekeep.store.schema_archives import archive_gc_journal, archive_search_jobs, archives
from tidekeep.store.schema_catalog import catalog_records

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_700_000_000_000  # the ManualClock's start


@pytest.fixture
def gc_client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"archive_output.retention_period": 60}, create=True)
    yield c
    c.close()


@pytest.fixture
def gc_storage_client(tmp_path: Path, metadata_url: str, storage_uri: str) -> Iterator[tk.Client]:
    """gc_client on each kind of storage root, local and S3: for the tests where the collector's
    file work (deleting, finding orphans) is what is checked."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri,
                   clock=tk.ManualClock(T0), settings={"archive_output.retention_period": 60}, create=True)
    yield c
    c.close()


def clock_of(client: tk.Client) -> tk.ManualClock:
    assert isinstance(client.clock, tk.ManualClock)
    return client.clock


def ending(client: tk.Client, dataset: str, end_ms: int | None) -> Archive:
    """An archive whose newest message is at end_ms (None: no timestamps)."""
    if end_ms is None:
        return make_archive(client, dataset, [(None, "no time here"), (None, "nor here")])
    return make_archive(client, dataset, [(end_ms - 5 * MIN, "first"), (end_ms, "last")])


def file_exists(client: tk.Client, archive: Archive) -> bool:
    return client.workspace.storage.exists(archive.path)


def live_ids(client: tk.Client) -> set[str]:
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(archives.c.id)).scalars())


def record_ids(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(catalog_records.c.id)).scalars())


def journal_rows(client: tk.Client) -> list[str]:
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(archive_gc_journal.c.archive_id)).scalars())


def test_the_worked_expiry_example_on_real_archives(gc_storage_client: tk.Client) -> None:
    """TTL 1 h, archive end 16:00 UTC: kept at 17:00:00.000, deleted at 17:00:00.001 — row,
    catalog record and file together."""
    gc_client = gc_storage_client
    clock = clock_of(gc_client)
    sixteen = 1_700_064_000_000  # 2023-11-15T16:00:00Z, after the clock's start
    clock.set(sixteen + 5 * MIN)
    a = ending(gc_client, "web", sixteen)
    clock.set(sixteen + HOUR)
    report = collect_archives(gc_client.workspace)
    assert report.deleted == 0 and a.id in live_ids(gc_client) and file_exists(gc_client, a)
    clock.set(sixteen + HOUR + 1)
    report = collect_archives(gc_client.workspace)
    assert report.deleted == 1 and report.bytes_freed == a.stored_bytes
    assert a.id not in live_ids(gc_client) and not file_exists(gc_client, a)
    assert a.catalog_record_id not in record_ids(gc_client)
    assert journal_rows(gc_client) == []


def test_disabled_when_retention_is_null(client: tk.Client) -> None:
    a = make_archive(client, "web", [(1, "very old")])
    report = collect_archives(client.workspace)
    assert not report.enabled and "disabled" in report.summary()
    assert a.id in live_ids(client) and file_exists(client, a)


def test_unexpired_and_untimestamped_archives_stay(gc_client: tk.Client) -> None:
    clock = clock_of(gc_client)
    old = ending(gc_client, "web", T0 - 3 * HOUR)
    young = ending(gc_client, "web", T0 - 30 * MIN)
    timeless = ending(gc_client, "web", None)
    other = ending(gc_client, "db", T0 - 2 * HOUR)
    clock.advance(10 * 24 * HOUR)  # the timeless archive is never expired, however late
    report = collect_archives(gc_client.workspace)
    assert live_ids(gc_client) == {timeless.id}
    assert {c["archive_id"] for c in report.candidates} == {old.id, young.id, other.id}
    assert file_exists(gc_client, timeless)
    assert all(not file_exists(gc_client, a) for a in (old, young, other))


def test_a_running_search_holds_back_what_it_may_read(gc_client: tk.Client) -> None:
    clock = clock_of(gc_client)
    kept = ending(gc_client, "web", T0 - 50 * MIN)  # ≥ C − TTL for a job created at C = T0
    gone = ending(gc_client, "web", T0 - 61 * MIN)  # below the job's lower bound: may go
    jobs = SearchJobStore(gc_client.workspace)
    job = jobs.create("web", "x", regex=False, ignore_case=False, begin_ts=None, end_ts=None, retention_minutes=60)
    clock.advance(30 * MIN)  # now − TTL = T0 − 30 min: `kept` is past it, but the job may read it
    report = collect_archives(gc_client.workspace)
    assert report.held_back_by_job == job.id and report.expiry_ms == T0 - HOUR
    assert live_ids(gc_client) == {kept.id} and file_exists(gc_client, kept)
    assert not file_exists(gc_client, gone)
    # the job's own lower bound excludes exactly what was deleted
    searched = ArchiveStore(gc_client.workspace).for_search("web", None, None, job.lower_bound_ms)
    assert [a.id for a in searched] == [kept.id]
    # the job ends: the next sweep deletes what it held back
    assert jobs.finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=0)
    report = collect_archives(gc_client.workspace)
    assert report.held_back_by_job is None and live_ids(gc_client) == set() and not file_exists(gc_client, kept)


def test_cancelling_releases_the_hold_back(gc_client: tk.Client) -> None:
    clock = clock_of(gc_client)
    a = ending(gc_client, "web", T0 - 50 * MIN)
    jobs = SearchJobStore(gc_client.workspace)
    job = jobs.create("web", "x", regex=False, ignore_case=False, begin_ts=None, end_ts=None, retention_minutes=60)
    clock.advance(30 * MIN)
    collect_archives(gc_client.workspace)
    assert a.id in live_ids(gc_client)
    jobs.cancel(job.id)
    collect_archives(gc_client.workspace)
    assert a.id not in live_ids(gc_client)


def test_an_overlong_search_is_killed_and_stops_holding(tmp_path: Path, metadata_url: str) -> None:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"archive_output.retention_period": 60,
                                                       "search.max_runtime": "2h"}, create=True)
    try:
        a = ending(c, "web", T0 - 50 * MIN)
        jobs = SearchJobStore(c.workspace)
        job = jobs.create("web", "x", regex=False, ignore_case=False, begin_ts=None, end_ts=None, retention_minutes=60)
        c.clock.advance(2 * HOUR)  # exactly max_runtime: still RUNNING, still holding
        collect_archives(c.workspace)
        assert jobs.get(job.id).state is JobState.RUNNING and a.id in live_ids(c)
        c.clock.advance(1)
        dry = collect_archives(c.workspace, dry_run=True)
        assert [k["job_id"] for k in dry.killed_jobs] == [job.id] and jobs.get(job.id).state is JobState.RUNNING
        assert [x["archive_id"] for x in dry.candidates] == [a.id]
        report = collect_archives(c.workspace)
        killed = jobs.get(job.id)
        assert killed.state is JobState.KILLED and killed.completed_ms == T0 + 2 * HOUR + 1
        assert killed.error is not None and "search.max_runtime" in killed.error
        assert [k["job_id"] for k in report.killed_jobs] == [job.id] and a.id not in live_ids(c)
        kills = [e for e in c.audit() if e["action"] == "search_kill"]
        assert [e["target"] for e in kills] == [f"search/{job.id}"]
        # the search's own process finishing later does not overwrite the verdict
        assert not jobs.finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=3)
    finally:
        c.close()


def test_a_file_already_gone_is_fine(gc_storage_client: tk.Client) -> None:
    gc_client = gc_storage_client
    a = ending(gc_client, "web", T0 - 2 * HOUR)
    gc_client.workspace.storage.delete([a.path])
    report = collect_archives(gc_client.workspace)
    assert report.deleted == 1 and report.files_deleted == 0 and live_ids(gc_client) == set()
    assert journal_rows(gc_client) == []


def test_audit_of_an_expiry(gc_client: tk.Client) -> None:
    a = ending(gc_client, "web", T0 - 2 * HOUR)
    b = ending(gc_client, "web", T0 - 3 * HOUR)
    collect_archives(gc_client.workspace)
    [entry] = [e for e in gc_client.audit() if e["action"] == "archive_expire"]
    assert entry["target"] == "archives/web" and entry["bytes_freed"] == a.stored_bytes + b.stored_bytes
    details = json.loads(entry["details"])
    pairs = dict(zip(details["archives"], details["end_ts"], strict=True))
    assert pairs == {a.id: a.end_ts, b.id: b.end_ts}
    assert details["expiry_ms"] == T0 - HOUR and details["retention_minutes"] == 60
    assert sorted(details["bytes"]) == sorted([a.stored_bytes, b.stored_bytes])


def test_dry_run_changes_nothing_and_says_why(gc_client: tk.Client) -> None:
    a = ending(gc_client, "web", T0 - 2 * HOUR)
    held = ending(gc_client, "db", T0 - 2 * HOUR)
    gc_client.holds.add("dataset", "db", "investigation")
    report = collect_archives(gc_client.workspace, dry_run=True)
    assert live_ids(gc_client) == {a.id, held.id} and file_exists(gc_client, a) and journal_rows(gc_client) == []
    [candidate] = report.candidates
    assert candidate["archive_id"] == a.id and candidate["dataset"] == "web" and candidate["end_ts"] == a.end_ts
    assert candidate["age_ms"] == 2 * HOUR and candidate["bytes"] == a.stored_bytes
    assert "before expiry" in candidate["why"]
    assert [h["archive_id"] for h in report.held] == [held.id] and "dataset hold" in report.held[0]["why"]
    assert report.dry_run and "would delete 1" in report.summary()
    assert [e for e in gc_client.audit() if e["action"] == "archive_expire"] == []


def test_journal_replay_finishes_committed_deletions_and_forgets_uncommitted(gc_storage_client: tk.Client) -> None:
    """A journal row whose archive row is gone: its file is deleted. One whose row still exists
    (the crash came before the metadata commit, and the archive may now be searched): kept."""
    gc_client = gc_storage_client
    gone = ending(gc_client, "web", T0 - 2 * HOUR)
    alive = ending(gc_client, "web", T0 - 10 * MIN)  # not expired
    with gc_client.workspace.db.write() as conn:
        for a in (gone, alive):
            conn.execute(sa.insert(archive_gc_journal).values(archive_id=a.id, dataset=a.dataset, path=a.path,
                                                              stored_bytes=a.stored_bytes, end_ts=a.end_ts,
                                                              journaled_ms=T0))
        conn.execute(sa.delete(archives).where(archives.c.id == gone.id))
    report = collect_archives(gc_client.workspace)
    assert report.replayed == 1 and report.journal_dropped == 1
    assert not file_exists(gc_client, gone) and file_exists(gc_client, alive) and alive.id in live_ids(gc_client)
    assert journal_rows(gc_client) == []


def test_orphan_files_older_than_the_grace_are_swept(tmp_path: Path, metadata_url: str, storage_uri: str) -> None:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri,
                   clock=tk.ManualClock(0), settings={"archive_output.retention_period": 60, "sweep.grace": "1h"},
                       create=True)
    try:
        registered = ending(c, "web", None)  # never expires: it must survive the orphan sweep
        orphan = "archives/web/" + "f" * 32 + ".parquet"
        c.workspace.storage.write(orphan, b"half an ingest")
        [written_ms] = [f.mtime_ms for f in c.workspace.storage.list_files("archives") if f.path == orphan]
        assert written_ms is not None
        c.clock.set(written_ms + HOUR)
        assert collect_archives(c.workspace).orphans == 0  # younger than the grace: an ingest may be registering it
        c.clock.advance(1)
        dry = collect_archives(c.workspace, dry_run=True)
        assert dry.orphans == 1 and c.workspace.storage.exists(orphan)
        report = collect_archives(c.workspace)
        assert report.orphans == 1 and report.orphan_bytes == len(b"half an ingest")
        assert not c.workspace.storage.exists(orphan)
        assert file_exists(c, registered) and registered.id in live_ids(c)
    finally:
        c.close()


def test_collect_all_runs_both(gc_client: tk.Client) -> None:
    a = ending(gc_client, "web", T0 - 2 * HOUR)
    report = collect_all(gc_client.workspace)
    assert a.id not in live_ids(gc_client)
    document = report.to_dict()
    assert document["archives"]["deleted"] == 1 and document["results"]["enabled"]
    assert gc_client.archives.gc(dry_run=True).archives.candidates == []


def test_the_recheck_inside_the_delete_transaction_honours_new_holds_and_searches(gc_client: tk.Client) -> None:
    """Between choosing candidates and deleting them a hold and a new search appear: the re-check
    under the dataset lock keeps what they protect and forgets those journal rows."""
    from tidekeep.archives.gc import ArchiveGcReport, _plan, delete_metadata, write_journal

    clock = clock_of(gc_client)
    held = ending(gc_client, "legal", T0 - 3 * HOUR)
    searched = ending(gc_client, "web", T0 - 50 * MIN)
    gone = ending(gc_client, "web", T0 - 5 * HOUR)
    clock.advance(HOUR)
    now = clock.now_ms()
    plan, _ = _plan(gc_client.workspace, 60, now)
    assert {a.id for a in plan.candidates} == {held.id, searched.id, gone.id}
    write_journal(gc_client.workspace, plan.candidates, now)
    gc_client.holds.add("dataset", "legal", "just in time")
    # a search that started at T0 (before the candidates were chosen, but seen only now) may read `searched`
    with gc_client.workspace.db.write() as conn:
        conn.execute(sa.insert(archive_search_jobs).values(
            dataset="web", query="q", regex=False, ignore_case=False, state="RUNNING", created_ms=T0,
            lower_bound_ms=T0 - HOUR, archives_searched=0, results_count=0, actor="t"))
    report = ArchiveGcReport(now_ms=now, dry_run=False, enabled=True, retention_minutes=60)
    deleted = delete_metadata(gc_client.workspace, plan, report)
    assert [a.id for a in deleted] == [gone.id]
    assert set(report.kept_by_recheck) == {held.id, searched.id}
    assert live_ids(gc_client) == {held.id, searched.id}
    assert journal_rows(gc_client) == [gone.id]  # only the deleted archive's row remains for its file


def test_cli_ages_are_readable() -> None:
    from tidekeep.cli.archives_gc import format_age

    assert [format_age(v) for v in (5, 42_000, 2 * HOUR, 2 * HOUR + 5 * MIN + 7_000, 1107 * 24 * HOUR + 6 * HOUR)] == \
        ["5ms", "42s", "2h", "2h 5m", "1107d 6h"]


def test_a_backlog_is_collected_in_rounds(gc_client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    import tidekeep.archives.gc as gc_module

    monkeypatch.setattr(gc_module, "GC_BATCH_SIZE", 2)
    old = [ending(gc_client, "web" if i % 2 else "db", T0 - (2 + i) * HOUR) for i in range(5)]
    young = ending(gc_client, "web", T0)
    progress: list[tuple[int, int]] = []
    report = collect_archives(gc_client.workspace, progress=lambda done, total: progress.append((done, total)))
    assert report.deleted == 5 and report.files_deleted == 5 and live_ids(gc_client) == {young.id}
    assert not any(file_exists(gc_client, a) for a in old) and journal_rows(gc_client) == []
    assert progress == [(i, 5) for i in range(1, 6)]
    # dataset by dataset (db ×3, web ×2): rounds {db, db}, {db, web}, {web}; one audit per dataset per round
    targets = [e["target"] for e in reversed(gc_client.audit()) if e["action"] == "archive_expire"]
    assert targets == ["archives/db", "archives/db", "archives/web", "archives/web"]


def test_a_sweep_that_chose_the_same_candidates_late_leaves_no_journal_rows(gc_client: tk.Client) -> None:
    """Two collectors chose the same candidates; A finishes first (rows, files, journal rows gone).
    B's journal step then must not bring journal rows back for archives that are already deleted."""
    from tidekeep.archives.gc import ArchiveGcReport, _plan, delete_files, delete_metadata, write_journal

    old = [ending(gc_client, "web", T0 - 2 * HOUR) for _ in range(3)]
    now = gc_client.clock.now_ms()
    plan_a, _ = _plan(gc_client.workspace, 60, now)
    plan_b, _ = _plan(gc_client.workspace, 60, now)
    report_a = ArchiveGcReport(now_ms=now, dry_run=False, enabled=True, retention_minutes=60)
    write_journal(gc_client.workspace, plan_a.candidates, now)
    delete_files(gc_client.workspace, delete_metadata(gc_client.workspace, plan_a, report_a), report_a)
    assert report_a.deleted == 3 and journal_rows(gc_client) == []
    report_b = ArchiveGcReport(now_ms=now, dry_run=False, enabled=True, retention_minutes=60)
    write_journal(gc_client.workspace, plan_b.candidates, now)
    assert journal_rows(gc_client) == []
    assert delete_metadata(gc_client.workspace, plan_b, report_b) == [] and report_b.deleted == 0
    assert journal_rows(gc_client) == [] and not any(file_exists(gc_client, a) for a in old)


def test_the_orphan_sweep_leaves_a_dataset_alone_while_an_ingest_runs(tmp_path: Path, metadata_url: str) -> None:
    """An ingest longer than the grace: its staging files and a file it has just moved into place
    (a move keeps the file's old mtime) are not orphans while its staging directory is fresh."""
    import time

    now = int(time.time() * 1000)
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(now), settings={"archive_output.retention_period": 60, "sweep.grace": "1h"},
                       create=True)
    try:
        root = Path(c.workspace.storage.full_path("archives/web"))
        staging = root / "_ingest-0123"
        staging.mkdir(parents=True)
        part = staging / "part-1.parquet"
        part.write_bytes(b"still being written")
        moved = root / ("e" * 32 + ".parquet")
        moved.write_bytes(b"moved into place")
        two_hours_ago = (now - 2 * HOUR) / 1000
        os.utime(moved, (two_hours_ago, two_hours_ago))
        os.utime(part, (two_hours_ago, two_hours_ago))  # staging itself was touched just now
        report = collect_archives(c.workspace)
        assert report.orphans == 0 and moved.exists() and part.exists()
        os.utime(staging, (two_hours_ago, two_hours_ago))  # the ingest died two hours ago
        report = collect_archives(c.workspace)
        assert report.orphans == 2 and not moved.exists() and not part.exists() and not staging.exists()
    finally:
        c.close()


# ---- dead searches: no heartbeat ------------------------------------------------------------------
SECOND = 1000


def beating_job(client: tk.Client, interval_ms: int = 10 * SECOND) -> SearchJob:
    """A RUNNING job as run_search creates it: with a heartbeat promised every interval_ms."""
    return SearchJobStore(client.workspace).create("web", "x", regex=False, ignore_case=False, begin_ts=None,
                                                   end_ts=None, retention_minutes=60,
                                                   heartbeat_interval_ms=interval_ms)


def test_a_search_silent_past_its_heartbeats_is_failed_and_stops_holding(gc_client: tk.Client) -> None:
    clock = clock_of(gc_client)
    held = ending(gc_client, "web", T0 - 50 * MIN)  # ≥ the job's lower bound T0 − TTL: the job may read it
    other = ending(gc_client, "db", T0)  # not expired: must not change
    jobs = SearchJobStore(gc_client.workspace)
    job = beating_job(gc_client)
    assert (job.heartbeat_ms, job.heartbeat_interval_ms) == (T0, 10 * SECOND)  # the first beat is the creation
    clock.advance(15 * MIN)  # now − TTL is past `held`: only the job holds it
    last = T0 + 15 * MIN
    assert jobs.heartbeat(job.id) and jobs.get(job.id).heartbeat_ms == last
    clock.set(last + 30 * SECOND)  # exactly three intervals of silence: still alive
    report = collect_archives(gc_client.workspace)
    assert jobs.get(job.id).state is JobState.RUNNING and report.failed_jobs == []
    assert report.held_back_by_job == job.id and held.id in live_ids(gc_client)
    clock.advance(1)
    dry = collect_archives(gc_client.workspace, dry_run=True)
    assert [(f["job_id"], f["heartbeat_ms"], f["silent_ms"]) for f in dry.failed_jobs] == [(job.id, last,
                                                                                            30 * SECOND + 1)]
    assert [c["archive_id"] for c in dry.candidates] == [held.id] and "1 dead search(es) to fail" in dry.summary()
    assert jobs.get(job.id).state is JobState.RUNNING and held.id in live_ids(gc_client)

    report = collect_archives(gc_client.workspace)
    failed = jobs.get(job.id)
    now = last + 30 * SECOND + 1
    assert failed.state is JobState.FAILED and failed.completed_ms == now and failed.heartbeat_ms == last
    assert failed.error == ("no heartbeat since 2023-11-14T22:28:20.000Z (expected every 10s): its process died; "
                            "marked FAILED by the archive collector at 2023-11-14T22:28:50.001Z")
    assert [f["job_id"] for f in report.failed_jobs] == [job.id] and report.killed_jobs == []
    assert report.held_back_by_job is None and "1 dead search(es) failed (no heartbeat)" in report.summary()
    assert live_ids(gc_client) == {other.id} and not file_exists(gc_client, held) and file_exists(gc_client, other)
    [entry] = [e for e in gc_client.audit() if e["action"] == "search_fail"]
    assert entry["target"] == f"search/{job.id}" and entry["reason"] == failed.error
    details = json.loads(entry["details"])
    assert (details["heartbeat_ms"], details["heartbeat_interval_ms"], details["missed_heartbeats"]) == \
        (last, 10 * SECOND, 3)
    assert [e for e in gc_client.audit() if e["action"] == "search_kill"] == []
    # the search's process, were it alive after all, can neither beat the job back to life nor finish it
    assert not jobs.heartbeat(job.id)
    assert not jobs.finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=3)
    assert jobs.get(job.id) == failed
    assert collect_archives(gc_client.workspace).failed_jobs == []  # once


def test_fresh_heartbeats_keep_a_long_search_alive(gc_client: tk.Client) -> None:
    """A search beating on time is never failed, however long it runs (up to search.max_runtime)."""
    clock = clock_of(gc_client)
    held = ending(gc_client, "web", T0 - 50 * MIN)
    jobs = SearchJobStore(gc_client.workspace)
    job = beating_job(gc_client)
    for _ in range(40):  # 40 × 25 s: well past three intervals since creation, never three since a beat
        clock.advance(25 * SECOND)
        assert jobs.heartbeat(job.id)
        report = collect_archives(gc_client.workspace)
        assert report.failed_jobs == [] and report.held_back_by_job == job.id
    assert jobs.get(job.id).state is JobState.RUNNING and held.id in live_ids(gc_client)


def test_a_search_that_beat_after_being_judged_dead_is_not_failed(gc_client: tk.Client) -> None:
    """The collector read a stale heartbeat, then the (only slow) process beat: the FAILED update
    requires the heartbeat it judged, so the job stays RUNNING, and the re-check inside the deleting
    transaction keeps what it holds back."""
    from tidekeep.archives.expiry import plan_archive_sweep
    from tidekeep.archives.gc import ArchiveGcReport, delete_metadata, fail_dead_searches

    clock = clock_of(gc_client)
    held = ending(gc_client, "web", T0 - 50 * MIN)
    jobs = SearchJobStore(gc_client.workspace)
    job = beating_job(gc_client)
    clock.advance(31 * MIN)
    now = clock.now_ms()
    plan = plan_archive_sweep(now, 60, HOUR, ArchiveStore(gc_client.workspace).list(), jobs.list(), set(), set())
    assert [j.id for j in plan.dead] == [job.id] and [a.id for a in plan.candidates] == [held.id]
    assert jobs.heartbeat(job.id)
    assert fail_dead_searches(gc_client.workspace, plan.dead, now) == []
    assert jobs.get(job.id).state is JobState.RUNNING
    report = ArchiveGcReport(now_ms=now, dry_run=False, enabled=True, retention_minutes=60)
    assert delete_metadata(gc_client.workspace, plan, report) == [] and report.kept_by_recheck == [held.id]
    assert held.id in live_ids(gc_client) and file_exists(gc_client, held)
    assert [e for e in gc_client.audit() if e["action"] == "search_fail"] == []


def test_jobs_from_before_heartbeats_fall_back_to_max_runtime(gc_client: tk.Client) -> None:
    """A job RUNNING when migration 0012 is applied has no heartbeat: it is never taken for dead,
    and search.max_runtime (1 h) still ends it."""
    from importlib import resources

    from alembic import command
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    clock = clock_of(gc_client)
    held = ending(gc_client, "web", T0 - 50 * MIN)
    job = beating_job(gc_client)
    with gc_client.workspace.db.engine.connect() as conn:  # back to the schema before heartbeats, and up again
        config = Config()
        config.set_main_option("script_location", str(resources.files("tidekeep.store") / "migrations"))
        config.attributes["connection"] = conn
        before = ScriptDirectory.from_config(config).get_revision("0012").down_revision
        command.downgrade(config, str(before))
        conn.commit()
        assert "heartbeat_ms" not in {c["name"] for c in sa.inspect(conn).get_columns("archive_search_jobs")}
    gc_client.workspace.db.upgrade()
    jobs = SearchJobStore(gc_client.workspace)
    legacy = jobs.get(job.id)
    assert (legacy.state, legacy.heartbeat_ms, legacy.heartbeat_interval_ms) == (JobState.RUNNING, None, None)
    clock.advance(HOUR)  # hours of "silence" are nothing without a promised heartbeat
    report = collect_archives(gc_client.workspace)
    assert report.failed_jobs == [] and report.held_back_by_job == job.id and held.id in live_ids(gc_client)
    clock.advance(1)
    report = collect_archives(gc_client.workspace)
    assert [k["job_id"] for k in report.killed_jobs] == [job.id] and jobs.get(job.id).state is JobState.KILLED
    assert held.id not in live_ids(gc_client)


def test_the_gc_report_lists_dead_searches(gc_client: tk.Client, capsys: pytest.CaptureFixture[str]) -> None:
    from tidekeep.cli.archives_gc import print_report

    ending(gc_client, "web", T0)
    job = beating_job(gc_client)
    clock_of(gc_client).advance(2 * MIN)
    for dry_run, heading in ((True, "searches whose process died, that would be marked FAILED (no heartbeat):"),
                             (False, "searches whose process died, marked FAILED (no heartbeat):")):
        capsys.readouterr()
        print_report(collect_all(gc_client.workspace, dry_run=dry_run))
        lines = capsys.readouterr().out.splitlines()
        at = lines.index(heading)
        assert lines[at + 1].split() == ["JOB", "DATASET", "CREATED", "LAST", "HEARTBEAT", "SILENT", "QUERY"]
        assert lines[at + 2].split() == [str(job.id), "web", "2023-11-14T22:13:20.000Z", "2023-11-14T22:13:20.000Z",
                                         "2m", "x"]
    assert SearchJobStore(gc_client.workspace).get(job.id).state is JobState.FAILED
