"""The catalog retention job against Stroom's approach, on identical data in the same run: time and database CPU.

    .venv/bin/python benchmarks/bench_catalog.py [--rows N] [--backend sqlite|postgres|both] [--spark-master M]
        [--slice-rows R] [--parallelism P] [--json]

N generated meta records (default 10,000,000; `tidekeep catalog generate`'s generator, seed 1, ten
years of create times) are generated into workspace J (the job) and copied row for row into
workspace B (baseline) inside the database; the same 8 rules are saved in both. Then, with one fixed `now`:

  job full         `client.catalog.run(now)`: the job (first run, no trackers)
  baseline full    Stroom's approach: for each processing period, ONE
                   `UPDATE catalog_records SET status='DELETED', status_time=:now WHERE status='UNLOCKED'
                    AND create_time in period AND (CASE WHEN <rule 1> THEN .. WHEN <rule 2> .. END) = true`
                   executed in the database (the same SQLAlchemy compiler as the job, bound parameters)
  job +1 day       the job again one simulated day later (trackers: each period shrinks to a day)
  baseline +1 day  the baseline's statements over the same shortened periods

Both sides must end with the same DELETED ids (count and id sum, after the full runs and after +1 day;
a disagreement stops the benchmark). Every step is timed (wall clock) and its database CPU measured
(benchmarks/proc_cpu.py, before/after snapshots):

  PostgreSQL  the whole local server: every live process of the postmaster's tree (utime + stime)
              plus the CPU of its exited children (backends closed during the step); the server's
              background work (autovacuum, checkpointer, WAL writer) and any other client's load are
              included on both sides — the server's idle CPU rate is sampled before the steps.
  SQLite      the database runs in the process executing the statements. Baseline: CPU of this
              process. Job: CPU of this process (the driver) + the local Spark JVM's Python workers
              (alive or exited) — an upper bound of the database's share: it includes Python glue.

Goals (docs/benchmarks.md): baseline full / job full >= 1.3 on PostgreSQL and >= 1.0 on SQLite;
job +1 day / job full <= 0.02 (1/50); job database CPU / baseline database CPU <= 1.0 (full runs).
The Spark session is started before timing. Timing never fails anything. `--slice-rows` and
`--parallelism` set the job's `catalog.slice_rows` / `catalog.parallelism` (only when given).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from bench_retention import pg_schema_url
from proc_cpu import CpuMeter, postmaster_of, spark_python_cpu_seconds, tree_cpu_seconds

import tidekeep as tk
from tidekeep.catalog.ages import Age, TimeUnit
from tidekeep.catalog.expressions import CompileContext, parse, to_sqlalchemy
from tidekeep.catalog.periods import Period, process_periods
from tidekeep.catalog.rules import RetentionRule, active_rules
from tidekeep.store.schema_catalog import catalog_records

DAY = 86_400_000
NOW = 1_767_225_600_000  # 2026-01-01T00:00Z
IDLE_SAMPLE_S = 3.0

GOAL_SPEEDUP = {"postgres": 1.3, "sqlite": 1.0}  # baseline full / job full, at least
GOAL_INC_OVER_FULL = 1 / 50  # job +1 day / job full, at most
GOAL_CPU_RATIO = 1.0  # job database CPU / baseline database CPU (full runs), at most

RULES = [
    RetentionRule(1, "Security audit: 7 years", True, parse('feed = "SECURITY_AUDIT"'), Age(7, TimeUnit.YEARS)),
    RetentionRule(2, "Special data: forever", True, parse('feed = "SPECIAL_DATA"'), None),
    RetentionRule(3, "Internal errors: 1 week", True, parse('feed = "INTERNAL_LOGS" and type = "Error"'),
                  Age(1, TimeUnit.WEEKS)),
    RetentionRule(4, "Internal logs: 3 months", True, parse('feed = "INTERNAL_LOGS"'), Age(3, TimeUnit.MONTHS)),
    RetentionRule(5, "Reference data: 5 years", True, parse('type = "Reference"'), Age(5, TimeUnit.YEARS)),
    RetentionRule(6, "Big raw files: 6 months", True, parse('type = "Raw Events" and file_size > 200KB'),
                  Age(6, TimeUnit.MONTHS)),
    RetentionRule(7, "App events: 1 year", True, parse('feed = "APP_*_EVENTS" and type in ("Events", "Error")'),
                  Age(1, TimeUnit.YEARS)),
    RetentionRule(8, "Everything else: 2 years", True, parse("all"), Age(2, TimeUnit.YEARS)),
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def baseline(client: tk.Client, periods: list[Period], now_ms: int) -> int:
    """Stroom's statements: one UPDATE per period, in the database; returns the rows deleted."""
    t = catalog_records
    ctx = CompileContext(now_ms, {})
    rules = active_rules(RULES)
    total = 0
    for period in periods:
        deleting = {a.rule_number for a in period.actions if a.delete}
        if not deleting:
            continue
        case = sa.case(*((to_sqlalchemy(r.expression, ctx, t), r.rule_number in deleting) for r in rules),
                       else_=False)
        with client.workspace.db.write() as conn:
            total += conn.execute(sa.update(t).where(
                t.c.status == "UNLOCKED", t.c.create_time >= period.from_ms, t.c.create_time < period.to_ms,
                case == sa.true()).values(status="DELETED", status_time=now_ms)).rowcount
    return total


