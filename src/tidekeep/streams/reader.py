"""Reading a stream between two cuts, as Arrow batches or as events, in per-key order.

Segments are read in ascending id, which reads every predecessor before its successors, so each
routing key's events come out in the order they were written, across scaling too.

Chunks are read ahead: while the caller works through one chunk's events, the next `READ_AHEAD`
chunk files are read and decoded on a small shared thread pool (pyarrow releases the GIL while it
reads and decompresses). Batches are still handed out strictly in plan order, and an error of a
chunk read ahead is raised only when the caller reaches that chunk, exactly where a read one at a
time would raise it. Events are built column-wise in C (`map` over `zip` of the columns' lists):
no Python frame runs per event.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Generator, Iterable, Iterator
from concurrent.futures import Future
from itertools import chain, repeat
from typing import Any, NamedTuple, cast

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ChunkMissing
from ..store.chunks import read_chunk_file
from ..store.fileio import FileIO
from .controller import ReadPlan, ReadTask, StreamController
from .model import SegmentId
from .pools import shared_pool

READ_AHEAD = 2  # chunk files read ahead of the caller: enough to keep one core decoding while another converts

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


# Event(*fields) runs a Python __new__ per event; tuple.__new__ over the fields' tuple stays in C
_new_event = functools.partial(tuple.__new__, Event)


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
        committed, writers = _one_array(table["committed_ms"]), _one_array(table["writer_id"])
    else:
        committed = pa.repeat(pa.scalar(ref.committed_ms, pa.int64()), n)
        writers = pa.repeat(pa.scalar(ref.writer_id, pa.string()), n)
    return pa.RecordBatch.from_arrays([
        pa.repeat(pa.scalar(stream, pa.string()), n),
        pa.repeat(pa.scalar(ref.segment, pa.int64()), n),
        _one_array(offsets),
        _one_array(table["routing_key"]),
        _one_array(table["payload"]),
        committed,
        writers,
    ], schema=EVENT_SCHEMA)


def _one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array: a chunk file read whole is one chunk, taken as it is (combining
    would copy every payload)."""
    if isinstance(column, pa.Array):
        return column
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _task_batches(controller: StreamController, plan: ReadPlan) -> Iterator[tuple[ReadTask, pa.RecordBatch]]:
    storage = controller.storage
    tasks = iter(plan.tasks)
    ahead: deque[tuple[ReadTask, Future[pa.RecordBatch]]] = deque()

    def submit_next() -> None:
        task = next(tasks, None)
        if task is not None:
            ahead.append((task, shared_pool("read-ahead", READ_AHEAD).submit(read_task, storage, plan.stream, task)))

    try:
        for _ in range(READ_AHEAD):
            submit_next()
        while ahead:
            task, future = ahead.popleft()
            submit_next()
            try:
                batch = future.result()
            except ChunkMissing as exc:
                raise controller.explain_missing_chunk(plan.stream, exc, task) from None
            yield task, batch
    finally:  # the caller stopped early (or a chunk failed): reads not started yet are dropped
        for _, future in ahead:
            future.cancel()


def iter_batches(controller: StreamController, plan: ReadPlan) -> Iterator[pa.RecordBatch]:
    for _, batch in _task_batches(controller, plan):
        yield batch


def _values(column: pa.Array) -> Iterable[Any]:
    """A column's values as Python objects; a column holding one value throughout (the chunk's
    commit time or writer) as that one object repeated, instead of a new object per row."""
    n = len(column)
    if n and not column.null_count:
        first = column[0]
        if pc.all(pc.equal(column, first)).as_py():
            return repeat(first.as_py(), n)
    return column.to_pylist()


def _chunk_events(task: ReadTask, batch: pa.RecordBatch) -> Iterator[Event]:
    n = batch.num_rows
    return map(_new_event, zip(batch.column("payload").to_pylist(), batch.column("routing_key").to_pylist(),
                               repeat(SegmentId(task.chunk.segment), n),
                               batch.column("offset").to_numpy().tolist(),
                               _values(batch.column("commit_time_ms")), _values(batch.column("writer_id")),
                               strict=True))


class _Events(chain[Event]):
    """The events of a read: a chain, so each event comes straight from C iterators (the chunks'
    generator runs once per chunk), with a generator's close() to stop the read early."""

    chunks: Generator[Iterator[Event], None, None]  # what the chain iterates: closed by close()

    def close(self) -> None:
        self.chunks.close()


def iter_events(controller: StreamController, plan: ReadPlan) -> Iterator[Event]:
    chunks = (_chunk_events(task, batch) for task, batch in _task_batches(controller, plan))
    events = cast(_Events, _Events.from_iterable(chunks))  # from_iterable makes an instance of its class
    events.chunks = chunks
    return events
