"""The data retention job: the rules evaluated inside the database, slices run by Spark
(docs/design/catalog.md).

One run:
1. fixes `now` (ms) once; every cutoff, period and status time of the run derives from it;
2. loads the rule set, its trackers (trackers of other rule versions are dropped) and the
   dictionaries, and computes the processing periods (periods.py);
3. plans each period that deletes into balanced create-time slices from grouped counts, never
   reading the records out (slice_plan.py);
4. runs every slice as one statement inside the database (slice_sql.py, slice_runner.py): an
   UPDATE of the slice's UNLOCKED records whose first matching rule says DELETE in the period and
   that no hold matches, counting per rule what it changed. On PostgreSQL the slices are Spark
   tasks that run at once (one connection each, at most `catalog.parallelism`); on SQLite, whose
   one writer gains nothing from that, and for a single slice, the driver runs them in turn;
5. then, for each period, youngest first, in one transaction: saves the period's tracker, appends
   an audit entry and records the period in the run's row. A run killed before its trackers are
   saved is simply run again: every slice changes only UNLOCKED records, so what was done is not
   repeated and nothing else changes.

A dry run plans the same slices and counts, per rule, what each would change, writing nothing.

Under `tidekeep serve` the run gets the catalog lease's fence (store/fencing.py): stale trackers are
dropped, and the run's row, every slice's UPDATE and every period's tracker are written only while
that lease is still held. A run whose lease was taken over ends FAILED with LeaseLost (a refused
slice fails its Spark task; the driver then finds the lease gone and raises LeaseLost), having
changed nothing after the takeover.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import LeaseLost
from ..faults import fault_point
from ..spark.cluster import check_settings_reach
from ..spark.connect import job_master
from ..spark.credentials import metadata_reference
from ..spark.progress import monotonic, track_tasks, units_done
from ..spark.session import job_spark
from ..store.audit import AuditEntry
from ..store.fencing import LeaseFence, check_fence, confirm_fence
from ..store.schema_catalog import catalog_records, catalog_runs
from .runs import end_run, exclusive_run, start_run
from .slice_plan import Slice, plan_slices, widen
from .slice_runner import Count, PlannedSlice, SliceWork
from .slice_sql import candidates, span_counts

if TYPE_CHECKING:
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


def rules_that_matter(rules: Sequence[Any], deleting: set[int]) -> list[Any]:
    """The CASE needs the rules up to the last one that deletes in this period: a later rule can
    only retain, and no match retains too."""
    ordered = sorted(rules, key=lambda r: r.rule_number)
    last = max((i for i, r in enumerate(ordered) if r.rule_number in deleting), default=-1)
    return ordered[: last + 1]


# ---- state -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class JobInputs:
    now_ms: int
    rules_version: str
    rules: tuple[Any, ...]  # active rules, ascending rule number
    periods: tuple[Any, ...]
    dictionaries: Mapping[str, tuple[str, ...]]


def load_dictionaries(workspace: Workspace) -> dict[str, tuple[str, ...]]:
    from .holds import load_dictionaries as read_dictionaries

    with workspace.db.read() as conn:
        return {name: tuple(words) for name, words in read_dictionaries(conn).items()}


def load_inputs(workspace: Workspace, now_ms: int, *, drop_stale_trackers: bool,
                fence: LeaseFence | None = None) -> JobInputs:
    from .periods import process_periods
    from .rules import active_rules
    from .rules_store import RulesStore

    store = RulesStore(workspace)
    ruleset = store.load()
    trackers = store.trackers(ruleset.version, drop_stale=drop_stale_trackers, fence=fence) if ruleset.version else {}
    periods = tuple(process_periods(ruleset.rules, now_ms, trackers))
    return JobInputs(now_ms, ruleset.version, active_rules(ruleset.rules), periods, load_dictionaries(workspace))


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
    """One run (see the module doc); refused with RunInProgress, before anything changes, while
    another retention run that is not a dry run is working (catalog/runs.py)."""
    if not workspace.db.is_sqlite:
        # Spark tasks may open the metadata store: a password they could get no reference to is
        # refused before anything changes (SQLite runs in the driver: no executor opens it)
        check_settings_reach(workspace.settings, metadata=True)
    with exclusive_run(workspace, "retention", dry_run):
        return _run_retention_job(workspace, dry_run, progress, now_ms, fence)


def _run_retention_job(workspace: Workspace, dry_run: bool, progress: Progress | None, now_ms: int | None,
                       fence: LeaseFence | None) -> RunReport:
    started = time.monotonic()
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
        end_run(workspace, report.run_id, report.state, report.to_dict())
        raise
    report.state = "SUCCEEDED"
    report.elapsed_s = time.monotonic() - started
    end_run(workspace, report.run_id, report.state, report.to_dict())
    log.info("catalog retention run %s: %d record(s), %d bytes logically deleted%s", report.run_id, report.rows,
             report.bytes, " (dry run)" if dry_run else "")
    return report


def _process(workspace: Workspace, inputs: JobInputs, report: RunReport, progress: Progress | None,
             fence: LeaseFence | None) -> None:
    from .slice_runner import DELETE, DRY_RUN, PeriodRules, SliceWork

    entries: list[PeriodReport] = []
    periods: list[PeriodRules] = []
    planned: list[PlannedSlice] = []
    target = workspace.settings["catalog.slice_rows"]
    with workspace.db.read() as conn:
        for index, period in enumerate(inputs.periods):
            deleting = tuple(sorted(a.rule_number for a in period.actions if a.delete))
            rules = rules_that_matter(inputs.rules, set(deleting))
            periods.append(PeriodRules(tuple((r.rule_number, r.expression) for r in rules), deleting))
            if deleting:
                slices = plan_period(conn, period.from_ms, period.to_ms, target)
                planned += [PlannedSlice(index, s.low, s.high, s.rows) for s in slices]
                candidates = sum(s.rows for s in slices)
            else:
                candidates = count_candidates(conn, period.from_ms, period.to_ms)
            entries.append(PeriodReport(period.from_ms, period.to_ms, period.tracker_age,
                                        [{"rule": a.rule_number, "name": a.rule_name, "action": a.outcome}
                                         for a in period.actions], candidates=candidates))
    work = SliceWork(DRY_RUN if report.dry_run else DELETE, inputs.now_ms, tuple(periods), tuple(planned),
                     inputs.dictionaries, fence=fence, parallelism=workspace.settings["catalog.parallelism"],
                     driver_pid=os.getpid())
    total = sum(e.candidates for e in entries)
    report_progress = monotonic(progress or (lambda _done, _total: None))
    report_progress(0, total)
    counts, elapsed = run_slices(workspace, work, lambda done: report_progress(done, total))
    for count in counts:
        rule_count = entries[work.slices[count.slice].period].deleted.setdefault(count.rule, RuleCount())
        rule_count.rows += count.rows
        rule_count.bytes += count.bytes
    for index, seconds in elapsed.items():
        entries[work.slices[index].period].elapsed_s += seconds
    done = 0
    for entry in entries:
        entry.deleted = dict(sorted(entry.deleted.items()))
        report.periods.append(entry)
        fault_point("catalog.before_tracker")
        _finish_period(workspace, report, entry, fence)
        fault_point("catalog.after_period")
        done += entry.candidates
        report_progress(done, total)


def plan_period(conn: sa.Connection, from_ms: int, to_ms: int, target: int) -> list[Slice]:
    """Balanced slices of a period's candidates (slice_plan.py), covering the whole period."""
    t = catalog_records
    low, high = conn.execute(sa.select(sa.func.min(t.c.create_time), sa.func.max(t.c.create_time))
                             .where(candidates(from_ms, to_ms))).one()
    if low is None:
        return []

    def count_spans(span_low: int, span_high: int, n: int) -> list[int]:
        counts = [0] * n
        for span, rows in conn.execute(span_counts(span_low, span_high, n)):
            counts[int(span)] = int(rows)
        return counts

    return widen(plan_slices(count_spans, int(low), int(high) + 1, target), from_ms, to_ms)


