"""The "tidekeep" Spark sink: df.write / df.writeStream .format("tidekeep") into a stream.

    (df.writeStream.format("tidekeep").option("stream", "iot/out")
       .option("payload_column", "body").option("routing_key_column", "sensor")
       .option("event_time_column", "time").option("checkpointLocation", "/ckpt/q1").start())

Semantics (docs/spark.md "Writing"):

- **Executors** route each Arrow batch's rows to the stream's active segments as a Writer does
  (`streams.txn.route_events`/`write_chunks`: one hash per distinct key, random for null keys) and
  write chunk files under a staging directory of the stream, `<stream dir>/txn/spark-<random>/`
  (with the driver's `storage.fsync`: on disk, names included, before the task returns).
  Nothing is visible yet. A task returns the chunks it wrote (in write order), its row count and the
  maximum event time it saw; a task that fails deletes what it wrote before re-raising.
- **The driver's commit** of a micro-batch first checks every chunk file is in the storage at the
  size its task reported (staged.py: a task that wrote where the driver cannot see fails the batch
  with StagedFileMissing before anything is begun). Then it is ONE tidekeep transaction: begin (writer
  id = the sink's), stage every task's chunks, commit with the batch sequence `batchId + 1`. The sequence is
  checked against the writer's last one in the same metadata transaction that appends the data, so
  a batch Spark re-executes (a restart from a checkpoint whose commit log lacks it) is aborted and
  its files deleted instead of appended twice. Chunks staged in segments a scale sealed since the
  tasks routed them are re-routed by the transaction's commit. A batch write job is one transaction
  too, without a sequence. Spark's abort deletes the staged files, except those a committed chunk
  refers to (Spark also aborts a batch whose commit call failed after tidekeep committed it); a
  failed job leaves nothing visible. Spark creates the writer again for every micro-batch, so each
  batch's tasks route with the segments current when it was planned.
- **Time notes**: with `note_time` = `max_event_time` (the default when an event time column is
  given) the commit records the writer's mark at the maximum event time it has written so far: the
  batch's maximum, never below the writer's previous mark. `processing_time` notes the driver's
  clock instead (also never below the previous mark); `none` notes nothing.
- **Writer id**: `writer_id`, or for a streaming query with a `checkpointLocation` option,
  `spark-<query id>` with the query id read from the checkpoint's `metadata` file: the same across
  restarts from that checkpoint, a new writer for a new checkpoint (whose batch ids start at 0
  again, which an old writer id's sequence would take for replays). Batch writes default to
  `spark-batch`. The writer id must belong to the sink alone: its batch sequence lives in the
  `writers` table that tidekeep writers use too.

Bad options and columns are refused with tidekeep's typed errors when Spark creates the writer (at
`save()` / the query's first batch); `save_to_stream` and `write_stream` check in the caller first
so the typed error itself is raised there.
"""

from __future__ import annotations

import json
import logging
import tempfile
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..config import MAX_EVENT_SIZE
from ..errors import ConfigError, EventTooLarge, InvalidInput, StagedFileMissing, StreamSealed
from ..faults import fault_active, pause_point
from ..names import check_writer_id
from ..store.chunks import ChunkStorage
from ..store.deletion import warn_files_left
from ..store.fileio import FileIO
from ..streams.controller import PendingChunk
from ..streams.model import EVENT_HEADER_BYTES, Router
from ..streams.repository import StreamStatus
from ..streams.txn import write_chunks
from ..units import parse_size_bytes
from .connect import job_master
from .credentials import MetadataReference, reference_from_options
from .options import SOURCE_NAME, WORKSPACE_OPTIONS, caller_options, checked_options
from .partitions import StorageLocation
from .staged import StagedFile, describe_task, verify_staged

log = logging.getLogger("tidekeep.spark.sink")

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter

    from .driver_workspace import DriverWorkspace

NOTE_MAX_EVENT_TIME, NOTE_PROCESSING_TIME, NOTE_NONE = "max_event_time", "processing_time", "none"
NOTE_TIME_MODES = (NOTE_MAX_EVENT_TIME, NOTE_PROCESSING_TIME, NOTE_NONE)
DEFAULT_PAYLOAD_COLUMN = "payload"
BATCH_WRITER_ID = "spark-batch"
# Logical bytes a task buffers before writing chunk files (one per segment the rows route to): big
# enough that files are few, small enough that a task's memory stays bounded.
SINK_CHUNK_BYTES = 16 * 1024 * 1024
# How long the driver's transaction may stay open: covers staging and re-routing a large batch; a
# driver that dies mid-commit leaves it to expire, and Spark re-runs the batch in a new one.
SINK_LEASE = "10m"
# the fault seam (TIDEKEEP_FAULT) that makes a task write into a directory private to its worker
PRIVATE_STORAGE_FAULT = "sink.private_storage"

