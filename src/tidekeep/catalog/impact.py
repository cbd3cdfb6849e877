"""The impact summary: what the retention job would delete if it ran now with no trackers
(docs/design/catalog.md#impact), per rule, feed and type — for the saved rules or for rules not yet
saved.

It runs the same slices and the same rule CASE as the job, inside the database (slice_sql.py,
`expired_by_rule`), so its counts are the job's counts by construction: an UNLOCKED record whose
first matching active rule (ascending rule number) is not forever and whose create time is
before that rule's cutoff (now − age). Held records are counted apart (`held_rows`): they would be
deleted but for a hold. Forever rules never appear. Unlike Stroom's summary, LOCKED records are
not counted, because the job never deletes them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..spark.progress import Progress, monotonic

if TYPE_CHECKING:
    from ..store.house import Workspace
    from .slice_runner import Count, PeriodRules


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
    from .ages import cutoff_ms
    from .job import rules_that_matter
    from .rules import active_rules
    from .slice_runner import IMPACT, PeriodRules

    now = workspace.clock.now_ms() if now_ms is None else now_ms
    version, all_rules = resolve_rules(workspace, rules)
    active = active_rules(all_rules)
    expiring = [r for r in active if r.age is not None]
    if not expiring:
        return ImpactSummary(now, version, ())
    cutoffs = {r.rule_number: cutoff_ms(now, r.age) for r in expiring}
    case_rules = rules_that_matter(active, set(cutoffs))
    period = PeriodRules(tuple((r.rule_number, r.expression) for r in case_rules), cutoffs=cutoffs)
    counts = count_expiring(workspace, IMPACT, now, period, max(cutoffs.values()), progress)
    merged: dict[tuple[int, str, str], list[int]] = {}
    for count in counts:
        add_count(merged, (count.rule, count.feed or "", count.type or ""), count)
    by_number = {r.rule_number: r for r in expiring}
    rows = [ImpactRow(rule, by_number[rule].name, by_number[rule].age_string, feed, type_, *totals)
            for (rule, feed, type_), totals in sorted(merged.items())]
    return ImpactSummary(now, version, tuple(rows))


def count_expiring(workspace: Workspace, kind: str, now: int, period: PeriodRules, upper: int,
                   progress: Progress | None) -> list[Count]:
    """The grouped counts of `kind` (IMPACT or the forecast's) over the UNLOCKED records created
    before `upper`, run as the job runs its slices; `progress` in records as the slices finish."""
    from .job import load_dictionaries, plan_period, run_slices
    from .slice_runner import PlannedSlice, SliceWork

    if not workspace.db.is_sqlite:
        # Spark tasks may open the metadata store (job.py)
        from ..spark.cluster import check_settings_reach

        check_settings_reach(workspace.settings, metadata=True)
    with workspace.db.read() as conn:
        slices = plan_period(conn, 0, upper, workspace.settings["catalog.slice_rows"])
    work = SliceWork(kind, now, (period,), tuple(PlannedSlice(0, s.low, s.high, s.rows) for s in slices),
                     load_dictionaries(workspace), parallelism=workspace.settings["catalog.parallelism"])
    total = sum(s.rows for s in slices)
    report = monotonic(progress or (lambda _done, _total: None))
    report(0, total)
    counts, _elapsed = run_slices(workspace, work, lambda done: report(done, total))
    report(total, total)
    return counts


def add_count(merged: dict[Any, list[int]], key: Any, count: Count) -> None:
    """Add a slice's count to `merged[key]`: [rows, bytes, held rows]."""
    entry = merged.setdefault(key, [0, 0, 0])
    entry[0] += count.rows
    entry[1] += count.bytes
    entry[2] += count.held_rows
