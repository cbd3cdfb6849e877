"""Stream write and read on S3 (a moto server on loopback, reached by pyarrow's own S3 client over
HTTP, as the tests start it) against local storage, same payloads, in one run.

    .venv/bin/python benchmarks/bench_s3.py [--events N] [--size BYTES] [--repeat N] [--json FILE]

Three workspaces, all with SQLite metadata on local disk: `storage.uri` a local directory with
`storage.fsync` on (the default), the same with it off, and an `s3://` bucket on the loopback
server (a PUT is durable when it returns: there is nothing to fsync). On each, per repetition and
taking turns, each side leading in turn (so load from other processes falls on all alike):

  write 4MiB   writer.write_many(payloads, keys), the default writer.batch_size: few large chunks
  write 64KiB  the same with batch_size 64 KiB: many small chunks (one PUT each on S3)
  read events  client.stream(name).read() of the 4 MiB-batch stream
  read Arrow   client.stream(name).read_batches() of the same stream
  read small   read_batches() of the 64 KiB-batch stream (one GET per chunk file on S3)

The S3 server logs one line per HTTP request; the requests each operation made are counted by
method from that log, and S3's wall time per request given (an upper bound of one request's cost).
A probe times one 1 KiB PUT and one GET of it through the same pyarrow client (median). Reported:
best-of-N seconds per side, the ratios S3/local with and without fsync, the requests. Timing never
fails anything; every side must read back every payload. The load average is printed with the
table: the figures mean little on a loaded machine unless the load is recorded next to them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_streams import make_payloads  # benchmarks share the payload maker

import tidekeep as tk
from helpers.s3 import S3Server, environment, moto_server, new_bucket

SEGMENTS = 4
SMALL_BATCH = 64 * 1024
# werkzeug's request line, which it colours for some statuses (a 206 partial GET)
_REQUEST = re.compile(rb'"(?:\x1b\[[0-9;]*m)*(GET|PUT|POST|DELETE|HEAD) ')


@dataclass
class Figure:
    operation: str
    seconds: dict[str, float]  # best of the turns, by side: local, local-nofsync, s3
    requests: dict[str, int] = field(default_factory=dict)  # S3 requests of one run, by method

    @property
    def ratio(self) -> float:
        return self.seconds["s3"] / self.seconds["local"]

    @property
    def ratio_without_fsync(self) -> float:
        return self.seconds["s3"] / self.seconds["local-nofsync"]

    @property
    def ms_per_request(self) -> float:
        """S3's wall time per request: an upper bound of what one request costs (the rest is
        tidekeep's own work, which the local sides also pay)."""
        return self.seconds["s3"] * 1000 / max(sum(self.requests.values()), 1)


def requests_since(server: S3Server, offset: int) -> tuple[Counter[str], int]:
    """The requests the server logged after byte `offset` of its log, by method, and the new offset."""
    data = server.log.read_bytes()
    return Counter(m.group(1).decode() for m in _REQUEST.finditer(data, offset)), len(data)


def probe_latency(server: S3Server, bucket: str, runs: int) -> tuple[float, float]:
    """Median seconds of one 1 KiB PUT and of one GET of it, through pyarrow's S3 client."""
    import pyarrow.fs as pafs

    filesystem, path = pafs.FileSystem.from_uri(server.uri(bucket, "probe"))
    body = os.urandom(1024)
    puts, gets = [], []
    for n in range(runs):
        key = f"{path}/p-{n}"
        started = time.perf_counter()
        with filesystem.open_output_stream(key) as out:
            out.write(body)
        puts.append(time.perf_counter() - started)
        started = time.perf_counter()
        with filesystem.open_input_stream(key) as source:
            assert source.read() == body
        gets.append(time.perf_counter() - started)
    return statistics.median(puts), statistics.median(gets)


class Side:
    """One workspace and its streams."""

    def __init__(self, home: Path, storage: str, fsync: bool = True) -> None:
        self.client = tk.connect(home=home, storage=storage, settings={"storage.fsync": fsync}, create=True)
        self.runs = 0

    def new_stream(self) -> str:
        self.runs += 1
        name = f"bench/s{self.runs}"
        self.client.create_stream(name, tk.StreamConfig(segments=SEGMENTS))
        return name

    def write(self, stream: str, payloads: list[bytes], keys: list[str], batch_size: int | None) -> None:
        with self.client.stream(stream).writer("bench-writer", batch_size=batch_size) as writer:
            writer.write_many(payloads, keys)

    def read_events(self, stream: str, total: int) -> None:
        assert sum(len(event.payload) for event in self.client.stream(stream).read()) == total

    def read_arrow(self, stream: str, events: int) -> None:
        assert sum(batch.num_rows for batch in self.client.stream(stream).read_batches()) == events


