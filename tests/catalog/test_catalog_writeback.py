"""The executors' write-back, called directly on Arrow batches as Spark would: slices by range with
the kept rows excluded, the fallback to ids when a row appeared in the range after Spark read it,
and the guards (UNLOCKED only, holds) — on SQLite and PostgreSQL."""

from __future__ import annotations

import pyarrow as pa
import sqlalchemy as sa

import tidekeep as tk
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.writeback import DeleteSpec, delete_partition
from tidekeep.spark.credentials import MetadataReference, metadata_reference
from tidekeep.store.schema_catalog import catalog_records

NOW = 1_711_843_200_000


def metadata_of(client: tk.Client) -> MetadataReference:
    """The client's metadata store as a task gets it: the password by reference."""
    return metadata_reference(client.settings.metadata_url, "local[2]")


def verdicts(rows: list[tuple[int, int, int | None, bool]]) -> pa.RecordBatch:
    """(id, create_time, rule, doomed) rows as the Spark plan hands them to a task."""
    return pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows], pa.int64()), pa.array([r[1] for r in rows], pa.int64()),
         pa.array([r[2] for r in rows], pa.int32()), pa.array([10] * len(rows), pa.int64()),
         pa.array([r[3] for r in rows], pa.bool_())],
        names=["id", "create_time", "rule", "file_size", "doomed"])


def status_of(client: tk.Client) -> dict[int, str]:
    with client.workspace.db.read() as conn:
        return dict(conn.execute(sa.select(catalog_records.c.id, catalog_records.c.status)).all())


def summary(batches: list[pa.RecordBatch]) -> dict[int, tuple[int, int]]:
    table = pa.Table.from_batches(batches) if batches else None
    if table is None:
        return {}
    return {r["rule"]: (r["rows"], r["bytes"]) for r in table.to_pylist()}


def test_a_slice_by_range_leaves_the_kept_rows_and_counts_exactly(client: tk.Client) -> None:
    ids = client.catalog.add([{"feed": "F", "type": "T", "create_time": 1000 + i, "file_size": 10}
                              for i in range(10)])
    kept = {ids[2], ids[5]}
    batch = verdicts([(i, 1000 + n, 1 if i not in kept else None, i not in kept) for n, i in enumerate(ids)])
    out = list(delete_partition(DeleteSpec(metadata_of(client), NOW, 100), iter([batch])))
    after = status_of(client)
    assert {i for i, s in after.items() if s == "DELETED"} == set(ids) - kept
    assert summary(out) == {1: (8, 80)}


def test_a_row_added_to_the_range_after_spark_read_it_is_not_deleted(client: tk.Client) -> None:
    ids = client.catalog.add([{"feed": "F", "type": "T", "create_time": 1000 + i} for i in range(6)])
    batch = verdicts([(i, 1000 + n, 1, True) for n, i in enumerate(ids)])  # Spark saw these six
    late = client.catalog.add([{"feed": "F", "type": "T", "create_time": 1003}])[0]  # written since
    out = list(delete_partition(DeleteSpec(metadata_of(client), NOW, 100), iter([batch])))
    after = status_of(client)
    assert after[late] == "UNLOCKED"  # the range form saw it, rolled back, and went by id
    assert all(after[i] == "DELETED" for i in ids)
    assert summary(out) == {1: (6, 60)}


def test_locked_and_held_rows_are_guarded_inside_the_statement(client: tk.Client) -> None:
    from tidekeep.catalog.record_store import RecordStore

    ids = client.catalog.add([{"feed": "HELD" if i == 4 else "F", "type": "T", "create_time": 1000 + i}
                              for i in range(8)])
    RecordStore(client.workspace).set_status([ids[1]], "LOCKED")  # locked after Spark read it UNLOCKED
    batch = verdicts([(i, 1000 + n, 2, True) for n, i in enumerate(ids)])
    spec = DeleteSpec(metadata_of(client), NOW, 3, holds=(parse('feed = "HELD"'),))
    out = list(delete_partition(spec, iter([batch])))
    after = status_of(client)
    assert after[ids[1]] == "LOCKED" and after[ids[4]] == "UNLOCKED"
    assert {i for i, s in after.items() if s == "DELETED"} == set(ids) - {ids[1], ids[4]}
    assert summary(out) == {2: (6, 60)}
    # a second pass over the same verdicts changes nothing and counts nothing
    assert summary(list(delete_partition(spec, iter([batch])))) == {}


def test_sqlite_deletes_a_slice_by_rowid_not_by_walking_the_status_index(sqlite_client: tk.Client) -> None:
    # without ANALYZE statistics SQLite would pick the (status, ...) index for `status = 'UNLOCKED'`
    # and scan every unlocked row per slice, holding the write lock far too long on a big catalog
    from tidekeep.catalog.writeback import by_ids

    sqlite_client.catalog.add([{"feed": "F", "type": "T", "create_time": i} for i in range(50)])
    spec = DeleteSpec(metadata_of(sqlite_client), NOW, 10)
    [statement] = by_ids(list(range(1, 30)), spec, sa.false(), postgres=False)
    with sqlite_client.workspace.db.engine.connect() as conn:
        sql = str(statement.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True}))
        plan = " ".join(str(row[3]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
    assert "PRIMARY KEY" in plan and "status" not in plan, plan
