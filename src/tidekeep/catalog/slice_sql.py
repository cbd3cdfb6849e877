"""The statements the retention job, its dry run and the impact summary run over one create-time
slice, inside the database (docs/design/catalog.md#slices). Built with SQLAlchemy from the same
compiled rule predicates as everything else (expressions/sql.py), bound parameters throughout.

- `rule_case`: the number of the first active rule (ascending rule number) whose expression
  matches the record, NULL when none does — Stroom's rule CASE.
- `logical_delete`: UPDATE every UNLOCKED record of the slice whose rule says DELETE in its period
  and no hold matches, with the run's fixed `now` as status time; returns what it changed as
  (rule, file_size). PostgreSQL sums those inside the database (a data-modifying WITH), so only
  one row per rule comes back.
- `would_delete`: the same choice as a grouped count, changing nothing (the dry run).
- `expired_by_rule`: the impact summary's grouped counts: per rule, feed and type, the records
  created before their rule's cutoff, held ones apart.
- `expired_by_window`: the retention forecast's grouped counts: per rule and whole-day window of
  create time after the rule's cutoff at now, the records its cutoff passes within the forecast,
  held ones apart (forecast_days.py turns each window into its day).
- `span_counts`: the planner's histogram (slice_plan.py): candidates per equal create-time span.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from ..store.schema_catalog import catalog_records
from .expressions import CompileContext, Expr, to_sqlalchemy

RuleExpressions = Sequence[tuple[int, Expr]]  # (rule number, expression), ascending rule number


def candidates(low: int, high: int) -> Any:
    """UNLOCKED records created in [low, high): one range of the (status, create_time) index."""
    t = catalog_records
    return sa.and_(t.c.status == "UNLOCKED", t.c.create_time >= low, t.c.create_time < high)


def rule_case(rules: RuleExpressions, ctx: CompileContext) -> Any:
    """The first matching rule's number (ascending), NULL when none matches."""
    t = catalog_records
    if not rules:
        return sa.cast(sa.null(), sa.Integer)
    return sa.case(*((to_sqlalchemy(expression, ctx, t), sa.literal(number, sa.Integer))
                     for number, expression in rules), else_=sa.null())


def span_counts(low: int, high: int, n: int) -> Any:
    """(span, count) of the candidates in [low, high) per span of slice_plan.span_bounds(low, high,
    n): integer arithmetic, the same as slice_plan.span_of."""
    t = catalog_records
    width = high - low
    n = max(1, min(n, width))  # as span_bounds: no span narrower than a millisecond
    span = ((t.c.create_time - sa.literal(low, sa.BigInteger)) * sa.literal(n, sa.BigInteger)) // sa.literal(
        width, sa.BigInteger)
    return sa.select(span.label("span"), sa.func.count()).where(candidates(low, high)).group_by(span)


def logical_delete(low: int, high: int, case: Any, deleting: Sequence[int], held: Any, now_ms: int,
                   postgres: bool) -> Any:
    """The slice's logical delete. PostgreSQL: rows (rule, rows, bytes), one per rule. SQLite (no
    data-modifying WITH): rows (rule, file_size), one per changed record, summed by the caller."""
    t = catalog_records
    changed = (sa.update(t).where(candidates(low, high), case.in_(list(deleting)), sa.not_(held))
               .values(status="DELETED", status_time=now_ms)
               .returning(case.label("rule"), t.c.file_size))
    if not postgres:
        return changed
    done = changed.cte("changed")
    return (sa.select(done.c.rule, sa.func.count(), sa.func.coalesce(sa.func.sum(done.c.file_size), 0))
            .group_by(done.c.rule))


def would_delete(low: int, high: int, case: Any, deleting: Sequence[int], held: Any) -> Any:
    """(rule, rows, bytes) the slice's logical delete would change now."""
    t = catalog_records
    judged = sa.select(case.label("rule"), t.c.file_size).where(candidates(low, high), sa.not_(held)).subquery()
    return (sa.select(judged.c.rule, sa.func.count(), sa.func.coalesce(sa.func.sum(judged.c.file_size), 0))
            .where(judged.c.rule.in_(list(deleting))).group_by(judged.c.rule))


def expired_by_rule(low: int, high: int, case: Any, cutoffs: Mapping[int, int], held: Any) -> Any:
    """(rule, feed, type, rows, bytes, held_rows): the candidates of the slice whose first matching
    rule expires (`cutoffs`: rule number → cutoff ms) and that were created before its cutoff."""
    t = catalog_records
    judged = sa.select(case.label("rule"), t.c.feed, t.c.type, t.c.file_size, t.c.create_time,
                       sa.case((held, 1), else_=0).label("held")).where(candidates(low, high)).subquery()
    cutoff = sa.case(*((judged.c.rule == number, sa.literal(value, sa.BigInteger))
                       for number, value in sorted(cutoffs.items())), else_=sa.literal(0, sa.BigInteger))
    free = 1 - judged.c.held
    return (sa.select(judged.c.rule, judged.c.feed, judged.c.type, sa.func.sum(free),
                      sa.func.coalesce(sa.func.sum(free * sa.func.coalesce(judged.c.file_size, 0)), 0),
                      sa.func.sum(judged.c.held))
            .where(judged.c.rule.in_(sorted(cutoffs)), judged.c.create_time < cutoff)
            .group_by(judged.c.rule, judged.c.feed, judged.c.type))


def expired_by_window(low: int, high: int, case: Any, firsts: Mapping[int, int], lasts: Mapping[int, int],
                      held: Any, day_ms: int) -> Any:
    """(rule, window, rows, bytes, held_rows): the candidates of the slice whose first matching
    rule expires and that were created before its cutoff at the end of the forecast (`lasts`),
    grouped by window: −1 before the rule's cutoff at now (`firsts`), else the whole `day_ms`
    after it, ⌊(create_time − first) / day_ms⌋ (a non-negative division: the same on both engines)."""
    t = catalog_records
    judged = sa.select(case.label("rule"), t.c.file_size, t.c.create_time,
                       sa.case((held, 1), else_=0).label("held")).where(candidates(low, high)).subquery()

    def per_rule(values: Mapping[int, int]) -> Any:
        return sa.case(*((judged.c.rule == number, sa.literal(value, sa.BigInteger))
                         for number, value in sorted(values.items())), else_=sa.literal(0, sa.BigInteger))

    first = per_rule(firsts)
    window = sa.case((judged.c.create_time < first, sa.literal(-1, sa.BigInteger)),
                     else_=(judged.c.create_time - first) // sa.literal(day_ms, sa.BigInteger))
    windowed = (sa.select(judged.c.rule, window.label("day_window"), judged.c.file_size, judged.c.held)
                .where(judged.c.rule.in_(sorted(lasts)), judged.c.create_time < per_rule(lasts)).subquery())
    free = 1 - windowed.c.held
    return (sa.select(windowed.c.rule, windowed.c.day_window, sa.func.sum(free),
                      sa.func.coalesce(sa.func.sum(free * sa.func.coalesce(windowed.c.file_size, 0)), 0),
                      sa.func.sum(windowed.c.held))
            .group_by(windowed.c.rule, windowed.c.day_window))


__all__ = ["RuleExpressions", "candidates", "expired_by_rule", "expired_by_window", "logical_delete", "rule_case",
           "span_counts", "would_delete"]
