"""Synthetic meta records for demos and benchmarks: `tidekeep catalog generate --rows N --seed S`.

Deterministic: the records are a function of (seed, rows, start_ms, span_days, feeds, types) and of
the first id, which is max(id) + 1 of the store when the run starts (on PostgreSQL also past the id
sequence). Generation is vectorised with numpy in blocks of BLOCK rows, each block drawn from its
own generator seeded with (seed, block index), so the data does not depend on batch_size.

The id range is reserved up front: on PostgreSQL the id sequence is moved past it under a short
table lock, so concurrent `add`s take ids above it; on SQLite (which assigns max(rowid) + 1) do not
add records while a generate runs, or one of the two fails with a duplicate id.

Writing: one transaction per batch; PostgreSQL through COPY (CSV text made by pyarrow's C++ CSV
writer), SQLite through executemany. Indexes stay in place. Rows look like a Stroom store:

- a dozen feeds (INTERNAL_LOGS, SPECIAL_DATA, SECURITY_AUDIT, APP_<n>_EVENTS), Zipf-like weights;
- types "Raw Events" 45 %, "Events" 40 %, "Reference" 10 %, "Error" 5 %;
- create times rising with the id over the span_days before start_ms (default: the client's now),
  as records arrive in time order in a real store, with jitter below one row's share of the span;
  effective time up to an hour earlier;
- 1 % LOCKED (status_time up to a day after creation, never after start_ms), the rest UNLOCKED;
- "Events" and "Error" rows were processed from an earlier row of the same block (parent_id) by
  a pipeline; about 10 % of rows carry attributes (source host, sometimes a region);
- file sizes log-normal around 40 KB, raw sizes 2-10 times larger;
- location "catalog/<feed>/<id>.dat" under the storage root; files are only written with
  with_files=True (a small placeholder each).
"""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import InvalidInput
from ..store.schema_catalog import catalog_records
from .location_rules import location_rules
from .locations import LocationRules, decide
from .records import MAX_TEXT, MAX_TIME_MS

if TYPE_CHECKING:
    from ..store.house import Workspace

Progress = Callable[[int, int], None]

BLOCK = 10_000  # rows per generation block (fixed, so the data never depends on batch_size)
DEFAULT_BATCH_SIZE = 200_000  # rows per write transaction
MAX_ROWS = 1_000_000_000
DAY_MS = 86_400_000
DEFAULT_FEEDS: tuple[str, ...] = ("INTERNAL_LOGS", "SPECIAL_DATA", "SECURITY_AUDIT",
                                  *(f"APP_{n}_EVENTS" for n in range(1, 10)))
DEFAULT_TYPES: tuple[str, ...] = ("Raw Events", "Events", "Reference", "Error")
_TYPE_WEIGHTS = {"Raw Events": 0.45, "Events": 0.40, "Reference": 0.10, "Error": 0.05}
_PROCESSED_TYPES = ("Events", "Error")  # types that have a parent and a pipeline
COPY_COLUMNS = ("id", "feed", "type", "create_time", "effective_time", "status", "status_time", "parent_id",
                "pipeline", "file_size", "raw_size", "location", "attributes")


@dataclass(frozen=True)
class GenerateReport:
    rows: int
    elapsed_s: float
    first_id: int | None
    last_id: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GenerateSpec:
    """Everything the generated rows are a function of."""

    seed: int
    rows: int
    start_ms: int
    span_days: int
    feeds: tuple[str, ...]
    types: tuple[str, ...]
    first_id: int


def _check_choices(values: Sequence[str] | None, default: tuple[str, ...], what: str) -> tuple[str, ...]:
    if values is None:
        return default
    if isinstance(values, str) or not values:
        raise InvalidInput(f"generate: {what} must be a non-empty list of names")
    for value in values:
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT:
            raise InvalidInput(f"generate: invalid {what[:-1]} {value!r}: expected text of 1-{MAX_TEXT} characters")
    return tuple(values)


def _check_feed_locations(feeds: Sequence[str], rules: LocationRules) -> None:
    """Every location is catalog/<feed>/<id>.dat. The id part is a plain name, so the folder decides:
    when catalog/<feed> neither escapes the storage root nor overlaps one of tidekeep's areas (in
    either direction), no file in it can (locations.py)."""
    for feed in feeds:
        folder = f"catalog/{feed}"
        problem = decide(folder, rules).problem(folder)
        if problem is not None:
            raise InvalidInput(f"generate: feed {feed!r} would put records at {folder}/<id>.dat, but {problem}")


def _weights(n: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1) ** 0.8  # a few busy feeds, a long tail
    return weights / weights.sum()


