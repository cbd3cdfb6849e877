"""Planning a read into Spark partitions on the driver, and reading a partition on an executor.

Planning runs once, on the driver (in the Python worker Spark starts there): it opens the
workspace (spark/driver_workspace.py), asks the controller for a read plan and groups the plan's
chunk reads into partitions. Executors never touch the metadata store: each partition carries the
chunk refs and offset filters it needs plus where storage lives, and is read straight from the
chunk files into Arrow record batches (no per-row Python). The batch reader (datasource.py) and
the streaming reader (stream_source.py) share all of it; the sink (sink.py) shares
`StorageLocation`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from ..store.fileio import FileIO
from ..streams.controller import ReadPlan, ReadTask
from ..streams.model import segment_name
from ..streams.reader import EVENT_SCHEMA, read_task
from .options import HEAD, PARTITION_TARGET_BYTES, TAIL, ReadOptions
from .watermark_column import Thresholds, segment_thresholds, watermark_array

if TYPE_CHECKING:
    from .driver_workspace import DriverWorkspace

SPARK_SCHEMA = StructType([
    StructField("stream", StringType(), nullable=False),
    StructField("segment", LongType(), nullable=False),
    StructField("offset", LongType(), nullable=False),
    StructField("routing_key", StringType(), nullable=True),
    StructField("payload", BinaryType(), nullable=False),
    StructField("commit_time", TimestampType(), nullable=False),
    StructField("writer_id", StringType(), nullable=False),
    # the lower time of the last watermark the row's position has passed (watermark_column.py)
    StructField("watermark", TimestampType(), nullable=True),
])

# The Arrow schema Spark checks each returned batch against (pyspark's to_arrow_schema of
# SPARK_SCHEMA with the session zone UTC): the event schema with commit time as a UTC timestamp.
ARROW_SCHEMA = EVENT_SCHEMA.set(
    EVENT_SCHEMA.get_field_index("commit_time_ms"),
    pa.field("commit_time", pa.timestamp("us", tz="UTC"), nullable=False),
).append(pa.field("watermark", pa.timestamp("us", tz="UTC"), nullable=True))


def open_read_workspace(options: ReadOptions) -> DriverWorkspace:
    """The workspace the options name; settings resolve as tidekeep.connect() does."""
    from .driver_workspace import open_driver_workspace

    return open_driver_workspace(options.home, options.metadata, options.storage, options.shared_filesystem,
                                 options.fsync)


def plan_stream_read(opened: DriverWorkspace, options: ReadOptions) -> ReadPlan:
    """The controller's read plan for the options, "head" and "tail" taken from the stream now."""
    # plan_read reads head and tail from its own snapshot when given None; only a "tail" start or a
    # "head" end (legal, and an empty read) needs the words resolved here
    start = None if options.start == HEAD else options.start
    end = None if options.end == TAIL else options.end
    if isinstance(start, str) or isinstance(end, str):
        state = opened.streams.state(options.stream)
        start = state.cut(state.tail()) if start == TAIL else start
        end = state.cut(dict(state.head)) if end == HEAD else end
    return opened.streams.plan_read(options.stream, start, end)


@dataclass(frozen=True)
class StorageLocation:
    """Where chunk files live, in a form that pickles to executors. `uri` is the storage setting
    (a pyarrow.fs URI or a local path); `root` the resolved directory inside that filesystem;
    `fsync` the storage.fsync setting, for executors that write (the sink)."""

    uri: str
    root: str
    fsync: bool = True

    @property
    def opened_as(self) -> str:
        """What opens the root where this runs: the URI, or the resolved root of a local path (an
        executor's working directory is not the driver's)."""
        return self.uri if "://" in self.uri else self.root

    def file_io(self) -> FileIO:
        return FileIO(self.opened_as, fsync=self.fsync)


class ChunkPartition(InputPartition):
    """Consecutive chunk reads of one segment: what one Spark task reads."""

    def __init__(self, stream: str, segment: int, tasks: Sequence[ReadTask], location: StorageLocation,
                 thresholds: Thresholds = ((), ())) -> None:
        super().__init__(None)
        self.stream = stream
        self.segment = segment
        self.tasks = tuple(tasks)
        self.location = location
        self.thresholds = thresholds  # the segment's watermark thresholds (watermark_column.py)

    @property
    def logical_bytes(self) -> int:
        return sum(task.end - task.start for task in self.tasks)

    def __repr__(self) -> str:
        return (f"ChunkPartition({self.stream}, segment={segment_name(self.segment)}, chunks={len(self.tasks)}, "
                f"bytes={self.logical_bytes})")


