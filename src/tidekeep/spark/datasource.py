"""The "tidekeep" Spark data source: batch reads of a stream between two cuts.

    spark.read.format("tidekeep").option("stream", "iot/sensors")
        .option("start", cut).option("end", cut).load()

Planning runs once, on the driver (in the Python worker Spark starts there): it opens the
workspace (spark/driver_workspace.py), validates the options, asks the controller for a read plan
and groups the plan's chunk reads into partitions. Executors never touch the metadata store: each partition carries
the chunk refs and offset filters it needs plus where storage lives, and is read straight from
the chunk files into Arrow record batches (no per-row Python).

The pieces a streaming reader needs too (options, partition building, the executor read) are
plain functions here, so a micro-batch reader can plan its own [start, end) ranges and reuse them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from ..errors import InvalidInput, InvalidStreamCut
from ..names import split_stream_name
from ..store.fileio import FileIO
from ..streams.controller import ReadPlan, ReadTask
from ..streams.cuts import StreamCut
from ..streams.model import segment_name
from ..streams.reader import EVENT_SCHEMA, read_task
from ..units import parse_size_bytes
from .watermark_column import Thresholds, segment_thresholds, watermark_array

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .driver_workspace import DriverWorkspace

SOURCE_NAME = "tidekeep"

# Logical bytes (8-byte header + payload per event) one partition reads at most, unless a single
# chunk is bigger. Large enough that per-task overhead is small, small enough to spread a segment.
PARTITION_TARGET_BYTES = 64 * 1024 * 1024

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

_BATCH_ONLY = {"end"}
# options of spark.readStream only (stream_source.py); schema() accepts them, the batch reader refuses them
STREAM_ONLY = {"reader_group", "max_bytes_per_trigger", "on_truncated"}
# where the workspace is: the options every tidekeep source and the sink take
WORKSPACE_OPTIONS = frozenset({"home", "metadata_url", "storage", "shared_filesystem", "fsync"})
_COMMON = {"stream", "start", "partition_size", "path"} | WORKSPACE_OPTIONS
_KNOWN_OPTIONS = _COMMON | _BATCH_ONLY | STREAM_ONLY
HEAD, TAIL = "head", "tail"


# ---- options ---------------------------------------------------------------------------------------


CutSpec = StreamCut | str  # a parsed cut, or one of the words "head" and "tail"


@dataclass(frozen=True)
class ReadOptions:
    """The syntactically valid options of one read; `start`/`end` are cuts or "head"/"tail"."""

    stream: str
    start: CutSpec
    end: CutSpec
    home: str | None
    metadata_url: str | None
    storage: str | None
    partition_size: int = PARTITION_TARGET_BYTES
    shared_filesystem: str | None = None  # the spark.shared_filesystem setting, as given
    fsync: str | None = None  # the storage.fsync setting (commits of reader-group positions), checked on connect


def checked_options(options: Mapping[str, str], known: set[str], what: str,
                    hidden: frozenset[str] = frozenset({"path"})) -> tuple[dict[str, str], str]:
    """The options with lower-cased keys (Spark lower-cases them, so they compare case-insensitively)
    and the stream they name (`stream`, or the load()/save() path); unknown keys are refused, the
    message listing the known ones but `hidden` (those Spark passes itself)."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    unknown = sorted(set(lowered) - known)
    if unknown:
        raise InvalidInput(f"unknown tidekeep {what} option {unknown[0]!r}; known: "
                           f"{', '.join(sorted(known - hidden))}")
    stream = lowered.get("stream") or lowered.get("path")
    if not stream:
        verb = "write" if what == "write" else "read"
        raise InvalidInput(f'tidekeep {verb} needs a stream: .option("stream", "scope/name")')
    split_stream_name(stream)
    return lowered, stream


