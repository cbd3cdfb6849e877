"""Logical deletes written back from the executors, one create-time slice per transaction.

The retention job's Spark plan ends in `mapInArrow(delete_partition)`: each task receives the rows
of its create-time range with the rules' verdict (id, create_time, rule, file_size, doomed), sorts
them, cuts Stroom's create-time slices of `catalog.delete_batch_size` doomed rows (slices.py) and
runs one UPDATE per slice, in one of two equivalent forms:

    UPDATE catalog_records SET status = 'DELETED', status_time = :now
    WHERE create_time BETWEEN :low AND :high AND id NOT IN (:kept)      -- the slice's range
      AND status = 'UNLOCKED' AND NOT (<any hold matches>) RETURNING id
    ... WHERE id IN (:doomed) AND status = 'UNLOCKED' AND NOT (...) RETURNING id   -- by id

The range form (used when the slice's range holds fewer kept rows than doomed ones) scans the
(status, create_time) index in write order, which is far cheaper than one index probe per id;
RETURNING shows exactly what it changed, and if that is anything but doomed rows of the slice (a
record written into the range after Spark read it) the transaction is rolled back and the slice
goes by id. The guards make every slice idempotent and safe to repeat: a row deleted, locked or
placed under a hold since Spark read it is left alone, and a rerun after a crash simply finds
fewer UNLOCKED rows. Each task yields per-rule row and byte counts of real changes — the only
thing the driver collects. Under `tidekeep serve` every slice's transaction first checks the
catalog lease the run was started under (store/fencing.py): a run whose lease was taken over
changes no more rows.
"""

from __future__ import annotations

import bisect
import os
import signal
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from ..spark.credentials import MetadataReference
from ..store.fencing import LeaseFence, check_fence
from ..store.schema_catalog import catalog_records
from .slices import slice_ends

SUMMARY_SCHEMA = pa.schema([pa.field("rule", pa.int32()), pa.field("rows", pa.int64()),
                            pa.field("bytes", pa.int64())])
SUMMARY_DDL = "rule int, rows long, bytes long"


@dataclass(frozen=True)
class DeleteSpec:
    """Everything a task needs, pickled into the Spark closure: the metadata password by reference."""

    metadata: MetadataReference
    status_time_ms: int  # the run's fixed now
    batch_size: int
    holds: tuple[Any, ...] = ()  # hold expressions (AST) re-checked inside every UPDATE
    dictionaries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    driver_pid: int | None = None  # fault points in a task kill the driver, as a crash of the job would
    fence: LeaseFence | None = None  # the service's catalog lease: checked in every slice's transaction


def _begin(conn: Any, postgres: bool) -> Any:
    transaction = conn.begin()
    if postgres:
        # a slice need not wait for its own WAL flush: the period's tracker is saved later in a
        # synchronous commit, which makes every earlier slice durable too, and a slice lost with a
        # server crash is simply redone by the next run
        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
    return transaction


def _delete_slice(conn: Any, slice_ids: list[int], low: int, high: int, kept_in_range: list[int],
                  spec: DeleteSpec, held: Any, postgres: bool) -> set[int]:
    """Delete one slice; returns the ids that changed (always a subset of `slice_ids`)."""
    if len(kept_in_range) < len(slice_ids) and (postgres or len(kept_in_range) <= SQLITE_MAX_IDS):
        transaction = _begin(conn, postgres)
        try:
            check_fence(conn, spec.fence)
            changed = set(conn.execute(by_range(low, high, kept_in_range, spec, held, postgres)).scalars())
        except BaseException:
            transaction.rollback()
            raise
        if changed <= set(slice_ids):
            transaction.commit()
            return changed
        transaction.rollback()  # a row appeared in the range after Spark read it: go by id
    transaction = _begin(conn, postgres)
    try:
        check_fence(conn, spec.fence)
        changed = set()
        for statement in by_ids(slice_ids, spec, held, postgres):
            changed.update(conn.execute(statement).scalars())
    except BaseException:
        transaction.rollback()
        raise
    transaction.commit()
    return changed


def held_condition(holds: Iterable[Any], now_ms: int, dictionaries: Mapping[str, Any]) -> Any:
    """SQL true for a record any hold matches (false when there are no holds)."""
    holds = list(holds)
    if not holds:
        return sa.false()
    from .expressions import CompileContext
    from .holds import held_predicate

    return held_predicate([(None, expr) for expr in holds], CompileContext(now_ms, dictionaries), catalog_records)


SQLITE_MAX_IDS = 30_000  # below SQLite's limit of 32,766 bound parameters per statement


def _id_list(column: Any, ids: list[int], postgres: bool) -> Any:
    if postgres:
        from sqlalchemy.dialects.postgresql import ARRAY

        return column == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.BigInteger)))
    return column.in_(ids)