def build_partitions(stream: str, tasks: Sequence[ReadTask], location: StorageLocation,
                     target_bytes: int = PARTITION_TARGET_BYTES,
                     thresholds: Mapping[int, Thresholds] | None = None) -> list[ChunkPartition]:
    """Group chunk reads into partitions: never across segments, in offset order within one, each
    closed once it reaches `target_bytes` of logical bytes (a bigger chunk gets its own).
    `thresholds`: per segment, the watermark thresholds its rows are stamped with."""
    partitions: list[ChunkPartition] = []
    current: list[ReadTask] = []
    current_bytes = 0

    def close() -> None:
        nonlocal current, current_bytes
        if current:
            seg = current[0].chunk.segment
            partitions.append(ChunkPartition(stream, seg, current, location, (thresholds or {}).get(seg, ((), ()))))
        current, current_bytes = [], 0

    for task in tasks:
        size = task.end - task.start
        if current and (task.chunk.segment != current[0].chunk.segment or current_bytes + size > target_bytes):
            close()
        current.append(task)
        current_bytes += size
    close()
    return partitions


def read_partition(partition: ChunkPartition) -> Iterator[pa.RecordBatch]:
    """The rows of one partition as Arrow batches in ARROW_SCHEMA. Storage only: runs on executors.
    A missing or corrupt chunk raises ChunkMissing/CorruptChunk naming the file, failing the job."""
    storage = partition.location.file_io()
    for task in partition.tasks:
        batch = read_task(storage, partition.stream, task)
        if batch.num_rows:
            yield to_spark_batch(batch, partition.thresholds)


def to_spark_batch(batch: pa.RecordBatch, thresholds: Thresholds = ((), ())) -> pa.RecordBatch:
    """An EVENT_SCHEMA batch as ARROW_SCHEMA: commit_time_ms becomes a UTC timestamp, and the
    watermark column comes from the offsets and the segment's thresholds."""
    millis = batch.column("commit_time_ms")
    commit_time = pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC"))
    return pa.RecordBatch.from_arrays([
        batch.column("stream"), batch.column("segment"), batch.column("offset"), batch.column("routing_key"),
        batch.column("payload"), commit_time, batch.column("writer_id"),
        watermark_array(batch.column("offset"), thresholds),
    ], schema=ARROW_SCHEMA)


def plan_thresholds(opened: DriverWorkspace, plan: ReadPlan) -> dict[int, Thresholds]:
    """Per segment of the plan, the watermark thresholds its rows need (driver side; the same for
    batch and streaming reads)."""
    if not plan.ranges:
        return {}
    marks = opened.watermarks.list(plan.stream)
    if not marks:
        return {}
    segments = opened.streams.state(plan.stream).segments
    return {r.segment: segment_thresholds(marks, r.segment, segments, r.start, r.end) for r in plan.ranges}


def partitions_of(opened: DriverWorkspace, plan: ReadPlan, target_bytes: int) -> list[ChunkPartition]:
    """The partitions of a read plan, with their watermark thresholds (driver side)."""
    storage = opened.workspace.storage
    location = StorageLocation(storage.uri, storage.root, storage.fsync)
    return build_partitions(plan.stream, plan.tasks, location, target_bytes, plan_thresholds(opened, plan))


def plan_partitions(options: ReadOptions) -> list[ChunkPartition]:
    """Open the workspace, plan the read and build its partitions (driver side)."""
    opened = open_read_workspace(options)
    try:
        return partitions_of(opened, plan_stream_read(opened, options), options.partition_size)
    finally:
        opened.close()


def check_read(options: ReadOptions) -> None:
    """Validate the options against the workspace (stream exists, cuts valid and in order, start
    not before the head) without reading data: the load()-time check."""
    opened = open_read_workspace(options)
    try:
        plan_stream_read(opened, options)
    finally:
        opened.close()


__all__ = ["ARROW_SCHEMA", "SPARK_SCHEMA", "ChunkPartition", "StorageLocation", "build_partitions", "check_read",
           "open_read_workspace", "partitions_of", "plan_partitions", "plan_stream_read", "plan_thresholds",
           "read_partition", "to_spark_batch"]
