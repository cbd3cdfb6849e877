"""Spark Structured Streaming source and sink throughput against Parquet baselines in the same run.

    .venv/bin/python benchmarks/bench_spark_streaming.py [--events N] [--size B] [--repeat R] [--quick] [--profile]

One writer fills a 4-segment stream with N events of B bytes (JSON-like sensor readings, 300
routing keys; `bench_streams.make_payloads`). Spark runs `local[2]`. Every figure is the best of R
runs (wall clock), each run on fresh checkpoints and, for the sink, a fresh stream or directory.

Source (every query ends in format("noop"), which consumes every column of every row):
  tidekeep stream       readStream.format("tidekeep"), trigger(availableNow=True): one micro-batch
  tidekeep stream, N    the same with a reader group and max_bytes_per_trigger = 1/N of the data:
                        N micro-batches, each acknowledged (consumption-based retention)
  tidekeep batch        spark.read.format("tidekeep")
  baseline              spark.read.parquet of the stream's chunk directory (the same chunk files)
  baseline stream       readStream.parquet of that directory, availableNow (for reference)

Sink (the input is a Parquet directory of the same rows plus an event time; every figure includes
reading it, and "input -> noop" shows that share):
  tidekeep batch        df.write.format("tidekeep") (payload, routing key, event time columns)
  baseline              df.write.parquet (zstd, as tidekeep's chunk files)
  tidekeep stream       readStream.parquet(input).writeStream.format("tidekeep"), availableNow
  baseline stream       the same into writeStream.format("parquet") (zstd)

Also, outside Spark, the tidekeep Python code alone in this process: the streaming reader's planning
plus reading every partition into Arrow, and the sink's task write plus driver commit.

Ratios are baseline seconds / these seconds (1.00x = as fast as the baseline): "ratio" against the
batch Parquet job (spark.read.parquet -> noop; df.write.parquet), and for streaming queries a second
ratio against the Parquet streaming query of the same shape (one or 8 micro-batches), which isolates
what tidekeep adds from what Structured Streaming itself costs. MB/s counts payload bytes (10^6).
Timing never fails anything; every run checks its row count. Progress goes to stderr, the result
table to stdout. --profile adds cProfile of the in-process reader and sink.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

import tidekeep as tk
from tidekeep.streams.of_workspace import stream_controller

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_streams import best_of, make_payloads  # the same payloads and timing as the stream benchmark

SEGMENTS = 4
FLOOR_SOURCE = "bench_floor"
INPUT_FILES = 8  # the sink's input: Parquet files, so Spark reads it in several tasks
BATCHES = 8  # micro-batches of the bounded streaming read


# ---- the Python data source floor ------------------------------------------------------------------
# A minimal PySpark Python data source with no tidekeep code: each partition reads its chunk files with
# pyarrow and yields the batches with tidekeep's eight columns (the constant ones filled in). What it
# costs is what any Python data source of that schema pays to move the rows into Spark.


class FloorPartition(InputPartition):
    def __init__(self, files: list[str]) -> None:
        self.files = files


class FloorReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.files = options["files"].split(",")
        self.parts = int(options["partitions"])

    def partitions(self) -> list[InputPartition]:
        return [FloorPartition(self.files[i::self.parts]) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FloorPartition)
        for path in partition.files:
            for batch in pq.read_table(path).to_batches():
                n = batch.num_rows
                yield pa.RecordBatch.from_arrays(
                    [pa.repeat("bench/input", n), pa.repeat(1, n), batch.column("rel_offset"),
                     batch.column("routing_key").cast(pa.string()), batch.column("payload"),
                     pa.repeat(pa.scalar(0, pa.timestamp("us", "UTC")), n), pa.repeat("bench-writer", n),
                     pa.nulls(n, pa.timestamp("us", "UTC"))],
                    names=["stream", "segment", "offset", "routing_key", "payload", "commit_time", "writer_id",
                           "watermark"])


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FLOOR_SOURCE

    def schema(self) -> str:
        return ("stream string, segment long, offset long, routing_key string, payload binary, "
                "commit_time timestamp, writer_id string, watermark timestamp")

    def reader(self, schema: Any) -> DataSourceReader:
        return FloorReader(dict(self.options))


@dataclass
class Figure:
    section: str
    operation: str
    seconds: float
    baseline: str | None  # the operation this one is compared with (None: a baseline or reference)
    streaming_baseline: str | None = None  # for streaming queries: the Parquet streaming query of the same shape


# ---- timing --------------------------------------------------------------------------------------


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, root: Path, events: int, size: int, repeat: int, spark,  # type: ignore[no-untyped-def]
                 warm_up: bool = True) -> None:
        self.warm_up = warm_up  # one untimed run of each query first (JIT, Python workers, caches)
        self.root = root
        self.events = events
        self.size = size
        self.repeat = repeat
        self.spark = spark
        self.client = tk.connect(home=root / "ws", create=True)
        self.options = self.client.spark_options()
        self.figures: list[Figure] = []
        self._serial = 0
        self.payload_bytes = 0
        self.stored_bytes = 0
        self.chunk_count = 0

    def fresh(self, kind: str) -> str:
        self._serial += 1
        return f"{kind}-{self._serial}"

    def add(self, section: str, operation: str, seconds: float, baseline: str | None = None,
            streaming_baseline: str | None = None) -> None:
        self.figures.append(Figure(section, operation, seconds, baseline, streaming_baseline))
        progress(f"  {operation}: {seconds:.2f} s")

    # ---- data ----------------------------------------------------------------------------------
    def prepare(self) -> None:
        progress(f"generating {self.events} events of {self.size} bytes")
        payloads, keys = make_payloads(self.events, self.size, seed=self.size)
        self.payload_bytes = sum(map(len, payloads))
        self.stream = "bench/input"
        self.client.create_stream(self.stream, tk.StreamConfig(segments=SEGMENTS))
        with self.client.stream(self.stream).writer("bench-writer") as writer:
            writer.write_many(payloads, keys)
        plan = stream_controller(self.client.workspace).plan_read(self.stream)
        files = [self.client.workspace.storage.full_path(task.chunk.path) for task in plan.tasks]
        self.chunk_files = files
        self.chunk_count = len(files)
        self.stored_bytes = sum(os.path.getsize(f) for f in files)
        self.chunk_dir = self.client.workspace.storage.uri_of(self.client.stream(self.stream).state().storage_dir())
        assert all(f.startswith(self.chunk_dir.removeprefix("file://")) for f in files)
        progress(f"stream: {self.chunk_count} chunk files, {self.stored_bytes / 1e6:.1f} MB on disk, "
                 f"{self.payload_bytes / 1e6:.1f} MB of payload")

        # the sink's input: the same rows with an event time, as plain Parquet files
        self.input_dir = self.root / "input"
        self.input_dir.mkdir()
        base_ms = 1_700_000_000_000
        step = -(-self.events // INPUT_FILES)
        for n, begin in enumerate(range(0, self.events, step)):
            stop = min(begin + step, self.events)
            table = pa.table({
                "sensor": pa.array(keys[begin:stop], type=pa.string()),
                "body": pa.array(payloads[begin:stop], type=pa.binary()),
                "event_time": pa.array([base_ms + i * 10 for i in range(begin, stop)], type=pa.timestamp("ms", "UTC")),
            })
            pq.write_table(table, self.input_dir / f"part-{n:03d}.parquet")
        del payloads, keys

    # ---- checks --------------------------------------------------------------------------------
    def check_query(self, query) -> None:  # type: ignore[no-untyped-def]
        rows = sum(p["numInputRows"] for p in query.recentProgress)
        assert query.exception() is None, query.exception()
        assert rows == self.events, f"the query read {rows} rows, not {self.events}"

    def check_stream(self, stream: str) -> None:
        state = self.client.stream(stream).state()
        logical = sum(state.tail().values()) - sum(state.head.values())
        expected = self.payload_bytes + 8 * self.events
        assert logical == expected, f"{stream} holds {logical} logical bytes, not {expected}"

    # ---- source --------------------------------------------------------------------------------
    def tidekeep_stream(self, max_bytes: int | None = None, group: str | None = None):  # type: ignore[no-untyped-def]
        reader = self.spark.readStream.format("tidekeep").option("stream", self.stream).options(**self.options)
        if max_bytes is not None:
            reader = reader.option("max_bytes_per_trigger", str(max_bytes))
        if group is not None:
            reader = reader.option("reader_group", group)
        return reader.load()

    def run_to_noop(self, df) -> None:  # type: ignore[no-untyped-def]
        query = (df.writeStream.format("noop").option("checkpointLocation", str(self.root / self.fresh("ck")))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        self.check_query(query)

    def source(self) -> None:
        spark = self.spark
        from pyspark.sql import functions as F

        section = "source"
        progress("source: row checks" + (" and warm-up" if self.warm_up else ""))
        for df in (spark.read.format("tidekeep").option("stream", self.stream).options(**self.options).load(),
                   spark.read.option("recursiveFileLookup", "true").parquet(self.chunk_dir)):
            row = df.agg(F.count("*").alias("n"), F.sum(F.length("payload")).alias("b")).collect()[0]
            assert (row.n, row.b) == (self.events, self.payload_bytes), row
        if self.warm_up:
            self.run_to_noop(self.tidekeep_stream())
        chunk_schema = spark.read.option("recursiveFileLookup", "true").parquet(self.chunk_dir).schema

        def parquet_batch() -> None:
            spark.read.option("recursiveFileLookup", "true").parquet(self.chunk_dir) \
                .write.format("noop").mode("overwrite").save()

        def parquet_stream(max_files: int | None = None) -> None:
            reader = spark.readStream.schema(chunk_schema).option("recursiveFileLookup", "true")
            if max_files is not None:
                reader = reader.option("maxFilesPerTrigger", str(max_files))
            self.run_to_noop(reader.parquet(self.chunk_dir))

        def tidekeep_batch() -> None:
            spark.read.format("tidekeep").option("stream", self.stream).options(**self.options).load() \
                .write.format("noop").mode("overwrite").save()

        per_batch = -(-(self.payload_bytes + 8 * self.events) // BATCHES)
        baseline = "spark.read.parquet(chunk files) -> noop"
        self.add(section, baseline, best_of(self.repeat, parquet_batch))
        one_batch = "readStream.parquet(chunk files) -> noop, availableNow"
        self.add(section, one_batch, best_of(self.repeat, parquet_stream), baseline)
        files_per_batch = -(-self.chunk_count // BATCHES)
        batches = (f"readStream.parquet(chunk files), maxFilesPerTrigger={files_per_batch} "
                   f"({-(-self.chunk_count // files_per_batch)} micro-batches) -> noop")
        self.add(section, batches, best_of(self.repeat, lambda: parquet_stream(files_per_batch)), baseline)
        self.add(section, "readStream tidekeep -> noop, availableNow (1 micro-batch)",
                 best_of(self.repeat, lambda: self.run_to_noop(self.tidekeep_stream())), baseline, one_batch)
        self.add(section, f"readStream tidekeep + reader_group, max_bytes_per_trigger={per_batch} "
                          f"({BATCHES} micro-batches) -> noop",
                 best_of(self.repeat, lambda: self.run_to_noop(self.tidekeep_stream(per_batch, self.fresh("group")))),
                 baseline, batches)
        self.add(section, "spark.read tidekeep (batch) -> noop", best_of(self.repeat, tidekeep_batch), baseline)

        # the floor: as many partitions as the tidekeep batch read plans
        spark.dataSource.register(FloorSource)
        partitions = spark.read.format("tidekeep").option("stream", self.stream).options(**self.options).load() \
            .rdd.getNumPartitions()

        def floor() -> None:
            spark.read.format(FLOOR_SOURCE).option("files", ",".join(self.chunk_files)) \
                .option("partitions", str(partitions)).load().write.format("noop").mode("overwrite").save()

        if self.warm_up:
            floor()
        self.add(section, f"floor: a minimal Python data source yielding the same chunk files with the same 8 columns "
                          f"({partitions} partitions, no tidekeep code) -> noop", best_of(self.repeat, floor), baseline)

    # ---- sink ----------------------------------------------------------------------------------
    def new_stream(self) -> str:
        name = f"bench/{self.fresh('out')}"
        self.client.create_stream(name, tk.StreamConfig(segments=SEGMENTS))
        self.out_stream = name
        return name

    def sink_options(self) -> dict[str, str]:
        return {"payload_column": "body", "routing_key_column": "sensor", "event_time_column": "event_time",
                **self.options}

    def sink(self) -> None:
        spark = self.spark
        section = "sink"
        input_dir = str(self.input_dir)
        schema = spark.read.parquet(input_dir).schema

        def read_input():  # type: ignore[no-untyped-def]
            return spark.read.parquet(input_dir)

        def input_noop() -> None:
            read_input().write.format("noop").mode("overwrite").save()

        def parquet_batch() -> None:
            out = self.root / self.fresh("out")
            read_input().write.option("compression", "zstd").parquet(str(out))
            self.last_out = out

        def tidekeep_batch() -> None:
            read_input().write.format("tidekeep").mode("append").option("stream", self.out_stream) \
                .options(**self.sink_options()).save()

        def parquet_stream() -> None:
            out = self.root / self.fresh("out")
            query = (spark.readStream.schema(schema).parquet(input_dir).writeStream.format("parquet")
                     .option("compression", "zstd").option("path", str(out))
                     .option("checkpointLocation", str(self.root / self.fresh("ck")))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            self.check_query(query)

        def tidekeep_stream() -> None:
            query = (spark.readStream.schema(schema).parquet(input_dir).writeStream.format("tidekeep")
                     .option("stream", self.out_stream).options(**self.sink_options())
                     .option("checkpointLocation", str(self.root / self.fresh("ck")))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            self.check_query(query)

        if self.warm_up:
            progress("sink: warm-up")
            input_noop()
            parquet_batch()
            self.new_stream()
            tidekeep_batch()

        baseline, baseline_stream = "df.write.parquet (zstd)", "writeStream.parquet (zstd), availableNow"
        self.add(section, "input: spark.read.parquet -> noop (included in every sink figure)",
                 best_of(self.repeat, input_noop))
        self.add(section, baseline, best_of(self.repeat, parquet_batch))
        assert spark.read.parquet(str(self.last_out)).count() == self.events
        self.add(section, "df.write tidekeep (one transaction)",
                 best_of(self.repeat, lambda: (tidekeep_batch(), self.check_stream(self.out_stream)),
                         self.new_stream), baseline)
        self.add(section, baseline_stream, best_of(self.repeat, parquet_stream), baseline)
        self.add(section, "writeStream tidekeep, availableNow (1 micro-batch, 1 transaction)",
                 best_of(self.repeat, lambda: (tidekeep_stream(), self.check_stream(self.out_stream)),
                         self.new_stream), baseline, baseline_stream)

    # ---- tidekeep alone, in this process ---------------------------------------------------------
    def in_process(self, profile: bool) -> None:
        from pyspark.sql.streaming.datasource import ReadAllAvailable
        from pyspark.sql.types import BinaryType, StringType, StructField, StructType, TimestampType

        from tidekeep.spark.sink import commit_messages, make_batch_writer, write_task
        from tidekeep.spark.stream_source import TidekeepStreamReader

        section = "in process"

        def read_all() -> None:
            reader = TidekeepStreamReader({"stream": self.stream, **self.options})
            try:
                start = reader.initialOffset()
                end = reader.latestOffset(start, ReadAllAvailable())
                rows = sum(batch.num_rows for part in reader.partitions(start, end) for batch in reader.read(part))
            finally:
                reader.stop()
            assert rows == self.events, rows

        schema = StructType([StructField("sensor", StringType()), StructField("body", BinaryType()),
                             StructField("event_time", TimestampType())])
        files = sorted(self.input_dir.iterdir())

        def write_all() -> None:
            writer = make_batch_writer({"stream": self.out_stream, **self.sink_options()}, schema, False)
            # one task per input file, as Spark's tasks would (sequentially here, one core)
            messages = [write_task(writer.plan.target, iter(pq.read_table(f).to_batches(max_chunksize=10_000)))
                        for f in files]
            commit_messages(writer.plan, messages, None)
            self.check_stream(self.out_stream)

        def read_files() -> None:
            assert sum(pq.read_table(f).num_rows for f in files) == self.events

        progress("in process (no Spark)")
        self.add(section, "stream reader: plan + read every partition into Arrow, 1 core",
                 best_of(self.repeat, read_all))
        self.add(section, "sink: read input files + write_task per file + commit, 1 core",
                 best_of(self.repeat, write_all, self.new_stream))
        self.add(section, "read input files with pyarrow (included in the sink line)", best_of(self.repeat, read_files))
        if profile:
            profile_call("stream reader in process", read_all)
            self.new_stream()
            profile_call("sink in process", write_all)


def profile_call(label: str, run: Callable[[], object]) -> None:
    profiler = cProfile.Profile()
    profiler.enable()
    run()
    profiler.disable()
    print(f"\n--- profile: {label} (top 25 by internal time) ---", file=sys.stderr)
    pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(25)


# ---- report --------------------------------------------------------------------------------------


def table(bench: Bench) -> str:
    seconds = {f.operation: f.seconds for f in bench.figures}
    lines = ["| part | operation | s | events/s | MB/s | ratio | ratio to the Parquet streaming query |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for f in bench.figures:
        if f.baseline is not None:
            ratio = f"{seconds[f.baseline] / f.seconds:.2f}x"
        else:  # a baseline, or a reference figure (the sink's input read, the in-process lines)
            ratio = "baseline" if f.section != "in process" and not f.operation.startswith("input") else ""
        streaming = f"{seconds[f.streaming_baseline] / f.seconds:.2f}x" if f.streaming_baseline else ""
        lines.append(f"| {f.section} | {f.operation} | {f.seconds:.2f} | {bench.events / f.seconds:,.0f} "
                     f"| {bench.payload_bytes / f.seconds / 1e6:,.1f} | {ratio} | {streaming} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=None,
                        help="events (default 5000000: 500 MB of 100-byte payloads; quick 20000)")
    parser.add_argument("--size", type=int, default=100, help="event size in bytes (default 100, at least 64)")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure, best kept (default 3, quick 1)")
    parser.add_argument("--quick", action="store_true",
                        help="small run: 20000 events, one run each, no warm-up: a smoke check (< 1 min)")
    parser.add_argument("--no-sink", action="store_true", help="measure the source only")
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process reader and sink (stderr)")
    args = parser.parse_args(argv)
    if args.size < 64:
        parser.error("event sizes below 64 bytes are not supported (the JSON-like payload needs room)")
    events = args.events or (20_000 if args.quick else 5_000_000)
    repeat = args.repeat or (1 if args.quick else 3)

    from tidekeep.spark.session import build_spark

    started = time.perf_counter()
    load_start = os.getloadavg()
    spark = build_spark("local[2]", "tidekeep-bench-streaming")
    spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="tidekeep-bench-ss-"))
    try:
        bench = Bench(root, events, args.size, repeat, spark, warm_up=not args.quick)
        bench.prepare()
        bench.source()
        if not args.no_sink:
            bench.sink()
        bench.in_process(args.profile)
        bench.client.close()
        load_end = os.getloadavg()
        import pyspark

        print(f"\ntidekeep Spark streaming benchmark: {events} events of {args.size} B "
              f"({bench.payload_bytes / 1e6:.1f} MB payload; {bench.chunk_count} chunk files, "
              f"{bench.stored_bytes / 1e6:.1f} MB on disk), best of {repeat}, local[2] on {os.cpu_count()} cores, "
              f"PySpark {pyspark.__version__}, pyarrow {pa.__version__}; load average "
              f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} / {load_end[1]:.1f} (1 / 5 min) at the end; "
              f"{time.perf_counter() - started:.0f} s in all")
        print(table(bench))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
