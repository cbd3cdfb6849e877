"""Immutable chunk files in the workspace's storage (store/fileio.py).

A chunk is one Parquet file (zstd) holding a batch of events of one segment: relative offset,
routing key and payload. It is written completely before its metadata is committed; until then
it is invisible, and if the commit never happens the orphan sweep removes it after a grace period.
With `storage.fsync` on local storage the file and its directory entries are on disk when
`write_chunk` returns (store/durable.py), so the commit never names a file a crash can take back.
Reading verifies the file against its metadata (event count and length), so a missing or damaged
file is reported by name and never read as wrong or missing data.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import ChunkMissing, CorruptChunk, NotFound
from .fileio import FileIO, StoredFile
from .segment_ids import EVENT_HEADER_BYTES, segment_name

CHUNK_COLUMNS = ("rel_offset", "routing_key", "payload")  # CHUNK_SCHEMA's, in order
# a compacted chunk's file (parts > 1) also carries, per event, what a writer's chunk has once for all
COMMIT_COLUMNS = ("writer_id", "committed_ms")

if TYPE_CHECKING:
    import pyarrow as pa

    CHUNK_SCHEMA: pa.Schema  # chunk_schema(), built on first use: opening a workspace needs no pyarrow


@functools.cache
def chunk_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("rel_offset", pa.int64(), nullable=False),
            pa.field("routing_key", pa.string()),
            pa.field("payload", pa.binary(), nullable=False),
        ]
    )


@functools.cache
def compacted_chunk_schema() -> pa.Schema:
    import pyarrow as pa

    return chunk_schema().append(pa.field("writer_id", pa.string(), nullable=False)).append(
        pa.field("committed_ms", pa.int64(), nullable=False))


def __getattr__(name: str) -> Any:
    if name == "CHUNK_SCHEMA":
        return chunk_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ChunkRef:
    """What the metadata says a committed chunk holds."""

    path: str
    segment: int
    base_offset: int
    length: int
    event_count: int
    committed_ms: int  # of a compacted chunk: its newest part's (each event's is in the file)
    writer_id: str  # of a compacted chunk: "" (each event's is in the file)
    parts: int = 1  # commits merged into this chunk by compaction (1: as written)

    @property
    def compacted(self) -> bool:
        return self.parts > 1


def build_chunk_table(
    payloads: list[bytes] | pa.Array, routing_keys: list[str | None] | pa.Array
) -> tuple[pa.Table, int]:
    """The chunk table for a batch and its logical length (8-byte header + payload per event)."""
    import pyarrow as pa
    import pyarrow.compute as pc  # only writers need pyarrow and its compute kernels; opening a workspace does not

    payload_array = payloads if isinstance(payloads, pa.Array) else pa.array(payloads, type=pa.binary())
    key_array = routing_keys if isinstance(routing_keys, pa.Array) else pa.array(routing_keys, type=pa.string())
    sizes = pc.add(pc.binary_length(payload_array).cast(pa.int64()), EVENT_HEADER_BYTES)
    ends = pc.cumulative_sum(sizes)
    rel_offsets = pc.subtract(ends, sizes)
    length = ends[-1].as_py() if len(ends) else 0
    table = pa.Table.from_arrays(
        [rel_offsets, key_array, payload_array], schema=chunk_schema()
    )
    return table, length


class ChunkStorage(FileIO):
    """The workspace's storage root (a FileIO, store/fileio.py) with the chunk format on top.
    Without `create` a local root must exist (NotFound otherwise: nothing is created), and an
    object store's bucket (ConfigError otherwise). Deleting
    files needs `workspace_id`: the client sets it once it has matched the root's workspace id with
    the metadata store's (store/workspace.py); until then `delete` and `delete_dir` refuse, and only
    `discard` removes files — those this process just wrote itself. With `fsync` every file is
    durable before its write returns (store/durable.py). `io_options` are FileIO's own keyword
    options, handed on unread: the pyarrow filesystem stays FileIO's alone
    (tests/store/test_storage_boundary.py)."""

    def __init__(self, uri: str, create: bool = False, fsync: bool = True, **io_options: Any) -> None:
        super().__init__(uri, fsync=fsync, **io_options)
        if create:
            self.create_root()  # durably, when fsync is on
        elif self.is_local and not self.is_dir():
            raise NotFound(f"no tidekeep workspace storage at {uri}: {self.root} is not a directory; run "
                           "'tidekeep init' first, or check storage.uri")
        else:
            self.require_bucket()  # on an object store: a missing bucket is named now, not at the first write
        self._offsets_cache: dict[str, frozenset[int]] = {}

    def write_chunk(self, rel_path: str, table: pa.Table) -> None:
        # payloads and offsets are (nearly) all distinct: a dictionary attempt there only costs time,
        # and increasing offsets delta-encode to almost nothing; routing keys repeat, so they keep one
        self.write_parquet(rel_path, table, compression="zstd", write_statistics=False,
                           use_dictionary=["routing_key"], column_encoding={"rel_offset": "DELTA_BINARY_PACKED"})

    def write_compacted_chunk(self, rel_path: str, table: pa.Table) -> None:
        # as write_chunk; writers repeat as routing keys do, and commit times delta-encode
        self.write_parquet(rel_path, table, compression="zstd", write_statistics=False,
                           use_dictionary=["routing_key", "writer_id"],
                           column_encoding={"rel_offset": "DELTA_BINARY_PACKED", "committed_ms": "DELTA_BINARY_PACKED"})

    def read_chunk(self, ref: ChunkRef, columns: list[str] | None = None) -> pa.Table:
        return read_chunk_file(self, ref, columns)

    def event_offsets(self, ref: ChunkRef) -> frozenset[int]:
        """The relative offsets of a chunk's events (for event-boundary checks). Chunks are
        immutable, so the answer is cached by path."""
        cached = self._offsets_cache.get(ref.path)
        if cached is None:
            if len(self._offsets_cache) > 256:
                self._offsets_cache.clear()
            cached = frozenset(self.read_chunk(ref, columns=["rel_offset"])["rel_offset"].to_pylist())
            self._offsets_cache[ref.path] = cached
        return cached


def read_chunk_file(storage: FileIO, ref: ChunkRef, columns: list[str] | None = None) -> pa.Table:
    """Read a committed chunk and check it against its metadata. Runs on Spark executors too, so
    it takes any FileIO on the storage root rather than a ChunkStorage."""
    import pyarrow as pa

    known = CHUNK_COLUMNS + COMMIT_COLUMNS if ref.compacted else CHUNK_COLUMNS
    wanted = None if columns is None else sorted(set(columns) | {"rel_offset", "payload"}, key=known.index)
    try:
        table = storage.read_parquet(ref.path, columns=wanted)
    except FileNotFoundError:
        raise ChunkMissing(f"chunk file {ref.path} is missing (segment {segment_name(ref.segment)}, offset "
                           f"{ref.base_offset})",
                           ref.path) from None
    except (pa.ArrowInvalid, pa.ArrowException, OSError) as exc:
        if isinstance(exc, OSError) and not isinstance(exc, pa.ArrowException) and "not found" in str(exc).lower():
            raise ChunkMissing(f"chunk file {ref.path} is missing", ref.path) from None
        raise CorruptChunk(f"chunk file {ref.path} is corrupt: {str(exc).splitlines()[0]}", ref.path) from None
    if table.num_rows != ref.event_count:
        raise CorruptChunk(
            f"chunk file {ref.path} is corrupt: {table.num_rows} events, metadata says {ref.event_count}", ref.path
        )
    if table.num_rows:
        last = table.num_rows - 1
        end = table["rel_offset"][last].as_py() + EVENT_HEADER_BYTES + len(table["payload"][last].as_py())
        if end != ref.length or table["rel_offset"][0].as_py() != 0:
            raise CorruptChunk(
                f"chunk file {ref.path} is corrupt: it spans {end} bytes, metadata says {ref.length}", ref.path
            )
    if columns is not None:
        table = table.select(columns)
    return table


__all__ = ["CHUNK_SCHEMA", "COMMIT_COLUMNS", "ChunkRef", "ChunkStorage", "StoredFile", "build_chunk_table",
           "compacted_chunk_schema", "read_chunk_file"]