_KNOWN_OPTIONS = {"stream", "path", "payload_column", "routing_key_column", "event_time_column", "note_time",
                  "writer_id", "chunk_size", "checkpointlocation"} | WORKSPACE_OPTIONS


# ---- options and columns (pure: no workspace) ------------------------------------------------------


@dataclass(frozen=True)
class SinkOptions:
    """The syntactically valid options of one write."""

    stream: str
    payload_column: str
    routing_key_column: str | None
    event_time_column: str | None
    note_time: str
    writer_id: str | None  # explicit, or derived later from the checkpoint
    checkpoint_location: str | None
    chunk_size: int
    home: str | None
    metadata: MetadataReference | None  # the metadata URL, its password by reference
    storage: str | None
    shared_filesystem: str | None = None  # the spark.shared_filesystem setting, as given
    fsync: str | None = None  # the storage.fsync setting, checked when the workspace opens


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Check the options without touching the workspace."""
    lowered, stream = checked_options(options, _KNOWN_OPTIONS, "write", frozenset({"path", "checkpointlocation"}))
    event_time = lowered.get("event_time_column") or None
    note_time = (lowered.get("note_time") or "").strip().lower()
    if not note_time:
        note_time = NOTE_MAX_EVENT_TIME if event_time else NOTE_NONE
    if note_time not in NOTE_TIME_MODES:
        raise InvalidInput(f"invalid note_time {lowered['note_time']!r}: one of {', '.join(NOTE_TIME_MODES)}")
    if note_time == NOTE_MAX_EVENT_TIME and not event_time:
        raise InvalidInput('note_time "max_event_time" needs an event time: .option("event_time_column", col)')
    writer_id = lowered.get("writer_id") or None
    if writer_id is not None:
        check_writer_id(writer_id)
    chunk_size = SINK_CHUNK_BYTES
    if lowered.get("chunk_size"):
        chunk_size = parse_size_bytes(lowered["chunk_size"])
        if chunk_size <= 0:
            raise InvalidInput(f"invalid chunk_size {lowered['chunk_size']!r}: must be greater than zero")
    return SinkOptions(stream, lowered.get("payload_column") or DEFAULT_PAYLOAD_COLUMN,
                       lowered.get("routing_key_column") or None, event_time, note_time, writer_id,
                       lowered.get("checkpointlocation") or None, chunk_size, lowered.get("home") or None,
                       reference_from_options(lowered), lowered.get("storage") or None,
                       lowered.get("shared_filesystem") or None, lowered.get("fsync") or None)


@dataclass(frozen=True)
class SinkColumns:
    """Where the sink finds each value in the input's Arrow batches (field names as Spark sends them)."""

    payload: str
    routing_key: str | None
    event_time: str | None
    event_time_is_timestamp: bool = False


_PAYLOAD_TYPES = (BinaryType, StringType)
_EVENT_TIME_TYPES = (TimestampType, TimestampNTZType, LongType, IntegerType)


def resolve_columns(schema: StructType, options: SinkOptions) -> SinkColumns:
    """The input columns the options name, with their types checked: payload binary or string (UTF-8),
    routing key string, event time timestamp or integer milliseconds since the epoch."""
    payload = _column(schema, options.payload_column, "payload", _PAYLOAD_TYPES, "binary or string")
    key = event_time = None
    if options.routing_key_column:
        key = _column(schema, options.routing_key_column, "routing key", (StringType,), "string")
    if options.event_time_column:
        event_time = _column(schema, options.event_time_column, "event time", _EVENT_TIME_TYPES,
                             "timestamp or long (milliseconds since the epoch)")
    return SinkColumns(payload.name, None if key is None else key.name, None if event_time is None else event_time.name,
                       event_time is not None and isinstance(event_time.dataType, (TimestampType, TimestampNTZType)))


