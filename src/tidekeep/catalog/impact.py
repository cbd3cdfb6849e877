"""The impact summary: what the retention job would delete if it ran now with no trackers
(docs/design/catalog.md#impact), per rule, feed and type — for the saved rules or for rules not yet
saved.

It runs on Spark over the same source and the same rule CASE column as the job, so its counts
are the job's counts by construction: an UNLOCKED record whose first matching active rule (ascending
rule number) is not forever and whose create time is before that rule's cutoff (now − age). Held
records are counted apart (`held_rows`): they would be deleted but for a hold. Forever rules never
appear. Unlike Stroom's summary, LOCKED records are not counted, because the job never deletes them.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..spark.progress import Progress, monotonic, track_tasks, units_done
from . import source

if TYPE_CHECKING:
    from ..store.house import Workspace


@dataclass(frozen=True)
class ImpactRow:
    rule: int
    rule_name: str
    age: str
    feed: str
    type: str
    rows: int
    bytes: int
    held_rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ImpactSummary:
    now_ms: int
    rules_version: str  # "" for rules not saved
    rows: tuple[ImpactRow, ...]

    @property
    def total_rows(self) -> int:
        return sum(r.rows for r in self.rows)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"now_ms": self.now_ms, "rules_version": self.rules_version, "total_rows": self.total_rows,
                "total_bytes": self.total_bytes, "held_rows": sum(r.held_rows for r in self.rows),
                "rows": [r.to_dict() for r in self.rows]}


def resolve_rules(workspace: Workspace, rules: Any) -> tuple[str, tuple[Any, ...]]:
    """(version, rules) for None (the saved set), a RuleSet, a list of rules, or a rules file."""
    from .rules import RuleSet, check_rules
    from .rules_store import RulesStore

    if rules is None:
        saved = RulesStore(workspace).load()
        return saved.version, saved.rules
    if isinstance(rules, RuleSet):
        return "", rules.rules
    if isinstance(rules, (str, Path)):
        from .rules import load_rules_file

        loaded = load_rules_file(rules)
        return "", loaded.rules if isinstance(loaded, RuleSet) else tuple(loaded)
    return "", check_rules(rules)


def impact_summary(workspace: Workspace, rules: Any = None, now_ms: int | None = None,
                   progress: Progress | None = None) -> ImpactSummary:
    from pyspark.sql import functions as F

    from .ages import cutoff_ms
    from .expressions import CompileContext
    from .job import (
        first_match_column,
        held_column,
        load_side_inputs,
        needed_columns,
        partition_count,
        period_frame,
        rules_that_matter,
    )
    from .rules import active_rules

    now = workspace.clock.now_ms() if now_ms is None else now_ms
    version, all_rules = resolve_rules(workspace, rules)
    active = active_rules(all_rules)
    expiring = [r for r in active if r.age is not None]
    if not expiring:
        return ImpactSummary(now, version, ())
    holds, dictionaries = load_side_inputs(workspace)
    ctx = CompileContext(now, dictionaries)
    cutoffs = {r.rule_number: cutoff_ms(now, r.age) for r in expiring}
    case_rules = rules_that_matter(active, set(cutoffs))
    columns = sorted(set(needed_columns(case_rules, holds)) | {"feed", "type"})
    from ..spark.connect import default_parallelism
    from ..spark.session import job_spark

    spark = job_spark(workspace.settings, metadata=True)  # executors read the records from the metadata store
    url = workspace.settings.metadata_url
    upper = max(cutoffs.values())
    with workspace.db.read() as conn:
        stats = source.scan_stats(conn, 0, upper, "UNLOCKED")
    ranges = source.plan_ranges(0, upper, stats, partition_count(
        workspace.settings["catalog.partitions"], default_parallelism(spark), stats.rows))
    from ..spark.connect import job_master
    from ..spark.credentials import metadata_reference

    metadata = metadata_reference(url, job_master(spark))  # the password by reference (spark/credentials.py)
    frame = period_frame(spark, metadata, source.check_columns(columns), ranges, 0, upper,
                         workspace.settings["spark.shared_filesystem"])
    cutoff = None
    for number, value in cutoffs.items():
        cutoff = (F.when(F.col("rule") == number, F.lit(value)) if cutoff is None
                  else cutoff.when(F.col("rule") == number, F.lit(value)))
    assert cutoff is not None
    expired = (frame.withColumn("rule", first_match_column(case_rules, ctx))
               .where(F.col("rule").isin(sorted(cutoffs)))
               .where(F.col("create_time") < cutoff.otherwise(F.lit(0)))
               .withColumn("held", held_column(holds, ctx)))
    grouped = expired.groupBy("rule", "feed", "type").agg(
        F.sum(F.when(~F.col("held"), 1).otherwise(0)).alias("rows"),
        F.sum(F.when(~F.col("held"), F.coalesce(F.col("file_size"), F.lit(0))).otherwise(0)).alias("bytes"),
        F.sum(F.when(F.col("held"), 1).otherwise(0)).alias("held_rows"))
    by_number = {r.rule_number: r for r in expiring}
    # progress in records: the candidates scanned (those created before the latest cutoff), as the
    # fraction of the Spark job's work done (spark/progress.py)
    report = monotonic(progress or (lambda _done, _total: None))
    report(0, stats.rows)

    def on_fraction(fraction: float) -> None:
        report(units_done(fraction, stats.rows), stats.rows)

    with track_tasks(spark, f"tidekeep-impact-{os.getpid()}-{now}", on_fraction):
        collected = grouped.collect()
    report(stats.rows, stats.rows)
    rows = sorted((ImpactRow(int(g["rule"]), by_number[int(g["rule"])].name, by_number[int(g["rule"])].age_string,
                             g["feed"], g["type"], int(g["rows"]), int(g["bytes"]), int(g["held_rows"]))
                   for g in collected), key=lambda r: (r.rule, r.feed, r.type))
    return ImpactSummary(now, version, tuple(rows))