def timed(run: Callable[[], object]) -> float:
    gc.collect()
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def measure(sides: dict[str, Side], server: S3Server, payloads: list[bytes], keys: list[str],
            repeat: int) -> list[Figure]:
    total = sum(map(len, payloads))
    best: dict[tuple[str, str], float] = {}
    requests: dict[str, Counter[str]] = {}
    offset = len(server.log.read_bytes())

    def record(operation: str, side_name: str, run: Callable[[], object]) -> None:
        nonlocal offset
        _, offset = requests_since(server, offset)
        seconds = timed(run)
        best[operation, side_name] = min(best.get((operation, side_name), float("inf")), seconds)
        counted, offset = requests_since(server, offset)
        if side_name == "s3":
            requests[operation] = counted

    for side in sides.values():  # warm-up, untimed: imports, first connections, the metadata store's caches
        warm = side.new_stream()
        side.write(warm, payloads[:1000], keys[:1000], None)
        side.read_arrow(warm, min(1000, len(payloads)))
    names = list(sides)
    for turn in range(repeat):
        for side_name in names[turn % len(names):] + names[:turn % len(names)]:  # each side leads in turn
            side = sides[side_name]
            large, small = side.new_stream(), side.new_stream()
            record("write 4MiB", side_name, partial(side.write, large, payloads, keys, None))
            record("write 64KiB", side_name, partial(side.write, small, payloads, keys, SMALL_BATCH))
            record("read events", side_name, partial(side.read_events, large, total))
            record("read Arrow", side_name, partial(side.read_arrow, large, len(payloads)))
            record("read small", side_name, partial(side.read_arrow, small, len(payloads)))
        print(f"  turn {turn + 1}/{repeat} done", file=sys.stderr)
    return [Figure(op, {name: best[op, name] for name in names}, dict(requests[op]))
            for op in ("write 4MiB", "write 64KiB", "read events", "read Arrow", "read small")]


def table(figures: list[Figure], events: int, total: int, put_s: float, get_s: float) -> str:
    lines = [f"{events} events, {total / 1e6:.1f} MB of payload; probe: PUT 1 KiB {put_s * 1000:.1f} ms, "
             f"GET {get_s * 1000:.1f} ms (median)",
             "| operation | local s | local, no fsync s | S3 s | S3/local | S3/no fsync | S3 requests | "
             "S3 ms per request |",
             "|---|---:|---:|---:|---:|---:|---|---:|"]
    for f in figures:
        asked = ", ".join(f"{n} {m}" for m, n in sorted(f.requests.items())) or "-"
        lines.append(f"| {f.operation} | {f.seconds['local']:.3f} | {f.seconds['local-nofsync']:.3f} | "
                     f"{f.seconds['s3']:.3f} | {f.ratio:.2f}x | {f.ratio_without_fsync:.2f}x | {asked} | "
                     f"{f.ms_per_request:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000, help="events per write (default 100000)")
    parser.add_argument("--size", type=int, default=200, help="payload bytes per event (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="turns per side, best kept (default 3)")
    parser.add_argument("--probes", type=int, default=50, help="PUT/GET probes for the latency (default 50)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    payloads, keys = make_payloads(args.events, args.size, seed=args.size)
    total = sum(map(len, payloads))
    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-s3-") as tmp:
        root = Path(tmp)
        with moto_server(root / "moto.log") as server:
            os.environ.update(environment(server))
            bucket = new_bucket(server)
            put_s, get_s = probe_latency(server, bucket, args.probes)
            sides = {"local": Side(root / "local", str(root / "local-data")),
                     "local-nofsync": Side(root / "local-nofsync", str(root / "local-nofsync-data"), fsync=False),
                     "s3": Side(root / "s3", server.uri(bucket, "tidekeep"))}
            print(f"{args.events} events of {args.size} bytes, {args.repeat} turns", file=sys.stderr)
            figures = measure(sides, server, payloads, keys, args.repeat)
            for side in sides.values():
                side.client.close()
    load_after = os.getloadavg()
    print(table(figures, args.events, total, put_s, get_s))
    print(f"\nload average (1, 5, 15 min): before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)}; cores: {os.cpu_count()}")
    if args.json:
        document: dict[str, Any] = {"events": args.events, "size": args.size, "repeat": args.repeat,
                                    "put_s": put_s, "get_s": get_s, "load_before": load_before,
                                    "load_after": load_after,
                                    "figures": [{**asdict(f), "ratio": f.ratio,
                                                 "ratio_without_fsync": f.ratio_without_fsync,
                                                 "ms_per_request": f.ms_per_request} for f in figures]}
        args.json.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
