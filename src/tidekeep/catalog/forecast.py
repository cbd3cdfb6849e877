"""The retention forecast (docs/catalog.md#retention-forecast): what the retention job would
delete if it ran at `now` and at the end of each of the next N days, for the saved rules or rules
not yet saved, changing nothing.

Day 0 is the impact summary at `now` (impact.py), per rule instead of per rule, feed and type.
Day d (1..N) holds the records that become deletable during (now + (d−1)·24h, now + d·24h]: an
UNLOCKED record whose first matching active rule (ascending rule number) is not forever and whose
create time is before that rule's cutoff at the end of day d (cutoff_ms(now + d·24h, age), calendar
months and years included) but not at the end of any earlier day. Held records are counted apart
(`held_rows`); LOCKED records and forever rules never appear.

It is one pass over the records, like the impact summary: the same create-time slices and the same
rule CASE inside the database (slice_sql.py `expired_by_window`), run where the job's slices run,
grouped by rule and by whole-day window after the rule's cutoff at now; forecast_days.py turns each
window into its day. The forecast assumes that nothing else changes meanwhile: the same records,
rules, holds and dictionaries, with the rules' and holds' relative dates (`now()-7d`) taken at `now`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from ..spark.progress import Progress
from .forecast_days import check_days, day_cutoffs, day_of_window

if TYPE_CHECKING:
    from ..store.house import Workspace


@dataclass(frozen=True)
class ForecastRow:
    day: int  # 0: deletable now; d: becomes deletable in (now + (d−1)·24h, now + d·24h]
    rule: int
    rule_name: str
    age: str
    rows: int
    bytes: int
    held_rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CatalogForecast:
    now_ms: int
    days: int
    rules_version: str  # "" for rules not saved
    rows: tuple[ForecastRow, ...]  # by day, then rule

    @property
    def total_rows(self) -> int:
        return sum(r.rows for r in self.rows)

    @property
    def total_bytes(self) -> int:
        return sum(r.bytes for r in self.rows)

    @property
    def held_rows(self) -> int:
        return sum(r.held_rows for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {"now_ms": self.now_ms, "days": self.days, "rules_version": self.rules_version,
                "total_rows": self.total_rows, "total_bytes": self.total_bytes, "held_rows": self.held_rows,
                "rows": [r.to_dict() for r in self.rows]}


def catalog_forecast(workspace: Workspace, rules: Any = None, now_ms: int | None = None, days: int = 7,
                     progress: Progress | None = None) -> CatalogForecast:
    """The forecast for the saved rules (None) or `rules` (a RuleSet, a list of rules or a rules
    file, as impact_summary takes them) over days 0..`days` (0..3660). `progress` counts the
    candidate records scanned."""
    from .impact import add_count, count_expiring, resolve_rules
    from .job import rules_that_matter
    from .rules import active_rules
    from .slice_runner import FORECAST, PeriodRules

    days = check_days(days)
    now = workspace.clock.now_ms() if now_ms is None else now_ms
    version, all_rules = resolve_rules(workspace, rules)
    active = active_rules(all_rules)
    expiring = [r for r in active if r.age is not None]
    if not expiring:
        return CatalogForecast(now, days, version, ())
    cutoffs = {r.rule_number: day_cutoffs(now, r.age, days) for r in expiring if r.age is not None}
    case_rules = rules_that_matter(active, set(cutoffs))
    period = PeriodRules(tuple((r.rule_number, r.expression) for r in case_rules),
                         cutoffs={n: c.first for n, c in cutoffs.items()},
                         last_cutoffs={n: c.last for n, c in cutoffs.items()})
    # the candidates: created before the latest cutoff of any rule over the whole forecast
    counts = count_expiring(workspace, FORECAST, now, period, max(c.last for c in cutoffs.values()), progress)
    merged: dict[tuple[int, int], list[int]] = {}
    for count in counts:
        assert count.day_window is not None
        day = day_of_window(cutoffs[count.rule], count.day_window)
        if day is None:  # cannot happen: the statement keeps only create times before the last cutoff
            raise AssertionError(f"rule {count.rule}: window {count.day_window} is past the forecast")
        add_count(merged, (day, count.rule), count)
    by_number = {r.rule_number: r for r in expiring}
    rows = [ForecastRow(day, rule, by_number[rule].name, by_number[rule].age_string, *totals)
            for (day, rule), totals in sorted(merged.items())]
    return CatalogForecast(now, days, version, tuple(rows))


__all__ = ["CatalogForecast", "ForecastRow", "catalog_forecast"]
