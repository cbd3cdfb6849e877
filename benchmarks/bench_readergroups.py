"""Reader-group read throughput and checkpoint completion latency, against client.read in the same run.

    .venv/bin/python benchmarks/bench_readergroups.py [--events N] [--repeat R] [--metadata-url URL]
                                                      [--json FILE]

A 4-segment stream of N 100-byte events (300 routing keys) on SQLite (or the given metadata URL):

  client.read           one pass over the whole stream with client.stream(name).read() (the baseline)
  group, 1 reader       one reader in this process reads the stream through a fresh reader group
                        (joined before the clock starts), until it has returned all N events
  1 / 2 reader procs    1 or 2 reader processes, started and warmed up beforehand (each reads one event
                        through another group: imports and first queries are not timed), join a fresh
                        group (as the 1 reader above, before the clock starts) and are told to go at
                        once; time from "go" to the last event returned by any of them
  2 procs, join at go   the same, but each joins when told to go: the first to sync takes every
                        segment and hands half on when it sees the second (its watch, every 20 ms)
  checkpoint            with 2 reader processes reading a fresh group, initiate_checkpoint().wait();
                        median and max over the repetitions

While the readers are timed this process only waits on a queue (no polling that takes a core).
Goals (issue 22): 1 reader >= 0.7x client.read; 2 reader processes >= 1.3x 1 reader process.
Figures are wall clock, best of R (latency: median). Timing never fails anything.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import tidekeep as tk

STREAM = "bench/rg"
KEYS = 300
GOAL_ONE = 0.7  # 1 reader / client.read
GOAL_TWO = 1.3  # 2 reader processes / 1 reader process


def connect(home: Path, url: str) -> tk.Client:
    client = tk.connect(home=home / "ws", metadata_url=url, storage=str(home / "data"), settings={"writer.linger": 0},
        create=True)
    client.workspace.db.ensure_schema()
    return client


def fill(client: tk.Client, events: int) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=4))
    rng = random.Random(7)
    writer = client.stream(STREAM).writer("bench", batch_size="1MiB")
    for start in range(0, events, 10_000):
        n = min(10_000, events - start)
        keys = [f"key-{rng.randrange(KEYS)}" for _ in range(n)]
        writer.write_many([(f"{k}:" + "x" * 100)[:100].encode() for k in keys], keys)
    writer.close()


def read_count(reader: Any, expected: int) -> int:
    """Read until `expected` events were returned (as client.read's pass, no clock per event)."""
    count = 0
    while count < expected:
        if reader.read_next_event(1000).is_event:
            count += 1
    return count


def worker(home: str, url: str, group: str, reader_id: str, join_first: bool, go: Any, stop: Any, out: Any) -> None:
    """Join `group` (before or when told to go), read from "go" on, and report (count, time of the
    last event) whenever a read comes back empty after new events; leave when told to stop."""
    with connect(Path(home), url) as client:
        warm = client.reader_group(f"{group}-warm").reader(reader_id)
        while not warm.read_next_event(1000).is_event:  # imports and first queries: not what is timed
            pass
        warm.close()
        rg = client.reader_group(group)
        reader = rg.reader(reader_id) if join_first else None
        out.put(("ready", reader_id, 0, 0.0))
        go.wait()
        if reader is None:
            reader = rg.reader(reader_id)
        now = time.monotonic
        count, last, reported = 0, 0.0, -1
        while True:
            event = reader.read_next_event(50)
            if event.is_event:
                count += 1
                last = now()
            elif event.is_empty:
                if count != reported:
                    out.put(("progress", reader_id, count, last))
                    reported = count
                if stop.is_set():
                    break
        reader.close()
        out.put(("done", reader_id, count, last))


def run_procs(home: Path, url: str, client: tk.Client, group: str, events: int, readers: int,
              checkpoints: int = 0, join_first: bool = True) -> tuple[float, list[float]]:
    """`readers` processes read a fresh group: seconds from "go" to the last event, checkpoint latencies."""
    client.create_reader_group(group, tk.ReaderGroupConfig(streams=[STREAM]))
    client.create_reader_group(f"{group}-warm", tk.ReaderGroupConfig(streams=[STREAM]))
    queue: Any = mp.Queue()
    go, stop = mp.Event(), mp.Event()
    procs = [mp.Process(target=worker, args=(str(home), url, group, f"r{i}", join_first, go, stop, queue))
             for i in range(readers)]
    for p in procs:
        p.start()
    for _ in procs:
        assert queue.get(timeout=120)[0] == "ready"
    start = time.monotonic()
    go.set()
    latencies = []
    for i in range(checkpoints):
        t0 = time.monotonic()
        client.reader_group(group).initiate_checkpoint(f"c{i}").wait(60)
        latencies.append(time.monotonic() - t0)
    progress: dict[str, tuple[int, float]] = {}
    while sum(n for n, _ in progress.values()) < events:
        _, reader_id, count, last = queue.get(timeout=120)
        progress[reader_id] = (count, last)
    stop.set()
    done = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    print(f"  {group}: " + ", ".join(f"{r[1]} read {r[2]} events, last at +{r[3] - start:.2f}s" for r in done),
          file=sys.stderr)
    total = sum(r[2] for r in done)
    assert total == events, f"{readers} readers read {total} of {events} events"
    return max(r[3] for r in done if r[2]) - start, latencies


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--metadata-url", default=None)
    parser.add_argument("--json", type=Path, help="also write the results as JSON to this file")
    args = parser.parse_args()
    mp.set_start_method("spawn")
    times: dict[str, list[float]] = {"client.read": [], "group, 1 reader": [], "group, 1 reader process": [],
                                     "group, 2 reader processes": [], "2 processes, join at go": []}
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        url = args.metadata_url or f"sqlite:///{home / 'metadata.db'}"
        client = connect(home, url)
        print(f"filling {args.events} events ...", file=sys.stderr)
        fill(client, args.events)
        for r in range(args.repeat):
            t0 = time.monotonic()
            n = sum(1 for _ in client.stream(STREAM).read())
            times["client.read"].append(time.monotonic() - t0)
            assert n == args.events
            reader = client.create_reader_group(f"one{r}", tk.ReaderGroupConfig(streams=[STREAM])).reader("solo")
            t0 = time.monotonic()
            read_count(reader, args.events)
            times["group, 1 reader"].append(time.monotonic() - t0)
            reader.close()
            times["group, 1 reader process"].append(run_procs(home, url, client, f"p1-{r}", args.events, 1)[0])
            times["group, 2 reader processes"].append(run_procs(home, url, client, f"p2-{r}", args.events, 2)[0])
            times["2 processes, join at go"].append(
                run_procs(home, url, client, f"j2-{r}", args.events, 2, join_first=False)[0])
            _, lat = run_procs(home, url, client, f"cp{r}", args.events, 2, checkpoints=5)
            latencies.extend(lat)
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items())
                  + f", checkpoints {[round(x * 1000) for x in lat]} ms", file=sys.stderr)
        client.close()
    best = {k: min(v) for k, v in times.items()}
    base = best["client.read"]
    one = base / best["group, 1 reader"]
    two = best["group, 1 reader process"] / best["group, 2 reader processes"]
    load = os.getloadavg()[0]
    store = "SQLite" if args.metadata_url is None else "given URL"
    print(f"events: {args.events} x 100 B, 4 segments, metadata {store}, best of {args.repeat}, "
          f"load average {load:.2f}")
    print(f"{'operation':<28}{'seconds':>10}{'events/s':>12}{'ratio':>8}")
    for label, secs in best.items():
        print(f"{label:<28}{secs:>10.2f}{args.events / secs:>12,.0f}{base / secs:>8.2f}")
    print(f"1 reader / client.read: {one:.2f}x (goal >= {GOAL_ONE}x)")
    print(f"2 reader processes / 1 reader process: {two:.2f}x (goal >= {GOAL_TWO}x)")
    print(f"checkpoint completion with 2 readers: median {statistics.median(latencies) * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms over {len(latencies)}")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "events": args.events, "repeat": args.repeat, "metadata": store, "load_average": load,
            "seconds": best, "events_per_s": {k: args.events / v for k, v in best.items()},
            "one_reader_vs_client_read": one, "two_procs_vs_one_proc": two,
            "goals": {"one_reader_vs_client_read": GOAL_ONE, "two_procs_vs_one_proc": GOAL_TWO},
            "checkpoint_ms": {"median": statistics.median(latencies) * 1000, "max": max(latencies) * 1000,
                              "count": len(latencies)},
        }, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
