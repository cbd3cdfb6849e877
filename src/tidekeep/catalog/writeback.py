"""Logical deletes written back from the executors, one create-time slice per transaction.

The retention job's Spark plan ends in `mapInArrow(delete_partition)`: each task receives the rows
of its create-time range that the rules delete (id, create_time, rule, file_size), sorts them,
cuts Stroom's create-time slices of `catalog.delete_batch_size` rows (slices.py) and runs one
UPDATE per slice:

    UPDATE catalog_records SET status = 'DELETED', status_time = :now
    WHERE id IN (:ids) AND status = 'UNLOCKED' AND NOT (<any hold matches>)
    RETURNING id

The guards make every slice idempotent and safe to repeat: a row that was deleted, locked or
placed under a hold since Spark read it is left alone, and a rerun after a crash simply finds
fewer UNLOCKED rows. RETURNING tells exactly which rows changed, so the task yields per-rule row
and byte counts of real changes — the only thing the driver collects.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import sqlalchemy as sa

from ..store.schema_catalog import catalog_records
from .slices import slice_ends

SUMMARY_SCHEMA = pa.schema([pa.field("rule", pa.int32()), pa.field("rows", pa.int64()),
                            pa.field("bytes", pa.int64())])
SUMMARY_DDL = "rule int, rows long, bytes long"


@dataclass(frozen=True)
class DeleteSpec:
    """Everything a task needs, pickled into the Spark closure."""

    url: str
    status_time_ms: int  # the run's fixed now
    batch_size: int
    holds: tuple[Any, ...] = ()  # hold expressions (AST) re-checked inside every UPDATE
    dictionaries: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    driver_pid: int | None = None  # fault points in a task kill the driver, as a crash of the job would


def held_condition(holds: Iterable[Any], now_ms: int, dictionaries: Mapping[str, Any]) -> Any:
    """SQL true for a record any hold matches (false when there are no holds)."""
    holds = list(holds)
    if not holds:
        return sa.false()
    from .expressions import CompileContext
    from .holds import held_predicate

    return held_predicate([(None, expr) for expr in holds], CompileContext(now_ms, dictionaries), catalog_records)


SQLITE_MAX_IDS = 30_000  # below SQLite's limit of 32,766 bound parameters per statement


def delete_statements(ids: list[int], spec: DeleteSpec, held: Any, postgres: bool) -> list[Any]:
    """The UPDATE(s) of one slice: on PostgreSQL one statement with the ids as one array parameter;
    on SQLite the ids as separate parameters, split only if the slice exceeds SQLite's limit."""
    t = catalog_records
    guards = (t.c.status == "UNLOCKED", sa.not_(held))
    if postgres:
        from sqlalchemy.dialects.postgresql import ARRAY

        chunks = [t.c.id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.BigInteger)))]
    else:
        chunks = [t.c.id.in_(ids[i:i + SQLITE_MAX_IDS]) for i in range(0, len(ids), SQLITE_MAX_IDS)]
    return [sa.update(t).where(chunk, *guards).values(status="DELETED", status_time=spec.status_time_ms)
            .returning(t.c.id) for chunk in chunks]


def _fault(name: str, driver_pid: int | None) -> None:
    armed = os.environ.get("TIDEKEEP_FAULT")
    if armed and name in armed.split(","):
        if driver_pid is not None:
            os.kill(driver_pid, signal.SIGKILL)
        os._exit(77)


def delete_partition(spec: DeleteSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    batch_list = [b for b in batches if b.num_rows]
    if not batch_list:
        return
    table = pa.Table.from_batches(batch_list)
    table = table.take(pc.sort_indices(table, [("create_time", "ascending"), ("id", "ascending")]))
    ids = table.column("id").to_pylist()
    rules = table.column("rule").to_pylist()
    sizes = table.column("file_size").fill_null(0).to_pylist()
    ends = slice_ends(table.column("create_time").to_pylist(), spec.batch_size)

    from ..store.database import Database

    db = Database(spec.url)
    db.ensure_schema()
    totals: dict[int, list[int]] = {}
    try:
        held = held_condition(spec.holds, spec.status_time_ms, spec.dictionaries)
        postgres = not db.is_sqlite
        start = 0
        # one connection for the task, one transaction per slice
        with db.engine.connect().execution_options(tidekeep_write=True) as conn:
            for end in ends:
                changed: set[int] = set()
                with conn.begin():
                    if postgres:
                        # a slice need not wait for its own WAL flush: the period's tracker is saved
                        # later in a synchronous commit, which makes every earlier slice durable too,
                        # and a slice lost with a server crash is simply redone by the next run
                        conn.exec_driver_sql("SET LOCAL synchronous_commit = off")
                    for statement in delete_statements(ids[start:end], spec, held, postgres):
                        changed.update(conn.execute(statement).scalars())
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