def _column(schema: StructType, name: str, what: str, types: tuple[type[DataType], ...], expected: str) -> Any:
    # Spark resolves column names case-insensitively by default; an exact match wins
    matches = ([f for f in schema.fields if f.name == name]
               or [f for f in schema.fields if f.name.lower() == name.lower()])
    if not matches:
        shown = ", ".join(f.name for f in schema.fields) or "none"
        raise InvalidInput(f"{what} column {name!r} is not in the input (columns: {shown})")
    if len(matches) > 1:
        raise InvalidInput(f"{what} column {name!r} is ambiguous in the input")
    found = matches[0]
    if not isinstance(found.dataType, types):
        raise InvalidInput(f"{what} column {found.name!r} is {found.dataType.simpleString()}; expected {expected}")
    return found


# ---- the writer id ---------------------------------------------------------------------------------


def writer_id_from_checkpoint(checkpoint_location: str) -> str:
    """`spark-<query id>` from the checkpoint's metadata file, which Spark writes when the query is
    first created and keeps across restarts."""
    try:
        checkpoint = FileIO.outside(_checkpoint_uri(checkpoint_location))
        first_line = checkpoint.read("metadata").decode("utf-8").splitlines()[0]
        query_id = json.loads(first_line)["id"]
    except (OSError, ValueError, KeyError, IndexError, TypeError, pa.ArrowException, ConfigError) as exc:
        raise InvalidInput(f"cannot derive a writer id from checkpoint {checkpoint_location!r} "
                           f"({type(exc).__name__}); set .option(\"writer_id\", id)") from None
    return check_writer_id(f"spark-{query_id}")


def _checkpoint_uri(location: str) -> str:
    """A Hadoop checkpoint location as FileIO opens it: `file:` URIs as local paths, Hadoop's S3
    schemes under pyarrow's name."""
    if location.startswith("file:"):
        return "/" + location[len("file:"):].lstrip("/")
    if "://" in location:
        scheme, rest = location.split("://", 1)
        scheme = {"s3a": "s3", "s3n": "s3"}.get(scheme, scheme)  # Hadoop's S3 schemes, pyarrow's name
        return f"{scheme}://{rest}"
    return location


def sink_writer_id(options: SinkOptions, streaming: bool) -> str:
    if options.writer_id:
        return options.writer_id
    if not streaming:
        return BATCH_WRITER_ID
    if options.checkpoint_location:
        return writer_id_from_checkpoint(options.checkpoint_location)
    raise InvalidInput('tidekeep stream sink needs a writer id: .option("writer_id", id) or '
                       '.option("checkpointLocation", dir) to derive one')


# ---- the note time (pure) --------------------------------------------------------------------------


def note_time_for(mode: str, previous_mark_ms: int | None, batch_max_event_ms: int | None,
                  now_ms: int) -> int | None:
    """The time a sink commit notes for its writer: never below the writer's previous mark, since a
    writer's time only moves forward; None when nothing is to be noted."""
    if mode == NOTE_NONE:
        return None
    candidate = now_ms if mode == NOTE_PROCESSING_TIME else batch_max_event_ms
    known = [t for t in (previous_mark_ms, candidate) if t is not None]
    return max(known) if known else None


# ---- what executors get ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkTarget:
    """What a task needs to write a stream, in a form that pickles to executors (no metadata store)."""

    stream: str
    stream_dir: str  # the stream's storage directory, relative to the storage root
    location: StorageLocation
    router: Router  # the stream's active segments when the writer was created
    columns: SinkColumns
    chunk_size: int = SINK_CHUNK_BYTES


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """One task's result: the chunks it wrote, in write order, with each file's size in bytes as the
    task's worker saw it and which task it was (the driver checks the files before committing)."""

    directory: str
    chunks: list[PendingChunk] = field(default_factory=list)
    rows: int = 0
    max_event_time_ms: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)  # chunk path -> bytes
    task: str = ""

    def staged_files(self) -> list[StagedFile]:
        # a chunk the task's own listing lacked gets size -1, which no stored file has
        return [StagedFile(c.path, self.sizes.get(c.path, -1), self.task) for c in self.chunks]


