"""The small-flush scenario: a stream written one event per flush, before and after compaction,
against the same events written in one batch, in the same run.

    .venv/bin/python benchmarks/small_flushes.py [--flushes N] [--repeat R] [--json]

Both streams have 4 segments and get the same N 100-byte events with the same routing keys; the
flushed one gets a chunk file per flush. Figures: chunk files, bytes on disk (the files' sizes), and
the time of a full read (events, best of R) — for the flushed stream before compaction, after
`compact()` plus a sweep of the replaced files, and for the one-batch stream. Goals (issue 22):
after compaction, disk <= 1.3x and full read <= 1.2x of the one-batch stream. Timing never fails
anything; bench_streams.py runs this scenario too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import tidekeep as tk

SEGMENTS = 4
KEYS = 300
EVENT_SIZE = 100
DISK_GOAL = 1.3
READ_GOAL = 1.2


@dataclass
class StreamFigures:
    label: str
    files: int
    disk_bytes: int
    read_s: float


@dataclass
class SmallFlushResult:
    flushes: int
    flushed: StreamFigures
    compacted: StreamFigures
    one_batch: StreamFigures
    compact_s: float

    @property
    def disk_ratio(self) -> float:
        return self.compacted.disk_bytes / self.one_batch.disk_bytes

    @property
    def read_ratio(self) -> float:
        return self.compacted.read_s / self.one_batch.read_s

    def table(self) -> str:
        rows = ["| stream | chunk files | bytes on disk | full read (s) | disk vs one batch | read vs one batch |",
                "|---|---:|---:|---:|---:|---:|"]
        base = self.one_batch
        for fig in (self.flushed, self.compacted, base):
            rows.append(f"| {fig.label} | {fig.files:,} | {fig.disk_bytes:,} | {fig.read_s:.3f} | "
                        f"{fig.disk_bytes / base.disk_bytes:.2f}x | {fig.read_s / base.read_s:.2f}x |")
        verdict = (f"after compaction: disk {self.disk_ratio:.2f}x (goal <= {DISK_GOAL}x), "
                   f"full read {self.read_ratio:.2f}x (goal <= {READ_GOAL}x); compaction took {self.compact_s:.2f} s")
        return "\n".join(rows) + "\n\n" + verdict

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "disk_ratio": self.disk_ratio, "read_ratio": self.read_ratio}


def events(count: int, seed: int = 11) -> tuple[list[bytes], list[str]]:
    rng = random.Random(seed)
    keys = [f"key-{rng.randrange(KEYS)}" for _ in range(count)]
    payloads = [(f'{{"k":"{k}","v":{rng.random()!r},"n":{i}}}' + " " * EVENT_SIZE)[:EVENT_SIZE].encode()
                for i, k in enumerate(keys)]
    return payloads, keys


def on_disk(client: tk.Client, stream: str) -> tuple[int, int]:
    """The stream's chunk files and their bytes."""
    files = client.workspace.storage.list_files(client.stream(stream).state().storage_dir())
    return len(files), sum(f.size for f in files)


def best_reads(client: tk.Client, streams: list[str], repeat: int) -> dict[str, float]:
    """The best full-read time of each stream, the streams read in turn, so a change of machine
    load hits them all alike."""
    best = dict.fromkeys(streams, float("inf"))
    for _ in range(repeat):
        for stream in streams:
            start = time.perf_counter()
            for _event in client.stream(stream).read():
                pass
            best[stream] = min(best[stream], time.perf_counter() - start)
    return best


def run(root: Path, flushes: int, repeat: int) -> SmallFlushResult:
    payloads, keys = events(flushes)
    flushed_name, batch_name = "bench/flushed", "bench/batch"
    with tk.connect(home=root / "ws", create=True, settings={"writer.linger": 0}) as client:
        for name in (flushed_name, batch_name):
            client.create_stream(name, tk.StreamConfig(segments=SEGMENTS))
        with client.stream(flushed_name).writer("w") as writer:
            for i, (payload, key) in enumerate(zip(payloads, keys, strict=True)):
                writer.write(payload, key)
                writer.flush()
                if i % 1000 == 999:
                    print(f"  {i + 1} flushes", file=sys.stderr)
        with client.stream(batch_name).writer("w") as writer:
            writer.write_many(payloads, keys)
        before = best_reads(client, [flushed_name, batch_name], max(1, repeat // 2))
        flushed = StreamFigures(f"{flushes:,} single-event flushes", *on_disk(client, flushed_name),
                                before[flushed_name])
        start = time.perf_counter()
        client.stream(flushed_name).compact()
        compact_s = time.perf_counter() - start
        client.sweep(grace=0)  # the replaced files: what is left on disk is what compaction leaves
        after = best_reads(client, [flushed_name, batch_name], repeat)
        compacted = StreamFigures("the flushed stream, compacted", *on_disk(client, flushed_name),
                                  after[flushed_name])
        one_batch = StreamFigures("the same events in one batch", *on_disk(client, batch_name),
                                  min(before[batch_name], after[batch_name]))
    return SmallFlushResult(flushes, flushed, compacted, one_batch, compact_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flushes", type=int, default=10_000, help="events, one flush each (default 10000)")
    parser.add_argument("--repeat", type=int, default=20, help="full reads per figure, best kept (default 20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp), args.flushes, args.repeat)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(f"small flushes: {args.flushes:,} x {EVENT_SIZE} B events, {SEGMENTS} segments, "
              f"load average {os.getloadavg()[0]:.2f}")
        print(result.table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
