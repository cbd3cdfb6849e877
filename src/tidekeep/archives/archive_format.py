"""The layouts of an archive file, and reading either back as messages (pure: pyarrow only).

Every archive is one Parquet file whose first column is `timestamp` (int64 ms UTC, null for a
message without one), so search can skip row groups by their timestamp statistics in any format.
The format is written in the file's Arrow schema metadata under `tidekeep.archive.format`; a file
without it is format 1. A reader refuses a format newer than it knows, naming it.

- **Format 1, text** (ARCHIVE_SCHEMA): `timestamp`, `message` (the text), `source`.
- **Format 2, templates** (docs/archives.md, "Template encoding"): the message is stored as CLP
  stores it. Its leading timestamp text is taken out where it renders back byte for byte from the
  timestamp (`timestamp_format` names how; null where it stays in the text, timestamp_text.py);
  what is left is split into a log type, numbers and dictionary variables (template_columns.py).
  Parquet's dictionary encoding of `logtype` and `variables` is the log-type dictionary and the
  variable dictionary of each row group, so a search can match a query against the distinct log
  types of a row group before it decodes any message.
- **Format 3, templates grouped by log type**: format 2's columns, rows and lists, with each row
  group's `numbers` and `variables` values stored grouped by log type and placeholder, as CLP's
  tables per log type hold them (value_order.py), and `numbers` byte-stream-split. A reader puts
  the values back in row order as it reads each row group (`restore_rows`), and then reads it as
  format 2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from .model import ARCHIVE_SCHEMA
from .template_columns import decode_column, encode_column
from .timestamp_text import split_timestamps, timestamp_prefixes
from .value_order import RowLayout, StoredOrder, from_stored, log_type_groups, to_stored

if TYPE_CHECKING:
    import pyarrow.parquet as pq

FORMAT_KEY = b"tidekeep.archive.format"
TEXT_FORMAT = 1
TEMPLATE_FORMAT = 2
GROUPED_FORMAT = 3
CURRENT_FORMAT = GROUPED_FORMAT
KNOWN_FORMATS = (TEXT_FORMAT, TEMPLATE_FORMAT, GROUPED_FORMAT)
TEMPLATE_FORMATS = (TEMPLATE_FORMAT, GROUPED_FORMAT)  # the formats that store messages template-encoded
MESSAGE_PARTS = ("timestamp_format", "logtype", "numbers", "variables")  # formats 2, 3: what makes the message
GROUPED_VALUES = ("numbers", "variables")  # format 3: stored grouped by log type (value_order.py)
# formats 2 and 3: columns a search reads as Arrow dictionaries: the distinct values are matched, not every row
DICTIONARY_COLUMNS = ("timestamp_format", "logtype", "variables.list.element")

TEMPLATE_SCHEMA = pa.schema([
    pa.field("timestamp", pa.int64()),  # first in every format: search skips row groups by its statistics
    pa.field("timestamp_format", pa.string()),  # null: the timestamp text (if any) is still in the log type
    pa.field("logtype", pa.binary(), nullable=False),
    pa.field("numbers", pa.list_(pa.int64()), nullable=False),
    pa.field("variables", pa.list_(pa.binary()), nullable=False),
    pa.field("source", pa.string(), nullable=False),
], metadata={FORMAT_KEY: str(TEMPLATE_FORMAT).encode()})
GROUPED_SCHEMA = TEMPLATE_SCHEMA.with_metadata({FORMAT_KEY: str(GROUPED_FORMAT).encode()})


TEXT_ZSTD_LEVEL = 3
TEMPLATE_ZSTD_LEVEL = 9
DICTIONARY_PAGE_LIMIT = 64 << 20


class UnknownArchiveFormat(ValueError):
    """An archive written in a format this tidekeep does not read (a newer one)."""


def schema_of(archive_format: int) -> pa.Schema:
    return {TEXT_FORMAT: ARCHIVE_SCHEMA, TEMPLATE_FORMAT: TEMPLATE_SCHEMA}.get(archive_format, GROUPED_SCHEMA)


def writer_options(archive_format: int) -> dict[str, Any]:
    """pq.ParquetWriter options besides compression. Sources repeat; sorted timestamps delta-encode
    to almost nothing; statistics only where search uses them (a row group's time range). Format 1's
    messages are (nearly) all distinct, so a dictionary attempt on them only costs time; format 2's
    log types and variables repeat, and their dictionaries are what search matches first."""
    encodings = {"timestamp": "DELTA_BINARY_PACKED"}
    common: dict[str, Any] = {"write_statistics": ["timestamp"], "column_encoding": encodings}
    if archive_format == TEXT_FORMAT:
        return {**common, "use_dictionary": ["source"], "compression_level": TEXT_ZSTD_LEVEL}
    # a row group's distinct log types and variables run to megabytes: below the limit they stay one
    # dictionary (Parquet falls back to plain pages past it); zstd 9 costs little next to encoding
    # and keeps 5 % less (docs/benchmarks.md, "Template-encoded archives")
    options = {**common, "use_dictionary": ["timestamp_format", "logtype", "variables.list.element", "source"],
               "dictionary_pagesize_limit": DICTIONARY_PAGE_LIMIT, "compression_level": TEMPLATE_ZSTD_LEVEL}
    if archive_format == GROUPED_FORMAT:
        # a placeholder's numbers stored together share their high bytes: split by byte, zstd keeps
        # 4-10 % less of them (docs/benchmarks.md, "Template-encoded archives")
        options["column_encoding"] = {**encodings, "numbers.list.element": "BYTE_STREAM_SPLIT"}
    return options


def format_of(schema: pa.Schema) -> int:
    """The format of an archive file from its Arrow schema; UnknownArchiveFormat for a newer one."""
    metadata = schema.metadata or {}
    raw = metadata.get(FORMAT_KEY)
    if raw is None:
        return TEXT_FORMAT
    try:
        found = int(raw)
    except ValueError:
        raise UnknownArchiveFormat(f"archive format {raw!r} is not a number") from None
    if found not in KNOWN_FORMATS:
        raise UnknownArchiveFormat(f"archive format {found} is newer than this tidekeep reads "
                                   f"(formats {', '.join(map(str, KNOWN_FORMATS))}): upgrade tidekeep to read it")
    return found


def encode_rows(table: pa.Table, timezone: str | None, archive_format: int = CURRENT_FORMAT) -> pa.Table:
    """Messages (ARCHIVE_SCHEMA, in timestamp order) as one row group of format 2 or 3 (the values
    of a format 3 row group are ordered within it), ordered by source and then
    timestamp: the lines of one file sit together and compress better (13 % smaller on the
    benchmark corpus), a row group's time range is the same, and since the sort is stable, messages
    of one timestamp keep their order within each file (search results order ties by position).
    `timezone` is the ingest's zone when its timestamps were read in the built-in forms; None (a
    user's timestamp format) keeps every timestamp text in the message."""
    table = table.sort_by([("source", "ascending"), ("timestamp", "ascending")])
    messages = table.column("message").combine_chunks().cast(pa.string())
    timestamps = table.column("timestamp").combine_chunks()
    if timezone is None:
        formats, rest = pa.nulls(len(messages), pa.string()), messages
    else:
        formats, rest = split_timestamps(messages, timestamps, timezone)
    encoded = encode_column(rest)
    numbers, variables = encoded.numbers, encoded.dictionary
    if archive_format == GROUPED_FORMAT:
        layout = RowLayout.of(log_type_groups(encoded.logtypes))
        numbers, variables = to_stored(numbers, layout), to_stored(variables, layout)
    elif archive_format != TEMPLATE_FORMAT:
        raise ValueError(f"archive format {archive_format} does not store templates")
    return pa.Table.from_arrays([timestamps, formats, encoded.logtypes, numbers, variables,
                                 table.column("source").combine_chunks().cast(pa.string())],
                                schema=schema_of(archive_format))


def restore_rows(archive_format: int, table: pa.Table) -> pa.Table:
    """One row group as read (any of its columns) with format 3's values back in row order, so it
    reads as format 2; other formats as they are. Row groups are restored one at a time: the order
    is each row group's own."""
    if archive_format != GROUPED_FORMAT or not any(name in table.column_names for name in GROUPED_VALUES):
        return table
    layout = RowLayout.of(log_type_groups(table.column("logtype")))
    for name in GROUPED_VALUES:
        if name in table.column_names:
            column = table.column(name)
            lists = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
            table = table.set_column(table.column_names.index(name), name, from_stored(lists, layout))
    return table


def decode_messages(table: pa.Table) -> pa.Array:
    """The message texts of format 2 rows (columns `timestamp` and MESSAGE_PARTS)."""
    variables = table.column("variables")
    if pa.types.is_dictionary(variables.type.value_type):  # as search reads it
        variables = variables.cast(pa.list_(pa.binary()))
    # the timestamp texts are rendered first and the messages decoded after them, in one pass
    prefixes = timestamp_prefixes(table.column("timestamp_format"), table.column("timestamp"), table.num_rows)
    return decode_column(table.column("logtype"), table.column("numbers"), variables, prefixes)


class StoredRowGroup:
    """One row group as read (with `logtype` when it has value columns), whose rows are taken out
    by number: a search tests every row and decodes only the rows left, so format 3's values are
    put back in row order for those rows only (value_order.StoredOrder)."""

    def __init__(self, archive_format: int, table: pa.Table) -> None:
        self.table = table
        self.grouped = archive_format == GROUPED_FORMAT and any(name in table.column_names for name in GROUPED_VALUES)
        self._order: StoredOrder | None = None

    def _stored_order(self) -> StoredOrder:
        """Format 3's order, from the log types: made when first needed (a row group whose rows are
        all ruled out by their log types never needs it)."""
        if self._order is None:
            self._order = StoredOrder(self.table.column("logtype"))
        return self._order

    @property
    def variable_owners(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """For format 3, what gives the rows holding the values at given positions of the
        `variables` column's values as read; None where each list holds its own row's values."""
        if not self.grouped:
            return None
        variables = _one_chunk(self.table.column("variables"))
        return lambda positions: self._stored_order().owners(variables, positions)

    def take(self, rows: np.ndarray, columns: list[str] | None = None) -> pa.Table:
        """The rows numbered `rows` (ascending) of `columns` (default: all), format 3's values in
        row order."""
        table = self.table if columns is None else self.table.select(columns)
        if not self.grouped:
            return table.take(pa.array(rows, pa.int64()))
        order = self._stored_order()
        arrays = []
        for name in table.column_names:
            column = _one_chunk(table.column(name))
            arrays.append(order.take(column, rows) if name in GROUPED_VALUES else column.take(pa.array(rows)))
        return pa.Table.from_arrays(arrays, schema=table.schema)


def _one_chunk(column: pa.ChunkedArray) -> Any:
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def read_columns(archive_format: int, columns: list[str]) -> list[str]:
    """The file's columns to read for the message columns `columns` (ARCHIVE_SCHEMA names)."""
    if archive_format == TEXT_FORMAT:
        return columns
    wanted: list[str] = []
    for name in columns:
        parts = ["timestamp", *MESSAGE_PARTS] if name == "message" else [name]
        wanted.extend(part for part in parts if part not in wanted)
    return wanted


def as_messages(archive_format: int, table: pa.Table, columns: list[str]) -> pa.Table:
    """Rows read with `read_columns(archive_format, columns)` as the ARCHIVE_SCHEMA columns `columns`."""
    if archive_format == TEXT_FORMAT:
        return table.select(columns)
    fields = {field.name: field for field in ARCHIVE_SCHEMA}
    arrays = []
    for name in columns:
        if name == "message":
            arrays.append(decode_messages(table))
        else:
            arrays.append(table.column(name).combine_chunks().cast(fields[name].type))  # a dictionary too
    return pa.Table.from_arrays(arrays, schema=pa.schema([fields[name] for name in columns]))


def read_messages(parquet: pq.ParquetFile, columns: list[str] | None = None,
                  row_groups: list[int] | None = None) -> pa.Table:
    """An archive file's rows as ARCHIVE_SCHEMA columns (all of them by default), in any format."""
    archive_format = format_of(parquet.schema_arrow)
    wanted = list(ARCHIVE_SCHEMA.names) if columns is None else columns
    groups = list(range(parquet.metadata.num_row_groups)) if row_groups is None else row_groups
    stored = read_columns(archive_format, wanted)
    if not groups:
        return as_messages(archive_format, schema_of(archive_format).empty_table().select(stored), wanted)
    if archive_format == GROUPED_FORMAT and any(name in stored for name in GROUPED_VALUES):
        return pa.concat_tables([as_messages(archive_format, restore_rows(
            archive_format, parquet.read_row_group(group, columns=stored)), wanted) for group in groups])
    table = parquet.read_row_groups(groups, columns=stored)
    return as_messages(archive_format, table, wanted)


__all__ = ["CURRENT_FORMAT", "DICTIONARY_COLUMNS", "FORMAT_KEY", "GROUPED_FORMAT", "GROUPED_SCHEMA", "KNOWN_FORMATS",
           "MESSAGE_PARTS", "TEMPLATE_FORMAT", "TEMPLATE_FORMATS", "TEMPLATE_SCHEMA", "TEXT_FORMAT",
           "StoredRowGroup", "UnknownArchiveFormat", "as_messages", "decode_messages", "encode_rows", "format_of",
           "read_columns", "read_messages", "restore_rows", "schema_of", "writer_options"]
