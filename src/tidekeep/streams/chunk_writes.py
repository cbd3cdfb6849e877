"""Writing a routed batch as chunk files: one per target segment, the files of a batch in parallel.

A batch is split by segment with one stable sort (each segment's events keep their write order, so
each routing key's events keep theirs) and one gather, instead of a gather per segment. pyarrow
releases the GIL while it encodes, compresses and writes a Parquet file, and the OS while it
fsyncs, so the segments' files are written on a small shared thread pool: a batch spread over four
segments costs about the time of its largest file, not of all four in turn. Every file is complete
(and durable, with `storage.fsync`) before this returns, as each `write_chunk` is on its own; if
any file fails, the others of the batch are discarded and the first error is raised, so a caller
commits all of the batch's files or none.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa

from ..store.chunks import ChunkStorage, build_chunk_table
from ..store.deletion import warn_files_left
from .controller import PendingChunk
from .pools import shared_pool

log = logging.getLogger("tidekeep.writer")

# one thread per core, at most four: more files at once only queue for the same cores and disk
WRITE_THREADS = max(2, min(4, os.cpu_count() or 1))


def split_by_segment(targets: np.ndarray, segment_ids: Sequence[int], payloads: pa.Array,
                     keys: pa.Array) -> list[tuple[int, pa.Array, pa.Array]]:
    """(segment, payloads, keys) per target segment in ascending segment order, each in write order.
    `segment_ids` holds every segment a target can name (the router's)."""
    if len(targets) == 0:
        return []
    ids = np.unique(np.asarray(segment_ids, dtype=np.int64))
    # each event's segment as a small index: a stable sort of 16-bit values is a linear radix sort
    found = np.searchsorted(ids, targets)
    if found.max() >= len(ids) or not np.array_equal(ids[found], targets):
        raise ValueError(f"a batch routed to segments outside {ids.tolist()}")  # a routing bug: never write it
    index = found.astype(np.int16)
    counts = np.bincount(index, minlength=len(ids))
    if counts.max() == len(targets):  # one segment: the batch as it is, nothing copied
        return [(int(ids[int(counts.argmax())]), payloads, keys)]
    indices = pa.array(np.argsort(index, kind="stable"))  # stable: write order within each segment
    payloads, keys = payloads.take(indices), keys.take(indices)
    parts, start = [], 0
    for seg, count in zip(ids.tolist(), counts.tolist(), strict=True):
        if count:
            parts.append((seg, payloads.slice(start, count), keys.slice(start, count)))
            start += count
    return parts


def write_segment_chunks(storage: ChunkStorage, targets: np.ndarray, segment_ids: Sequence[int], payloads: pa.Array,
                         keys: pa.Array, path_of: Callable[[int], str]) -> list[PendingChunk]:
    """Write the events of a batch routed to `targets` (among `segment_ids`) as one chunk file per
    segment, at `path_of(segment)`; returns them in ascending segment order."""

    def write(seg: int, seg_payloads: pa.Array, seg_keys: pa.Array) -> PendingChunk:
        table, length = build_chunk_table(seg_payloads, seg_keys)
        path = path_of(seg)
        storage.write_chunk(path, table)
        return PendingChunk(seg, path, length, table.num_rows)

    parts = split_by_segment(targets, segment_ids, payloads, keys)
    if len(parts) == 1:
        return [write(*part) for part in parts]
    futures = [shared_pool("chunk-write", WRITE_THREADS).submit(write, *part) for part in parts]
    written, errors = [], []
    for future in futures:
        try:
            written.append(future.result())
        except BaseException as exc:  # the first is raised once every file is settled
            errors.append(exc)
    if errors:
        left = storage.discard(p.path for p in written).failed
        warn_files_left(log, "chunk files of a failed batch write", left, in_result=False)
        raise errors[0]
    return written


__all__ = ["split_by_segment", "write_segment_chunks"]