def parse_read_options(options: Mapping[str, str], known: set[str] | None = None) -> ReadOptions:
    """Check the options without touching the workspace: stream name, cut syntax, unknown keys.
    `known`: the option names allowed (default: a batch read's)."""
    known = _COMMON | _BATCH_ONLY if known is None else known
    lowered, stream = checked_options(options, known, "read" if known & _BATCH_ONLY else "streaming read")
    partition_size = PARTITION_TARGET_BYTES
    if lowered.get("partition_size"):
        partition_size = parse_size_bytes(lowered["partition_size"])
        if partition_size <= 0:
            raise InvalidInput(f"invalid partition_size {lowered['partition_size']!r}: must be greater than zero")
    return ReadOptions(stream, _parse_cut_option(lowered.get("start"), stream, "start", HEAD),
                       _parse_cut_option(lowered.get("end"), stream, "end", TAIL),
                       lowered.get("home") or None, lowered.get("metadata_url") or None,
                       lowered.get("storage") or None, partition_size, lowered.get("shared_filesystem") or None,
                       lowered.get("fsync") or None)


def _parse_cut_option(value: str | None, stream: str, which: str, default: str) -> CutSpec:
    if value is None or not value.strip():
        return default
    if value.strip().lower() in (HEAD, TAIL):
        return value.strip().lower()
    cut = StreamCut.parse(value)
    if cut.stream != stream:
        raise InvalidStreamCut(f"{which} cut is for {cut.stream!r}, not {stream!r}")
    return cut


def open_read_workspace(options: ReadOptions) -> DriverWorkspace:
    """The workspace the options name; settings resolve as tidekeep.connect() does."""
    from .driver_workspace import open_driver_workspace

    return open_driver_workspace(options.home, options.metadata_url, options.storage, options.shared_filesystem,
                                 options.fsync)


def caller_options(options: Mapping[str, object]) -> dict[str, str]:
    """Options as strings, with the workspace's paths made absolute here, in the caller's process:
    the Python worker Spark plans in, and the executors, may run in another directory or elsewhere."""
    from ..config import absolute_metadata_url, absolute_storage_uri

    raw: dict[str, str] = {}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, StreamCut):
            raw[key] = value.to_json()
        elif key == "home":
            raw[key] = str(Path(str(value)).resolve())
        elif key == "metadata_url":
            raw[key] = absolute_metadata_url(str(value))
        elif key == "storage":
            raw[key] = absolute_storage_uri(str(value))
        else:
            raw[key] = str(value)
    return raw


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


# ---- partitions (shared with the streaming reader) -------------------------------------------------


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


# ---- the Spark classes -----------------------------------------------------------------------------


class TidekeepDataSource(DataSource):
    """spark.read.format("tidekeep"); see the module docstring and docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        # Spark calls this at load(), for spark.read and spark.readStream alike: fail there, with
        # tidekeep's message, on bad options. Streaming-only options mark a streaming read.
        lowered = {str(k).lower() for k in self.options}
        if lowered & STREAM_ONLY:
            from .stream_source import check_stream_options

            check_stream_options(self.options)
        else:
            check_read(parse_read_options(self.options, _KNOWN_OPTIONS))
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return TidekeepBatchReader(parse_read_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from .stream_source import TidekeepStreamReader

        return TidekeepStreamReader(self.options)

    # writes (docs/spark.md "Writing"): df.write / df.writeStream .format("tidekeep"); the sink lives in sink.py
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import make_batch_writer

        return make_batch_writer(self.options, schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import make_stream_writer

        return make_stream_writer(self.options, schema, overwrite)


class TidekeepBatchReader(DataSourceReader):
    """Plans on the driver in partitions(); read() runs on executors with the partition alone."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        return plan_partitions(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ChunkPartition):
            return iter(())  # Spark asks for one placeholder partition when a read has none
        return read_partition(partition)


def load_stream(spark: SparkSession, stream: str, start: StreamCut | str | None = None,
                end: StreamCut | str | None = None, **options: str | int | Path) -> DataFrame:
    """spark.read.format("tidekeep") with the options checked in the caller first, so bad input
    raises tidekeep's typed errors here rather than a Spark AnalysisException that wraps them.
    `options`: home, metadata_url, storage, partition_size (as for the data source)."""
    raw = caller_options({"stream": stream, "start": start, "end": end, **options})
    check_read(parse_read_options(raw))
    return spark.read.format(SOURCE_NAME).options(**raw).load()
