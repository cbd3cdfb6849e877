"""The data retention job, on Spark (docs/design/catalog.md).

One run:
1. fixes `now` (ms) once; every cutoff, period and status time of the run derives from it;
2. loads the rule set, its trackers (trackers of other rule versions are dropped), the
   dictionaries and the holds on records, and computes the processing periods (periods.py);
3. for each period, youngest first: reads the period's UNLOCKED records in parallel create-time
   partitions (source.py), evaluates the rule CASE as a Spark Column (the first matching active
   rule in ascending rule number), marks the rows whose rule says DELETE in this period and that
   no hold matches, and writes the logical deletes back from the executors in create-time slices
   (writeback.py); the driver only collects per-rule counts;
4. after each period, in one transaction: saves the period's tracker, appends an audit entry and
   records progress in the run's row — so a run killed mid-way resumes at the period it was in,
   and the updates it had made are simply not repeated (only UNLOCKED rows change).

A dry run does steps 1–3 without writing anything: it counts what each period would delete.

Under `tidekeep serve` the run gets the catalog lease's fence (store/fencing.py): stale trackers are
dropped, and the run's row, every slice's UPDATE and every period's tracker are written, only while
that lease is still held. A run
whose lease was taken over ends FAILED with LeaseLost (a refused slice fails its Spark task; the
driver then finds the lease gone and raises LeaseLost), having changed nothing after the takeover.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import LeaseLost
from ..faults import fault_point
from ..spark.cluster import check_settings_reach
from ..spark.connect import default_parallelism, job_master
from ..spark.credentials import MetadataReference, metadata_reference
from ..spark.progress import monotonic, track_tasks
from ..spark.session import job_spark
from ..store.audit import AuditEntry
from ..store.fencing import LeaseFence, check_fence, confirm_fence
from ..store.schema_catalog import catalog_runs
from . import source
from .runs import end_run, start_run
from .writeback import SUMMARY_DDL, DeleteSpec, delete_partition

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from ..store.house import Workspace

log = logging.getLogger("tidekeep.catalog")

Progress = Callable[[int, int], None]
AUDIT_TARGET = "catalog"


# ---- reports --------------------------------------------------------------------------------------
@dataclass
class RuleCount:
    rows: int = 0
    bytes: int = 0


@dataclass
class PeriodReport:
    from_ms: int
    to_ms: int
    tracker_age: str
    actions: list[dict[str, Any]]  # [{"rule": n, "name": ..., "action": "DELETE" | "RETAIN"}]
    candidates: int = 0  # UNLOCKED records in the period when it started
    deleted: dict[int, RuleCount] = field(default_factory=dict)  # per rule number
    elapsed_s: float = 0.0

    @property
    def rows(self) -> int:
        return sum(c.rows for c in self.deleted.values())

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.deleted.values())

    def to_dict(self) -> dict[str, Any]:
        return {"from_ms": self.from_ms, "to_ms": self.to_ms, "tracker_age": self.tracker_age,
                "actions": self.actions, "candidates": self.candidates, "rows": self.rows, "bytes": self.bytes,
                "deleted": {str(k): asdict(v) for k, v in sorted(self.deleted.items())},
                "elapsed_s": round(self.elapsed_s, 3)}


@dataclass
class RunReport:
    run_id: int | None
    now_ms: int
    dry_run: bool
    rules_version: str
    periods: list[PeriodReport] = field(default_factory=list)
    state: str = "RUNNING"
    elapsed_s: float = 0.0

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.periods)

    @property
    def bytes(self) -> int:
        return sum(p.bytes for p in self.periods)

    def by_rule(self) -> dict[int, RuleCount]:
        totals: dict[int, RuleCount] = {}
        for period in self.periods:
            for rule, count in period.deleted.items():
                entry = totals.setdefault(rule, RuleCount())
                entry.rows += count.rows
                entry.bytes += count.bytes
        return dict(sorted(totals.items()))

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "now_ms": self.now_ms, "dry_run": self.dry_run,
                "rules_version": self.rules_version, "state": self.state, "rows": self.rows, "bytes": self.bytes,
                "by_rule": {str(k): asdict(v) for k, v in self.by_rule().items()},
                "periods": [p.to_dict() for p in self.periods], "elapsed_s": round(self.elapsed_s, 3)}


# ---- the rule CASE as a Spark Column -----------------------------------------------------------------
def first_match_column(rules: Sequence[Any], ctx: Any) -> Column:
    """The number of the first active rule (ascending rule number) whose expression matches, or null."""
    from pyspark.sql import functions as F

    from .expressions import to_spark

    column = None
    for rule in sorted(rules, key=lambda r: r.rule_number):
        condition = to_spark(rule.expression, ctx)
        column = (F.when(condition, F.lit(rule.rule_number)) if column is None
                  else column.when(condition, F.lit(rule.rule_number)))
    return (F.lit(None) if column is None else column.otherwise(F.lit(None))).cast("int")


def held_column(holds: Sequence[Any], ctx: Any) -> Column:
    from pyspark.sql import functions as F

    from .expressions import to_spark
    from .expressions.shape import balanced

    if not holds:
        return F.lit(False)
    # pairwise, not a chain: Spark's analyzer recurses once per level (expressions/shape.py)
    return balanced([to_spark(expr, ctx) for expr in holds], lambda left, right: left | right)


def rules_that_matter(rules: Sequence[Any], deleting: set[int]) -> list[Any]:
    """The CASE needs the rules up to the last one that deletes in this period: a later rule can
    only retain, and no match retains too."""
    ordered = sorted(rules, key=lambda r: r.rule_number)
    last = max((i for i, r in enumerate(ordered) if r.rule_number in deleting), default=-1)
    return ordered[: last + 1]


def needed_columns(rules: Sequence[Any], holds: Sequence[Any]) -> list[str]:
    from .expressions import referenced_columns

    columns = {"id", "create_time", "file_size"}
    for expr in [r.expression for r in rules] + list(holds):
        columns |= set(referenced_columns(expr))
    return list(source.check_columns(sorted(columns)))


def period_frame(spark: SparkSession, metadata: MetadataReference, columns: Sequence[str],
                 ranges: Sequence[tuple[int, int]], from_ms: int, to_ms: int,
                 shared_filesystem: bool = False) -> DataFrame:
    """The catalog source over one period; the metadata password by reference (spark/credentials.py)."""
    return (spark.read.format(source.SOURCE_NAME).options(**metadata.options()).option("columns", ",".join(columns))
            .option("shared_filesystem", str(shared_filesystem).lower())
            .option("status", "UNLOCKED").option("from", str(from_ms)).option("to", str(to_ms))
            .option("ranges", json.dumps([list(r) for r in ranges])).load())


# ---- state -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobInputs:
    now_ms: int
    rules_version: str
    rules: tuple[Any, ...]  # active rules, ascending rule number
    periods: tuple[Any, ...]
    holds: tuple[Any, ...]  # hold expressions
    dictionaries: Mapping[str, tuple[str, ...]]


def load_side_inputs(workspace: Workspace) -> tuple[tuple[Any, ...], dict[str, tuple[str, ...]]]:
    """The hold expressions on records and the dictionaries, read together."""
    from .holds import load_dictionaries, record_holds

    with workspace.db.read() as conn:
        holds = tuple(expr for _, expr in record_holds(conn))
        dictionaries = {name: tuple(words) for name, words in load_dictionaries(conn).items()}
    return holds, dictionaries


def load_inputs(workspace: Workspace, now_ms: int, *, drop_stale_trackers: bool,
                fence: LeaseFence | None = None) -> JobInputs:
    from .periods import process_periods
    from .rules import active_rules
    from .rules_store import RulesStore

    store = RulesStore(workspace)
    ruleset = store.load()
    trackers = store.trackers(ruleset.version, drop_stale=drop_stale_trackers, fence=fence) if ruleset.version else {}
    periods = tuple(process_periods(ruleset.rules, now_ms, trackers))
    holds, dictionaries = load_side_inputs(workspace)
    return JobInputs(now_ms, ruleset.version, active_rules(ruleset.rules), periods, holds, dictionaries)


def _finish_period(workspace: Workspace, report: RunReport, period: PeriodReport, fence: LeaseFence | None) -> None:
    """Tracker, audit and progress of a finished period, in one transaction."""
    from .rules_store import upsert_tracker

    with workspace.db.write() as conn:
        check_fence(conn, fence)
        if not report.dry_run and report.rules_version:
            upsert_tracker(conn, report.rules_version, period.tracker_age, report.now_ms)
        if not report.dry_run and period.rows:
            workspace.audit.append(conn, AuditEntry(
                "catalog_delete", AUDIT_TARGET,
                f"retention rules {report.rules_version}: {period.rows} record(s) logically deleted in period "
                f"[{period.from_ms}, {period.to_ms})",
                details={"run": report.run_id, "now_ms": report.now_ms, "period": [period.from_ms, period.to_ms],
                         "rules": {str(k): asdict(v) for k, v in sorted(period.deleted.items())},
                         "bytes": period.bytes}))
        conn.execute(sa.update(catalog_runs).where(catalog_runs.c.id == report.run_id)
                     .values(report=json.dumps(report.to_dict())))


# ---- the run --------------------------------------------------------------------------------------------
def run_retention_job(workspace: Workspace, dry_run: bool = False, progress: Progress | None = None,
                      now_ms: int | None = None, fence: LeaseFence | None = None) -> RunReport:
    started = time.monotonic()
    # executors open the metadata store: a SQLite file they cannot reach is refused before anything
    # changes (the master of the session is checked again when Spark is needed)
    check_settings_reach(workspace.settings, metadata=True)
    now = workspace.clock.now_ms() if now_ms is None else now_ms
    inputs = load_inputs(workspace, now, drop_stale_trackers=not dry_run, fence=fence)
    report = RunReport(None, now, dry_run, inputs.rules_version)
    if not inputs.periods:  # no active rules: nothing to do (Stroom's noRules)
        report.state = "SUCCEEDED"
        return report
    report.run_id = start_run(workspace, "retention", now, dry_run, inputs.rules_version, fence=fence)
    try:
        _process(workspace, inputs, report, progress, fence)
    except BaseException:
        report.state = "FAILED"
        report.elapsed_s = time.monotonic() - started
        end_run(workspace, "retention", report.run_id, report.state, dry_run, report.to_dict())
        raise
    report.state = "SUCCEEDED"
    report.elapsed_s = time.monotonic() - started
    end_run(workspace, "retention", report.run_id, report.state, dry_run, report.to_dict())
    log.info("catalog retention run %s: %d record(s), %d bytes logically deleted%s", report.run_id, report.rows,
             report.bytes, " (dry run)" if dry_run else "")
    return report


def _process(workspace: Workspace, inputs: JobInputs, report: RunReport, progress: Progress | None,
             fence: LeaseFence | None) -> None:
    from .expressions import CompileContext

    ctx = CompileContext(inputs.now_ms, inputs.dictionaries)
    url = workspace.settings.metadata_url
    with workspace.db.read() as conn:
        stats = [source.scan_stats(conn, p.from_ms, p.to_ms, "UNLOCKED") for p in inputs.periods]
    total = sum(s.rows for s in stats)
    done = 0
    if progress is not None:
        progress = monotonic(progress)
        progress(0, total)
    spark: SparkSession | None = None
    for period, period_stats in zip(inputs.periods, stats, strict=True):
        period_started = time.monotonic()
        deleting = {a.rule_number for a in period.actions if a.delete}
        entry = PeriodReport(period.from_ms, period.to_ms, period.tracker_age,
                             [{"rule": a.rule_number, "name": a.rule_name, "action": a.outcome}
                              for a in period.actions], candidates=period_stats.rows)
        if deleting and period_stats.rows:
            def within_period(fraction: float, base: int = done, rows: int = period_stats.rows) -> None:
                if progress is not None:
                    progress(base + int(fraction * rows), total)

            spark = spark or job_spark(workspace.settings, metadata=True, writes=not report.dry_run)
            entry.deleted = _run_period(spark, workspace, url, inputs, ctx, period, period_stats, deleting,
                                        report.dry_run, within_period, fence)
        entry.elapsed_s = time.monotonic() - period_started
        report.periods.append(entry)
        fault_point("catalog.before_tracker")
        _finish_period(workspace, report, entry, fence)
        fault_point("catalog.after_period")
        done += period_stats.rows
        if progress is not None:
            progress(done, total)


ROWS_PER_SMALL_PARTITION = 50_000


def partition_count(configured: int, parallelism: int, rows: int) -> int:
    """`catalog.partitions` when set; otherwise Spark's parallelism, but no more partitions than
    one per 50,000 rows — a daily incremental period is one small task, not a task per core."""
    if configured:
        return configured
    return max(1, min(parallelism, -(-rows // ROWS_PER_SMALL_PARTITION)))


def _run_period(spark: SparkSession, workspace: Workspace, url: str, inputs: JobInputs, ctx: Any, period: Any,
                stats: source.ScanStats, deleting: set[int], dry_run: bool,
                on_fraction: Callable[[float], None], fence: LeaseFence | None = None) -> dict[int, RuleCount]:
    from pyspark.sql import functions as F

    rules = rules_that_matter(inputs.rules, deleting)
    columns = needed_columns(rules, inputs.holds)
    ranges = source.plan_ranges(period.from_ms, period.to_ms, stats,
                                partition_count(workspace.settings["catalog.partitions"],
                                                default_parallelism(spark), stats.rows))
    metadata = metadata_reference(url, job_master(spark))
    frame = period_frame(spark, metadata, columns, ranges, period.from_ms, period.to_ms,
                         workspace.settings["spark.shared_filesystem"])
    ruled = frame.withColumn("rule", first_match_column(rules, ctx))
    # the rule says DELETE in this period and no hold matches (null rule: no match, kept)
    doomed = F.coalesce(F.col("rule").isin(sorted(deleting)) & ~held_column(inputs.holds, ctx), F.lit(False))
    if dry_run:
        summary = ruled.where(doomed).groupBy("rule").agg(
            F.count(F.lit(1)).alias("rows"), F.sum(F.coalesce(F.col("file_size"), F.lit(0))).alias("bytes"))
    else:
        spec = DeleteSpec(metadata, inputs.now_ms, workspace.settings["catalog.delete_batch_size"], inputs.holds,
                          inputs.dictionaries, os.getpid(), fence)
        # every row goes to its task with its verdict, so a slice can be written as its create-time
        # range minus the kept rows; the output is one small row per rule per task, summed here
        summary = (ruled.select("id", "create_time", "rule", "file_size", doomed.alias("doomed"))
                   .mapInArrow(lambda batches: delete_partition(spec, batches), SUMMARY_DDL))
    try:
        with track_tasks(spark, f"tidekeep-catalog-{os.getpid()}-{period.from_ms}", on_fraction):
            rows = summary.collect()
    except Exception as exc:
        # a slice refused by the lease check fails its task, and Spark reports that as its own error:
        # if the lease is gone, say so with the typed error instead
        try:
            confirm_fence(workspace.db, fence)
        except LeaseLost as lost:
            raise lost from exc
        raise
    counts: dict[int, RuleCount] = {}
    for r in rows:
        entry = counts.setdefault(int(r["rule"]), RuleCount())
        entry.rows += int(r["rows"])
        entry.bytes += int(r["bytes"] or 0)
    return counts


__all__ = ["PeriodReport", "RuleCount", "RunReport", "run_retention_job"]
