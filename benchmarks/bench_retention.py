"""Retention cycle cost over many streams, against a bare metadata read of the same streams in the same run.

    .venv/bin/python benchmarks/bench_retention.py [--streams N] [--records R] [--backend sqlite|postgres|both]

N streams (default 1000), each with one segment, a size policy and a retention set of R records
(default 50). The sets are built through the retention store's own API: a ManualClock is advanced
just past retention.frequency and `client.stream(name).retention.run()` records the tail (a small event is written
to every stream before every 10th round, so the records have several distinct sizes). The policy's
minimum (1 GiB) is above any stream's size, so the measured cycles decide over the whole set and
truncate nothing: the set stays at R records and every repetition measures the same work.

  stream_state    client.stream(name).state() for every stream (the baseline: a bare metadata read)
  cycle, not due  client.stream(name).retention.run() with the clock inside the frequency: load the set,
                  decide (pure), no record written
  cycle, due      client.stream(name).retention.run() with the clock past the frequency: also records the
                  tail (one insert) — the set grows by one record per repetition

Figures are streams per second, best of --repeat passes over all streams; ratios are cycle time
per stream / stream_state time per stream. PostgreSQL runs in a fresh schema of the local server
(TIDEKEEP_TEST_PG_URL or the test suite's default URL), dropped afterwards. Timing never fails anything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk

DEFAULT_PG_URL = "postgresql+psycopg://tidekeep:tidekeep@127.0.0.1:5432/tidekeep_test"
FREQUENCY_MS = 30 * 60_000  # the default retention.frequency


@contextlib.contextmanager
def pg_schema_url() -> Iterator[str]:
    base = os.environ.get("TIDEKEEP_TEST_PG_URL", DEFAULT_PG_URL)
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(base)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield sa.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def build(client: tk.Client, clock: tk.ManualClock, names: list[str], records: int) -> None:
    policy = tk.RetentionPolicy.by_size("1GiB")
    for name in names:
        client.create_stream(name, tk.StreamConfig(segments=1, retention=policy))
    started = time.perf_counter()
    for round_number in range(records):
        if round_number % 10 == 0:
            for name in names:
                with client.stream(name).writer("bench") as writer:
                    writer.write(b"x" * 100)
        clock.advance(FREQUENCY_MS + 1)
        for name in names:
            client.stream(name).retention.run()
        if round_number % 10 == 9:
            log(f"  built {round_number + 1}/{records} records per stream ({time.perf_counter() - started:.0f} s)")
    sizes = {len(client.stream(name).retention.records()) for name in names}
    assert sizes == {records}, sizes


def best_pass(names: list[str], repeat: int, operation: Callable[[str], object],
              before: Callable[[], None] = lambda: None) -> float:
    best = float("inf")
    for _ in range(repeat):
        before()
        started = time.perf_counter()
        for name in names:
            operation(name)
        best = min(best, time.perf_counter() - started)
    return best


def measure(backend: str, url: str, home: Path, streams: int, records: int, repeat: int) -> dict[str, float]:
    clock = tk.ManualClock()
    client = tk.connect(home=home / "ws", metadata_url=url, storage=str(home / "data"), clock=clock,
                        settings={"writer.linger": 0}, create=True)
    try:
        client.workspace.db.ensure_schema()
        names = [f"bench/s{i:05d}" for i in range(streams)]
        log(f"{backend}: building {streams} streams x {records} records")
        build(client, clock, names, records)
        read_s = best_pass(names, repeat, lambda name: client.stream(name).state())
        def cycle(name: str) -> object:
            return client.stream(name).retention.run()

        not_due_s = best_pass(names, repeat, cycle)  # the clock stays inside the frequency
        due_s = best_pass(names, repeat, cycle, lambda: clock.advance(FREQUENCY_MS + 1))
        decision = client.stream(names[0]).retention.run()
        assert decision.cut is None and len(decision.records) >= records, decision.to_dict()
        return {"read": read_s, "not_due": not_due_s, "due": due_s}
    finally:
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--records", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    log(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    results: dict[str, dict[str, float]] = {}
    for backend in (["sqlite", "postgres"] if args.backend == "both" else [args.backend]):
        with tempfile.TemporaryDirectory(prefix="tk-bench-retention-") as tmp:
            if backend == "sqlite":
                results[backend] = measure(backend, f"sqlite:///{tmp}/metadata.db", Path(tmp), args.streams,
                                           args.records, args.repeat)
            else:
                with pg_schema_url() as url:
                    results[backend] = measure(backend, url, Path(tmp), args.streams, args.records, args.repeat)
    n = args.streams
    print(f"retention cycle over {n} streams with {args.records}-record sets, best of {args.repeat}")
    print(f"{'backend':<10} {'operation':<16} {'streams/s':>10} {'ms/stream':>10} {'x stream_state':>15}")
    for backend, r in results.items():
        for key, label in (("read", "stream_state"), ("not_due", "cycle, not due"), ("due", "cycle, due")):
            print(f"{backend:<10} {label:<16} {n / r[key]:>10.0f} {1000 * r[key] / n:>10.3f} "
                  f"{r[key] / r['read']:>15.2f}")


if __name__ == "__main__":
    main()
