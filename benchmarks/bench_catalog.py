"""The catalog retention job on Spark against Stroom's approach, on identical data in the same run.

    .venv/bin/python benchmarks/bench_catalog.py [--rows N] [--backend sqlite|postgres|both] [--spark-master M]

N generated meta records (default 10,000,000; `tidekeep catalog generate`'s generator, seed 1, ten
years of create times) are generated into workspace S (Spark job) and copied row for row into
workspace B (baseline) inside the database; the same 8 rules are saved in both. Then, with one fixed `now`:

  baseline full    Stroom's approach: for each processing period, ONE
                   `UPDATE catalog_records SET status='DELETED', status_time=:now WHERE status='UNLOCKED'
                    AND create_time in period AND (CASE WHEN <rule 1> THEN .. WHEN <rule 2> .. END) = true`
                   executed in the database (the same SQLAlchemy compiler as the job, bound parameters)
  spark full       `client.catalog.run(now)`: the Spark job (first run, no trackers)
  spark +1 day     the job again one simulated day later (trackers: each period shrinks to a day)
  baseline +1 day  the baseline's statements over the same shortened periods

Both sides must end with the same DELETED ids (checked by count and id sum). Ratios: spark full /
baseline full (goal on PostgreSQL: <= 1.0) and spark +1 day / spark full (goal: <= 0.05). The Spark
session is started before timing. Timing never fails anything.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
from bench_retention import pg_schema_url

import tidekeep as tk
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import CompileContext, parse, to_sqlalchemy
from tidekeep.catalog.periods import process_periods
from tidekeep.catalog.rules import RetentionRule, active_rules
from tidekeep.store.schema_catalog import catalog_records

DAY = 86_400_000
NOW = 1_767_225_600_000  # 2026-01-01T00:00Z

RULES = [
    RetentionRule(1, "Security audit: 7 years", True, parse('feed = "SECURITY_AUDIT"'), Age(7, "years")),
    RetentionRule(2, "Special data: forever", True, parse('feed = "SPECIAL_DATA"'), None),
    RetentionRule(3, "Internal errors: 1 week", True, parse('feed = "INTERNAL_LOGS" and type = "Error"'),
                  Age(1, "weeks")),
    RetentionRule(4, "Internal logs: 3 months", True, parse('feed = "INTERNAL_LOGS"'), Age(3, "months")),
    RetentionRule(5, "Reference data: 5 years", True, parse('type = "Reference"'), Age(5, "years")),
    RetentionRule(6, "Big raw files: 6 months", True, parse('type = "Raw Events" and file_size > 200KB'),
                  Age(6, "months")),
    RetentionRule(7, "App events: 1 year", True, parse('feed = "APP_*_EVENTS" and type in ("Events", "Error")'),
                  Age(1, "years")),
    RetentionRule(8, "Everything else: 2 years", True, parse("all"), Age(2, "years")),
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def baseline(client: tk.Client, periods: list, now_ms: int) -> tuple[int, float]:
    """Stroom's statements: one UPDATE per period, in the database; returns (rows, seconds)."""
    t = catalog_records
    ctx = CompileContext(now_ms, {})
    rules = active_rules(RULES)
    started = time.perf_counter()
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
    return total, time.perf_counter() - started


def copy_records(name: str, source: tk.Client, target: tk.Client) -> None:
    """The same rows in the baseline's store, copied by the database itself."""
    target.workspace.db.ensure_schema()
    if name == "sqlite":
        import sqlite3

        raw = sqlite3.connect(target.workspace.db.url.database, isolation_level=None)
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


def bench_backend(name: str, url_s: str, url_b: str, rows: int, workdir: Path, master: str) -> dict:
    settings = {"spark.master": master}
    spark_side = tk.connect(home=workdir / f"{name}-spark", metadata_url=url_s, settings=settings,
                            clock=tk.ManualClock(NOW), create=True)
    base_side = tk.connect(home=workdir / f"{name}-base", metadata_url=url_b, clock=tk.ManualClock(NOW), create=True)
    try:
        started = time.perf_counter()
        spark_side.catalog.generate(rows, seed=1, span_days=3650)
        log(f"{name}: generated {rows:,} rows in {time.perf_counter() - started:.1f}s")
        started = time.perf_counter()
        copy_records(name, spark_side, base_side)
        log(f"{name}: copied them to the baseline side in {time.perf_counter() - started:.1f}s")
        for client in (spark_side, base_side):
            client.catalog.set_rules(RULES)
        if name == "postgres":
            for client in (spark_side, base_side):
                with client.workspace.db.engine.connect() as conn:
                    conn.execute(sa.text("ANALYZE catalog_records"))
                    conn.commit()
        spark_side.spark()  # start Spark before timing
        started = time.perf_counter()
        full = spark_side.catalog.run(now_ms=NOW)
        spark_full = time.perf_counter() - started
        log(f"{name}: spark full run {full.rows:,} rows in {spark_full:.1f}s")
        base_rows, base_full = baseline(base_side, process_periods(RULES, NOW, {}), NOW)
        log(f"{name}: baseline full {base_rows:,} rows in {base_full:.1f}s")
        assert deleted_fingerprint(spark_side) == deleted_fingerprint(base_side), "the two sides disagree"

        later = NOW + DAY
        trackers = {p.tracker_age: NOW for p in process_periods(RULES, NOW, {})}
        started = time.perf_counter()
        incremental = spark_side.catalog.run(now_ms=later)
        spark_inc = time.perf_counter() - started
        base_inc_rows, base_inc = baseline(base_side, process_periods(RULES, later, trackers), later)
        assert deleted_fingerprint(spark_side) == deleted_fingerprint(base_side), "the two sides disagree (+1 day)"
        log(f"{name}: spark +1 day {incremental.rows:,} rows in {spark_inc:.2f}s; baseline +1 day "
            f"{base_inc_rows:,} rows in {base_inc:.2f}s")
        return {"backend": name, "rows": rows, "deleted": full.rows, "spark_full_s": spark_full,
                "baseline_full_s": base_full, "spark_inc_s": spark_inc, "baseline_inc_s": base_inc,
                "inc_deleted": incremental.rows}
    finally:
        spark_side.close()
        base_side.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--spark-master", default="local[2]")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-catalog-") as tmp:
        workdir = Path(tmp)
        if args.backend in ("sqlite", "both"):
            results.append(bench_backend("sqlite", f"sqlite:///{workdir / 'spark.db'}",
                                         f"sqlite:///{workdir / 'base.db'}", args.rows, workdir, args.spark_master))
        if args.backend in ("postgres", "both"):
            with pg_schema_url() as url_s, pg_schema_url() as url_b:
                results.append(bench_backend("postgres", url_s, url_b, args.rows, workdir, args.spark_master))
    print(f"catalog retention job, {args.rows:,} records, 8 rules, Spark {args.spark_master}")
    print(f"{'backend':<10} {'deleted':>12} {'spark full':>11} {'baseline':>9} {'ratio':>6} "
          f"{'spark +1d':>10} {'base +1d':>9} {'inc/full':>9}")
    for r in results:
        print(f"{r['backend']:<10} {r['deleted']:>12,} {r['spark_full_s']:>10.1f}s {r['baseline_full_s']:>8.1f}s "
              f"{r['spark_full_s'] / r['baseline_full_s']:>6.2f} {r['spark_inc_s']:>9.2f}s "
              f"{r['baseline_inc_s']:>8.2f}s "
              f"{r['spark_inc_s'] / r['spark_full_s']:>9.3f}")


if __name__ == "__main__":
    main()