def copy_records(name: str, source: tk.Client, target: tk.Client) -> None:
    """The same rows in the baseline's store, copied by the database itself."""
    target.workspace.db.ensure_schema()
    if name == "sqlite":
        import sqlite3

        raw = sqlite3.connect(str(target.workspace.db.url.database), isolation_level=None)
        try:
            raw.execute("ATTACH DATABASE ? AS src", (source.workspace.db.url.database,))
            raw.execute("BEGIN")
            raw.execute("INSERT INTO main.catalog_records SELECT * FROM src.catalog_records")
            raw.execute("COMMIT")
            raw.execute("DETACH DATABASE src")
        finally:
            raw.close()
        return
    schema_of = {}
    for side, client in (("source", source), ("target", target)):
        with client.workspace.db.engine.connect() as conn:
            schema_of[side] = conn.execute(sa.text("SELECT current_schema()")).scalar()
    with target.workspace.db.engine.begin() as conn:
        conn.execute(sa.text(f'INSERT INTO "{schema_of["target"]}".catalog_records '
                             f'SELECT * FROM "{schema_of["source"]}".catalog_records'))


def deleted_fingerprint(client: tk.Client) -> tuple[int, int]:
    t = catalog_records
    with client.workspace.db.read() as conn:
        row = conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(t.c.id), 0))
                           .where(t.c.status == "DELETED")).one()
    return int(row[0]), int(row[1])


def check_same_deleted(job_side: tk.Client, base_side: tk.Client, when: str) -> None:
    job, base = deleted_fingerprint(job_side), deleted_fingerprint(base_side)
    if job != base:
        raise SystemExit(f"the two sides disagree {when}: job DELETED (count, id sum) {job}, baseline {base}")


def process_cpu() -> float:
    return time.process_time()


def driver_and_workers_cpu() -> float | None:
    """This process (the Spark driver) + the local Spark JVM's Python workers; None without a local JVM."""
    workers = spark_python_cpu_seconds(os.getpid())
    return None if workers is None else time.process_time() + workers


def postgres_server_cpu_reader(client: tk.Client) -> tuple[Callable[[], float | None] | None, str]:
    """A reader of the local PostgreSQL server's CPU seconds, or None and why it is unavailable."""
    with client.workspace.db.engine.connect() as conn:
        backend = int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())
        postmaster = postmaster_of(backend)
    if postmaster is None:
        return None, f"backend pid {backend} not visible in /proc here (remote server or another PID namespace)"
    if tree_cpu_seconds(postmaster) is None:
        return None, f"postmaster pid {postmaster} not readable"
    return (lambda: tree_cpu_seconds(postmaster)), f"postmaster pid {postmaster}"


