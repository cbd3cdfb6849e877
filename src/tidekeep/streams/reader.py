"""Reading a stream between two cuts, as Arrow batches or as events, in per-key order.

Segments are read in ascending id, which reads every predecessor before its successors, so each
routing key's events come out in the order they were written, across scaling too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ChunkMissing
from ..store.chunks import read_chunk_file
from ..store.fileio import FileIO
from .controller import ReadPlan, ReadTask, StreamController
from .model import SegmentId

EVENT_SCHEMA = pa.schema([
    pa.field("stream", pa.string(), nullable=False),
    pa.field("segment", pa.int64(), nullable=False),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("routing_key", pa.string()),
    pa.field("payload", pa.binary(), nullable=False),
    pa.field("commit_time_ms", pa.int64(), nullable=False),
    pa.field("writer_id", pa.string(), nullable=False),
])


class Event(NamedTuple):
    payload: bytes
    routing_key: str | None
    segment: SegmentId  # prints as epoch.number; int(segment) is the 64-bit id
    offset: int
    commit_time_ms: int
    writer_id: str


def read_task(storage: FileIO, stream: str, task: ReadTask) -> pa.RecordBatch:
    """The events of one chunk within [task.start, task.end), as a batch in EVENT_SCHEMA. Pure
    storage work: runs on Spark executors as well as in the client."""
    ref = task.chunk
    table = read_chunk_file(storage, ref)
    offsets = pc.add(table["rel_offset"], ref.base_offset)
    if task.start > ref.base_offset or task.end < ref.base_offset + ref.length:
        keep = pc.and_(pc.greater_equal(offsets, task.start), pc.less(offsets, task.end))
        table = table.filter(keep)
        offsets = offsets.filter(keep)
    n = table.num_rows
    if ref.compacted:  # each event keeps its own commit's time and writer
        committed, writers = table["committed_ms"].combine_chunks(), table["writer_id"].combine_chunks()
    else:
        committed = pa.repeat(pa.scalar(ref.committed_ms, pa.int64()), n)
        writers = pa.repeat(pa.scalar(ref.writer_id, pa.string()), n)
    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar(stream, pa.string()), n),
        pa.repeat(pa.scalar(ref.segment, pa.int64()), n),
        offsets.combine_chunks() if isinstance(offsets, pa.ChunkedArray) else offsets,
        table["routing_key"].combine_chunks(),
        table["payload"].combine_chunks(),
        committed,
        writers,
    ], schema=EVENT_SCHEMA)


def _task_batches(controller: StreamController, plan: ReadPlan) -> Iterator[tuple[ReadTask, pa.RecordBatch]]:
    storage = controller.storage
    for task in plan.tasks:
        try:
            batch = read_task(storage, plan.stream, task)
        except ChunkMissing as exc:
            raise controller.explain_missing_chunk(plan.stream, exc, task) from None
        yield task, batch


def iter_batches(controller: StreamController, plan: ReadPlan) -> Iterator[pa.RecordBatch]:
    for _, batch in _task_batches(controller, plan):
        yield batch


def iter_events(controller: StreamController, plan: ReadPlan) -> Iterator[Event]:
    for task, batch in _task_batches(controller, plan):
        # segment, commit time and writer are the chunk's: repeat them instead of converting columns
        # (a compacted chunk's events each keep their own commit's)
        ref, n = task.chunk, batch.num_rows
        if ref.compacted:
            committed: Iterable[int] = batch.column("commit_time_ms").to_pylist()
            writers: Iterable[str] = batch.column("writer_id").to_pylist()
        else:
            committed, writers = repeat(ref.committed_ms, n), repeat(ref.writer_id, n)
        yield from map(Event, batch.column("payload").to_pylist(), batch.column("routing_key").to_pylist(),
                       repeat(SegmentId(ref.segment), n), batch.column("offset").to_pylist(), committed, writers)
