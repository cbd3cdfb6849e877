"""Bulk import of meta records through Spark: `tidekeep catalog import INPUT [--format F]`.

INPUT is a path or a URI (`file://`, `s3://bucket/prefix?endpoint_override=…`, any `pyarrow.fs`
URI, store/inputs.py) naming a file or a directory (a prefix) of files at any depth (hidden files
and names starting with "_" are skipped, in every part of the path), all of one format: CSV with a
header row (.csv), JSON lines (.jsonl, .ndjson, .json) or Parquet (.parquet, .pq); `format`
overrides the extension. The driver lists the files (and reads a Parquet file's footer to plan one
task per row group); every file's rows are read by the executors, through FileIO.

Columns are the record fields (id, feed, type, create_time, effective_time, status, status_time,
parent_id, pipeline, file_size, raw_size, location), `attributes` (a JSON object; in JSON lines also
a nested object) and one column per custom attribute named `attr.<name>` in every format. Times are
epoch ms or ISO-8601 text (Parquet timestamps too). In CSV an empty field is "not given"; quoted
fields may not contain line breaks (each line is one record, so errors can name it). Lines end at
\n, \r\n or \r. CSV and JSON lines files must be UTF-8: a line that is not is refused naming it.

The job runs in three steps, none of which brings the rows to the driver, all on the DataFrame API
(so they run on a classic session and on Spark Connect alike): one task per text file or per
Parquet row group reads its rows in the executor.
1. validate: every row is parsed and checked (records.record_from_mapping and the location rules
   of locations.py, the same gates as `client.catalog.add`) in the executors; each task returns
   only its first error and counts. Ids given twice in the input are found with a shuffle
   of the ids. Any bad row fails the import with InvalidInput naming the file and line (row for
   Parquet) BEFORE anything is written.
2. on PostgreSQL the id sequence is moved past the largest explicit id, so rows without an id never
   take an id the input gives explicitly; on SQLite, which assigns max(rowid) + 1, rows with ids are
   written in a job before the rows without.
3. write: each task opens its own connection to the metadata store and inserts its rows in batches
   of WRITE_BATCH rows, one transaction each (PostgreSQL: COPY into a temporary table, then INSERT
   ... ON CONFLICT DO NOTHING; SQLite: INSERT ... ON CONFLICT DO NOTHING).

Tasks write side by side, so the ids the database gives rows without an id need not follow the
order of the lines. Re-importing a file whose rows carry ids is idempotent: a row whose id exists is skipped (and
counted as skipped). Rows without ids get new ids each time, so re-importing them duplicates them,
and a crash in the middle of an import leaves the batches already committed in place (a partial
import): import id-less data once, or give it ids.
"""

from __future__ import annotations

import csv
import functools
import json
import os
import posixpath
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput
from ..faults import fault_point
from ..store.inputs import InputFile, InputOpener, check_input_uri, list_inputs, locations_of, visible
from .location_rules import location_rules
from .locations import LocationRules, check_location
from .records import ATTRIBUTE_NAME, ATTRIBUTE_PREFIX, COLUMNS, MetaRecord, record_from_mapping

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from ..spark.credentials import MetadataReference
    from ..store.house import Workspace

Progress = Callable[[int, int], None]

FORMATS: dict[str, tuple[str, ...]] = {
    "csv": (".csv",),
    "json": (".jsonl", ".ndjson", ".json"),
    "parquet": (".parquet", ".pq"),
}
WRITE_BATCH = 5_000  # rows per write transaction in a task
ERROR_SHOWN = 200  # characters of a bad line quoted in an error
READ_BLOCK = 1 << 20  # bytes a task reads from a text file at a time
LINE_BREAK = re.compile(rb"\r\n|\r|\n")


@dataclass(frozen=True)
class ImportReport:
    rows: int  # valid rows read from the files
    files: int
    elapsed_s: float
    inserted: int = 0
    skipped: int = 0  # rows whose id already existed (a re-import)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---- pure pieces: finding files, parsing lines and rows ------------------------------------------


