"""Fetching a segment's next chunks for a reader-group reader, ahead of need.

A fetch is the reads of consecutive chunks of one segment, from offset `start` to `end`. It is
started on the read-ahead pool as one scan of all its files (FileIO.parquet_scan), which decodes
them without taking the interpreter lock: a reader handing out events in a tight Python loop holds
the lock almost all the time, and a read that needs it between files (as one `read_task` per file
does a dozen times) waits the interpreter's switch interval each time, which made read-ahead no
faster than reading in the reader's own thread. A fetch the pool has not started by the time the
reader needs it (no core was free for the pool's thread) is read in the reader's thread instead of
waited for.

The scan's table is checked against the chunks' metadata in the reader's thread (event counts, the
first event at relative offset 0, the last one ending at the chunk's length), with a few vectorised
operations per fetch. A scan that failed, or a table that does not match, is read again chunk by
chunk with `read_task`, which names the file that is missing or corrupt; so a fetch reports exactly
what reading one chunk at a time reports.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ChunkMissing
from ..store.chunks import chunk_schema
from ..store.fileio import FileIO
from .controller import ReadTask
from .model import EVENT_HEADER_BYTES
from .pools import shared_pool
from .reader import READ_AHEAD, read_task


@dataclass(frozen=True)
class Fetch:
    """Reads of a segment's chunks `tasks` (consecutive, in offset order) covering [start, end)."""

    start: int
    end: int
    tasks: list[ReadTask]
    read: Callable[[], pa.Table]  # the scan
    scan: Future[pa.Table]  # the scan on the read-ahead pool

    def cancel(self) -> None:
        self.scan.cancel()


@dataclass(frozen=True)
class Fetched:
    """A fetch's events in offset order: their payloads, routing keys, offsets and the offset
    after each (where the next event of the segment begins)."""

    payloads: pa.ChunkedArray
    keys: pa.ChunkedArray
    offsets: np.ndarray
    nexts: np.ndarray


class MissingRead(Exception):
    """A chunk file of a fetch is missing: the storage's error and the read that hit it."""

    def __init__(self, error: ChunkMissing, task: ReadTask) -> None:
        super().__init__(str(error))
        self.error, self.task = error, task


def start_fetch(storage: FileIO, tasks: list[ReadTask]) -> Fetch:
    """Start reading `tasks` (non-empty, consecutive chunks of one segment) on the read-ahead pool."""
    scan = storage.parquet_scan([task.chunk.path for task in tasks], chunk_schema())
    return Fetch(tasks[0].start, tasks[-1].end, tasks, scan, shared_pool("read-ahead", READ_AHEAD).submit(scan))


def fetched_events(storage: FileIO, stream: str, fetch: Fetch) -> Fetched:
    """The events of `fetch`, waiting for its scan. Raises MissingRead for a missing chunk file and
    CorruptChunk for a damaged one, as `read_task` does."""
    try:
        # not started yet (no core was free for the pool's thread): read it here and now instead
        table = fetch.read() if fetch.scan.cancel() else fetch.scan.result()
    except Exception:  # whatever the scan hit, reading chunk by chunk says which file and why
        table = None
    events = None if table is None else _checked(fetch, table)
    return events if events is not None else _chunk_by_chunk(storage, stream, fetch.tasks)


def _checked(fetch: Fetch, table: pa.Table) -> Fetched | None:
    """The fetch's events from its scan's table, None if the table does not match the metadata."""
    refs = [task.chunk for task in fetch.tasks]
    counts = np.fromiter((ref.event_count for ref in refs), dtype=np.int64, count=len(refs))
    if table.num_rows != int(counts.sum()) or not table.num_rows:
        return None
    relative = table.column("rel_offset").to_numpy()
    payloads = table.column("payload")
    lengths = pc.binary_length(payloads).to_numpy()
    firsts = np.cumsum(counts) - counts
    held = counts > 0
    lasts = (firsts + counts - 1)[held]
    chunk_lengths = np.fromiter((ref.length for ref in refs), dtype=np.int64, count=len(refs))[held]
    if relative[firsts[held]].any() or not np.array_equal(
            relative[lasts] + EVENT_HEADER_BYTES + lengths[lasts], chunk_lengths):
        return None
    bases = np.fromiter((ref.base_offset for ref in refs), dtype=np.int64, count=len(refs))
    offsets = relative + np.repeat(bases, counts)
    begin, stop = np.searchsorted(offsets, [fetch.start, fetch.end], side="left").tolist()
    nexts = offsets[begin:stop] + (EVENT_HEADER_BYTES + lengths[begin:stop])
    return Fetched(payloads.slice(begin, stop - begin), table.column("routing_key").slice(begin, stop - begin),
                   offsets[begin:stop], nexts)


def _chunk_by_chunk(storage: FileIO, stream: str, tasks: list[ReadTask]) -> Fetched:
    batches = []
    for task in tasks:
        try:
            batches.append(read_task(storage, stream, task))
        except ChunkMissing as exc:
            raise MissingRead(exc, task) from None
    offsets = np.concatenate([batch.column("offset").to_numpy() for batch in batches])
    payloads = pa.chunked_array([batch.column("payload") for batch in batches], pa.binary())
    lengths = pc.binary_length(payloads).to_numpy()
    return Fetched(payloads, pa.chunked_array([batch.column("routing_key") for batch in batches], pa.string()),
                   offsets, offsets + (EVENT_HEADER_BYTES + lengths))


__all__ = ["Fetch", "Fetched", "MissingRead", "fetched_events", "start_fetch"]
