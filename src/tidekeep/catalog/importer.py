"""Bulk import of meta records through Spark: `tidekeep catalog import PATH [--format F]`.

PATH is a local file or a directory of files (hidden files and names starting with "_" are skipped),
all of one format: CSV with a header row (.csv), JSON lines (.jsonl, .ndjson, .json) or Parquet
(.parquet, .pq); `format` overrides the extension.

Columns are the record fields (id, feed, type, create_time, effective_time, status, status_time,
parent_id, pipeline, file_size, raw_size, location), `attributes` (a JSON object; in JSON lines also
a nested object) and one column per custom attribute named `attr.<name>` in every format. Times are
epoch ms or ISO-8601 text (Parquet timestamps too). In CSV an empty field is "not given"; quoted
fields may not contain line breaks (each line is one record, so errors can name it). CSV and JSON
lines files must be UTF-8: a file that is not is refused naming its first bad line, as Spark's text
reader would silently turn the bytes into U+FFFD.

The job runs in three steps, none of which brings the rows to the driver:
1. validate: every row is parsed and checked (records.record_from_mapping and the location rules
   of locations.py, the same gates as `client.catalog.add`) in the executors; each partition
   returns only its first error and counts. Ids given twice in the input are found with a shuffle
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

import codecs
import csv
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, NotFound
from ..faults import fault_point
from .location_rules import location_rules
from .locations import LocationRules, check_location
from .records import ATTRIBUTE_NAME, ATTRIBUTE_PREFIX, COLUMNS, MetaRecord, record_from_mapping

if TYPE_CHECKING:
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


def format_of(path: Path, format: str | None) -> str:
    if format is not None:
        if format.lower() not in FORMATS:
            raise InvalidInput(f"unknown import format {format!r}: expected csv, json or parquet")
        return format.lower()
    for name, extensions in FORMATS.items():
        if path.name.lower().endswith(extensions):
            return name
    raise InvalidInput(f"{path}: cannot tell the format from the extension; use --format csv|json|parquet")


def find_files(path: str | os.PathLike[str], format: str | None) -> tuple[str, list[Path]]:
    """(format, files) for a file or a directory of files, sorted by name."""
    root = Path(path)
    if not root.exists():
        raise NotFound(f"import path {str(root)!r} does not exist")
    if root.is_file():
        return format_of(root, format), [root]
    files = sorted(p for p in root.iterdir() if p.is_file() and not p.name.startswith((".", "_")))
    if not files:
        raise InvalidInput(f"import directory {str(root)!r} holds no files")
    if format is not None:
        chosen = format_of(root, format)
        wanted = [p for p in files if p.name.lower().endswith(FORMATS[chosen])] or files
        return chosen, wanted
    formats = {format_of(p, None) for p in files}
    if len(formats) > 1:
        raise InvalidInput(f"import directory {str(root)!r} mixes formats ({', '.join(sorted(formats))}); "
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


def check_utf8(name: str) -> None:
    """InvalidInput naming the file and line when a text input file is not UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(name, "rb") as handle:
            while chunk := handle.read(1 << 20):  # the common, valid file: one pass in C
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        return
    except UnicodeDecodeError:
        pass
    with open(name, "rb") as handle:
        found = first_bad_utf8(handle)
    line, column, byte = found if found is not None else (0, 0, 0)
    raise InvalidInput(f"{name} line {line}: not UTF-8 text (byte 0x{byte:02x} at column {column}); "
                       "save the file as UTF-8")


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


# ---- the Spark job --------------------------------------------------------------------------------

Item = tuple[int, int, Any]  # (file index, 1-based line or row number, raw line or row mapping)


def _where(files: list[str], kind: str, file_index: int, number: int) -> str:
    return f"{files[file_index]} {'row' if kind == 'parquet' else 'line'} {number}"