def write_task(target: SinkTarget, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """Executor side: route and write one task's rows as chunk files. Storage only."""
    location = target.location
    root = location.opened_as
    if fault_active(PRIVATE_STORAGE_FAULT):
        # tests: this task's worker has a disk of its own, as a worker isolated from the driver's
        root = tempfile.mkdtemp(prefix="tidekeep-private-storage-")
    storage = ChunkStorage(root, fsync=location.fsync)
    message = SinkCommitMessage(f"{target.stream_dir}/txn/spark-{uuid.uuid4().hex}")
    holder = SimpleNamespace(storage=storage)  # write_chunks needs only the controller's storage
    payloads: list[pa.Array] = []
    keys: list[pa.Array] = []
    pending = 0

    def flush() -> None:
        nonlocal payloads, keys, pending
        if payloads:
            message.chunks.extend(write_chunks(holder, message.directory, target.router,
                                               pa.concat_arrays(payloads), pa.concat_arrays(keys)))
        payloads, keys, pending = [], [], 0

    try:
        for batch in batches:
            if not batch.num_rows:
                continue
            payload, key, event_max = _batch_values(batch, target.columns)
            message.rows += batch.num_rows
            if event_max is not None:
                message.max_event_time_ms = max(event_max, message.max_event_time_ms or event_max)
            # slice the batch so no flush holds much more than chunk_size (a row is never split)
            ends = np.cumsum(pc.binary_length(payload).to_numpy(zero_copy_only=False) + EVENT_HEADER_BYTES)
            start, consumed = 0, 0
            while start < len(ends):
                stop = max(start + 1, int(np.searchsorted(ends, consumed + target.chunk_size - pending, "right")))
                payloads.append(payload.slice(start, stop - start))
                keys.append(key.slice(start, stop - start))
                pending += int(ends[stop - 1]) - consumed
                consumed, start = int(ends[stop - 1]), stop
                if pending >= target.chunk_size:
                    flush()
        flush()
        # what this worker sees of its files: one listing of the task's own directory
        message.sizes = {f.path: f.size for f in storage.list_files(message.directory)}
        message.task = describe_task()
        # tests: hold a task whose chunk files are written, before it reports them, so a test can
        # kill its executor there (TIDEKEEP_PAUSE; docs/testing.md, "A Spark cluster that shares no disk")
        pause_point("sink.task_written")
    except BaseException:
        # the task fails: what it wrote is no one's (Spark's abort never hears of this task's files)
        left = storage.discard(c.path for c in message.chunks) + storage.discard_dir(message.directory)
        warn_files_left(log, "failed sink task", left.failed, in_result=False)
        raise
    return message


def _batch_values(batch: pa.RecordBatch, columns: SinkColumns) -> tuple[pa.Array, pa.Array, int | None]:
    """(payloads as binary, routing keys as string, the batch's max event time in ms or None)."""
    payload = batch.column(columns.payload)
    if payload.null_count:
        raise InvalidInput(f"payload column {columns.payload!r} has a null value; every event needs a payload")
    payload = payload.cast(pa.binary())
    largest = pc.max(pc.binary_length(payload)).as_py()
    if largest > MAX_EVENT_SIZE:
        raise EventTooLarge(f"event of {largest} bytes in column {columns.payload!r} is above the "
                            f"{MAX_EVENT_SIZE}-byte limit")
    if columns.routing_key is None:
        key = pa.nulls(batch.num_rows, pa.string())
    else:
        key = batch.column(columns.routing_key).cast(pa.string())
    event_max = None
    if columns.event_time is not None:
        times = batch.column(columns.event_time)
        raw = times.cast(pa.int64())  # timestamps: in their unit since the epoch (UTC)
        lowest = pc.min(raw).as_py()
        if lowest is not None and lowest < 0:
            raise InvalidInput(f"event time column {columns.event_time!r} has a time before 1970; "
                               "event times are milliseconds since the epoch, >= 0")
        event_max = pc.max(raw).as_py()
        if event_max is not None and columns.event_time_is_timestamp:
            event_max = _to_ms(event_max, times.type.unit)
    return payload, key, event_max


def _to_ms(value: int, unit: str) -> int:
    # only the maximum is converted: non-negative, so integer division is the floor
    return {"s": value * 1000, "ms": value, "us": value // 1000, "ns": value // 1_000_000}[unit]


# ---- the driver ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SinkPlan:
    """A validated write: the options, the writer id and what executors get."""

    options: SinkOptions
    writer_id: str
    target: SinkTarget


def open_sink_workspace(options: SinkOptions) -> DriverWorkspace:
    from .driver_workspace import open_driver_workspace

    return open_driver_workspace(options.home, options.metadata, options.storage, options.shared_filesystem,
                                 options.fsync)


def plan_sink(options: Mapping[str, str], schema: StructType, overwrite: bool, streaming: bool,
              require_writer_id: bool = True) -> SinkPlan:
    """Validate a write against the workspace (stream exists and takes writes, columns and types)
    and take the stream's active segments for the tasks' routing. Changes nothing."""
    parsed = parse_sink_options(options)
    if overwrite:
        raise InvalidInput('tidekeep streams are append-only: write with mode "append"')
    columns = resolve_columns(schema, parsed)
    writer_id = sink_writer_id(parsed, streaming) if require_writer_id else (parsed.writer_id or BATCH_WRITER_ID)
    opened = open_sink_workspace(parsed)
    try:
        state = opened.streams.state(parsed.stream)
        if state.info.state is StreamStatus.SEALED:
            raise StreamSealed(f"stream {parsed.stream!r} is sealed; it takes no writes")
        storage = opened.workspace.storage
        location = StorageLocation(storage.uri, storage.root, storage.fsync)
        target = SinkTarget(parsed.stream, state.storage_dir(), location, Router(state.active_segments()),
                            columns, parsed.chunk_size)
    finally:
        opened.close()
    return SinkPlan(parsed, writer_id, target)


@dataclass(frozen=True)
class SinkCommit:
    """What a sink commit did: `txn_id` None when the batch had no rows (nothing to commit)."""

    txn_id: str | None
    rows: int
    duplicate: bool
    note_time_ms: int | None
    positions: dict[int, int]


def commit_messages(plan: SinkPlan, messages: Sequence[SinkCommitMessage | None],
                    sequence: int | None) -> SinkCommit:
    """The driver's commit of one batch: one transaction holding every task's chunks, committed with
    the batch `sequence` (None for a batch write job) and the note time. A replayed sequence aborts
    the transaction and deletes the files (result `duplicate`). On any error the transaction is
    aborted and the files deleted, unless the outcome is unknown (then the sweep decides).

    First every chunk file must be in the storage at the size its task wrote: if one is not (the
    task wrote where the driver cannot see), StagedFileMissing is raised before a transaction is
    begun, and the files that are there are deleted as an abort deletes them."""
    sent = [m for m in messages if m is not None]
    chunks = [c for m in sent for c in m.chunks]
    rows = sum(m.rows for m in sent)
    opened = open_sink_workspace(plan.options)
    try:
        if not chunks:
            _delete_dirs(opened, sent)
            return SinkCommit(None, 0, False, None, {})
        if opened.streams.referenced_paths([c.path for c in chunks]):
            # these very messages were committed before (a retried commit call): staging their files
            # again would let that transaction's abort delete committed data
            return SinkCommit(None, 0, True, None, {})
        try:
            verify_staged(opened.workspace.storage, [f for m in sent for f in m.staged_files()])
        except StagedFileMissing:
            _discard(opened, sent)
            raise
        txn = opened.transactional_writer(plan.options.stream, plan.writer_id, lease=SINK_LEASE).begin()
        try:
            opened.transactions.stage(txn.id, chunks)
            timestamp = note_time_for(plan.options.note_time, _previous_mark(opened, plan),
                                      _max_event_time(sent), opened.workspace.clock.now_ms())
            result = txn.commit(timestamp, sequence)
        except BaseException:
            _abort(opened, txn.id, chunks, sent)
            raise
        if result.duplicate:
            _delete_dirs(opened, sent)
        return SinkCommit(txn.id, 0 if result.duplicate else rows, result.duplicate,
                          None if result.duplicate else timestamp, result.positions)
    finally:
        opened.close()


def abort_messages(plan: SinkPlan, messages: Sequence[SinkCommitMessage | None]) -> None:
    """Spark's abort: delete the files of the tasks that succeeded (failed tasks deleted their own).
    Spark also aborts a batch whose commit failed, and a commit can fail after tidekeep committed it
    (the commit process died before answering): files a committed chunk refers to always stay. If
    the store cannot say, nothing is deleted and the orphan sweep decides later."""
    opened = open_sink_workspace(plan.options)
    try:
        _discard(opened, [m for m in messages if m is not None])
    finally:
        opened.close()


def _discard(opened: DriverWorkspace, messages: Sequence[SinkCommitMessage]) -> None:
    """Delete the messages' files but those a committed chunk refers to, and their empty directories."""
    paths = [c.path for m in messages for c in m.chunks]
    committed = opened.streams.referenced_paths(paths)
    # this job's own files, never committed: no workspace proof needed
    left = opened.workspace.storage.discard(p for p in paths if p not in committed).failed
    warn_files_left(log, "aborted sink batch", left, in_result=False)
    _delete_dirs(opened, messages)


def _previous_mark(opened: DriverWorkspace, plan: SinkPlan) -> int | None:
    if plan.options.note_time == NOTE_NONE:
        return None
    return next((m.time_ms for m in opened.watermarks.marks(plan.options.stream) if m.writer_id == plan.writer_id),
                None)


def _max_event_time(messages: Sequence[SinkCommitMessage]) -> int | None:
    times = [m.max_event_time_ms for m in messages if m.max_event_time_ms is not None]
    return max(times) if times else None


def _abort(opened: DriverWorkspace, txn_id: str, chunks: Sequence[PendingChunk],
           messages: Sequence[SinkCommitMessage]) -> None:
    try:
        opened.transactions.abort(txn_id)
    except Exception:
        # committed after all (an acknowledgement lost on the way back) or the store is unreachable:
        # the files may be referenced, so they stay and the orphan sweep decides
        return
    left = opened.workspace.storage.discard(c.path for c in chunks).failed
    warn_files_left(log, f"aborted sink transaction {txn_id}", left, in_result=False)
    _delete_dirs(opened, messages)


def _delete_dirs(opened: DriverWorkspace, messages: Sequence[SinkCommitMessage]) -> None:
    """Remove the tasks' staging directories once empty (never recursively: a directory's files may
    be committed chunks of an earlier commit of the same messages)."""
    for message in messages:
        if not opened.workspace.storage.list_files(message.directory):
            opened.workspace.storage.discard_dir(message.directory)


# ---- the Spark classes -----------------------------------------------------------------------------


class TidekeepBatchWriter(DataSourceArrowWriter):
    """df.write.format("tidekeep"): one transaction per write job."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.plan.target, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        commit_messages(self.plan, _ours(messages), None)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        abort_messages(self.plan, _ours(messages))


class TidekeepStreamWriter(DataSourceStreamArrowWriter):
    """df.writeStream.format("tidekeep"): one transaction per micro-batch, sequence batchId + 1."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.plan.target, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        commit_messages(self.plan, _ours(messages), batchId + 1)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        abort_messages(self.plan, _ours(messages))


def _ours(messages: Sequence[WriterCommitMessage | None]) -> list[SinkCommitMessage | None]:
    return [m if isinstance(m, SinkCommitMessage) else None for m in messages]


def make_batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> TidekeepBatchWriter:
    return TidekeepBatchWriter(plan_sink(options, schema, overwrite, streaming=False))


def make_stream_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> TidekeepStreamWriter:
    return TidekeepStreamWriter(plan_sink(options, schema, overwrite, streaming=True))


# ---- helpers that raise the typed errors in the caller ----------------------------------------------


def save_to_stream(df: DataFrame, stream: str, **options: Any) -> None:
    """df.write.format("tidekeep").mode("append").save() with the options checked here first, so bad
    input raises tidekeep's typed error rather than a Spark exception wrapping it."""
    raw = caller_options({"stream": stream, **options}, job_master(df.sparkSession))
    plan_sink(raw, df.schema, overwrite=False, streaming=False)
    df.write.format(SOURCE_NAME).mode("append").options(**raw).save()


def write_stream(df: DataFrame, stream: str, **options: Any) -> DataStreamWriter:
    """df.writeStream.format("tidekeep") with the options checked here first (the writer id, which may
    come from the checkpoint, is checked when the query starts). Add a checkpoint and start() it."""
    raw = caller_options({"stream": stream, **options}, job_master(df.sparkSession))
    plan_sink(raw, df.schema, overwrite=False, streaming=True, require_writer_id=False)
    return df.writeStream.format(SOURCE_NAME).outputMode("append").options(**raw)


__all__ = [
    "NOTE_TIME_MODES", "SinkColumns", "SinkCommit", "SinkCommitMessage", "SinkOptions", "SinkPlan", "SinkTarget",
    "TidekeepBatchWriter", "TidekeepStreamWriter", "abort_messages", "commit_messages", "make_batch_writer",
    "make_stream_writer", "note_time_for", "parse_sink_options", "plan_sink", "resolve_columns", "save_to_stream",
    "write_stream", "write_task", "writer_id_from_checkpoint",
]