class Step:
    """Wall clock and CPU meters around one timed step."""

    def __init__(self, db: Callable[[], float | None] | None, client: Callable[[], float | None]) -> None:
        self.db = CpuMeter(db) if db is not None else None
        self.client = CpuMeter(client)
        self.wall_s = 0.0
        self.db_cpu_s: float | None = None
        self.client_cpu_s: float | None = None

    @contextmanager
    def measure(self) -> Iterator[Step]:
        self.client.start()
        if self.db is not None:
            self.db.start()
        started = time.perf_counter()
        yield self
        self.wall_s = time.perf_counter() - started
        if self.db is not None:
            self.db_cpu_s = self.db.stop()
        self.client_cpu_s = self.client.stop()


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def bench_backend(name: str, url_j: str, url_b: str, rows: int, workdir: Path, master: str,
                  job_settings: dict[str, Any]) -> dict[str, Any]:
    settings = {"spark.master": master, **job_settings}
    try:
        job_side = tk.connect(home=workdir / f"{name}-job", metadata_url=url_j, settings=settings,
                              clock=tk.ManualClock(NOW), create=True)
    except tk.ConfigError as e:  # e.g. --slice-rows on a tree whose job has no catalog.slice_rows yet
        raise SystemExit(f"bench_catalog: the job's settings: {e}") from None
    base_side = tk.connect(home=workdir / f"{name}-base", metadata_url=url_b, clock=tk.ManualClock(NOW), create=True)
    result: dict[str, Any] = {"backend": name, "rows": rows}
    try:
        started = time.perf_counter()
        job_side.catalog.generate(rows, seed=1, span_days=3650)
        result["generate_s"] = time.perf_counter() - started
        log(f"{name}: generated {rows:,} rows in {result['generate_s']:.1f}s")
        started = time.perf_counter()
        copy_records(name, job_side, base_side)
        result["copy_s"] = time.perf_counter() - started
        log(f"{name}: copied them to the baseline side in {result['copy_s']:.1f}s")
        for client in (job_side, base_side):
            client.catalog.set_rules(RULES)
        if name == "postgres":
            for client in (job_side, base_side):
                with client.workspace.db.engine.connect() as conn:
                    conn.execute(sa.text("ANALYZE catalog_records"))
                    conn.commit()
        job_side.spark()  # start Spark before timing

        job_client = driver_and_workers_cpu
        if name == "postgres":
            server, where = postgres_server_cpu_reader(base_side)
            result["db_cpu_method"] = "postgres server tree" if server else f"unavailable: {where}"
            log(f"{name}: database CPU: {where}")
            job_db, base_db = server, server
            if server is not None:
                before = server()
                time.sleep(IDLE_SAMPLE_S)
                after = server()
                if before is not None and after is not None:
                    result["server_idle_cpu_per_s"] = (after - before) / IDLE_SAMPLE_S
        else:
            if driver_and_workers_cpu() is None:
                log(f"{name}: no local Spark JVM below this process: the job's CPU is unavailable")
                result["db_cpu_method"] = "baseline: this process; job: unavailable (no local Spark JVM)"
            else:
                result["db_cpu_method"] = "baseline: this process; job: driver + Spark Python workers (upper bound)"
            job_db, base_db = driver_and_workers_cpu, process_cpu

        with Step(job_db, job_client).measure() as job_full:
            full = job_side.catalog.run(now_ms=NOW)
        log(f"{name}: job full run {full.rows:,} rows in {job_full.wall_s:.1f}s")
        with Step(base_db, process_cpu).measure() as base_full:
            base_rows = baseline(base_side, process_periods(RULES, NOW, {}), NOW)
        log(f"{name}: baseline full {base_rows:,} rows in {base_full.wall_s:.1f}s")
        check_same_deleted(job_side, base_side, "after the full runs")

        later = NOW + DAY
        trackers = {p.tracker_age: NOW for p in process_periods(RULES, NOW, {})}
        with Step(job_db, job_client).measure() as job_inc:
            incremental = job_side.catalog.run(now_ms=later)
        with Step(base_db, process_cpu).measure() as base_inc:
            base_inc_rows = baseline(base_side, process_periods(RULES, later, trackers), later)
        check_same_deleted(job_side, base_side, "after +1 day")
        log(f"{name}: job +1 day {incremental.rows:,} rows in {job_inc.wall_s:.2f}s; baseline +1 day "
            f"{base_inc_rows:,} rows in {base_inc.wall_s:.2f}s")

        for key, step in (("job_full", job_full), ("baseline_full", base_full), ("job_inc", job_inc),
                          ("baseline_inc", base_inc)):
            result[f"{key}_s"] = step.wall_s
            result[f"{key}_db_cpu_s"] = step.db_cpu_s
            result[f"{key}_client_cpu_s"] = step.client_cpu_s
        result.update(deleted=full.rows, inc_deleted=incremental.rows,
                      speedup=ratio(base_full.wall_s, job_full.wall_s),
                      speedup_inc=ratio(base_inc.wall_s, job_inc.wall_s),
                      inc_over_full=ratio(job_inc.wall_s, job_full.wall_s),
                      db_cpu_ratio=ratio(job_full.db_cpu_s, base_full.db_cpu_s),
                      db_cpu_ratio_inc=ratio(job_inc.db_cpu_s, base_inc.db_cpu_s))
        result["goals"] = {
            "speedup": {"goal": GOAL_SPEEDUP[name], "met": meets(result["speedup"], at_least=GOAL_SPEEDUP[name])},
            "inc_over_full": {"goal": GOAL_INC_OVER_FULL,
                              "met": meets(result["inc_over_full"], at_most=GOAL_INC_OVER_FULL)},
            "db_cpu_ratio": {"goal": GOAL_CPU_RATIO, "met": meets(result["db_cpu_ratio"], at_most=GOAL_CPU_RATIO)},
        }
        return result
    finally:
        job_side.close()
        base_side.close()


