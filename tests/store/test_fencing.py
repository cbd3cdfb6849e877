"""Fenced controllers, in-process on SQLite and PostgreSQL (store/fencing.py): work decided under a
lease that another process has since taken over is refused (LeaseLost) by the transaction that would
apply it, and changes nothing — retention truncation, the catalog job's slices and the purge, the
archive and search-result collectors, and the service's housekeeping. Takeovers happen by the
ManualClock: A holds the lease at version v, its TTL passes, B takes it at v + 1. The service drops
a lease lost mid-work without a backoff and decides again on a later pass."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from helpers.storage import chunk_rows, stored_files
from tidekeep.archives.expiry import plan_archive_sweep
from tidekeep.archives.gc import ArchiveGcReport, collect_archives, delete_metadata, write_journal
from tidekeep.archives.gc_results import collect_search_results
from tidekeep.archives.model import JobState, results_dir
from tidekeep.archives.store import ArchiveStore, SearchJobStore
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.errors import LeaseLost
from tidekeep.service.assembly import ARCHIVE_GC_RESOURCE, CATALOG_RESOURCE, COMPACTION_RESOURCE
from tidekeep.service.scheduler import SWEEP_RESOURCE
from tidekeep.service.server import ServeOptions, build_service
from tidekeep.service.tasks import CronTask, IntervalTask
from tidekeep.store.fencing import LeaseFence, check_fence
from tidekeep.store.leases import LeaseAction, LeaseStore
from tidekeep.store.schema_archives import archive_gc_journal, archive_search_jobs, archives
from tidekeep.store.schema_catalog import catalog_records, catalog_runs
from tidekeep.store.schema_leases import leases as leases_table
from tidekeep.streams.of_workspace import retention_manager, stream_controller, watermark_store
from tidekeep.streams.retention_store import fenced

TTL = 30_000
MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
T0 = 1_750_000_000_000
STREAM = "s/a"
SETTINGS = {"writer.linger": 0, "retention.frequency": "500ms", "catalog.purge_batch_size": 1,
            "archive_output.retention_period": 60, "results_cache.retention_period": 30,
            "catalog.schedule": "* * * * *", "catalog.slice_rows": 1}


@pytest.fixture
def fclient(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings=SETTINGS, create=True)
    yield c
    c.close()


def clock_of(client: tk.Client) -> tk.ManualClock:
    assert isinstance(client.clock, tk.ManualClock)
    return client.clock


def take(client: tk.Client, resource: str, owner: str) -> LeaseFence:
    """`owner` takes `resource` now; its fence."""
    decision = LeaseStore(client.workspace.db, client.clock).acquire(resource, owner, TTL)
    assert decision.action is LeaseAction.ACQUIRE, decision
    return LeaseFence(resource, owner, decision.lease.version)


def take_over(client: tk.Client, resource: str, stale: LeaseFence, new_owner: str = "B") -> LeaseFence:
    """The holder of `stale` stops renewing; a TTL later `new_owner` takes the lease (next version)."""
    clock_of(client).advance(TTL)
    fence = take(client, resource, new_owner)
    assert fence.version == stale.version + 1
    return fence


def refusal(fence: LeaseFence, holder: str, version: int) -> str:
    return (f"{fence.resource} was held by {fence.owner} at version {fence.version} and is now held by {holder} at "
            f"version {version}; the work decided under version {fence.version} is not applied")


def lost_message(stale: LeaseFence, new: LeaseFence) -> str:
    return refusal(stale, new.owner, new.version)


def audit_actions(client: tk.Client) -> list[str]:
    return [e["action"] for e in client.audit(limit=1000)]


# ---- the check itself ----------------------------------------------------------------------------
def test_the_fence_passes_for_its_holder_only(fclient: tk.Client) -> None:
    resource = "retention:s/x"
    ghost = LeaseFence(resource, "A", 1)
    with fclient.workspace.db.write() as conn, pytest.raises(LeaseLost) as no_row:
        check_fence(conn, ghost)
    assert str(no_row.value) == (f"{resource} was held by A at version 1 and no longer exists; the work decided "
                                 "under version 1 is not applied")
    assert (no_row.value.holder, no_row.value.current_version) == (None, None)
    a = take(fclient, resource, "A")
    with fclient.workspace.db.write() as conn:
        check_fence(conn, a)
        check_fence(conn, None)  # a manual run holds no lease: nothing to check
    # ran out but nobody took it: still A's at the same version (the lease rule renews it), so still valid
    clock_of(fclient).advance(TTL + 1)
    with fclient.workspace.db.write() as conn:
        check_fence(conn, a)
    b = take(fclient, resource, "B")
    with fclient.workspace.db.write() as conn, pytest.raises(LeaseLost) as taken:
        check_fence(conn, a)
    assert str(taken.value) == lost_message(a, b)
    error = taken.value
    assert (error.resource, error.version, error.holder, error.current_version) == (resource, 1, "B", 2)
    assert isinstance(error, tk.errors.ConflictError) and error.exit_code == 7
    copy = pickle.loads(pickle.dumps(error))  # a Spark task raises it on an executor
    assert str(copy) == str(error) and (copy.resource, copy.holder, copy.current_version) == (resource, "B", 2)
    with fclient.workspace.db.write() as conn:
        check_fence(conn, b)
    assert LeaseStore(fclient.workspace.db, fclient.clock).release(resource, "B")
    with fclient.workspace.db.write() as conn, pytest.raises(LeaseLost, match=r"B at version 2 and has been released "
                                                                     r"\(version 2\); the work decided"):
        check_fence(conn, b)


def test_the_lease_row_stays_locked_until_the_fenced_transaction_ends(fclient: tk.Client) -> None:
    """While a fenced transaction is open, a takeover cannot commit (it waits for the row); on
    PostgreSQL other fenced transactions are not blocked (FOR SHARE), so slices run in parallel."""
    resource = "catalog"
    a = take(fclient, resource, "A")
    clock_of(fclient).advance(TTL)
    with fclient.workspace.db.write() as conn:
        check_fence(conn, a)
        with fclient.workspace.db.engine.connect() as other:
            if fclient.workspace.db.is_sqlite:
                other.exec_driver_sql("PRAGMA busy_timeout=0")
                with pytest.raises(sa.exc.OperationalError, match="database is locked"):
                    other.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                with other.begin():
                    other.execute(sa.select(leases_table.c.version).where(leases_table.c.resource == resource)
                                  .with_for_update(read=True, nowait=True))  # another fenced transaction: fine
                with other.begin(), pytest.raises(sa.exc.OperationalError, match="could not obtain lock"):
                    other.execute(sa.select(leases_table.c.version).where(leases_table.c.resource == resource)
                                  .with_for_update(nowait=True))  # what a takeover does first
    take(fclient, resource, "B")  # after the commit, the takeover goes through


# ---- retention ----------------------------------------------------------------------------------
def write_batch(client: tk.Client, batch: int, events: int = 20) -> None:
    with client.stream(STREAM).writer(f"w{batch}") as writer:
        writer.write_many([f"{batch}:{i}".encode() * 8 for i in range(events)], [f"k{i % 3}" for i in range(events)])


def prepare_stream(client: tk.Client) -> dict[int, int]:
    """Two batches recorded an hour apart, a size policy of 1.5 batches, a third batch: a cycle now
    truncates at the first record. Returns that cut."""
    base = client.clock.now_ms() - 3 * HOUR
    client.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size("1TB")))
    for batch in range(2):
        write_batch(client, batch)
        client.stream(STREAM).retention.run(now=base + batch * HOUR)
    first, second = client.stream(STREAM).retention.records()
    client.stream(STREAM).update(tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(
        (second.recording_size - first.recording_size) * 3 // 2)))
    write_batch(client, 2)
    return first.positions


def stream_snapshot(client: tk.Client) -> tuple[Any, ...]:
    return (dict(client.stream(STREAM).state().head), [tuple(r) for r in chunk_rows(client, STREAM)],
            stored_files(client), [r.recording_time_ms for r in client.stream(STREAM).retention.records()],
            audit_actions(client))


def test_a_stale_lease_truncation_is_refused_and_changes_nothing(fclient: tk.Client) -> None:
    expected = prepare_stream(fclient)
    resource = f"retention:{STREAM}"
    a = take(fclient, resource, "A")
    assert fclient.stream(STREAM).retention.preview().cut == expected  # what A decided under its lease
    b = take_over(fclient, resource, a)
    before = stream_snapshot(fclient)
    # the truncation itself: its guard checks the lease under the stream lock, in the truncating transaction
    with pytest.raises(LeaseLost) as refused:
        stream_controller(fclient.workspace).truncate(STREAM, fclient.stream(STREAM).state().cut(expected),
                                 reason="retention", guard=fenced(a, lambda conn, state: None))
    assert str(refused.value) == lost_message(a, b)
    assert stream_snapshot(fclient) == before
    # a whole cycle under the stale lease: not even the tail is recorded
    with pytest.raises(LeaseLost, match="the work decided under version 1 is not applied"):
        retention_manager(fclient.workspace).run(STREAM, fence=a)
    assert stream_snapshot(fclient) == before
    # the new holder decides again and truncates where the policy says; a manual run needs no lease
    decided = retention_manager(fclient.workspace).run(STREAM, fence=b)
    assert decided.cut == expected and dict(fclient.stream(STREAM).state().head) == expected
    assert audit_actions(fclient).count("truncate") == 1
    clock_of(fclient).advance(MIN)
    assert fclient.stream(STREAM).retention.run().cut is None


# ---- the catalog --------------------------------------------------------------------------------
def catalog_state(client: tk.Client) -> tuple[Any, ...]:
    with client.workspace.db.read() as conn:
        records = sorted((r.id, r.status, r.status_time) for r in conn.execute(sa.select(catalog_records)))
        runs = [(r.kind, r.state) for r in conn.execute(sa.select(catalog_runs).order_by(catalog_runs.c.id))]
    return records, runs, audit_actions(client)


@pytest.mark.spark
def test_a_catalog_run_whose_lease_was_taken_over_deletes_no_record(fclient: tk.Client, spark: Any) -> None:
    now = fclient.clock.now_ms()
    fclient.catalog.set_rules([RetentionRule(1, "three days", True, parse("all"), Age(3, "days"))])
    old = fclient.catalog.add([{"feed": "F", "type": "Raw", "create_time": now - (5 + i) * DAY} for i in range(6)])
    young = fclient.catalog.add([{"feed": "F", "type": "Raw", "create_time": now - DAY}])
    a = take(fclient, CATALOG_RESOURCE, "A")
    b = take_over(fclient, CATALOG_RESOURCE, a)
    before = catalog_state(fclient)
    with pytest.raises(LeaseLost) as refused:
        fclient.catalog.run(fence=a)
    assert str(refused.value) == lost_message(a, b)
    assert catalog_state(fclient) == before and before[1] == []  # not even a run row

    # lost while the run is under way: after its run row, before its Spark job. Every slice's
    # transaction on the executors refuses, and the driver reports the typed error
    def taken_over_now(done: int, total: int) -> None:
        if not takeovers:
            takeovers.append(take_over(fclient, CATALOG_RESOURCE, b, "C"))

    takeovers: list[LeaseFence] = []
    with pytest.raises(LeaseLost) as refused:
        fclient.catalog.run(fence=b, progress=taken_over_now)
    assert str(refused.value) == lost_message(b, takeovers[0])
    if not fclient.workspace.db.is_sqlite:
        # on PostgreSQL the slices (SETTINGS: one record each) are Spark tasks: raised by a slice on
        # an executor, reported by the driver as the typed error; SQLite's driver raises it itself
        cause = refused.value.__cause__
        assert type(cause).__name__ == "PythonException" and "tidekeep.errors.LeaseLost: catalog was held by B" in str(
            cause)
    records, runs, actions = catalog_state(fclient)
    assert records == before[0] and runs == [("retention", "FAILED")] and "catalog_delete" not in actions
    # the holder's run deletes what the rules say
    report = fclient.catalog.run(fence=takeovers[0])
    assert report.state == "SUCCEEDED" and report.rows == len(old)
    statuses = {r[0]: r[1] for r in catalog_state(fclient)[0]}
    assert {i for i, s in statuses.items() if s == "DELETED"} == set(old) and statuses[young[0]] == "UNLOCKED"


def add_deleted_records(client: tk.Client, count: int) -> list[int]:
    """Records DELETED 30 days ago, each with a data file."""
    now = client.clock.now_ms()
    ids = []
    with client.workspace.db.write() as conn:
        for i in range(count):
            location = f"catalog/d{i}.dat"
            ids.append(int(conn.execute(sa.insert(catalog_records).values(
                feed="F", type="Raw", create_time=now - 400 * DAY, status="DELETED",
                status_time=now - 30 * DAY - i * MIN, file_size=4, location=location)).inserted_primary_key[0]))
            path = Path(client.workspace.storage.full_path(location))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"data")
    return ids


def data_files(client: tk.Client) -> set[str]:
    return {f.path for f in client.workspace.storage.list_files("catalog")}


def test_a_purge_whose_lease_was_taken_over_deletes_no_file_and_no_row(fclient: tk.Client) -> None:
    ids = add_deleted_records(fclient, 2)  # purged newest first, one per batch (catalog.purge_batch_size 1)
    a = take(fclient, CATALOG_RESOURCE, "A")
    b = take_over(fclient, CATALOG_RESOURCE, a)
    before = catalog_state(fclient), data_files(fclient)
    with pytest.raises(LeaseLost, match="the work decided under version 1 is not applied"):
        fclient.catalog.purge(fence=a)
    assert (catalog_state(fclient), data_files(fclient)) == before

    # lost between the batches: the second batch's files are not touched
    def after_batch(done: int, total: int) -> None:
        if done and not takeovers:
            takeovers.append(take_over(fclient, CATALOG_RESOURCE, b, "C"))

    takeovers: list[LeaseFence] = []
    with pytest.raises(LeaseLost) as refused:
        fclient.catalog.purge(fence=b, progress=after_batch)
    assert str(refused.value) == lost_message(b, takeovers[0])
    records, runs, _ = catalog_state(fclient)
    assert [r[0] for r in records] == [ids[1]] and data_files(fclient) == {"catalog/d1.dat"}
    assert runs == [("purge", "FAILED")]
    assert fclient.catalog.purge(fence=takeovers[0]).purged == 1 and data_files(fclient) == set()


# ---- the archive and search-result collectors ------------------------------------------------------
def archive_state(client: tk.Client) -> tuple[Any, ...]:
    with client.workspace.db.read() as conn:
        ids = sorted(conn.execute(sa.select(archives.c.id)).scalars())
        journal = sorted(conn.execute(sa.select(archive_gc_journal.c.archive_id)).scalars())
        records = sorted(conn.execute(sa.select(catalog_records.c.id)).scalars())
    files = {f.path for f in client.workspace.storage.list_files("archives")}
    return ids, journal, records, files, audit_actions(client)


def test_an_archive_sweep_whose_lease_was_taken_over_deletes_no_archive(fclient: tk.Client) -> None:
    now = fclient.clock.now_ms()
    expired = [make_archive(fclient, "web", [(now - 2 * HOUR - i * MIN, f"m{i}")]) for i in range(3)]
    kept = make_archive(fclient, "web", [(now, "fresh")])
    a = take(fclient, ARCHIVE_GC_RESOURCE, "A")
    b = take_over(fclient, ARCHIVE_GC_RESOURCE, a)
    before = archive_state(fclient)
    with pytest.raises(LeaseLost) as refused:
        collect_archives(fclient.workspace, fence=a)
    assert str(refused.value) == lost_message(a, b)
    assert archive_state(fclient) == before
    # decided and journaled under B's lease, applied after C took it over: the deleting transaction refuses
    now = fclient.clock.now_ms()
    plan = plan_archive_sweep(now, 60, fclient.settings["search.max_runtime"],
                              ArchiveStore(fclient.workspace).list(), [], set(), set())
    assert sorted(x.id for x in plan.candidates) == sorted(x.id for x in expired)
    write_journal(fclient.workspace, plan.candidates, now, b)
    journaled = archive_state(fclient)
    c = take_over(fclient, ARCHIVE_GC_RESOURCE, b, "C")
    report = ArchiveGcReport(now_ms=now, dry_run=False, enabled=True, retention_minutes=60)
    with pytest.raises(LeaseLost) as refused:
        delete_metadata(fclient.workspace, plan, report, plan.candidates, fence=b)
    assert str(refused.value) == lost_message(b, c)
    assert archive_state(fclient) == journaled and report.deleted == 0
    # the holder's sweep finishes the work
    done = collect_archives(fclient.workspace, fence=c)
    assert done.deleted == 3 and archive_state(fclient)[0] == [kept.id]


def test_a_search_result_sweep_whose_lease_was_taken_over_expires_nothing(fclient: tk.Client) -> None:
    make_archive(fclient, "web", [(None, "x")])
    jobs = SearchJobStore(fclient.workspace)
    job = jobs.create("web", "q", regex=False, ignore_case=False, begin_ts=None, end_ts=None, retention_minutes=None)
    directory = Path(fclient.workspace.storage.full_path(results_dir(job.id)))
    directory.mkdir(parents=True)
    (directory / ("a" * 32 + ".parquet")).write_bytes(b"results")
    jobs.finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=1)
    clock_of(fclient).advance(HOUR)
    a = take(fclient, "search-result-gc", "A")
    b = take_over(fclient, "search-result-gc", a)
    with pytest.raises(LeaseLost) as refused:
        collect_search_results(fclient.workspace, fence=a)
    assert str(refused.value) == lost_message(a, b)
    with fclient.workspace.db.read() as conn:
        assert conn.execute(sa.select(archive_search_jobs.c.results_expired_ms)).scalar_one() is None
    assert directory.exists() and "search_results_expire" not in audit_actions(fclient)
    assert len(collect_search_results(fclient.workspace, fence=b).expired) == 1 and not directory.exists()


# ---- the housekeeping under the sweep lease ---------------------------------------------------------
def test_housekeeping_whose_lease_was_taken_over_changes_nothing(fclient: tk.Client) -> None:
    fclient.create_stream(STREAM, tk.StreamConfig(segments=1))
    txn = fclient.stream(STREAM).transactional_writer("tw", lease="1s").begin()
    txn.write(b"never committed", routing_key="k")
    txn.flush()
    orphan = Path(fclient.workspace.storage.full_path(f"streams/{STREAM}-orphan.parquet"))
    orphan.write_bytes(b"left by a crashed writer")
    old = (fclient.clock.now_ms() - 2 * HOUR) / 1000
    os.utime(orphan, (old, old))
    a = take(fclient, SWEEP_RESOURCE, "A")
    b = take_over(fclient, SWEEP_RESOURCE, a)  # the transaction's 1 s lease has run out by now too
    for stale_work in (lambda: fclient.transactions.expire(a),
                       lambda: watermark_store(fclient.workspace).prune(STREAM, a),
                       lambda: fclient.sweep(fence=a)):
        with pytest.raises(LeaseLost) as refused:
            stale_work()
        assert str(refused.value) == lost_message(a, b)
    assert txn.status() is tk.TxnState.OPEN and orphan.exists()
    assert fclient.transactions.expire(b) == [txn.id] and txn.status() is tk.TxnState.ABORTED
    assert fclient.sweep(fence=b).files_deleted == 1 and not orphan.exists()


# ---- the service ------------------------------------------------------------------------------------
def test_the_service_drops_a_lease_lost_mid_work_and_decides_again_later(
        fclient: tk.Client, caplog: pytest.LogCaptureFixture) -> None:
    """Each kind of work under `serve` (a stream's cycle, the housekeeping, the catalog job, a
    collector) loses its lease while it runs: its deletes are refused, the service logs "lease lost",
    forgets the lease, records no work done and backs nothing off; a later pass decides again."""
    expected = prepare_stream(fclient)
    now = fclient.clock.now_ms()
    fclient.catalog.set_rules([RetentionRule(1, "three days", True, parse("all"), Age(3, "days"))])
    doomed = fclient.catalog.add([{"feed": "F", "type": "Raw", "create_time": now - 5 * DAY}])
    make_archive(fclient, "web", [(now - 2 * HOUR, "expired")])
    options = ServeOptions(frequency_ms=HOUR, lease_ttl_ms=TTL, sweep_every_ms=HOUR, watermark_every_ms=None)
    service = build_service(fclient.workspace, options, owner="A")
    catalog = next(task for task in service.tasks if isinstance(task, CronTask))
    collector = next(task for task in service.tasks
                     if isinstance(task, IntervalTask) and task.resource == ARCHIVE_GC_RESOURCE)
    housekeeping = next(task for task in service.tasks
                        if isinstance(task, IntervalTask) and task.resource == SWEEP_RESOURCE)
    compaction = next(task for task in service.tasks
                      if isinstance(task, IntervalTask) and task.resource == COMPACTION_RESOURCE)
    takeovers: dict[str, LeaseFence] = {}

    def stalled(resource: str, work: Any) -> Any:
        """`work`, but the first time the process stalls past its TTL as it starts, B takes over, and the
        heartbeat notices before the work goes on (the work must still be fenced, not run unfenced)."""
        def run(*args: Any) -> Any:
            if resource not in takeovers:
                held = service.fence(resource)
                assert held.owner == "A" and service.holds(resource)
                takeovers[resource] = take_over(fclient, resource, held)
                service.renew()
                assert not service.holds(resource)
            return work(*args)
        return run

    assert service.retention is not None
    retention = service.retention.task(STREAM)
    retention.cycle = stalled(f"retention:{STREAM}", retention.cycle)
    housekeeping.work = stalled(SWEEP_RESOURCE, housekeeping.work)
    compaction.work = stalled(COMPACTION_RESOURCE, compaction.work)
    catalog.work = stalled(CATALOG_RESOURCE, catalog.work)
    collector.work = stalled(ARCHIVE_GC_RESOURCE, collector.work)
    before = stream_snapshot(fclient), archive_state(fclient)
    store = LeaseStore(fclient.workspace.db, fclient.clock)
    with caplog.at_level(logging.INFO, logger="tidekeep"):
        report = service.run_pass()  # the catalog task only notes when it first looked
    assert report.lost == [STREAM] and report.ran == report.failed == [] and not report.swept
    assert (stream_snapshot(fclient), archive_state(fclient)) == before
    with caplog.at_level(logging.INFO, logger="tidekeep"):
        clock_of(fclient).advance(MIN)  # B stops renewing too; the catalog schedule fires
        report = service.run_pass()
    assert set(takeovers) == {f"retention:{STREAM}", SWEEP_RESOURCE, COMPACTION_RESOURCE, CATALOG_RESOURCE,
                              ARCHIVE_GC_RESOURCE}
    messages = [r.getMessage() for r in caplog.records]
    for resource, new in takeovers.items():
        stale = LeaseFence(resource, "A", new.version - 1)
        assert f"lease lost: {lost_message(stale, new)}" in messages, messages
    assert not any("failed" in m for m in messages), messages  # lost is not failed: no retry, no backoff
    assert catalog.failures == 0 and catalog.retry_at_ms is None
    assert {r[0]: r[1] for r in catalog_state(fclient)[0]}[doomed[0]] == "UNLOCKED"
    catalog_lease = store.get(CATALOG_RESOURCE)
    assert catalog_lease is not None and catalog_lease.work_done_ms is None  # A recorded no run under B's lease
    assert not service.holds(CATALOG_RESOURCE)
    # the leases B took in the first pass ran out and A took them again: it decided afresh and did the work
    assert report.ran == [STREAM] and report.swept
    assert dict(fclient.stream(STREAM).state().head) == expected
    assert archive_state(fclient)[0] == []
    for resource in (f"retention:{STREAM}", SWEEP_RESOURCE, COMPACTION_RESOURCE, ARCHIVE_GC_RESOURCE):
        row = store.get(resource)
        assert row is not None and row.version == takeovers[resource].version + 1 and row.work_done_ms is not None
