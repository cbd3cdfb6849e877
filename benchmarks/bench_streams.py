"""Stream write and read throughput against raw Parquet baselines measured in the same run.

    .venv/bin/python benchmarks/bench_streams.py [--events N] [--quick] [--repeat R] [--profile]

One writer, a 4-segment stream, 100-byte and 1 KiB events (JSON-like text with random numbers,
a few hundred routing keys). Every figure is the best of R runs (wall clock), tidekeep and its
baseline alternating run by run so that a change of machine load hits both. Baselines get the
same payloads and the same number of files:

  write        tidekeep: writer.write() per event + flush   | pyarrow: Arrow table from the same
                                                               Python lists, pq.write_table (zstd)
  write_many   tidekeep: writer.write_many(payloads, keys)  | the same pyarrow baseline
  write_arrow  tidekeep: writer.write_arrow of Arrow arrays built from the same Python lists (the
               zero-copy batch API; an extra line, no goal)  | the same pyarrow baseline
  read events  tidekeep: stream.read() -> Event tuples      | pyarrow: pq.read_table of the chunk
                                                               files + to_pydict()
  read Arrow   tidekeep: stream.read_batches()              | pyarrow: pq.read_table of the chunk files
  Spark read   tidekeep: format("tidekeep") .agg(sum(length(payload)), count)
                                                             | spark.read.parquet of the stream's chunk
                                                               directory, same aggregation

Ratios are tidekeep / baseline throughput (1.0 = as fast as raw Parquet). Each ratio is printed next
to its goal from issue 22 ("Per-event paths near raw Parquet"): for 100-byte events write >= 0.8x,
read events >= 0.8x, read Arrow >= 0.9x; for 1 KiB events >= 0.9x on write, write_many, read events
and read Arrow. Timing never fails anything.

Durability cost: writer.write_many with storage.fsync on (the default: chunk files and their
directories fsynced, SQLite commits with synchronous=FULL) against the same writes with it off, in
two workspaces on the same disk, with small (64 KiB) and large (4 MiB, the default) batches; the
ratio is on / off throughput.
Small flushes (issue 22): N single-event flushes before and after compaction against the same
events in one batch — chunk files, bytes on disk, full-read time (benchmarks/small_flushes.py).

Progress and details go to stderr, the result table to stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import os
import pstats
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import small_flushes  # benchmarks/small_flushes.py, beside this script

import tidekeep as tk
from tidekeep.streams.of_workspace import stream_controller
from tidekeep.streams.writer import Writer

SEGMENTS = 4
ROUTING_KEYS = 300
SIZES = (100, 1024)
# issue 22's goals: (event size, operation) -> least ratio; the 1 KiB goals stand for every size above 100 B
GOALS = {(100, "write"): 0.8, (100, "read events"): 0.8, (100, "read Arrow"): 0.9,
         (1024, "write"): 0.9, (1024, "write_many"): 0.9, (1024, "read events"): 0.9, (1024, "read Arrow"): 0.9}
DURABILITY_BATCHES = (("64KiB", 64 * 1024), ("4MiB", 4 * 1024 * 1024))  # small, and writer.batch_size's default


@dataclass
class Figure:
    size: int
    operation: str
    events: int
    payload_bytes: int
    tidekeep_s: float
    baseline_s: float

    @property
    def ratio(self) -> float:
        return self.baseline_s / self.tidekeep_s

    @property
    def goal(self) -> float | None:
        return GOALS.get((100 if self.size <= 100 else 1024, self.operation))


@dataclass
class DurabilityFigure:
    size: int
    batch: str
    events: int
    payload_bytes: int
    chunks: int  # chunk files (and metadata commits) per run
    fsync_on_s: float
    fsync_off_s: float

    @property
    def ratio(self) -> float:
        return self.fsync_off_s / self.fsync_on_s


# ---- data ----------------------------------------------------------------------------------------


def make_payloads(count: int, size: int, seed: int) -> tuple[list[bytes], list[str]]:
    """Semi-compressible payloads: JSON-like readings with random numbers, cut to exactly `size`
    bytes, and keys drawn from ROUTING_KEYS sensors."""
    rng = random.Random(seed)
    statuses = ("ok", "ok", "ok", "warn", "degraded", "recalibrating")
    payloads, keys = [], []
    for i in range(count):
        sensor = rng.randrange(ROUTING_KEYS)
        parts = [f'{{"sensor":"s-{sensor:04d}","seq":{i},"ts":{1_700_000_000_000 + i * 37 + rng.randrange(1000)}']
        length = len(parts[0])
        while length < size:
            field = (f',"t{len(parts)}":{rng.uniform(-40, 60):.3f},"h{len(parts)}":{rng.randrange(100)},'
                     f'"st":"{rng.choice(statuses)}"')
            parts.append(field)
            length += len(field)
        payloads.append("".join(parts).encode()[: size - 1] + b"}")
        keys.append(f"sensor-{sensor:04d}")
    return payloads, keys


# ---- timing --------------------------------------------------------------------------------------


def best_of(repeat: int, run: Callable[[], object], setup: Callable[[], object] | None = None) -> float:
    best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def best_of_pair(repeat: int, ours: Callable[[], object], theirs: Callable[[], object],
                 setup: Callable[[], object] | None = None) -> tuple[float, float]:
    """Best of `repeat` for each side, the two sides alternating run by run, so that a change of
    machine load (other jobs on a shared machine) hits both alike. `setup` runs before each of ours."""
    best_ours = best_theirs = float("inf")
    for _ in range(repeat):
        best_ours = min(best_ours, best_of(1, ours, setup))
        best_theirs = min(best_theirs, best_of(1, theirs))
    return best_ours, best_theirs


class Bench:
    def __init__(self, root: Path, events: int, repeat: int, profile: bool, with_durability: bool = True) -> None:
        self.root = root
        self.events = events
        self.repeat = repeat
        self.profile = profile
        self.with_durability = with_durability
        self.client = tk.connect(home=root / "ws", create=True)  # storage.fsync on: the default
        self.client_without_fsync = tk.connect(home=root / "ws-nofsync", settings={"storage.fsync": False},
                                               create=True)
        self.figures: list[Figure] = []
        self.durability: list[DurabilityFigure] = []
        self.spark_overhead_s = 0.0
        self._runs = 0

    def stream_name(self, size: int) -> str:
        self._runs += 1
        return f"bench/s{size}-{self._runs}"

    # -- write ---------------------------------------------------------------------------------
    def write_tidekeep(self, stream: str, payloads: list[bytes], keys: list[str]) -> None:
        with self.client.stream(stream).writer("bench-writer") as writer:
            write = writer.write
            for payload, key in zip(payloads, keys, strict=True):
                write(payload, key)
            writer.flush()

    def write_arrow_tidekeep(self, stream: str, payloads: list[bytes], keys: list[str]) -> None:
        with self.client.stream(stream).writer("bench-writer") as writer:
            writer.write_arrow(pa.array(payloads, type=pa.binary()), pa.array(keys, type=pa.string()))

    def write_many_tidekeep(self, stream: str, payloads: list[bytes], keys: list[str],
                            client: tk.Client | None = None, batch_size: int | None = None) -> None:
        with (client or self.client).stream(stream).writer("bench-writer", batch_size=batch_size) as writer:
            writer.write_many(payloads, keys)

    def run_durability(self, size: int, payloads: list[bytes], keys: list[str]) -> None:
        """write_many with storage.fsync on and off, small and large batches. The two sides alternate
        run by run (each on a new stream), so a change of machine load hits both; best of `repeat`."""
        total = sum(map(len, payloads))
        sides = ((True, self.client), (False, self.client_without_fsync))
        for label, batch_size in DURABILITY_BATCHES:
            best = {fsync: float("inf") for fsync, _ in sides}
            chunks = 0
            for _ in range(self.repeat):
                for fsync, client in sides:
                    stream = self.stream_name(size)
                    client.create_stream(stream, tk.StreamConfig(segments=SEGMENTS))
                    gc.collect()
                    started = time.perf_counter()
                    self.write_many_tidekeep(stream, payloads, keys, client, batch_size)
                    best[fsync] = min(best[fsync], time.perf_counter() - started)
                    chunks = len(stream_controller(client.workspace).plan_read(stream).tasks)
            figure = DurabilityFigure(size, label, self.events, total, chunks, best[True], best[False])
            print(f"  fsync on/off, {label} batches: {chunks} chunks per run, {figure.ratio:.2f}x", file=sys.stderr)
            self.durability.append(figure)

    def write_baseline(self, out_dir: Path, payloads: list[bytes], keys: list[str], files: int) -> None:
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.mkdir(parents=True)
        step = -(-len(payloads) // files)
        for n, begin in enumerate(range(0, len(payloads), step)):
            table = pa.table({
                "routing_key": pa.array(keys[begin:begin + step], type=pa.string()),
                "payload": pa.array(payloads[begin:begin + step], type=pa.binary()),
            })
            pq.write_table(table, out_dir / f"part-{n}.parquet", compression="zstd")

    def chunk_files(self, stream: str) -> list[str]:
        plan = stream_controller(self.client.workspace).plan_read(stream)
        return [self.client.workspace.storage.full_path(task.chunk.path) for task in plan.tasks]

    def run_size(self, size: int, spark) -> None:  # type: ignore[no-untyped-def]
        payloads, keys = make_payloads(self.events, size, seed=size)
        total = sum(map(len, payloads))
        print(f"\n{size}-byte events: {self.events} events, {total / 1e6:.1f} MB of payload", file=sys.stderr)

        streams: list[str] = []

        def new_stream() -> None:
            name = self.stream_name(size)
            self.client.create_stream(name, tk.StreamConfig(segments=SEGMENTS))
            streams.append(name)

        # a first write (a warm-up) tells how many chunk files the baseline writes
        new_stream()
        self.write_tidekeep(streams[-1], payloads, keys)
        stream = streams[-1]
        files = self.chunk_files(stream)
        stored = sum(os.path.getsize(f) for f in files)
        print(f"  tidekeep wrote {len(files)} chunk files, {stored / 1e6:.1f} MB on disk "
              f"({stored / total:.0%} of payload)", file=sys.stderr)
        baseline_dir = self.root / f"baseline-{size}"

        def baseline_write() -> None:
            self.write_baseline(baseline_dir, payloads, keys, len(files))

        writes = [("write", self.write_tidekeep), ("write_many", self.write_many_tidekeep)]
        if hasattr(Writer, "write_arrow"):  # absent in a tidekeep from before it (a "before" run)
            writes.append(("write_arrow", self.write_arrow_tidekeep))
        for operation, write in writes:
            ours_s, theirs_s = best_of_pair(self.repeat, lambda w=write: w(streams[-1], payloads, keys),
                                            baseline_write, new_stream)
            self.figures.append(Figure(size, operation, self.events, total, ours_s, theirs_s))

        if self.profile:
            new_stream()
            self.profile_call(f"write {size}B", lambda: self.write_tidekeep(streams[-1], payloads, keys))

        # -- reads of the same chunk files ------------------------------------------------------
        def read_events() -> None:
            count = 0
            for event in self.client.stream(stream).read():
                count += len(event.payload)
            assert count == total

        def baseline_events() -> None:
            count = 0
            for path in files:
                columns = pq.read_table(path).to_pydict()
                for payload in columns["payload"]:
                    count += len(payload)
            assert count == total

        def read_arrow() -> None:
            rows = sum(batch.num_rows for batch in self.client.stream(stream).read_batches())
            assert rows == self.events

        def baseline_arrow() -> None:
            rows = sum(pq.read_table(path).num_rows for path in files)
            assert rows == self.events

        for operation, ours, theirs in (("read events", read_events, baseline_events),
                                        ("read Arrow", read_arrow, baseline_arrow)):
            self.figures.append(Figure(size, operation, self.events, total,
                                       *best_of_pair(self.repeat, ours, theirs)))
        if self.profile:
            self.profile_call(f"read events {size}B", read_events)
            self.profile_call(f"read Arrow {size}B", read_arrow)

        if spark is not None:
            self.figures.append(self.spark_figure(spark, size, stream, files, total))
        if self.with_durability:
            self.run_durability(size, payloads, keys)

    def spark_figure(self, spark, size: int, stream: str, files: list[str], total: int) -> Figure:  # type: ignore[no-untyped-def]
        from pyspark.sql import functions as F

        aggregate = [F.sum(F.length("payload")).alias("bytes"), F.count("*").alias("events")]

        def ours() -> None:
            row = spark.read.format("tidekeep").option("stream", stream).options(**self.client.spark_options()) \
                .load().agg(*aggregate).collect()[0]
            assert (row.bytes, row.events) == (total, self.events)

        # the baseline reads the stream's directory (it holds exactly these chunk files): one path is
        # Spark's fastest way in; a list of hundreds of paths would add a parallel listing job
        directory = self.client.workspace.storage.uri_of(self.client.stream(stream).state().storage_dir())
        assert all(f.startswith(directory.removeprefix("file://")) for f in files)

        def theirs() -> None:
            row = spark.read.option("recursiveFileLookup", "true").parquet(directory).agg(*aggregate).collect()[0]
            assert (row.bytes, row.events) == (total, self.events)

        ours(), theirs()  # warm up: JIT, Python workers, file listing caches
        figure = Figure(size, "Spark read", self.events, total, best_of(self.repeat, ours),
                        best_of(self.repeat, theirs))
        if not self.spark_overhead_s:
            # what every tidekeep Spark query pays whatever its size: planning in a fresh Python
            # worker (imports, opening the workspace) and shipping the partitions
            empty = self.stream_name(0)
            self.client.create_stream(empty, tk.StreamConfig(segments=SEGMENTS))

            def empty_query() -> None:
                spark.read.format("tidekeep").option("stream", empty).options(**self.client.spark_options()) \
                    .load().agg(*aggregate).collect()

            self.spark_overhead_s = best_of(self.repeat, empty_query)
        return figure

    def profile_call(self, label: str, run: Callable[[], object]) -> None:
        profiler = cProfile.Profile()
        profiler.enable()
        run()
        profiler.disable()
        print(f"\n--- profile: {label} (top 15 by cumulative time) ---", file=sys.stderr)
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("cumulative").print_stats(15)


# ---- report --------------------------------------------------------------------------------------


def table(figures: list[Figure]) -> str:
    header = ("| event | operation | tidekeep events/s | tidekeep MB/s | baseline events/s | baseline MB/s "
              "| ratio | goal |")
    lines = [header, "|---|---|---:|---:|---:|---:|---:|---|"]
    for f in figures:
        ours_mb, theirs_mb = f.payload_bytes / f.tidekeep_s / 1e6, f.payload_bytes / f.baseline_s / 1e6
        goal = "-" if f.goal is None else f">= {f.goal:.1f}x {'met' if f.ratio >= f.goal else 'NOT met'}"
        lines.append(f"| {f.size} B | {f.operation} | {f.events / f.tidekeep_s:,.0f} | {ours_mb:,.1f} "
                     f"| {f.events / f.baseline_s:,.0f} | {theirs_mb:,.1f} | {f.ratio:.2f}x | {goal} |")
    return "\n".join(lines)


def durability_table(figures: list[DurabilityFigure]) -> str:
    lines = ["| event | batch | chunks per run | fsync on events/s | fsync on MB/s | fsync off events/s "
             "| fsync off MB/s | ratio on/off |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for f in figures:
        lines.append(f"| {f.size} B | {f.batch} | {f.chunks} | {f.events / f.fsync_on_s:,.0f} "
                     f"| {f.payload_bytes / f.fsync_on_s / 1e6:,.1f} | {f.events / f.fsync_off_s:,.0f} "
                     f"| {f.payload_bytes / f.fsync_off_s / 1e6:,.1f} | {f.ratio:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=None, help="events per size (default 200000, quick 20000)")
    parser.add_argument("--quick", action="store_true", help="small run: 20000 events, best of 2, for a smoke check")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure, best kept (default 5, quick 2)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES),
                        help="event sizes in bytes (default 100 1024)")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark read")
    parser.add_argument("--profile", action="store_true", help="cProfile the tidekeep write and reads")
    parser.add_argument("--no-durability", action="store_true", help="skip the storage.fsync on/off comparison")
    parser.add_argument("--small-flushes", type=int, default=None, metavar="N",
                        help="the small-flush scenario with N single-event flushes, before and after compaction "
                             "(default 10000, quick 2000; 0 skips it; benchmarks/small_flushes.py)")
    args = parser.parse_args(argv)
    if min(args.sizes) < 64:
        parser.error("event sizes below 64 bytes are not supported (the JSON-like payload needs room)")
    events = args.events or (20_000 if args.quick else 200_000)
    repeat = args.repeat or (2 if args.quick else 5)

    spark = None
    if not args.no_spark:
        from tidekeep.spark.session import build_spark

        spark = build_spark("local[2]", "tidekeep-bench")
        spark.sparkContext.setLogLevel("ERROR")
    root = Path(tempfile.mkdtemp(prefix="tidekeep-bench-"))
    try:
        bench = Bench(root, events, repeat, args.profile, with_durability=not args.no_durability)
        for size in args.sizes:
            bench.run_size(size, spark)
        bench.client.close()
        bench.client_without_fsync.close()
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(f"\ntidekeep stream benchmark: {events} events per size, best of {repeat}, "
              f"{os.cpu_count()} cores, Python {sys.version.split()[0]}, pyarrow {pa.__version__}, "
              f"load average at the end {load}")
        print(table(bench.figures))
        if bench.durability:
            print("\nDurability cost: write_many with storage.fsync on (default) vs off, same run:")
            print(durability_table(bench.durability))
        if bench.spark_overhead_s:
            print(f"\nSpark fixed cost per tidekeep query (empty stream, same aggregation): "
                  f"{bench.spark_overhead_s:.2f} s")
        flushes = args.small_flushes if args.small_flushes is not None else (2_000 if args.quick else 10_000)
        if flushes:
            print(f"\nSmall flushes: {flushes:,} single-event flushes of {small_flushes.EVENT_SIZE} B, before and "
                  "after compaction, against the same events in one batch:")
            print(small_flushes.run(root / "small-flushes", flushes, max(repeat * 4, 8)).table())
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if spark is not None:
            spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
