"""The "tidekeep_catalog" Spark data source: catalog records read in parallel create-time ranges.

    spark.read.format("tidekeep_catalog").option("metadata_url", url)
        .option("status", "UNLOCKED").option("from", 0).option("to", now).load()

The driver plans partitions as create-time ranges (about equal spans of the period's rows);
each executor task reads its range straight from the metadata store into Arrow with ADBC (the
C drivers of Arrow's database connectivity, for PostgreSQL and SQLite), ordered by create time,
so nothing passes row by row through Python and the retention job can cut create-time slices
from a partition without a shuffle. Times are LongType milliseconds since the epoch, UTC, the
form every catalog expression compiler works on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import sqlalchemy as sa

from ..errors import InvalidInput
from ..spark.credentials import REFERENCE_OPTIONS, MetadataReference, deployed_reference, reference_from_options
from ..store.schema_catalog import catalog_records

SOURCE_NAME = "tidekeep_catalog"

# every column of catalog_records, in table order, as Arrow types
COLUMN_TYPES: dict[str, pa.DataType] = {
    "id": pa.int64(), "feed": pa.string(), "type": pa.string(), "create_time": pa.int64(),
    "effective_time": pa.int64(), "status": pa.string(), "status_time": pa.int64(), "parent_id": pa.int64(),
    "pipeline": pa.string(), "file_size": pa.int64(), "raw_size": pa.int64(), "location": pa.string(),
    "attributes": pa.string(),
}
REQUIRED_COLUMNS = ("id", "feed", "type", "create_time", "status", "status_time")
BATCH_ROWS = 65_536
# one partition reads at most about this many rows, so a task's Arrow data stays small in memory
MAX_ROWS_PER_PARTITION = 1_000_000


def arrow_schema(columns: Sequence[str]) -> pa.Schema:
    return pa.schema([pa.field(c, COLUMN_TYPES[c], nullable=c not in REQUIRED_COLUMNS) for c in columns])


def check_columns(columns: Sequence[str]) -> tuple[str, ...]:
    unknown = [c for c in columns if c not in COLUMN_TYPES]
    if unknown:
        raise InvalidInput(f"unknown catalog column(s) {', '.join(map(repr, unknown))}: "
                           f"expected some of {', '.join(COLUMN_TYPES)}")
    if not columns:
        raise InvalidInput("no catalog columns selected")
    # table order, no duplicates: the Spark schema and the SELECT list are built from the same tuple
    return tuple(c for c in COLUMN_TYPES if c in set(columns))


# ---- planning (pure) ----------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanStats:
    rows: int
    min_create_time: int | None
    max_create_time: int | None


def plan_ranges(from_ms: int, to_ms: int, stats: ScanStats, partitions: int) -> list[tuple[int, int]]:
    """Split the rows of [from_ms, to_ms) into `partitions` create-time ranges of equal span over
    the part of the period that holds rows (more ranges when a range would exceed
    MAX_ROWS_PER_PARTITION at an even spread). The ranges are disjoint, ascending and together
    cover every row of the period; none is empty by construction of its bounds."""
    if stats.rows == 0 or stats.min_create_time is None or stats.max_create_time is None:
        return []
    low = max(from_ms, stats.min_create_time)
    high = min(to_ms, stats.max_create_time + 1)
    if low >= high:
        return []
    count = max(1, partitions, math.ceil(stats.rows / MAX_ROWS_PER_PARTITION))
    count = min(count, high - low)  # at least one millisecond per range
    bounds = [low + (high - low) * i // count for i in range(count + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(count)]


# ---- the store side (driver and executors) ----------------------------------------------------------
def scan_conditions(from_ms: int, to_ms: int, status: str | None) -> list[Any]:
    conditions = [catalog_records.c.create_time >= from_ms, catalog_records.c.create_time < to_ms]
    if status is not None:
        conditions.append(catalog_records.c.status == status)
    return conditions


def scan_stats(conn: sa.Connection, from_ms: int, to_ms: int, status: str | None) -> ScanStats:
    """Row count and create-time bounds of a period (one index range scan on (status, create_time))."""
    t = catalog_records
    row = conn.execute(sa.select(sa.func.count(), sa.func.min(t.c.create_time), sa.func.max(t.c.create_time))
                       .where(*scan_conditions(from_ms, to_ms, status))).one()
    return ScanStats(int(row[0]), row[1], row[2])


def adbc_target(url: str) -> tuple[str, str]:
    """("postgresql" | "sqlite", what the ADBC driver connects to) for a SQLAlchemy URL."""
    parsed = sa.make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        return "postgresql", parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    if backend == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise InvalidInput("the catalog source needs a SQLite file, not an in-memory database")
        return "sqlite", parsed.database
    raise InvalidInput(f"the catalog source supports sqlite and postgresql, not {backend!r}")


def range_query(backend: str, columns: Sequence[str], status: str | None) -> str:
    """The SELECT of one partition; the range bounds and status are bound parameters."""
    mark = (lambda i: f"${i}") if backend == "postgresql" else (lambda i: "?")
    where = f"create_time >= {mark(1)} AND create_time < {mark(2)}"
    if status is not None:
        where += f" AND status = {mark(3)}"
    # columns come from check_columns (known names only), never from user text
    return f"SELECT {', '.join(columns)} FROM catalog_records WHERE {where} ORDER BY create_time, id"


def read_range(url: str, columns: Sequence[str], status: str | None, from_ms: int, to_ms: int,
               rows_hint: int = MAX_ROWS_PER_PARTITION) -> Iterator[pa.RecordBatch]:
    """The rows of [from_ms, to_ms) (optionally of one status) as Arrow batches in create-time order."""
    backend, target = adbc_target(url)
    schema = arrow_schema(columns)
    params: tuple[Any, ...] = (from_ms, to_ms) if status is None else (from_ms, to_ms, status)
    if backend == "postgresql":
        import adbc_driver_postgresql.dbapi as driver
    else:
        import adbc_driver_sqlite.dbapi as driver
    with driver.connect(target) as conn, conn.cursor() as cursor:
        if backend == "sqlite":
            # the SQLite driver infers each column's type from its first batch; one batch for the
            # whole range means a column that starts with NULLs cannot be mistyped later
            cursor.adbc_statement.set_options(**{"adbc.sqlite.query.batch_rows": str(max(rows_hint, 1024))})
        cursor.execute(range_query(backend, columns, status), parameters=params)
        table = cursor.fetch_arrow_table()
    # drop driver metadata and fix types (an all-NULL SQLite column arrives as int64 or null)
    table = pa.Table.from_arrays([table.column(i).cast(schema.field(i).type) for i in range(len(columns))],
                                 schema=schema)
    yield from table.to_batches(max_chunksize=BATCH_ROWS)


# ---- options ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CatalogReadOptions:
    metadata: MetadataReference  # the metadata password by reference: these options go to executors
    columns: tuple[str, ...]
    status: str | None
    from_ms: int
    to_ms: int
    partitions: int
    ranges: tuple[tuple[int, int], ...] | None  # pre-planned by the caller (the retention job)


_KNOWN_OPTIONS = {"metadata_url", "home", "shared_filesystem", "columns", "status", "from", "to", "partitions",
                  "ranges", "path"} | REFERENCE_OPTIONS
END_OF_TIME = 253_402_300_800_000  # 10000-01-01T00:00Z: beyond any valid record time


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None:
        return default
    try:
        return int(str(raw).strip())
    except ValueError:
        raise InvalidInput(f"catalog source option {name!r}: expected a whole number, got {raw!r}") from None


def parse_options(options: Mapping[str, str]) -> CatalogReadOptions:
    unknown = sorted(set(options) - _KNOWN_OPTIONS)
    if unknown:
        raise InvalidInput(f"unknown catalog source option(s) {', '.join(map(repr, unknown))}")
    from ..config import absolute_metadata_url, load_settings

    url = options.get("metadata_url")
    # executors open the URL: a relative SQLite path is made absolute here, where Spark plans; its
    # password only ever by reference (spark/credentials.py)
    if url:
        metadata = reference_from_options({**options, "metadata_url": absolute_metadata_url(url)})
    else:
        # this runs in a Spark worker: no private password file may be made here
        metadata = deployed_reference(load_settings(options.get("home")).metadata_url,
                                      "the tidekeep_catalog source with only 'home'")
    assert metadata is not None
    columns = check_columns([c.strip() for c in options.get("columns", ",".join(COLUMN_TYPES)).split(",")
                             if c.strip()])
    status = options.get("status") or None
    if status is not None and status not in ("UNLOCKED", "LOCKED", "DELETED"):
        raise InvalidInput(f"catalog source option 'status': expected UNLOCKED, LOCKED or DELETED, got {status!r}")
    ranges = None
    if options.get("ranges"):
        try:
            ranges = tuple((int(a), int(b)) for a, b in json.loads(options["ranges"]))
        except (ValueError, TypeError):
            raise InvalidInput("catalog source option 'ranges': expected a JSON list of [from, to] pairs") from None
    from_ms, to_ms = _int_option(options, "from", 0), _int_option(options, "to", END_OF_TIME)
    if from_ms > to_ms:
        raise InvalidInput(f"catalog source: 'from' ({from_ms}) is after 'to' ({to_ms})")
    return CatalogReadOptions(metadata, columns, status, from_ms, to_ms, _int_option(options, "partitions", 0), ranges)


def spark_schema(columns: Sequence[str]) -> Any:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField(c, LongType() if COLUMN_TYPES[c] == pa.int64() else StringType(),
                                   nullable=c not in REQUIRED_COLUMNS) for c in columns])


def plan(options: CatalogReadOptions) -> list[tuple[int, int]]:
    if options.ranges is not None:
        return list(options.ranges)
    from ..store.database import Database

    db = Database(options.metadata.url())
    try:
        with db.read() as conn:
            stats = scan_stats(conn, options.from_ms, options.to_ms, options.status)
    finally:
        db.dispose()
    return plan_ranges(options.from_ms, options.to_ms, stats, options.partitions or 2)


# ---- the Spark classes -----------------------------------------------------------------------------
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402


class CatalogRange(InputPartition):
    def __init__(self, from_ms: int, to_ms: int) -> None:
        super().__init__((from_ms, to_ms))
        self.from_ms = from_ms
        self.to_ms = to_ms


class CatalogDataSource(DataSource):
    """Catalog records as a DataFrame (all columns unless the "columns" option names some)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> Any:
        return spark_schema(options_for_executors(self.options).columns)

    def reader(self, schema: Any) -> DataSourceReader:
        return CatalogReader(options_for_executors(self.options))


def options_for_executors(options: Mapping[str, str]) -> CatalogReadOptions:
    """parse_options, and the executors' reach: they open the metadata store, so a SQLite file is
    refused with ConfigError on a non-local master (the spark.master setting, which
    register_data_sources sets to the session's) unless the filesystem is declared shared."""
    from ..config import load_settings
    from ..spark.cluster import check_settings_reach

    parsed = parse_options(options)
    shared = options.get("shared_filesystem") or None
    settings = load_settings(options.get("home"), {"metadata.url": parsed.metadata.public_url,
                                                         "spark.shared_filesystem": shared})
    check_settings_reach(settings, metadata=True)
    return parsed


class CatalogReader(DataSourceReader):
    def __init__(self, options: CatalogReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        ranges = plan(self.options)
        # an empty period still needs one (empty) partition for Spark to build the plan on
        return [CatalogRange(a, b) for a, b in ranges] or [CatalogRange(self.options.from_ms, self.options.from_ms)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, CatalogRange)
        yield from read_range(self.options.metadata.url(), self.options.columns, self.options.status,
                              partition.from_ms, partition.to_ms)