def generate_block(spec: GenerateSpec, block: int) -> pa.Table:
    """Rows [block * BLOCK, min((block + 1) * BLOCK, rows)) as an Arrow table with the catalog_records
    columns. Pure: a function of the spec and the block index."""
    start = block * BLOCK
    n = min(BLOCK, spec.rows - start)
    rng = np.random.default_rng([spec.seed, block])
    index = np.arange(start, start + n, dtype=np.int64)
    ids = spec.first_id + index

    feed_idx = rng.choice(len(spec.feeds), size=n, p=_weights(len(spec.feeds)))
    weights = np.array([_TYPE_WEIGHTS.get(t, 0.1) for t in spec.types])
    type_idx = rng.choice(len(spec.types), size=n, p=weights / weights.sum())
    span_ms = spec.span_days * DAY_MS
    # records arrive in time order, as in a real store: create times rise with the id, spread
    # evenly over the span with a little jitter (so ids and create times correlate, like Stroom's meta)
    step = max(span_ms // max(spec.rows, 1), 1)
    create = spec.start_ms - span_ms + (index * span_ms) // max(spec.rows, 1)
    create = create + rng.integers(0, step, size=n, dtype=np.int64)
    create = np.clip(create, 0, spec.start_ms - 1)
    effective = np.maximum(create - rng.integers(0, 3_600_000, size=n, dtype=np.int64), 0)
    locked = rng.random(n) < 0.01
    status_time = np.where(locked, np.minimum(create + rng.integers(0, DAY_MS, size=n, dtype=np.int64),
                                              spec.start_ms), create)
    file_size = np.maximum(rng.lognormal(mean=10.6, sigma=1.2, size=n), 1).astype(np.int64)
    raw_size = file_size * rng.integers(2, 11, size=n, dtype=np.int64)

    # processed rows point at an earlier row of the same block (so the parent is always generated)
    type_names = np.array(spec.types, dtype=object)[type_idx]
    processed = np.isin(type_names, _PROCESSED_TYPES) & (index > start)
    back = rng.integers(1, 1_000, size=n, dtype=np.int64)
    parent = np.where(processed, ids - np.minimum(back, index - start), 0)
    pipeline_no = rng.integers(1, 6, size=n)

    with_attrs = rng.random(n) < 0.10
    host = rng.integers(1, 50, size=n)
    region = rng.integers(0, 3, size=n)  # 0: no region, 1: eu, 2: us

    feed_names = np.array(spec.feeds, dtype=object)[feed_idx]
    pipelines = [f"{feed} pipeline {p}" if is_processed else None
                 for feed, p, is_processed in zip(feed_names, pipeline_no.tolist(), processed.tolist(), strict=True)]
    attributes: list[str | None] = [None] * n
    for i in np.flatnonzero(with_attrs).tolist():
        attrs = {"source": f"host-{int(host[i]):02d}"}
        if region[i]:
            attrs["region"] = "eu" if region[i] == 1 else "us"
        attributes[i] = json.dumps(attrs, sort_keys=True, separators=(",", ":"))
    locations = [f"catalog/{feed}/{record_id}.dat" for feed, record_id in zip(feed_names, ids.tolist(), strict=True)]

    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "feed": pa.array(feed_names.tolist(), pa.string()),
        "type": pa.array(type_names.tolist(), pa.string()),
        "create_time": pa.array(create, pa.int64()),
        "effective_time": pa.array(effective, pa.int64()),
        "status": pa.array(np.where(locked, "LOCKED", "UNLOCKED").tolist(), pa.string()),
        "status_time": pa.array(status_time, pa.int64()),
        "parent_id": pa.array(parent, pa.int64(), mask=~processed),
        "pipeline": pa.array(pipelines, pa.string()),
        "file_size": pa.array(file_size, pa.int64()),
        "raw_size": pa.array(raw_size, pa.int64()),
        "location": pa.array(locations, pa.string()),
        "attributes": pa.array(attributes, pa.string()),
    })