def format_of(name: str, format: str | None) -> str:
    """The format of a file named `name` (its extension), or `format` when given."""
    if format is not None:
        if format.lower() not in FORMATS:
            raise InvalidInput(f"unknown import format {format!r}: expected csv, json or parquet")
        return format.lower()
    base = posixpath.basename(name).lower()
    for kind, extensions in FORMATS.items():
        if base.endswith(extensions):
            return kind
    raise InvalidInput(f"{name}: cannot tell the format from the extension; use --format csv|json|parquet")


def find_files(path: str | os.PathLike[str], format: str | None) -> tuple[str, list[InputFile]]:
    """(format, files) of a file or a directory (a prefix) of files at any depth, sorted by key;
    NotFound when nothing is there (store/inputs.py)."""
    given = os.fspath(path)
    if format is not None:
        format_of(given, format)  # an unknown format is refused before anything is listed
    files = list_inputs(given, keep=visible)
    if not files:
        raise InvalidInput(f"import directory {given!r} holds no files")
    if not files[0].in_directory:  # the input is one file
        return format_of(files[0].name, format), files
    if format is not None:
        chosen = format_of(given, format)
        wanted = [f for f in files if posixpath.basename(f.name).lower().endswith(FORMATS[chosen])] or files
        return chosen, wanted
    formats = {format_of(f.name, None) for f in files}
    if len(formats) > 1:
        raise InvalidInput(f"import directory {given!r} mixes formats ({', '.join(sorted(formats))}); "
                           "import one format at a time or pass --format")
    return formats.pop(), files


