"""The audit chain's costs, each against a baseline in the same run on the same store.

    .venv/bin/python benchmarks/bench_audit_chain.py [--rows N] [--appends M] [--metadata-url URL] [--json]

  append      M audited transactions of one row each through AuditLog.append (the chain: lock the
              head, hash, insert, move the head), against M transactions inserting the same row
              without the chain (the baseline: what an audit row cost before)
  verify      `audit verify` over N rows (default 100,000), against reading the same rows in the
              same pages without hashing (the baseline: the reading alone)

Reported: seconds and the ratio of each to its baseline. Timing never fails anything. SQLite in a
temporary directory unless --metadata-url names another store (an empty PostgreSQL schema: the
trail must hold only this run's rows).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store.audit import AuditEntry, chain_rows
from tidekeep.store.audit_verify import PAGE_ROWS, verify_trail
from tidekeep.store.schema import audit

BASELINE_IDS = 10_000_000  # the baseline's rows take ids from here, far past the chain's


def row(i: int) -> dict[str, object]:
    return {"time_ms": 1_700_000_000_000 + i, "action": "truncate", "target": f"bench/s{i % 50}",
            "old_head": '{"0": 0}', "new_head": f'{{"0": {i}}}', "bytes_freed": 4096 * i,
            "reason": "retention between-limits: the stream holds 20 GB, between min and max", "actor": "bench:1",
            "details": json.dumps({"chunks": i % 7, "case": None})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--appends", type=int, default=2_000)
    parser.add_argument("--metadata-url")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "ws"
        client = tk.connect(home=home, metadata_url=args.metadata_url, storage=str(Path(tmp) / "data"), create=True)
        db, log = client.workspace.db, client.workspace.audit
        figures: dict[str, float] = {}

        started = time.perf_counter()
        for i in range(args.appends):
            with db.write() as conn:
                conn.execute(sa.insert(audit).values(id=BASELINE_IDS + i, **row(i)))
        figures["append_baseline_s"] = time.perf_counter() - started
        with db.write() as conn:  # the baseline's rows only: they are outside the chain
            conn.execute(sa.delete(audit).where(audit.c.id >= BASELINE_IDS))
        started = time.perf_counter()
        for i in range(args.appends):
            with db.write() as conn:
                values = row(i)
                log.append(conn, AuditEntry(str(values["action"]), str(values["target"]), str(values["reason"]),
                                            int(str(values["bytes_freed"])), None, str(values["old_head"]),
                                            str(values["new_head"]), "bench:1", int(str(values["time_ms"]))))
        figures["append_s"] = time.perf_counter() - started
        print(f"appended {args.appends} rows", file=sys.stderr)

        for start in range(args.appends, args.rows, PAGE_ROWS):
            with db.write() as conn:
                chain_rows(conn, [row(i) for i in range(start, min(start + PAGE_ROWS, args.rows))])
        print(f"chained {args.rows} rows", file=sys.stderr)

        started = time.perf_counter()
        after, read = 0, 0
        while True:
            with db.read() as conn:
                page = conn.execute(sa.select(audit).where(audit.c.id > after).order_by(audit.c.id)
                                    .limit(PAGE_ROWS)).mappings().all()
            if not page:
                break
            read += len(page)
            after = int(page[-1]["id"])
        figures["read_s"] = time.perf_counter() - started
        started = time.perf_counter()
        verdict = verify_trail(db)
        figures["verify_s"] = time.perf_counter() - started
        assert verdict.ok and verdict.rows == read == args.rows, verdict
        client.close()
    figures["append_ratio"] = figures["append_s"] / figures["append_baseline_s"]
    figures["verify_ratio"] = figures["verify_s"] / figures["read_s"]
    if args.json:
        print(json.dumps({"rows": args.rows, "appends": args.appends, **figures}))
        return
    print(f"append  {args.appends} transactions: {figures['append_s']:.2f} s, without the chain "
          f"{figures['append_baseline_s']:.2f} s ({figures['append_ratio']:.2f}x)")
    print(f"verify  {args.rows} rows: {figures['verify_s']:.2f} s, reading alone {figures['read_s']:.2f} s "
          f"({figures['verify_ratio']:.2f}x)")


if __name__ == "__main__":
    main()
