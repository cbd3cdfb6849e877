"""First-command latency of a Spark-backed CLI command: a JVM started by the command (local mode)
against a running Spark Connect server (`spark.remote`), measured in the same run.

    .venv/bin/python benchmarks/bench_connect.py [--runs N] [--records N] [--json FILE]

The workspace (SQLite metadata, local storage) holds three retention rules and --records catalog
records; the command is `tidekeep catalog impact --json`, one Spark job over every record. Every
run is a fresh `tidekeep` process, so every local run pays what a user's first command pays: the
JVM's start-up. The Connect server (local[2], from the pyspark install, as the tests start it) is
started once; its start-up, and the first command on the new server, are reported on their own
rows. Connect is measured twice: every command in a new server session (the server starts Python
workers for each session), and every command reattaching to one session (`session_id` in the URL,
whose workers stay). Then the three modes take turns N times (default 5), so load from other
processes falls on all alike.

Reported: the median, fastest and slowest wall-clock seconds, and the ratio of the medians. Timing
never fails anything; both modes' outputs must be equal (the same records are judged). The table
goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from helpers.connect_server import start_connect_server

DAY = 86_400_000


def seed(home: Path, records: int) -> None:
    import tidekeep as tk
    from tidekeep.catalog.ages import Age
    from tidekeep.catalog.expressions import parse
    from tidekeep.catalog.rules import RetentionRule

    client = tk.connect(home=home, create=True)
    try:
        client.catalog.set_rules([RetentionRule(1, "keep", True, parse('feed = "SPECIAL"'), None),
                                  RetentionRule(2, "logs", True, parse('feed = "LOGS"'), Age(30, "days")),
                                  RetentionRule(3, "rest", True, parse("all"), Age(1, "years"))])
        now = client.clock.now_ms()
        feeds = ("SPECIAL", "LOGS", "OTHER")
        batch = [{"feed": feeds[i % 3], "type": "Events", "create_time": now - (i % 900) * DAY, "file_size": i}
                 for i in range(records)]
        client.catalog.add(batch)
    finally:
        client.close()


def timed(home: Path, env: dict[str, str]) -> tuple[float, Any]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    environment.pop("SPARK_REMOTE", None)
    environment.update({"TIDEKEEP_HOME": str(home), **env})
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "tidekeep.cli", "catalog", "impact", "--json"], env=environment,
                          capture_output=True, text=True, check=False, timeout=600)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"catalog impact failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout)
    return elapsed, {k: result[k] for k in ("total_rows", "total_bytes", "rows")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-connect-") as tmp:
        home = Path(tmp) / "ws"
        seed(home, args.records)
        began = time.perf_counter()
        server = start_connect_server(Path(tmp) / "server.log")
        server_start = time.perf_counter() - began
        print(f"connect server up in {server_start:.1f} s at {server.url}", file=sys.stderr)
        try:
            shared = f"{server.url}/;session_id={uuid.uuid4()}"
            modes = {"local[2]": {"TIDEKEEP_SPARK_MASTER": "local[2]"},
                     "connect": {"TIDEKEEP_SPARK_REMOTE": server.url},
                     "connect, one session_id": {"TIDEKEEP_SPARK_REMOTE": shared}}
            first_connect, expected = timed(home, modes["connect"])
            timed(home, modes["connect, one session_id"])  # opens the shared session: not a turn
            times: dict[str, list[float]] = {mode: [] for mode in modes}
            for turn in range(args.runs):
                for mode, env in modes.items():
                    elapsed, result = timed(home, env)
                    if result != expected:
                        raise SystemExit(f"{mode} gave {result}, expected {expected}")
                    times[mode].append(elapsed)
                    print(f"turn {turn + 1}/{args.runs} {mode}: {elapsed:.2f} s", file=sys.stderr)
        finally:
            server.stop()
    local, connect = statistics.median(times["local[2]"]), statistics.median(times["connect"])
    shared_median = statistics.median(times["connect, one session_id"])
    print(f"catalog impact over {args.records:,} records, {args.runs} runs each (wall-clock seconds)")
    print(f"{'mode':<34} {'median':>7} {'fastest':>8} {'slowest':>8}")
    for mode, values in times.items():
        print(f"{mode:<34} {statistics.median(values):7.2f} {min(values):8.2f} {max(values):8.2f}")
    print(f"{'connect, first on a new server':<34} {first_connect:7.2f}")
    print(f"{'connect server start-up (once)':<34} {server_start:7.2f}")
    print(f"local / connect (medians): {local / connect:.1f}x; local / connect with one session_id: "
          f"{local / shared_median:.1f}x")
    if args.json is not None:
        args.json.write_text(json.dumps({"records": args.records, "runs": args.runs, "times": times,
                                         "first_connect_s": first_connect, "server_start_s": server_start,
                                         "ratio_local_to_connect": local / connect,
                                         "ratio_local_to_shared_session": local / shared_median}, indent=2))


if __name__ == "__main__":
    main()