def meets(value: float | None, at_least: float | None = None, at_most: float | None = None) -> bool | None:
    if value is None:
        return None
    if at_least is not None:
        return value >= at_least
    assert at_most is not None
    return value <= at_most


def fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{spec}}{unit}"


def verdict(goal: dict[str, Any]) -> str:
    return {True: "met", False: "NOT met", None: "n/a"}[goal["met"]]


def print_table(results: list[dict[str, Any]], header: str) -> None:
    print(header)
    print(f"{'backend':<9} {'deleted':>11} {'job full':>9} {'baseline':>9} {'base/job':>8} "
          f"{'job +1d':>8} {'base +1d':>8} {'+1d/full':>8} {'job dbCPU':>10} {'base dbCPU':>10} {'CPU j/b':>7}")
    for r in results:
        print(f"{r['backend']:<9} {r['deleted']:>11,} {r['job_full_s']:>8.1f}s {r['baseline_full_s']:>8.1f}s "
              f"{fmt(r['speedup'], '>8.2f')} {r['job_inc_s']:>7.2f}s {r['baseline_inc_s']:>7.2f}s "
              f"{fmt(r['inc_over_full'], '>8.3f')} {fmt(r['job_full_db_cpu_s'], '>9.1f', 's')} "
              f"{fmt(r['baseline_full_db_cpu_s'], '>9.1f', 's')} {fmt(r['db_cpu_ratio'], '>7.2f')}")
    for r in results:
        g = r["goals"]
        print(f"{r['backend']}: base/job >= {g['speedup']['goal']}: {verdict(g['speedup'])}; "
              f"+1d/full <= {g['inc_over_full']['goal']:.2f}: {verdict(g['inc_over_full'])}; "
              f"db CPU job/base <= {g['db_cpu_ratio']['goal']}: {verdict(g['db_cpu_ratio'])}")
        print(f"  +1 day db CPU: job {fmt(r['job_inc_db_cpu_s'], '.2f', 's')}, "
              f"baseline {fmt(r['baseline_inc_db_cpu_s'], '.2f', 's')}; client CPU full: job "
              f"{fmt(r['job_full_client_cpu_s'], '.1f', 's')}, "
              f"baseline {fmt(r['baseline_full_client_cpu_s'], '.1f', 's')}"
              f"; generate {r['generate_s']:.1f}s, copy {r['copy_s']:.1f}s")
        if r["backend"] == "postgres":
            print(f"  db CPU = the whole local PostgreSQL server (background work and other clients included on "
                  f"both sides); idle rate before the steps {fmt(r.get('server_idle_cpu_per_s'), '.3f')} CPU-s/s")
        else:
            print("  db CPU: baseline = this process; job = driver + Spark Python workers, an upper bound "
                  "of SQLite's share (includes Python glue)")


def rounded(value: Any) -> Any:
    """Figures to 4 decimals (ticks and perf_counter noise say nothing beyond that) for pasting."""
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--slice-rows", type=int, help="the job's catalog.slice_rows (only set when given)")
    parser.add_argument("--parallelism", type=int, help="the job's catalog.parallelism (only set when given)")
    parser.add_argument("--json", action="store_true", help="print one JSON object with every figure instead")
    args = parser.parse_args()
    job_settings: dict[str, Any] = {}
    if args.slice_rows is not None:
        job_settings["catalog.slice_rows"] = args.slice_rows
    if args.parallelism is not None:
        job_settings["catalog.parallelism"] = args.parallelism
    load_before = os.getloadavg()[0]
    results = []
    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-catalog-") as tmp:
        workdir = Path(tmp)
        if args.backend in ("sqlite", "both"):
            results.append(bench_backend("sqlite", f"sqlite:///{workdir / 'job.db'}",
                                         f"sqlite:///{workdir / 'base.db'}", args.rows, workdir, args.spark_master,
                                         job_settings))
        if args.backend in ("postgres", "both"):
            with pg_schema_url() as url_j, pg_schema_url() as url_b:
                results.append(bench_backend("postgres", url_j, url_b, args.rows, workdir, args.spark_master,
                                             job_settings))
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"rows": args.rows, "rules": len(RULES), "spark_master": args.spark_master,
                          "job_settings": job_settings, "cpu_count": os.cpu_count(),
                          "load_average_before": load_before, "load_average_after": load_after,
                          "tidekeep": str(Path(tk.__file__).parent), "results": rounded(results)}, indent=2))
        return
    print_table(results, f"catalog retention job, {args.rows:,} records, 8 rules, Spark {args.spark_master}, "
                         f"job settings {job_settings or 'default'}, "
                         f"load average {load_before:.2f} -> {load_after:.2f}")


if __name__ == "__main__":
    main()
