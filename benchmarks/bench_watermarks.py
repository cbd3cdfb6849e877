"""Watermark costs over many streams, against a bare metadata read of the same streams in the same run.

    .venv/bin/python benchmarks/bench_watermarks.py [--streams N] [--writers W] [--rounds R]
        [--backend sqlite|postgres|both]

N streams (default 200) with 2 segments and W writers each (default 4); every writer has committed a
few events. One round: every writer of every stream notes a time above its previous one
(`client.stream(name).watermarks.note`, what `writer.note_time` does after its flush), then every stream's next
watermark is computed and appended (`client.stream(name).watermarks.compute`, what `tidekeep serve` does per stream
every watermark.frequency) — each compute emits a watermark. After the rounds, a reader of a group on
each stream asks its time window once (`reader.time_window`: the first call binary-searches the
revisions) and again (paged, incremental).

  stream_state    client.stream(name).state() per stream (the baseline: a bare metadata read)
  note            one writer mark (a write transaction: stream state, writer position, mark row)
  compute         one stream's watermark (a read of marks + last watermark, the pure computation,
                  a conditional append)
  window, first   a reader's first time_window (binary search over R revisions)
  window, next    a later time_window with nothing new

Figures are operations per second (best of --repeat timed rounds); ratios are time per operation /
stream_state time per stream. "streams per serve process" = compute/s: how many streams one process
keeps at a 1 s watermark.frequency. PostgreSQL runs in a fresh schema of the local server, dropped
afterwards. Timing never fails anything.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_retention import pg_schema_url

import tidekeep as tk


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(action: Callable[[], None]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def run_backend(label: str, metadata_url: str, storage: str, args: argparse.Namespace) -> list[tuple[str, float]]:
    client = tk.connect(home=Path(storage) / "ws", metadata_url=metadata_url, storage=storage,
                        settings={"writer.linger": 0}, create=True)
    names = [f"bench/s{i}" for i in range(args.streams)]
    writers = [f"w{j}" for j in range(args.writers)]
    log(f"{label}: building {args.streams} streams x {args.writers} writers")
    for name in names:
        client.create_stream(name, tk.StreamConfig(segments=2))
        for writer_id in writers:
            with client.stream(name).writer(writer_id) as writer:
                writer.write_many([b"x" * 100] * 4, [f"k{k}" for k in range(4)])
    time_ms = [0]

    def notes() -> None:
        time_ms[0] += 1000
        for name in names:
            for writer_id in writers:
                client.stream(name).watermarks.note(writer_id, time_ms[0])

    def computes() -> None:
        for name in names:
            assert client.stream(name).watermarks.compute() is not None

    def states() -> None:
        for name in names:
            client.stream(name).state()

    best: dict[str, float] = {}
    for round_number in range(args.rounds):
        results = {"stream_state": timed(states), "note": timed(notes), "compute": timed(computes)}
        if round_number >= args.rounds - args.repeat:
            for key, seconds in results.items():
                best[key] = min(best.get(key, float("inf")), seconds)
        log(f"  round {round_number + 1}/{args.rounds}: " + ", ".join(f"{k} {v:.2f}s" for k, v in results.items()))
    readers = []
    for name in names:
        group = client.create_reader_group(f"g-{name.replace('/', '-')}", tk.ReaderGroupConfig(streams=[name]))
        readers.append((group.reader("r"), name))
    best["window_first"] = timed(lambda: [reader.time_window(name) for reader, name in readers])
    best["window_next"] = timed(lambda: [reader.time_window(name) for reader, name in readers])
    for reader, _ in readers:
        reader.close()
    client.close()
    per_op = {"stream_state": args.streams, "note": args.streams * args.writers, "compute": args.streams,
              "window_first": args.streams, "window_next": args.streams}
    base = best["stream_state"] / args.streams
    rows = []
    for key in ("stream_state", "note", "compute", "window_first", "window_next"):
        each = best[key] / per_op[key]
        rows.append((key, 1 / each, each * 1000, each / base))
    print(f"\n{label} ({args.streams} streams, {args.writers} writers each, {args.rounds} watermarks per stream)")
    print(f"{'operation':<16}{'ops/s':>10}{'ms/op':>10}{'x stream_state':>16}")
    for key, rate, ms, ratio in rows:
        print(f"{key:<16}{rate:>10,.0f}{ms:>10.2f}{ratio:>16.2f}")
    return [(key, ratio) for key, _, _, ratio in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=20, help="watermarks per stream (the last --repeat are timed)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    if args.repeat > args.rounds:
        parser.error("--repeat must not exceed --rounds")
    log(f"load average: {os.getloadavg()}")
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            run_backend("SQLite", f"sqlite:///{tmp}/metadata.db", tmp, args)
    if args.backend in ("postgres", "both"):
        with tempfile.TemporaryDirectory() as tmp, pg_schema_url() as url:
            run_backend("PostgreSQL", url, tmp, args)
    log(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