def _update(where: Any, spec: DeleteSpec, held: Any, status_by_index: bool = True) -> Any:
    t = catalog_records
    # by id, SQLite must look rows up by rowid: without statistics its planner would rather walk
    # the (status, ...) index over every UNLOCKED row, holding the write lock for seconds per slice;
    # `status || ''` is the same test that no index can serve
    status = t.c.status if status_by_index else t.c.status.concat("")
    return (sa.update(t).where(where, status == "UNLOCKED", sa.not_(held))
            .values(status="DELETED", status_time=spec.status_time_ms).returning(t.c.id))


def by_ids(ids: list[int], spec: DeleteSpec, held: Any, postgres: bool) -> list[Any]:
    """The slice's doomed rows by id: one statement on PostgreSQL (an array parameter), on SQLite
    split only where a slice exceeds SQLite's parameter limit."""
    t = catalog_records
    if postgres:
        return [_update(_id_list(t.c.id, ids, True), spec, held)]
    return [_update(_id_list(t.c.id, ids[i:i + SQLITE_MAX_IDS], False), spec, held, status_by_index=False)
            for i in range(0, len(ids), SQLITE_MAX_IDS)]


def by_range(low: int, high: int, kept: list[int], spec: DeleteSpec, held: Any, postgres: bool) -> Any:
    """The slice as its create-time range minus the rows Spark kept: an index range scan in the
    order the rows were written, much cheaper than one index probe per id. Only used when the
    caller can check that it changed nothing but the slice's doomed rows."""
    t = catalog_records
    where = sa.and_(t.c.create_time >= low, t.c.create_time <= high)
    if kept:
        where = sa.and_(where, sa.not_(_id_list(t.c.id, kept, postgres)))
    return _update(where, spec, held)


def _fault(name: str, driver_pid: int | None) -> None:
    armed = os.environ.get("TIDEKEEP_FAULT")
    if armed and name in armed.split(","):
        if driver_pid is not None:
            os.kill(driver_pid, signal.SIGKILL)
        os._exit(77)


def delete_partition(spec: DeleteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Rows in: every UNLOCKED row Spark read in this task's range (id, create_time, rule, file_size,
    doomed). Slices are cut over the doomed rows (Stroom's slices); each is deleted in one
    transaction, by its create-time range minus the kept rows in that range when that list is the
    shorter one — and if that statement touches any row that is not one of the slice's doomed rows
    (a record added since Spark read the range), the transaction is rolled back and the slice is
    deleted by id instead."""
    batch_list = [b for b in batches if b.num_rows]
    if not batch_list:
        return
    table = pa.Table.from_batches(batch_list)
    table = table.take(pc.sort_indices(table, [("create_time", "ascending"), ("id", "ascending")]))
    doomed_mask = table.column("doomed")
    doomed = table.filter(doomed_mask)
    kept = table.filter(pc.invert(doomed_mask))
    ids = doomed.column("id").to_pylist()
    times = doomed.column("create_time").to_pylist()
    rules = doomed.column("rule").to_pylist()
    sizes = doomed.column("file_size").fill_null(0).to_pylist()
    kept_ids = kept.column("id").to_pylist()
    kept_times = kept.column("create_time").to_pylist()
    ends = slice_ends(times, spec.batch_size)

    from ..store.database import Database

    db = Database(spec.metadata.url())  # the driver has migrated the schema: no check per task
    totals: dict[int, list[int]] = {}
    try:
        held = held_condition(spec.holds, spec.status_time_ms, spec.dictionaries)
        postgres = not db.is_sqlite
        start = 0
        # one connection for the task, one transaction per slice
        with db.engine.connect().execution_options(tidekeep_write=True) as conn:
            for end in ends:
                slice_ids = ids[start:end]
                low, high = times[start], times[end - 1]
                kept_in_range = kept_ids[bisect.bisect_left(kept_times, low):bisect.bisect_right(kept_times, high)]
                changed = _delete_slice(conn, slice_ids, low, high, kept_in_range, spec, held, postgres)
                for i in range(start, end):
                    if ids[i] in changed:
                        entry = totals.setdefault(rules[i], [0, 0])
                        entry[0] += 1
                        entry[1] += sizes[i]
                start = end
                _fault("catalog.after_slice", spec.driver_pid)
    finally:
        db.dispose()
    if totals:
        keys = sorted(totals)
        yield pa.RecordBatch.from_arrays(
            [pa.array(keys, pa.int32()), pa.array([totals[k][0] for k in keys], pa.int64()),
             pa.array([totals[k][1] for k in keys], pa.int64())], schema=SUMMARY_SCHEMA)
