"""Archives for tests that need them without running the ingest job: a real archive file written
with pyarrow in the archive format, registered through ArchiveStore like the ingest does."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from tidekeep.archives.archive_format import TEXT_FORMAT, encode_rows, read_messages, schema_of, writer_options
from tidekeep.archives.model import ARCHIVE_SCHEMA, Archive, archive_path
from tidekeep.archives.store import ArchiveStore
from tidekeep.client import Client


def make_archive(client: Client, dataset: str, messages: Sequence[tuple[int | None, str]],
                 source: str = "test.log", archive_format: int = TEXT_FORMAT) -> Archive:
    """Write and register one archive holding `messages` [(timestamp ms or None, text)], sorted by
    time as the ingest sorts them, in `archive_format` (archive_format.py; formats 2 and 3 with
    their timestamp texts read as UTC); returns it as registered."""
    rows = sorted(messages, key=lambda m: (m[0] is None, m[0] or 0))
    stamps = [m[0] for m in rows if m[0] is not None]
    if stamps and len(stamps) != len(rows):
        raise ValueError("an archive holds only messages with timestamps or only messages without")
    archive_id = uuid.uuid4().hex
    path = archive_path(dataset, archive_id)
    table = pa.Table.from_pydict({"timestamp": [m[0] for m in rows], "message": [m[1] for m in rows],
                                  "source": [source] * len(rows)}, schema=ARCHIVE_SCHEMA)
    if archive_format == TEXT_FORMAT:
        client.workspace.storage.write_parquet(path, table, compression="zstd")
    else:
        sink = client.workspace.storage.create(path)
        with pq.ParquetWriter(sink, schema_of(archive_format), compression="zstd",
                              **writer_options(archive_format)) as writer:
            writer.write_table(encode_rows(table, "UTC", archive_format))
        client.workspace.storage.finish(sink, path)
    stored = client.workspace.storage.size(path)
    archive = Archive(archive_id, dataset, min(stamps) if stamps else None, max(stamps) if stamps else None,
                      len(rows), sum(len(m[1].encode()) + 1 for m in rows), stored, path, client.clock.now_ms(),
                      uuid.uuid4().hex)
    return ArchiveStore(client.workspace).register([archive])[0]


def archive_rows(client: Client, archive: Archive) -> list[dict]:
    """Every message of an archive (timestamp, message, source), decoded from whatever format it has."""
    with client.workspace.storage.open_input(archive.path) as handle:
        return read_messages(pq.ParquetFile(handle)).to_pylist()
