"""Running the slice statements (slice_sql.py): one transaction per slice, in the driver or in a
Spark task (docs/design/catalog.md#slices).

Every slice's transaction:
1. checks the lease the run was started under, when there is one (store/fencing.py): a run whose
   lease was taken over changes nothing more;
2. on PostgreSQL takes the holds lock shared (store/holds.py `lock_holds`): a hold being added
   waits until the slice commits, and a slice that starts after it sees the hold;
3. reads the holds (records, dataset and archive holds) and runs its statement with `NOT held` in
   it, so a record held at that moment is never changed;
4. commits. Only UNLOCKED rows change, so a slice run twice — a rerun after a crash — changes
   nothing the second time.

Concurrent slices never wait on each other's rows: their create-time ranges are disjoint, so
their row sets are; they share only the holds lock, taken shared. Nothing else takes locks in
another order, so they cannot deadlock (docs/design/catalog.md#slices).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from ..faults import FAULT_EXIT_CODE, fault_active, fault_point, pause_point
from ..spark.credentials import MetadataReference
from ..store.fencing import LeaseFence, check_fence
from ..store.holds import lock_holds
from .expressions import CompileContext
from .forecast_days import DAY_MS
from .holds import load_held_records
from .slice_sql import RuleExpressions, expired_by_rule, expired_by_window, logical_delete, rule_case, would_delete

DELETE, DRY_RUN, IMPACT, FORECAST = "delete", "dry_run", "impact", "forecast"
# the slots of `parallelism` (PostgreSQL advisory locks): a namespace of tidekeep's own
SLOT_LOCK_SPACE = 0x746B0002
# A slice need not wait for its WAL flush: the run's trackers are saved later in a synchronous
# commit, which makes every earlier slice durable too, and a slice lost with a server crash is
# redone by the next run.
ASYNC_COMMIT = "SET LOCAL synchronous_commit = off"
COUNTS_DDL = ("slice long, rule int, feed string, type string, day_window long, rows long, bytes long, "
              "held_rows long, elapsed_ms long")
COUNTS_SCHEMA = pa.schema([("slice", pa.int64()), ("rule", pa.int32()), ("feed", pa.string()),
                           ("type", pa.string()), ("day_window", pa.int64()), ("rows", pa.int64()),
                           ("bytes", pa.int64()), ("held_rows", pa.int64()), ("elapsed_ms", pa.int64())])


@dataclass(frozen=True)
class PeriodRules:
    """What a slice of one period evaluates: the CASE's rules and, per kind, the rules that delete
    (the job) or expire with their cutoffs (impact; the forecast's at now), and the forecast's
    cutoffs at the end of its last day (`last_cutoffs`)."""

    rules: RuleExpressions
    deleting: tuple[int, ...] = ()
    cutoffs: Mapping[int, int] = field(default_factory=dict)
    last_cutoffs: Mapping[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PlannedSlice:
    period: int  # index into SliceWork.periods
    low: int
    high: int
    rows: int = 0  # candidates when planned: the unit of progress


@dataclass(frozen=True)
class Count:
    slice: int
    rule: int
    rows: int
    bytes: int
    feed: str | None = None
    type: str | None = None
    held_rows: int = 0
    day_window: int | None = None  # the forecast's whole-day window after the rule's cutoff (forecast_days.py)


@dataclass(frozen=True)
class SliceWork:
    """Everything a slice needs, pickled into Spark tasks: the metadata password by reference."""

    kind: str  # DELETE, DRY_RUN, IMPACT or FORECAST
    now_ms: int
    periods: tuple[PeriodRules, ...]
    slices: tuple[PlannedSlice, ...]
    dictionaries: Mapping[str, Sequence[str]] = field(default_factory=dict)
    metadata: MetadataReference | None = None  # for Spark tasks
    fence: LeaseFence | None = None
    parallelism: int = 0  # PostgreSQL: at most this many slices at once (0: as Spark schedules them)
    driver_pid: int | None = None  # a fault point in a task kills the driver, as a crash of the job would


def run_slice(conn: sa.Connection, work: SliceWork, index: int, postgres: bool) -> list[Count]:
    """One slice inside the caller's transaction (a write transaction for DELETE)."""
    planned = work.slices[index]
    period = work.periods[planned.period]
    check_fence(conn, work.fence)
    lock_holds(conn, shared=True)
    held = load_held_records(conn, work.now_ms).condition
    case = rule_case(period.rules, CompileContext(work.now_ms, work.dictionaries))
    if work.kind == IMPACT:
        statement = expired_by_rule(planned.low, planned.high, case, period.cutoffs, held)
        return [Count(index, int(r[0]), int(r[3]), int(r[4]), r[1], r[2], int(r[5])) for r in conn.execute(statement)]
    if work.kind == FORECAST:
        statement = expired_by_window(planned.low, planned.high, case, period.cutoffs, period.last_cutoffs, held,
                                      DAY_MS)
        return [Count(index, int(r[0]), int(r[2]), int(r[3]), held_rows=int(r[4]), day_window=int(r[1]))
                for r in conn.execute(statement)]
    if work.kind == DRY_RUN:
        statement = would_delete(planned.low, planned.high, case, period.deleting, held)
        return [Count(index, int(r[0]), int(r[1]), int(r[2])) for r in conn.execute(statement)]
    statement = logical_delete(planned.low, planned.high, case, period.deleting, held, work.now_ms, postgres)
    if postgres:
        return [Count(index, int(r[0]), int(r[1]), int(r[2])) for r in conn.execute(statement)]
    return [Count(index, rule, rows, size) for rule, (rows, size) in sorted(sum_returned(conn, statement).items())]


def sum_returned(conn: sa.Connection, statement: Any) -> dict[int, tuple[int, int]]:
    """Rows and bytes per rule of an UPDATE … RETURNING rule, file_size: one row per changed record,
    read from the DB-API cursor itself (too many to wrap each in a Row)."""
    result = conn.execute(statement)
    rows: dict[int, int] = {}
    sizes: dict[int, int] = {}
    try:
        while batch := result.cursor.fetchmany(65_536):
            for rule, size in batch:
                rows[rule] = rows.get(rule, 0) + 1
                if size:
                    sizes[rule] = sizes.get(rule, 0) + size
    finally:
        result.close()
    return {rule: (count, sizes.get(rule, 0)) for rule, count in rows.items()}


def run_here(db: Any, work: SliceWork, order: Sequence[int],
             on_slice: Callable[[int, list[Count], float], None]) -> None:
    """The slices in `order`, one after another on this process's connection (the driver): SQLite,
    whose one writer gains nothing from concurrent slices, and work that fits one slice."""
    postgres = not db.is_sqlite
    for index in order:
        pause_point("catalog.slice")
        started = time.monotonic()
        with (db.write() if work.kind == DELETE else db.read()) as conn:
            if postgres and work.kind == DELETE:
                conn.exec_driver_sql(ASYNC_COMMIT)
            counts = run_slice(conn, work, index, postgres)
        on_slice(index, counts, time.monotonic() - started)
        if work.kind == DELETE:
            fault_point("catalog.after_slice")


def _kill_on_fault(name: str, driver_pid: int | None) -> None:
    """A fault point in a Spark task: the driver dies with the task, as a crash of the job would."""
    if fault_active(name):
        if driver_pid is not None:
            os.kill(driver_pid, signal.SIGKILL)
        os._exit(FAULT_EXIT_CODE)


def try_slot(conn: sa.Connection, bound: int, key: int) -> bool:
    """Take one of `bound` slots (PostgreSQL session advisory locks, held until released or the
    connection ends), trying slot `key % bound` first; False when all are taken."""
    first = key % bound
    for step in range(bound):
        if conn.execute(sa.text("SELECT pg_try_advisory_lock(:space, :slot)"),
                        {"space": SLOT_LOCK_SPACE, "slot": (first + step) % bound}).scalar():
            return True
    return False


def take_slot(conn: sa.Connection, bound: int, key: int) -> None:
    """Wait for a slot: at most `bound` slices run at once however many tasks Spark runs."""
    while not try_slot(conn, bound, key):
        conn.rollback()
        time.sleep(0.05)


def slice_task(work: SliceWork, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """A Spark task (mapInArrow over the slice numbers): runs its slices, yields their counts."""
    from ..store.database import Database

    indexes = [int(i) for batch in batches for i in batch.column(0).to_pylist()]
    if not indexes:
        return
    assert work.metadata is not None
    db = Database(work.metadata.url())  # the driver has migrated the schema: no check per task
    out: list[dict[str, Any]] = []
    try:
        postgres = not db.is_sqlite
        with db.engine.connect().execution_options(tidekeep_write=work.kind == DELETE) as conn:
            if postgres and work.parallelism:
                take_slot(conn, work.parallelism, indexes[0])
                conn.commit()
            for index in indexes:
                pause_point("catalog.slice")
                started = time.monotonic()
                with conn.begin():
                    if postgres and work.kind == DELETE:
                        conn.exec_driver_sql(ASYNC_COMMIT)
                    counts = run_slice(conn, work, index, postgres)
                elapsed_ms = int((time.monotonic() - started) * 1000)
                out.extend({"slice": index, "rule": c.rule, "feed": c.feed, "type": c.type,
                            "day_window": c.day_window, "rows": c.rows, "bytes": c.bytes, "held_rows": c.held_rows,
                            "elapsed_ms": 0} for c in counts)
                out.append({"slice": index, "rule": None, "feed": None, "type": None, "day_window": None, "rows": 0,
                            "bytes": 0, "held_rows": 0, "elapsed_ms": elapsed_ms})
                if work.kind == DELETE:
                    _kill_on_fault("catalog.after_slice", work.driver_pid)
            if postgres and work.parallelism:
                conn.execute(sa.text("SELECT pg_advisory_unlock_all()"))
                conn.commit()
    finally:
        db.dispose()
    yield pa.RecordBatch.from_pylist(out, schema=COUNTS_SCHEMA)


def counts_from_rows(rows: Sequence[Any]) -> tuple[list[Count], dict[int, float]]:
    """The collected output of slice tasks: the counts, and each slice's time in seconds."""
    counts = [Count(int(r["slice"]), int(r["rule"]), int(r["rows"]), int(r["bytes"]), r["feed"], r["type"],
                    int(r["held_rows"]), None if r["day_window"] is None else int(r["day_window"]))
              for r in rows if r["rule"] is not None]
    elapsed = {int(r["slice"]): int(r["elapsed_ms"]) / 1000 for r in rows if r["rule"] is None}
    return counts, elapsed


__all__ = ["COUNTS_DDL", "DELETE", "DRY_RUN", "FORECAST", "IMPACT", "Count", "PeriodRules", "PlannedSlice", "SliceWork",
           "counts_from_rows", "run_here", "run_slice", "slice_task", "sum_returned", "take_slot",
           "try_slot"]