def _parse(kind: str, files: list[str], headers: dict[int, list[str]], rules: LocationRules,
           item: Item) -> MetaRecord | None:
    """A validated record (its location checked against `rules`), None for a blank line;
    InvalidInput naming the place otherwise."""
    file_index, number, raw = item
    where = _where(files, kind, file_index, number)
    if kind == "csv":
        mapping = parse_csv_line(raw, headers[file_index], where)
    elif kind == "json":
        mapping = parse_json_line(raw, where)
    else:
        mapping = {k: parquet_value(v) for k, v in raw.items() if v is not None}
    if mapping is None:
        return None
    record = record_from_mapping(mapping, where)
    check_location(record.location, rules, where)
    return record


def _text_items(sc: Any, kind: str, files: list[str]) -> Any:
    """(file index, line number, line) for every line after the CSV header, by Spark."""
    rdds = []
    for index, name in enumerate(files):
        lines = sc.textFile(Path(name).resolve().as_uri()).zipWithIndex()
        first = 2 if kind == "csv" else 1
        rdds.append(lines.filter(lambda pair, skip=first - 1: pair[1] >= skip)
                    .map(lambda pair, i=index: (i, pair[1] + 1, pair[0])))
    return sc.union(rdds)


def _read_row_group(task: tuple[int, str, int, int]) -> Iterator[Item]:
    import pyarrow.parquet as pq

    file_index, name, group, first_row = task
    table = pq.ParquetFile(name).read_row_group(group)
    for offset, row in enumerate(table.to_pylist()):
        yield file_index, first_row + offset, row


def _parquet_items(sc: Any, files: list[str]) -> Any:
    import pyarrow.parquet as pq

    tasks = []
    for index, name in enumerate(files):
        try:
            meta = pq.ParquetFile(name).metadata
        except Exception as exc:  # pyarrow raises ArrowInvalid/OSError for a file that is not Parquet
            raise InvalidInput(f"{name}: not a Parquet file ({' '.join(str(exc).split())[:200]})") from None
        check_columns(meta.schema.to_arrow_schema().names, name)
        first = 1
        for group in range(meta.num_row_groups):
            tasks.append((index, name, group, first))
            first += meta.row_group(group).num_rows
    if not tasks:
        return sc.emptyRDD()
    return sc.parallelize(tasks, len(tasks)).flatMap(_read_row_group)


def _check_partition(kind: str, files: list[str], headers: dict[int, list[str]], rules: LocationRules,
                     items: Iterable[Item]) -> Iterator[Checked]:
    rows = with_id = bad = max_id = 0
    first_error: tuple[int, int, str] | None = None
    for item in items:
        try:
            record = _parse(kind, files, headers, rules, item)
        except InvalidInput as exc:
            bad += 1
            error = (item[0], item[1], str(exc))
            first_error = error if first_error is None else min(first_error, error)
            continue
        if record is not None:
            rows += 1
            if record.id is not None:
                with_id += 1
                max_id = max(max_id, record.id)
    yield Checked(rows, with_id, bad, first_error, max_id)


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


def _write_partition(kind: str, files: list[str], headers: dict[int, list[str]], rules: LocationRules,
                     metadata: MetadataReference,
                     only: bool | None, items: Iterable[Item]) -> Iterator[tuple[int, int]]:
    """Write one partition's records in batches; `only` True/False restricts to rows with/without id.
    The task opens its own engine and closes it after, so no connection outlives the task."""
    from ..store.database import Database

    db = Database(metadata.url())
    inserted = skipped = 0
    batch: list[MetaRecord] = []
    try:
        for item in items:
            record = _parse(kind, files, headers, rules, item)
            if record is None or (only is not None and (record.id is not None) != only):
                continue
            batch.append(record)
            if len(batch) >= WRITE_BATCH:
                done, seen = _write_rows(db, batch)
                inserted, skipped, batch = inserted + done, skipped + seen, []
        if batch:
            done, seen = _write_rows(db, batch)
            inserted, skipped = inserted + done, skipped + seen
    finally:
        db.dispose()
    yield inserted, skipped


