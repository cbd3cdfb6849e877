"""Reader-group read throughput and checkpoint completion latency, against client.read in the same run.

    .venv/bin/python benchmarks/bench_readergroups.py [--events N] [--repeat R] [--metadata-url URL]

A 4-segment stream of N 100-byte events (300 routing keys) on SQLite (or the given metadata URL):

  client.read        one pass over the whole stream with client.stream(name).read() (the baseline)
  group, 1 reader    one reader (this process) reads the stream through a fresh reader group
  group, 2 readers   two reader processes share a fresh group; time to the last event returned
  checkpoint         with 2 reader processes reading a fresh group, initiate_checkpoint().wait();
                     median and max over the repetitions

Ratios are reader-group / client.read throughput. Figures are wall clock, best of R (latency:
median). Timing never fails anything.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import tidekeep as tk

STREAM = "bench/rg"
KEYS = 300


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


def read_all(reader: object, expected: int | None = None) -> tuple[int, float]:
    """Read until two empty results in a row; returns (events, monotonic time of the last one)."""
    count, last, empties = 0, time.monotonic(), 0
    while empties < 2:
        event = reader.read_next_event(100)  # type: ignore[attr-defined]
        if event.is_event:
            count, last, empties = count + 1, time.monotonic(), 0
        elif event.is_empty:
            empties += 1
    return count, last


def worker(home: str, url: str, group: str, reader_id: str, stop: str, out: mp.Queue) -> None:  # type: ignore[type-arg]
    with connect(Path(home), url) as client:
        reader = client.reader_group(group).reader(reader_id)
        out.put(("joined", reader_id, 0, 0.0))
        count, last = 0, time.monotonic()
        while not os.path.exists(stop):
            event = reader.read_next_event(50)
            if event.is_event:
                count, last = count + 1, time.monotonic()
        reader.close()
        out.put(("done", reader_id, count, last))


def run_two(home: Path, url: str, client: tk.Client, group: str, events: int,
            checkpoints: int = 0) -> tuple[float, list[float]]:
    client.create_reader_group(group, tk.ReaderGroupConfig(streams=[STREAM]))
    stop = home / f"stop-{group}"
    queue: mp.Queue = mp.Queue()  # type: ignore[type-arg]
    procs = [mp.Process(target=worker, args=(str(home), url, group, f"r{i}", str(stop), queue)) for i in range(2)]
    for p in procs:
        p.start()
    for _ in procs:
        queue.get(timeout=120)
    start = time.monotonic()
    latencies = []
    for i in range(checkpoints):
        t0 = time.monotonic()
        client.reader_group(group).initiate_checkpoint(f"c{i}").wait(60)
        latencies.append(time.monotonic() - t0)
    rg = client.reader_group(group)
    while any(s["unread_bytes"] for s in rg.describe()["streams"].values()):
        time.sleep(0.25)  # poll gently: this process must not take a core from the readers being timed
    stop.touch()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join()
    print(f"  {group}: " + ", ".join(f"{r[1]} read {r[2]} events, last at +{r[3] - start:.2f}s" for r in results),
          file=sys.stderr)
    total = sum(r[2] for r in results)
    assert total == events, f"two readers read {total} of {events} events"
    return max(r[3] for r in results) - start, latencies


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--metadata-url", default=None)
    args = parser.parse_args()
    mp.set_start_method("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        url = args.metadata_url or f"sqlite:///{home / 'metadata.db'}"
        client = connect(home, url)
        print(f"filling {args.events} events ...", file=sys.stderr)
        fill(client, args.events)
        base, one, two, latencies = [], [], [], []
        for r in range(args.repeat):
            t0 = time.monotonic()
            n = sum(1 for _ in client.stream(STREAM).read())
            base.append(time.monotonic() - t0)
            assert n == args.events
            group = client.create_reader_group(f"one{r}", tk.ReaderGroupConfig(streams=[STREAM]))
            reader = group.reader("solo")
            t0 = time.monotonic()
            n, last = read_all(reader)
            one.append(last - t0)
            reader.close()
            assert n == args.events, n
            elapsed, _ = run_two(home, url, client, f"two{r}", args.events)
            two.append(elapsed)
            _, lat = run_two(home, url, client, f"cp{r}", args.events, checkpoints=5)
            latencies.extend(lat)
            print(f"round {r + 1}: read {base[-1]:.2f}s, 1 reader {one[-1]:.2f}s, 2 readers {two[-1]:.2f}s, "
                  f"checkpoints {[round(x * 1000) for x in lat]} ms", file=sys.stderr)
        client.close()
    b = min(base)
    store = "SQLite" if args.metadata_url is None else "given URL"
    print(f"events: {args.events} x 100 B, 4 segments, metadata {store}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'operation':<22}{'seconds':>10}{'events/s':>12}{'ratio':>8}")
    for label, secs in (("client.read", b), ("group, 1 reader", min(one)), ("group, 2 readers", min(two))):
        print(f"{label:<22}{secs:>10.2f}{args.events / secs:>12,.0f}{b / secs:>8.2f}")
    print(f"checkpoint completion with 2 readers: median {statistics.median(latencies) * 1000:.0f} ms, "
          f"max {max(latencies) * 1000:.0f} ms over {len(latencies)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