def first_bad_utf8(lines: Iterable[bytes]) -> tuple[int, int, int] | None:
    """(line number, column, offending byte) of the first line that is not UTF-8, all 1-based, or
    None. Lines are decoded one by one: a line break never falls inside a UTF-8 sequence."""
    for number, raw in enumerate(lines, 1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return number, exc.start + 1, raw[exc.start]
    return None


def decode_line(raw: bytes, where: str) -> str:
    """A line of a text input as text; InvalidInput naming the place when it is not UTF-8 (a line
    break never falls inside a UTF-8 sequence, so a line decodes on its own)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{where}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); "
                           "save the file as UTF-8") from None


def text_lines(blocks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a byte stream read in blocks, split at \\n, \\r\\n or \\r (not kept), as Spark's
    text reader splits them: a break ending the data ends the last line, it opens no empty one."""
    pending = b""
    for block in blocks:
        data = pending + block
        # a \\r closing the data may be the first half of a \\r\\n: it waits for the next block
        cut = len(data) - 1 if data.endswith(b"\r") else len(data)
        parts = LINE_BREAK.split(data[:cut])
        pending = parts.pop() + data[cut:]
        yield from parts
    parts = LINE_BREAK.split(pending)
    last = parts.pop()
    yield from parts
    if last:
        yield last


def check_columns(columns: Iterable[str], where: str) -> list[str]:
    """Known column names (record fields, attributes, attr.<name>), each once."""
    seen: list[str] = []
    for column in columns:
        if column in seen:
            raise InvalidInput(f"{where}: column {column!r} appears twice")
        if column.startswith(ATTRIBUTE_PREFIX):
            if not ATTRIBUTE_NAME.fullmatch(column[len(ATTRIBUTE_PREFIX):]):
                raise InvalidInput(f"{where}: invalid attribute column {column!r}: "
                                   "expected attr.<[A-Za-z0-9_-]{1,64}>")
        elif column not in COLUMNS:
            raise InvalidInput(f"{where}: unknown column {column!r}: expected {', '.join(COLUMNS)} or attr.<name>")
        seen.append(column)
    return seen


def csv_header(first_line: str, where: str) -> list[str]:
    fields = next(csv.reader([first_line.lstrip("\ufeff")]), [])
    if not fields or all(not f.strip() for f in fields):
        raise InvalidInput(f"{where}: the header row is empty")
    return check_columns([f.strip() for f in fields], where)


def _quoted(line: str) -> str:
    return repr(line if len(line) <= ERROR_SHOWN else line[:ERROR_SHOWN] + "...")


def parse_csv_line(line: str, header: list[str], where: str) -> dict[str, Any] | None:
    """One CSV data line as a mapping (empty fields left out); None for a blank line."""
    if not line.strip():
        return None
    try:
        rows = list(csv.reader([line], strict=True))
    except csv.Error as exc:
        raise InvalidInput(f"{where}: bad CSV ({exc}; quoted fields may not span lines): {_quoted(line)}") from None
    fields = rows[0] if rows else []
    if len(fields) != len(header):
        raise InvalidInput(f"{where}: expected {len(header)} fields as in the header, got {len(fields)}")
    return {name: value for name, value in zip(header, fields, strict=True) if value != ""}


def parse_json_line(line: str, where: str) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except ValueError as exc:
        raise InvalidInput(f"{where}: bad JSON ({exc.args[0] if exc.args else exc}): {_quoted(line)}") from None
    if not isinstance(value, dict):
        raise InvalidInput(f"{where}: expected a JSON object, got {type(value).__name__}")
    check_columns(value.keys(), where)
    return value


def parquet_value(value: Any) -> Any:
    """Parquet map columns arrive from pyarrow as lists of (key, value) pairs."""
    if isinstance(value, list) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        return dict(value)
    return value


@dataclass(frozen=True)
class Checked:
    """What validating one partition found: counts, the first error, the largest explicit id."""

    rows: int = 0
    with_id: int = 0
    bad: int = 0
    first_error: tuple[int, int, str] | None = None  # (file index, line/row, message)
    max_id: int = 0

    def merge(self, other: Checked) -> Checked:
        errors = [e for e in (self.first_error, other.first_error) if e is not None]
        return Checked(self.rows + other.rows, self.with_id + other.with_id, self.bad + other.bad,
                       min(errors) if errors else None, max(self.max_id, other.max_id))


# ---- the Spark job: executor side ----------------------------------------------------------------


@dataclass(frozen=True)
class Slice:
    """One task's share of the input: a whole text file, or one row group of a Parquet file
    (`first`: the number of its first row in the file, 1-based)."""

    file: int
    group: int = -1
    first: int = 1


Parsed = tuple[int, int, MetaRecord | InvalidInput | None]  # (file index, line or row, record/error/blank)
CHECKED_DDL = ("rows BIGINT, with_id BIGINT, bad BIGINT, error_file INT, error_number BIGINT, error STRING, "
               "max_id BIGINT")
IDS_DDL = "id BIGINT, file INT, number BIGINT"
WRITTEN_DDL = "inserted BIGINT, skipped BIGINT"


def _where(name: str, kind: str, number: int) -> str:
    return f"{name} {'row' if kind == 'parquet' else 'line'} {number}"


def _record(kind: str, mapping: dict[str, Any] | None, rules: LocationRules, where: str) -> MetaRecord | None:
    """A validated record (its location checked against `rules`), None for a blank line;
    InvalidInput naming the place otherwise."""
    if mapping is None:
        return None
    record = record_from_mapping(mapping, where)
    check_location(record.location, rules, where)
    return record


def parsed_rows(kind: str, files: list[InputFile], rules: LocationRules, part: Slice,
                opener: InputOpener) -> Iterator[Parsed]:
    """Every row of a slice, parsed, in order: a record, the InvalidInput of a bad row (parsing
    goes on), or None for a blank line. A file that cannot be read on (not UTF-8, no CSV header,
    unreadable) ends with its error."""
    file = files[part.file]
    number = 0
    try:
        if kind == "parquet":
            import pyarrow.parquet as pq

            with opener.random_access(file) as handle:
                table = pq.ParquetFile(handle).read_row_group(part.group)
            for offset, row in enumerate(table.to_pylist()):
                number = part.first + offset
                where = _where(file.name, kind, number)
                try:
                    yield part.file, number, _record(kind, {k: parquet_value(v) for k, v in row.items()
                                                            if v is not None}, rules, where)
                except InvalidInput as exc:
                    yield part.file, number, exc
            return
        header: list[str] | None = None
        with opener.stream(file) as stream:
            for number, raw in enumerate(text_lines(iter(lambda: bytes(stream.read(READ_BLOCK)), b"")), 1):
                where = _where(file.name, kind, number)
                line = decode_line(raw, where)
                if kind == "csv" and header is None:
                    if not line.strip():
                        raise InvalidInput(f"{where}: expected a header row, the line is empty")
                    header = csv_header(line, where)
                    continue
                try:
                    mapping = parse_csv_line(line, header, where) if header is not None \
                        else parse_json_line(line, where)
                    yield part.file, number, _record(kind, mapping, rules, where)
                except InvalidInput as exc:
                    yield part.file, number, exc
        if kind == "csv" and header is None:
            raise InvalidInput(f"{_where(file.name, kind, 1)}: expected a header row, the file is empty")
    except InvalidInput as exc:
        yield part.file, max(number, 1), exc
    except (OSError, ValueError) as exc:  # an unreadable file (pyarrow's errors are OSError or ValueError)
        reason = " ".join(str(exc).split())[:ERROR_SHOWN] or type(exc).__name__
        yield part.file, max(number, 1), InvalidInput(f"{file.name}: cannot be read: {reason}")


def _slices_of(batches: Iterable[pa.RecordBatch], slices: list[Slice]) -> Iterator[Slice]:
    for batch in batches:
        for index in batch.column(0).to_pylist():
            yield slices[index]


def check_slices(kind: str, files: list[InputFile], rules: LocationRules, slices: list[Slice],
                 batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of the validation: one row of counts and the first error per task."""
    import pyarrow as pa

    checked = Checked()
    opener = InputOpener()
    for part in _slices_of(batches, slices):
        checked = checked.merge(_check(parsed_rows(kind, files, rules, part, opener)))
    error = checked.first_error
    yield pa.RecordBatch.from_pylist([{
        "rows": checked.rows, "with_id": checked.with_id, "bad": checked.bad,
        "error_file": None if error is None else error[0], "error_number": None if error is None else error[1],
        "error": None if error is None else error[2], "max_id": checked.max_id}],
        schema=pa.schema([("rows", pa.int64()), ("with_id", pa.int64()), ("bad", pa.int64()),
                          ("error_file", pa.int32()), ("error_number", pa.int64()), ("error", pa.string()),
                          ("max_id", pa.int64())]))


def _check(rows: Iterable[Parsed]) -> Checked:
    count = with_id = bad = max_id = 0
    first_error: tuple[int, int, str] | None = None
    for file_index, number, parsed in rows:
        if isinstance(parsed, InvalidInput):
            bad += 1
            error = (file_index, number, str(parsed))
            first_error = error if first_error is None else min(first_error, error)
        elif parsed is not None:
            count += 1
            if parsed.id is not None:
                with_id += 1
                max_id = max(max_id, parsed.id)
    return Checked(count, with_id, bad, first_error, max_id)


def id_rows(kind: str, files: list[InputFile], rules: LocationRules, slices: list[Slice],
            batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: (id, file, number) of every row that gives an id (IDS_DDL)."""
    import pyarrow as pa

    opener = InputOpener()
    for part in _slices_of(batches, slices):
        found = [(p.id, f, n) for f, n, p in parsed_rows(kind, files, rules, part, opener)
                 if isinstance(p, MetaRecord) and p.id is not None]
        if found:
            ids, file_indexes, numbers = zip(*found, strict=True)
            yield pa.RecordBatch.from_arrays([pa.array(ids, pa.int64()), pa.array(file_indexes, pa.int32()),
                                              pa.array(numbers, pa.int64())], names=["id", "file", "number"])


def _write_rows(db: Any, records: list[MetaRecord]) -> tuple[int, int]:
    """Insert in one transaction; returns (inserted, skipped). Runs in an executor."""
    rows = [r.to_row() for r in records]
    with db.write() as conn:
        write = _write_postgres if conn.dialect.name == "postgresql" else _write_sqlite
        inserted = write(conn, rows)
    return inserted, len(rows) - inserted


def _write_sqlite(conn: Any, rows: list[dict[str, Any]]) -> int:
    raw = conn.connection.driver_connection
    inserted = 0
    for has_id in (True, False):
        names = COLUMNS if has_id else COLUMNS[1:]
        part = [tuple(r.get(n) for n in names) for r in rows if ("id" in r) == has_id]
        if part:
            cursor = raw.executemany(
                f"INSERT INTO catalog_records ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
                "ON CONFLICT (id) DO NOTHING", part)
            inserted += max(cursor.rowcount, 0)  # sqlite3 sums the rows executemany changed
    return inserted


_TEMP = "tk_catalog_import"


def _write_postgres(conn: Any, rows: list[dict[str, Any]]) -> int:
    raw = conn.connection.driver_connection
    with raw.cursor() as cursor:
        cursor.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {_TEMP} (id bigint, feed text, type text, create_time bigint, "
            "effective_time bigint, status text, status_time bigint, parent_id bigint, pipeline text, "
            "file_size bigint, raw_size bigint, location text, attributes text) ON COMMIT DELETE ROWS")
        with cursor.copy(f"COPY {_TEMP} ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row([row.get(name) for name in COLUMNS])
        rest = ", ".join(COLUMNS[1:])
        cursor.execute(f"INSERT INTO catalog_records ({', '.join(COLUMNS)}) SELECT {', '.join(COLUMNS)} "
                       f"FROM {_TEMP} WHERE id IS NOT NULL ORDER BY id ON CONFLICT (id) DO NOTHING")
        inserted = max(cursor.rowcount, 0)
        cursor.execute(f"INSERT INTO catalog_records ({rest}) SELECT {rest} FROM {_TEMP} WHERE id IS NULL")
        inserted += max(cursor.rowcount, 0)
    return inserted


def write_slices(kind: str, files: list[InputFile], rules: LocationRules, metadata: MetadataReference,
                 only: bool | None, slices: list[Slice], batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body of a write job: the task's records in batches of WRITE_BATCH, one transaction
    each; `only` True/False restricts to rows with/without id. The task opens its own engine and
    closes it after, so no connection outlives the task. Yields (inserted, skipped) (WRITTEN_DDL)."""
    import pyarrow as pa

    from ..store.database import Database

    db = Database(metadata.url())
    inserted = skipped = 0
    batch: list[MetaRecord] = []
    opener = InputOpener()
    try:
        for part in _slices_of(batches, slices):
            for _, _, record in parsed_rows(kind, files, rules, part, opener):
                if not isinstance(record, MetaRecord) or (only is not None and (record.id is not None) != only):
                    continue  # blank lines; errors were refused by the validation before any write
                batch.append(record)
                if len(batch) >= WRITE_BATCH:
                    done, seen = _write_rows(db, batch)
                    inserted, skipped, batch = inserted + done, skipped + seen, []
        if batch:
            done, seen = _write_rows(db, batch)
            inserted, skipped = inserted + done, skipped + seen
    finally:
        db.dispose()
    yield pa.RecordBatch.from_arrays([pa.array([inserted], pa.int64()), pa.array([skipped], pa.int64())],
                                     names=["inserted", "skipped"])


# ---- the Spark job: driver side ------------------------------------------------------------------


def plan_slices(kind: str, files: list[InputFile]) -> list[Slice]:
    """One slice per text file; per Parquet file one per row group, its footer read here (a small
    read; the rows are the executors'). InvalidInput for a file that is not Parquet or has
    columns no record has."""
    if kind != "parquet":
        return [Slice(index) for index in range(len(files))]
    import pyarrow.parquet as pq

    slices = []
    opener = InputOpener()
    for index, file in enumerate(files):
        try:
            with opener.random_access(file) as handle:
                meta = pq.ParquetFile(handle).metadata
        except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for a file that is not Parquet
            raise InvalidInput(f"{file.name}: not a Parquet file ({' '.join(str(exc).split())[:200]})") from None
        check_columns(meta.schema.to_arrow_schema().names, file.name)
        first = 1
        for group in range(meta.num_row_groups):
            slices.append(Slice(index, group, first))
            first += meta.row_group(group).num_rows
    return slices


def _over(spark: SparkSession, start: int, stop: int) -> DataFrame:
    """A frame of the slice indexes start..stop-1, one per partition: one task per slice."""
    return spark.range(start, stop, 1, stop - start)


def _validate(spark: SparkSession, kind: str, files: list[InputFile], rules: LocationRules,
              slices: list[Slice]) -> Checked:
    rows = _over(spark, 0, len(slices)).mapInArrow(
        lambda it: check_slices(kind, files, rules, slices, it), CHECKED_DDL).collect()
    checked = Checked()
    for row in rows:
        error = None if row["error"] is None else (row["error_file"], row["error_number"], row["error"])
        checked = checked.merge(Checked(row["rows"], row["with_id"], row["bad"], error, row["max_id"]))
    return checked


def _duplicate_id(spark: SparkSession, kind: str, files: list[InputFile], rules: LocationRules,
                  slices: list[Slice]) -> str | None:
    """The first id given twice in the input, with where it first appears, or None (a shuffle of the ids)."""
    from pyspark.sql import functions as F

    ids = _over(spark, 0, len(slices)).mapInArrow(lambda it: id_rows(kind, files, rules, slices, it), IDS_DDL)
    duplicates = (ids.groupBy("id")
                  .agg(F.count(F.lit(1)).alias("count"), F.min(F.struct("file", "number")).alias("first"))
                  .where(F.col("count") > 1)
                  .orderBy("first")
                  .limit(1)
                  .collect())
    if not duplicates:
        return None
    found = duplicates[0]
    where = _where(files[found["first"]["file"]].name, kind, found["first"]["number"])
    return f"{where}: id {found['id']} appears {found['count']} times in the input (ids must be unique)"


def import_records(workspace: Workspace, path: str | os.PathLike[str], format: str | None = None,
                   progress: Progress | None = None) -> ImportReport:
    """Validate every row of the files at `path`, then write them to catalog_records from the
    executors. Any bad row: InvalidInput naming file and line, and nothing written."""
    began = time.perf_counter()
    given = os.fspath(path)
    check_input_uri(given)
    from ..spark.session import check_job_reach, job_spark

    # executors read the input files: a local one on a cluster is refused before it is listed
    check_job_reach(workspace.settings, metadata=True, inputs=locations_of([given]))
    kind, files = find_files(given, format)
    slices = plan_slices(kind, files)

    # executors read the input files and write the records into the metadata store; refused before
    # anything is written, schema included
    spark = job_spark(workspace.settings, metadata=True, inputs=locations_of([given]), writes=True)
    workspace.db.ensure_schema()
    if not slices:  # Parquet files without row groups
        return ImportReport(0, len(files), time.perf_counter() - began)

    rules = location_rules(workspace.settings)
    checked = _validate(spark, kind, files, rules, slices)
    if checked.first_error is not None:
        more = f" ({checked.bad - 1} more bad rows)" if checked.bad > 1 else ""
        raise InvalidInput(checked.first_error[2] + more)
    if checked.with_id:
        duplicate = _duplicate_id(spark, kind, files, rules, slices)
        if duplicate is not None:
            raise InvalidInput(duplicate)

    total = checked.rows
    if progress is not None:
        progress(0, total)
    if workspace.db.is_sqlite and checked.with_id and checked.with_id < total:
        phases: list[bool | None] = [True, False]  # explicit ids first: SQLite assigns max(rowid) + 1
    else:
        phases = [None]
        if checked.with_id and not workspace.db.is_sqlite:
            from .record_store import bump_id_sequence

            with workspace.db.write() as conn:
                bump_id_sequence(conn, checked.max_id)
    from ..spark.connect import default_parallelism, job_master
    from ..spark.credentials import metadata_reference

    # the tasks get the metadata password by reference, never in their closures (spark/credentials.py)
    metadata = metadata_reference(workspace.db.url.render_as_string(hide_password=False), job_master(spark))
    inserted = skipped = 0
    step = default_parallelism(spark)
    for only in phases:
        for start in range(0, len(slices), step):
            stop = min(start + step, len(slices))
            writer = functools.partial(write_slices, kind, files, rules, metadata, only, slices)
            counts = _over(spark, start, stop).mapInArrow(writer, WRITTEN_DDL).collect()
            inserted += sum(c["inserted"] for c in counts)
            skipped += sum(c["skipped"] for c in counts)
            if progress is not None:
                progress(inserted + skipped, total)
            fault_point("catalog_import_after_group")  # crash tests: some batches committed, the rest not
    return ImportReport(total, len(files), time.perf_counter() - began, inserted, skipped)


__all__ = ["FORMATS", "ImportReport", "check_columns", "decode_line", "find_files", "first_bad_utf8",
           "import_records", "parse_csv_line", "parse_json_line", "text_lines"]
