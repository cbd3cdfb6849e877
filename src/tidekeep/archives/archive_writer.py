"""Writing archive files: Parquet (zstd; format 2, template-encoded, unless told otherwise:
archive_format.py) into the storage (store/fileio.py), rolled to a new archive once a file's stored
size reaches the target size.

Rows arrive in the order of their files (an ingest task reads its files one after the other), so
an archive's begin and end are the least and greatest timestamps it holds. Rows are buffered into
row groups of about `row_group_raw_bytes` of text, each stored sorted by source and timestamp
(archive_format.encode_rows); after each row group is written the file's size is checked, and at
`target_size` or more the archive is closed. An archive is therefore at most `target_size` plus one
row group (plus the footer). Timestamped and timestamp-less messages never share an archive: a
writer is told which kind it writes and refuses the other. Files go through the storage's FileIO:
with `storage.fsync` on local storage an archive is on disk once it is closed.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..store.deletion import warn_files_left
from ..store.fileio import FileIO
from .archive_format import CURRENT_FORMAT, TEXT_FORMAT, encode_rows, schema_of, writer_options

log = logging.getLogger("tidekeep.archives.ingest")

MAX_ROW_GROUP_RAW_BYTES = 64 << 20
MIN_ROW_GROUP_RAW_BYTES = 4 << 10


def row_group_raw_bytes(target_size: int) -> int:
    """Text per row group: a quarter of the target (text compresses well, so a row group stores at
    a fraction of that), between 4 KiB and 64 MiB — big enough for zstd, small enough that the
    overshoot past the target stays small."""
    return max(MIN_ROW_GROUP_RAW_BYTES, min(MAX_ROW_GROUP_RAW_BYTES, target_size // 4))


@dataclass(frozen=True)
class WrittenArchive:
    id: str
    file: str  # where the writer put it, relative to the storage root
    begin_ts: int | None
    end_ts: int | None
    message_count: int
    raw_bytes: int
    stored_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


WRITTEN_SCHEMA = pa.schema([
    pa.field("id", pa.string()), pa.field("file", pa.string()), pa.field("begin_ts", pa.int64()),
    pa.field("end_ts", pa.int64()), pa.field("message_count", pa.int64()), pa.field("raw_bytes", pa.int64()),
    pa.field("stored_bytes", pa.int64()),
])


class IngestAbandoned(RuntimeError):
    """The ingest this writer works for has failed elsewhere: what it writes would be left behind."""


class ArchiveWriter:
    def __init__(self, storage: FileIO, directory: str, target_size: int, with_timestamps: bool, *,
                 archive_format: int = CURRENT_FORMAT, timezone: str | None = None,
                 still_wanted: Callable[[], bool] | None = None) -> None:
        """`timezone`: the ingest's zone when it read timestamps in the built-in forms (format 2
        then takes their text out of the messages, archive_format.encode_rows). `still_wanted`
        is asked before each archive file is opened and after it is closed: once it says no, the
        writer raises IngestAbandoned (its caller then aborts it, removing its files)."""
        self.still_wanted = still_wanted
        self.storage = storage
        self.archive_format = archive_format
        self.timezone = timezone
        self.directory = directory  # a key: relative to the storage root
        self.target_size = target_size
        self.group_bytes = row_group_raw_bytes(target_size)
        self.with_timestamps = with_timestamps
        self.written: list[WrittenArchive] = []
        self._buffer: list[pa.Table] = []
        self._buffered_raw = 0
        self._sink: Any = None
        self._writer: pq.ParquetWriter | None = None
        self._id = ""
        self._begin: int | None = None
        self._end: int | None = None
        self._count = 0
        self._raw = 0

    def write(self, table: pa.Table, raw_bytes: int) -> None:
        """Append rows (ARCHIVE_SCHEMA) of `raw_bytes` text."""
        if table.num_rows == 0:
            return
        nulls = table.column("timestamp").null_count
        if (nulls != 0) if self.with_timestamps else (nulls != table.num_rows):
            raise ValueError("an archive holds only messages with timestamps or only messages without")
        self._buffer.append(table)
        self._buffered_raw += raw_bytes
        if self._buffered_raw >= self.group_bytes:
            self._flush()

    def close(self) -> list[WrittenArchive]:
        self._flush()
        self._close_file()
        return self.written

    def abort(self) -> None:
        """Remove every file this writer created (a failed task leaves nothing behind)."""
        if self._writer is not None:
            try:
                self._writer.close()
                self._sink.close()  # not through `finish`: the file goes below, no need to sync it
            except Exception:  # the task is failing already; its files go below
                pass
            self._writer = None
            self.written.append(WrittenArchive(self._id, self._path(self._id), None, None, 0, 0, 0))
        # its own files, just written: never raises, so the task's own error is not hidden; what
        # cannot be deleted the orphan sweep removes later
        left = self.storage.discard(archive.file for archive in self.written).failed
        warn_files_left(log, "failed archive task", left, left_for="the archive orphan sweep", in_result=False)
        self.written = []

    def _path(self, archive_id: str) -> str:
        return f"{self.directory}/{archive_id}.parquet"

    def _flush(self) -> None:
        if not self._buffer:
            return
        table = pa.concat_tables(self._buffer)
        raw = self._buffered_raw
        self._buffer, self._buffered_raw = [], 0
        if self._writer is None:
            self._open_file()
        assert self._writer is not None
        if self.archive_format == TEXT_FORMAT:
            stored = table.sort_by([("source", "ascending"), ("timestamp", "ascending")])  # as encode_rows does
        else:
            stored = encode_rows(table, self.timezone, self.archive_format)
        self._writer.write_table(stored, row_group_size=table.num_rows)
        if self.with_timestamps:
            span = pc.min_max(table.column("timestamp")).as_py()
            self._begin = span["min"] if self._begin is None else min(self._begin, span["min"])
            self._end = span["max"] if self._end is None else max(self._end, span["max"])
        self._count += table.num_rows
        self._raw += raw
        if self._sink.tell() >= self.target_size:
            self._close_file()

    def _check_wanted(self) -> None:
        if self.still_wanted is not None and not self.still_wanted():
            raise IngestAbandoned(f"{self.directory} is no longer wanted: the ingest failed in another task, or "
                                  "this worker does not see the driver's storage")

    def _open_file(self) -> None:
        self._check_wanted()
        self._id = uuid.uuid4().hex
        self._sink = self.storage.create(self._path(self._id))
        self._writer = pq.ParquetWriter(self._sink, schema_of(self.archive_format), compression="zstd",
                                        **writer_options(self.archive_format))
        self._begin = self._end = None
        self._count = self._raw = 0

    def _close_file(self) -> None:
        if self._writer is None:
            return
        key = self._path(self._id)
        self._writer.close()
        self.storage.finish(self._sink, key)
        self._writer = None
        stored = self.storage.size(key)
        self.written.append(WrittenArchive(self._id, self._path(self._id), self._begin, self._end, self._count,
                                           self._raw, int(stored)))
        self._check_wanted()  # a file finished after its ingest failed is removed by the abort that follows


def written_table(archives: list[WrittenArchive]) -> pa.Table:
    return pa.Table.from_pylist([a.to_dict() for a in archives], schema=WRITTEN_SCHEMA)


__all__ = [
    "WRITTEN_SCHEMA",
    "ArchiveWriter",
    "IngestAbandoned",
    "WrittenArchive",
    "row_group_raw_bytes",
    "written_table",
]