def count_candidates(conn: sa.Connection, from_ms: int, to_ms: int) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(catalog_records)
                            .where(candidates(from_ms, to_ms))).scalar_one())


def run_slices(workspace: Workspace, work: SliceWork,
               on_done: Callable[[int], None]) -> tuple[list[Count], dict[int, float]]:
    """Every planned slice, with its counts and time. In the driver, one after another, on SQLite
    (one writer: concurrent slices would only queue for it) and when all of them hold no more
    candidates than one slice may (a Spark job would cost more than the work: a daily incremental
    run is a small slice per period); otherwise as Spark tasks, one slice each, that run at once
    as far as Spark's task slots and `catalog.parallelism` allow."""
    from .slice_runner import COUNTS_DDL, counts_from_rows, run_here, slice_task

    counts: list[Count] = []
    elapsed: dict[int, float] = {}
    if not work.slices:
        return counts, elapsed
    if workspace.db.is_sqlite or sum(s.rows for s in work.slices) <= workspace.settings["catalog.slice_rows"]:
        rows_done = [0]

        def on_slice(index: int, found: list[Count], seconds: float) -> None:
            counts.extend(found)
            elapsed[index] = seconds
            rows_done[0] += work.slices[index].rows
            on_done(rows_done[0])

        run_here(workspace.db, work, range(len(work.slices)), on_slice)
        return counts, elapsed
    spark = job_spark(workspace.settings, metadata=True, writes=work.kind == "delete")
    task_work = replace(work, metadata=metadata_reference(workspace.settings.metadata_url, job_master(spark)))
    n = len(work.slices)
    frame = spark.range(0, n, 1, n).mapInArrow(lambda batches: slice_task(task_work, batches), COUNTS_DDL)
    total = sum(s.rows for s in work.slices)
    try:
        with track_tasks(spark, f"tidekeep-catalog-{os.getpid()}-{work.now_ms}",
                         lambda fraction: on_done(units_done(fraction, total))):
            rows = frame.collect()
    except Exception as exc:
        # a slice refused by the lease check fails its task, and Spark reports that as its own error:
        # if the lease is gone, say so with the typed error instead
        try:
            confirm_fence(workspace.db, work.fence)
        except LeaseLost as lost:
            raise lost from exc
        raise
    return counts_from_rows(rows)


__all__ = ["PeriodReport", "RuleCount", "RunReport", "run_retention_job"]