def generate_tables(spec: GenerateSpec, batch_size: int) -> Iterator[pa.Table]:
    """The rows in tables of about batch_size rows (whole blocks)."""
    blocks_per_batch = max(1, batch_size // BLOCK)
    blocks = (spec.rows + BLOCK - 1) // BLOCK
    for first in range(0, blocks, blocks_per_batch):
        parts = [generate_block(spec, b) for b in range(first, min(first + blocks_per_batch, blocks))]
        yield pa.concat_tables(parts)


# ---- writing ------------------------------------------------------------------------------------


def _reserve_ids(conn: Connection, rows: int) -> int:
    """The first id of a fresh range of `rows` ids."""
    max_id = conn.execute(sa.select(sa.func.max(catalog_records.c.id))).scalar() or 0
    if conn.dialect.name != "postgresql":
        return int(max_id) + 1
    # no other insert may take an id between reading the sequence and moving it
    conn.exec_driver_sql("LOCK TABLE catalog_records IN SHARE ROW EXCLUSIVE MODE")
    last = conn.execute(sa.text(
        "SELECT COALESCE(pg_sequence_last_value(pg_get_serial_sequence('catalog_records', 'id')::regclass), 0)"
    )).scalar_one()
    first = max(int(max_id), int(last)) + 1
    conn.execute(sa.text("SELECT setval(pg_get_serial_sequence('catalog_records', 'id'), :v)"),
                 {"v": first + rows - 1})
    return first


def copy_table_postgres(conn: Connection, table: pa.Table) -> None:
    """COPY an Arrow table with the catalog_records columns into the table, inside conn's transaction.
    pyarrow writes NULL as an unquoted empty field and '' as "", which is what COPY CSV reads."""
    buffer = io.BytesIO()
    pacsv.write_csv(table.select(list(COPY_COLUMNS)), buffer,
                    pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cursor, cursor.copy(
            f"COPY catalog_records ({', '.join(COPY_COLUMNS)}) FROM STDIN WITH (FORMAT csv)") as copy:
        view = buffer.getbuffer()
        for offset in range(0, len(view), 1 << 20):
            copy.write(view[offset:offset + (1 << 20)])


def insert_table_sqlite(conn: Connection, table: pa.Table) -> None:
    columns = [table.column(name).to_pylist() for name in COPY_COLUMNS]
    placeholders = ", ".join("?" for _ in COPY_COLUMNS)
    raw = conn.connection.driver_connection
    assert raw is not None
    raw.executemany(f"INSERT INTO catalog_records ({', '.join(COPY_COLUMNS)}) VALUES ({placeholders})",
                    zip(*columns, strict=True))


def write_table(conn: Connection, table: pa.Table) -> None:
    if conn.dialect.name == "postgresql":
        copy_table_postgres(conn, table)
    else:
        insert_table_sqlite(conn, table)


def _write_files(workspace: Workspace, table: pa.Table) -> None:
    storage = workspace.storage  # owner-only files on local storage, as every data file
    for record_id, location in zip(table.column("id").to_pylist(), table.column("location").to_pylist(), strict=True):
        out = storage.create(location)  # closed unsynced: generated records are test data
        try:
            out.write(f"generated record {record_id}\n".encode())
        finally:
            out.close()


def generate_records(workspace: Workspace, rows: int, seed: int = 0, progress: Progress | None = None, *,
                     start_ms: int | None = None, span_days: int = 3650, feeds: Sequence[str] | None = None,
                     types: Sequence[str] | None = None, batch_size: int = DEFAULT_BATCH_SIZE,
                     with_files: bool = False) -> GenerateReport:
    """Generate and store `rows` synthetic records; reports progress (done, total) per batch."""
    if isinstance(rows, bool) or not isinstance(rows, int) or not 0 <= rows <= MAX_ROWS:
        raise InvalidInput(f"generate: invalid rows {rows!r}: expected 0 to {MAX_ROWS:,}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InvalidInput(f"generate: invalid seed {seed!r}: expected an integer >= 0")
    if isinstance(span_days, bool) or not isinstance(span_days, int) or not 1 <= span_days <= 100 * 366:
        raise InvalidInput(f"generate: invalid span_days {span_days!r}: expected 1 to 36600")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidInput(f"generate: invalid batch_size {batch_size!r}: expected a positive integer")
    start = workspace.clock.now_ms() if start_ms is None else start_ms
    if isinstance(start, bool) or not isinstance(start, int) or not 1 <= start <= MAX_TIME_MS:
        raise InvalidInput(f"generate: invalid start_ms {start_ms!r}: expected epoch ms up to year 9999")
    feed_names = _check_choices(feeds, DEFAULT_FEEDS, "feeds")
    type_names = _check_choices(types, DEFAULT_TYPES, "types")
    _check_feed_locations(feed_names, location_rules(workspace.settings))

    began = time.perf_counter()
    if rows == 0:
        return GenerateReport(0, 0.0, None, None)
    with workspace.db.write() as conn:
        first_id = _reserve_ids(conn, rows)
    spec = GenerateSpec(seed, rows, start, span_days, feed_names, type_names, first_id)
    done = 0
    if progress is not None:
        progress(0, rows)
    for table in generate_tables(spec, batch_size):
        with workspace.db.write() as conn:
            write_table(conn, table)
        if with_files:
            _write_files(workspace, table)
        done += table.num_rows
        if progress is not None:
            progress(done, rows)
    return GenerateReport(rows, time.perf_counter() - began, first_id, first_id + rows - 1)


__all__ = ["BLOCK", "DEFAULT_FEEDS", "DEFAULT_TYPES", "GenerateReport", "GenerateSpec", "copy_table_postgres",
           "generate_block", "generate_records", "write_table"]
