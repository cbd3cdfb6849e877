"""The per-unit costs docs/scaling.md extrapolates from, measured on PostgreSQL (a fresh schema of the
local server, dropped afterwards) with local storage.

    .venv/bin/python benchmarks/bench_scale.py [--streams N] [--chunks N] [--records N]

- streams: create N streams (2 segments each) and write one 100-byte event into each: seconds per
  stream, then metadata bytes per stream (tables and indexes of streams, segments, epochs, chunks,
  writers), `list_streams` over all of them;
- chunk files: one stream receiving N separate flushes (one chunk file each): seconds per flush,
  metadata bytes per chunk row, and the time to plan and read the whole stream, against a stream of
  the same events in a handful of chunks;
- catalog records: `client.catalog.generate(N)`: seconds per record and bytes per record (the table
  with its indexes), the figure a 10^9-record catalog is sized from.

Per-unit figures only; scaling.md says how far each is extrapolated. The load average is printed:
figures from a loaded machine are slower than the machine is. Timing never fails anything.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_retention import pg_schema_url  # benchmarks share the schema helper

import tidekeep as tk

STREAM_TABLES = ("streams", "segments", "epochs", "chunks", "writers")


def relation_bytes(engine: sa.Engine, tables: tuple[str, ...]) -> int:
    with engine.connect() as conn:
        return sum(int(conn.execute(sa.text("SELECT pg_total_relation_size(to_regclass(:t))"), {"t": t}).scalar()
                       or 0) for t in tables)


def row_count(engine: sa.Engine, table: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar() or 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--records", type=int, default=200_000)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-scale-") as tmp, pg_schema_url() as url:
        client = tk.connect(home=Path(tmp) / "ws", metadata_url=url, create=True)
        engine = sa.create_engine(url)
        try:
            empty = relation_bytes(engine, STREAM_TABLES)
            started = time.perf_counter()
            for n in range(args.streams):
                name = f"scale/s{n}"
                client.create_stream(name, tk.StreamConfig(segments=2))
                with client.stream(name).writer("w") as writer:
                    writer.write(b"x" * 100, "k")
            per_stream_s = (time.perf_counter() - started) / args.streams
            with engine.connect() as conn:
                conn.execute(sa.text("ANALYZE"))
            per_stream_bytes = (relation_bytes(engine, STREAM_TABLES) - empty) / args.streams
            started = time.perf_counter()
            listed = len(client.list_streams())
            list_s = time.perf_counter() - started
            rows += [("create + 1 write, per stream", f"{per_stream_s * 1000:.1f} ms"),
                     ("metadata per stream (2 segments, 1 chunk, 1 writer)", f"{per_stream_bytes / 1024:.1f} KiB"),
                     (f"list_streams over {listed} streams", f"{list_s:.2f} s")]
            print(f"streams done ({args.streams})", file=sys.stderr)

            chunks_before, bytes_before = row_count(engine, "chunks"), relation_bytes(engine, ("chunks",))
            client.create_stream("scale/many", tk.StreamConfig(segments=1))
            started = time.perf_counter()
            with client.stream("scale/many").writer("w") as writer:
                for _ in range(args.chunks):
                    writer.write(b"y" * 100, "k")
                    writer.flush()
            per_flush_s = (time.perf_counter() - started) / args.chunks
            with engine.connect() as conn:
                conn.execute(sa.text("ANALYZE"))
            added = row_count(engine, "chunks") - chunks_before
            per_chunk_bytes = (relation_bytes(engine, ("chunks",)) - bytes_before) / max(added, 1)
            client.create_stream("scale/few", tk.StreamConfig(segments=1))
            with client.stream("scale/few").writer("w") as writer:
                writer.write_many([b"y" * 100] * args.chunks, ["k"] * args.chunks)
            timings = {}
            for name in ("scale/many", "scale/few"):
                started = time.perf_counter()
                read = sum(batch.num_rows for batch in client.stream(name).read_batches())
                timings[name] = time.perf_counter() - started
                assert read == args.chunks
            rows += [("flush of one small chunk (commit + file)", f"{per_flush_s * 1000:.1f} ms"),
                     ("metadata per chunk row", f"{per_chunk_bytes:.0f} B"),
                     (f"read {args.chunks} events in {added} chunks", f"{timings['scale/many']:.2f} s"),
                     (f"read {args.chunks} events in 1 chunk", f"{timings['scale/few']:.3f} s")]
            print("chunks done", file=sys.stderr)

            started = time.perf_counter()
            client.catalog.generate(args.records, seed=1)
            per_record_s = (time.perf_counter() - started) / args.records
            with engine.connect() as conn:
                conn.execute(sa.text("ANALYZE"))
            per_record_bytes = relation_bytes(engine, ("catalog_records",)) / args.records
            rows += [("catalog generate, per record", f"{per_record_s * 1e6:.1f} µs"),
                     ("catalog record with its indexes", f"{per_record_bytes:.0f} B")]
        finally:
            client.close()
            engine.dispose()
    load_after = os.getloadavg()
    print("| measure (PostgreSQL, local storage) | figure |\n|---|---:|")
    for name, figure in rows:
        print(f"| {name} | {figure} |")
    print(f"\nload average (1, 5, 15 min): before {' '.join(f'{x:.2f}' for x in load_before)}, "
          f"after {' '.join(f'{x:.2f}' for x in load_after)}; cores: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