def _duplicate_id(items: Any, kind: str, files: list[str], headers: dict[int, list[str]],
                  rules: LocationRules) -> str | None:
    """The first id given twice in the input, with where it appears, or None (a shuffle of the ids)."""
    def ids(item: Item) -> list[tuple[int, tuple[int, tuple[int, int]]]]:
        record = _parse(kind, files, headers, rules, item)
        return [] if record is None or record.id is None else [(record.id, (1, (item[0], item[1])))]

    duplicates = (items.flatMap(ids)
                  .reduceByKey(lambda a, b: (a[0] + b[0], min(a[1], b[1])))
                  .filter(lambda kv: kv[1][0] > 1)
                  .takeOrdered(1, key=lambda kv: kv[1][1]))
    if not duplicates:
        return None
    record_id, (count, (file_index, number)) = duplicates[0]
    return (f"{_where(files, kind, file_index, number)}: id {record_id} appears {count} times in the input "
            "(ids must be unique)")


def import_records(workspace: Workspace, path: str | os.PathLike[str], format: str | None = None,
                   progress: Progress | None = None) -> ImportReport:
    """Validate every row of the files at `path`, then write them to catalog_records from the
    executors. Any bad row: InvalidInput naming file and line, and nothing written."""
    began = time.perf_counter()
    kind, paths = find_files(path, format)
    files = [str(p) for p in paths]
    if kind in ("csv", "json"):
        for name in files:
            check_utf8(name)
    headers: dict[int, list[str]] = {}
    if kind == "csv":
        for index, name in enumerate(files):
            with open(name, encoding="utf-8", newline="") as handle:
                first = handle.readline()
            if not first.strip():
                raise InvalidInput(f"{name} line 1: expected a header row, the file is empty")
            headers[index] = csv_header(first, f"{name} line 1")

    from ..spark.session import job_spark

    # executors read the input files and write the records into the metadata store; refused before
    # anything is written, schema included
    spark = job_spark(workspace.settings, metadata=True, inputs=files, writes=True)
    workspace.db.ensure_schema()
    from ..spark.connect import require_classic

    require_classic(spark, "catalog import")
    sc = spark.sparkContext
    items = _parquet_items(sc, files) if kind == "parquet" else _text_items(sc, kind, files)

    rules = location_rules(workspace.settings)
    summaries = items.mapPartitions(lambda part: _check_partition(kind, files, headers, rules, part)).collect()
    checked = Checked()
    for summary in summaries:
        checked = checked.merge(summary)
    if checked.first_error is not None:
        more = f" ({checked.bad - 1} more bad rows)" if checked.bad > 1 else ""
        raise InvalidInput(checked.first_error[2] + more)
    if checked.with_id:
        duplicate = _duplicate_id(items, kind, files, headers, rules)
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
    from ..spark.connect import job_master
    from ..spark.credentials import metadata_reference

    # the tasks get the metadata password by reference, never in their closures (spark/credentials.py)
    metadata = metadata_reference(workspace.db.url.render_as_string(hide_password=False), job_master(spark))
    inserted = skipped = done = 0
    partitions = items.getNumPartitions()
    step = max(1, sc.defaultParallelism)
    for only in phases:
        writer = items.mapPartitions(
            lambda part, o=only: _write_partition(kind, files, headers, rules, metadata, o, part))
        for start in range(0, partitions, step):
            counts = sc.runJob(writer, lambda it: it, list(range(start, min(start + step, partitions))))
            inserted += sum(c[0] for c in counts)
            skipped += sum(c[1] for c in counts)
            done = inserted + skipped
            if progress is not None:
                progress(done, total)
            fault_point("catalog_import_after_group")  # crash tests: some batches committed, the rest not
    return ImportReport(total, len(files), time.perf_counter() - began, inserted, skipped)


__all__ = ["FORMATS", "ImportReport", "check_columns", "find_files", "import_records", "parse_csv_line",
           "parse_json_line"]
