"""Immutable chunk files on any pyarrow.fs filesystem.

A chunk is one Parquet file (zstd) holding a batch of events of one segment: relative offset,
routing key and payload. It is written completely before its metadata is committed; until then
it is invisible, and if the commit never happens the orphan sweep removes it after a grace period.
With `storage.fsync` on local storage the file and its directory entries are on disk when
`write_chunk` returns (store/durable.py), so the commit never names a file a crash can take back.
Reading verifies the file against its metadata (event count and length), so a missing or damaged
file is reported by name and never read as wrong or missing data.
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import ChunkMissing, ConfigError, CorruptChunk, NotFound, WorkspaceMismatch
from ..streams.model import EVENT_HEADER_BYTES, segment_name
from .deletion import DeleteOutcome, FileLeft, failure_reason
from .durable import StorageWriter
from .local_dirs import check_can_be_directory, read_only_as_typed

log = logging.getLogger("tidekeep.storage")

CHUNK_SCHEMA = pa.schema(
    [
        pa.field("rel_offset", pa.int64(), nullable=False),
        pa.field("routing_key", pa.string()),
        pa.field("payload", pa.binary(), nullable=False),
    ]
)


@dataclass(frozen=True)
class ChunkRef:
    """What the metadata says a committed chunk holds."""

    path: str
    segment: int
    base_offset: int
    length: int
    event_count: int
    committed_ms: int
    writer_id: str


@dataclass(frozen=True)
class StoredFile:
    path: str
    mtime_ms: int
    size: int


def build_chunk_table(
    payloads: list[bytes] | pa.Array, routing_keys: list[str | None] | pa.Array
) -> tuple[pa.Table, int]:
    """The chunk table for a batch and its logical length (8-byte header + payload per event)."""
    import pyarrow.compute as pc  # here, not at the top: opening a workspace must not pay for it (docs/cli.md)

    payload_array = payloads if isinstance(payloads, pa.Array) else pa.array(payloads, type=pa.binary())
    key_array = routing_keys if isinstance(routing_keys, pa.Array) else pa.array(routing_keys, type=pa.string())
    sizes = pc.add(pc.binary_length(payload_array).cast(pa.int64()), EVENT_HEADER_BYTES)
    ends = pc.cumulative_sum(sizes)
    rel_offsets = pc.subtract(ends, sizes)
    length = ends[-1].as_py() if len(ends) else 0
    table = pa.Table.from_arrays(
        [rel_offsets, key_array, payload_array], schema=CHUNK_SCHEMA
    )
    return table, length


class ChunkStorage:
    """The workspace's storage root. Without `create` a local root must exist (NotFound otherwise:
    nothing is created). Deleting files needs `workspace_id`: the client sets it once it has matched
    the root's workspace id with the metadata store's (store/workspace.py); until then `delete` and
    `delete_dir` refuse, and only `discard` removes files — those this process just wrote itself.
    With `fsync` every file is durable before its write returns (store/durable.py)."""

    def __init__(self, uri: str, create: bool = False, fsync: bool = True) -> None:
        try:
            if "://" in uri:
                self.fs, root = pafs.FileSystem.from_uri(uri)
            else:
                self.fs, root = pafs.LocalFileSystem(), str(Path(uri).resolve())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as exc:
            raise ConfigError(f"bad value for 'storage.uri': {uri!r}: {exc}") from None
        self.uri = uri
        self.root = root.rstrip("/")
        self.fsync = fsync  # as configured; `file_writer.durable` says whether it applies to this filesystem
        self.file_writer = StorageWriter(self.fs, self.root, fsync)
        if create:
            if isinstance(self.fs, pafs.LocalFileSystem):
                check_can_be_directory(Path(self.root), "'storage.uri'")  # typed errors for a path under a file
            with read_only_as_typed(Path(self.root)):
                self.file_writer.create_root()  # it creates the root itself: durably, when fsync is on
        elif (isinstance(self.fs, pafs.LocalFileSystem)
              and self.fs.get_file_info(self.root).type != pafs.FileType.Directory):
            raise NotFound(f"no tidekeep workspace storage at {uri}: {self.root} is not a directory; run "
                           "'tidekeep init' first, or check storage.uri")
        self.workspace_id: str | None = None
        self._offsets_cache: dict[str, frozenset[int]] = {}

    def require_deletable(self) -> None:
        """Refuse to delete anything under a root not proven to belong to this workspace."""
        if self.workspace_id is None:
            raise WorkspaceMismatch(
                f"refusing to delete files under storage root {self.uri}: it carries no workspace id, so nothing "
                "proves it belongs to this metadata store; run 'tidekeep init' to stamp the workspace")

    def full_path(self, rel_path: str) -> str:
        return posixpath.join(self.root, rel_path)

    def uri_of(self, rel_path: str) -> str:
        """A URI Spark and pyarrow elsewhere can open."""
        if "://" in self.uri:
            return self.uri.rstrip("/") + "/" + rel_path
        return "file://" + self.full_path(rel_path)

    def write_chunk(self, rel_path: str, table: pa.Table) -> None:
        # payloads and offsets are (nearly) all distinct: a dictionary attempt there only costs time,
        # and increasing offsets delta-encode to almost nothing; routing keys repeat, so they keep one
        self.file_writer.write_parquet(self.full_path(rel_path), table, compression="zstd",
                                       write_statistics=False, use_dictionary=["routing_key"],
                                       column_encoding={"rel_offset": "DELTA_BINARY_PACKED"})

    def read_chunk(self, ref: ChunkRef, columns: list[str] | None = None) -> pa.Table:
        return read_chunk_file(self.fs, self.full_path(ref.path), ref, columns)

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

    def delete(self, rel_paths: Iterable[str]) -> DeleteOutcome:
        """Delete each file, going on past failures. A missing file is no failure (gone is gone);
        any other OSError (read-only filesystem, permissions) leaves the file, named with its reason
        in the outcome — never raised: callers delete after their metadata commit, which stands.
        Only in a workspace proven to be itself (require_deletable)."""
        self.require_deletable()
        return self.discard(rel_paths)

    def discard(self, rel_paths: Iterable[str]) -> DeleteOutcome:
        """`delete` for files this process wrote moments ago and knows to be unreferenced (a
        writer's uncommitted chunks): no workspace proof needed, they are its own."""
        deleted = 0
        failed: list[FileLeft] = []
        for rel in rel_paths:
            try:
                self.fs.delete_file(self.full_path(rel))
                deleted += 1
            except FileNotFoundError:
                pass
            except OSError as exc:
                failed.append(FileLeft(rel, failure_reason(exc)))
        return DeleteOutcome(deleted, tuple(failed))

    def delete_dir(self, rel_dir: str) -> DeleteOutcome:
        """Delete a directory and everything in it: its files one by one (as `delete`, so every
        file that can go goes and the outcome names those that cannot), then the emptied tree. A
        directory that cannot be listed stands in the outcome for everything under it; an empty
        tree that cannot be removed is only logged, as it holds no data."""
        self.require_deletable()
        return self.discard_dir(rel_dir)

    def discard_dir(self, rel_dir: str) -> DeleteOutcome:
        """`delete_dir` for a directory this process filled itself (a task's staging directory)."""
        try:
            files = self.list_files(rel_dir)
        except OSError as exc:
            return DeleteOutcome(0, (FileLeft(rel_dir, failure_reason(exc)),))
        outcome = self.discard(f.path for f in files)
        if outcome.failed:
            return outcome  # the tree cannot go while files remain in it
        try:
            self.fs.delete_dir(self.full_path(rel_dir))
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("directory %s holds no files but could not be removed (%s)", rel_dir, failure_reason(exc))
        self.file_writer.forget(self.full_path(rel_dir))
        return outcome

    def list_files(self, rel_dir: str) -> list[StoredFile]:
        selector = pafs.FileSelector(self.full_path(rel_dir), recursive=True, allow_not_found=True)
        files = []
        for info in self.fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                mtime = info.mtime_ns // 1_000_000 if info.mtime_ns is not None else 0
                files.append(StoredFile(posixpath.relpath(info.path, self.root), mtime, info.size or 0))
        return files


def read_chunk_file(
    fs: pafs.FileSystem, full_path: str, ref: ChunkRef, columns: list[str] | None = None
) -> pa.Table:
    """Read a committed chunk and check it against its metadata. Runs on Spark executors too, so
    it takes the filesystem and path rather than a ChunkStorage."""
    wanted = None if columns is None else sorted(set(columns) | {"rel_offset", "payload"},
                                                  key=CHUNK_SCHEMA.names.index)
    try:
        table = pq.read_table(full_path, filesystem=fs, columns=wanted)
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
