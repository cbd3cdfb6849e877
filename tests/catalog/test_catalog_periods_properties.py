"""Property tests of the period algorithm against a brute-force oracle.

The oracle is the precedence rule (docs/design/catalog.md#precedence) applied to one record at a
time: the first active rule (by ascending rule number) that matches decides; the record is deleted
iff that rule is not forever and the record was created before the rule's cutoff. Records here
carry their match flags directly (one boolean per rule), so the test is about periods and
precedence, not expressions.
"""

from __future__ import annotations

import calendar
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.catalog.ages import Age, TimeUnit, cutoff_ms, minus
from tidekeep.catalog.expressions.ast import Condition, Op, Operator, Term
from tidekeep.catalog.periods import Period, decide, process_periods
from tidekeep.catalog.rules import RetentionRule

DAY = 86_400_000
YEAR_2000 = 946_684_800_000
YEAR_2040 = 2_208_988_800_000

FIXED_UNITS = [TimeUnit.MINUTES, TimeUnit.HOURS, TimeUnit.DAYS, TimeUnit.WEEKS]
ages = st.one_of(
    st.none(),  # forever
    st.builds(Age, st.integers(1, 40), st.sampled_from(list(TimeUnit))),
    st.builds(Age, st.integers(1, 9999), st.just(TimeUnit.YEARS)),  # cutoffs before the epoch
)


@st.composite
def rule_sets(draw: st.DrawFn, age_strategy: st.SearchStrategy[Age | None] = ages) -> list[RetentionRule]:
    numbers = draw(st.lists(st.integers(1, 50), min_size=0, max_size=6, unique=True))
    rules = []
    for number in numbers:
        expression_enabled = draw(st.booleans().filter(lambda b: b) | st.booleans())
        rules.append(RetentionRule(number, f"rule {number}", draw(st.booleans() | st.just(True)),
                                   Operator(Op.AND, (Term("Feed", Condition.EQUALS, f"F{number}"),),
                                            enabled=expression_enabled),
                                   draw(age_strategy)))
    return rules


@dataclass(frozen=True)
class Record:
    create_ms: int
    matches: dict[int, bool]  # rule number -> whether the record matches that rule


@st.composite
def records(draw: st.DrawFn, rules: list[RetentionRule], nows: list[int]) -> list[Record]:
    """Records near every cutoff (where mistakes live) and anywhere between the epoch and now; never
    before the epoch, which is where the time line starts (catalog records refuse earlier times)."""
    anchors = [r.cutoff_ms(now) for r in rules for now in nows] + [0, *nows]
    # where a cutoff moved between two runs: the records whose outcome changed in between
    moved = [sorted((r.cutoff_ms(min(nows)), r.cutoff_ms(max(nows)))) for r in rules if r.age is not None]
    out = []
    for _ in range(draw(st.integers(1, 25))):
        where = draw(st.sampled_from(["anchor", "moved", "anywhere"] if moved else ["anchor", "anywhere"]))
        if where == "anchor":
            create = max(0, draw(st.sampled_from(anchors)) + draw(st.integers(-3 * DAY, 3 * DAY)))
        elif where == "moved":
            low, high = draw(st.sampled_from(moved))
            create = max(0, draw(st.integers(low, high)))
        else:
            create = draw(st.integers(0, max(nows)))
        out.append(Record(create, {r.rule_number: draw(st.booleans()) for r in rules}))
    return out


def oracle_deleted(rules: list[RetentionRule], record: Record, now: int) -> bool:
    for rule in sorted(rules, key=lambda r: r.rule_number):
        if rule.enabled and rule.expression.enabled and record.matches[rule.rule_number]:
            return rule.age is not None and record.create_ms < cutoff_ms(now, rule.age)
    return False


def job_deleted(periods: list[Period], record: Record) -> bool:
    """What the job does to a record: find the period holding its create time, apply that period's
    actions in order."""
    holding = [p for p in periods if record.create_ms in p]
    assert len(holding) <= 1, "periods overlap"
    if not holding:
        return False
    (period,) = holding
    action = decide([record.matches[a.rule_number] for a in period.actions], period.actions)
    return action is not None and action.delete


def lowest_boundary(rules: list[RetentionRule], now: int) -> int:
    return min([0] + [r.cutoff_ms(now) for r in rules if r.enabled and r.expression.enabled])


nows = st.integers(YEAR_2000, YEAR_2040)


@settings(max_examples=300)
@given(rule_sets(), nows)
def test_trackerless_periods_tile_the_processed_span(rules: list[RetentionRule], now: int) -> None:
    periods = process_periods(rules, now)
    active = [r for r in rules if r.enabled and r.expression.enabled]
    boundaries = sorted({0} | {r.cutoff_ms(now) for r in active}, reverse=True)
    assert len(periods) == len(boundaries) - 1
    if periods:
        assert periods[0].to_ms == boundaries[0]  # [newest cutoff, now) is never processed
        assert periods[-1].from_ms == lowest_boundary(rules, now)
    for younger, older in itertools.pairwise(periods):
        assert older.to_ms == younger.from_ms  # contiguous, disjoint, youngest first
    for period in periods:
        assert period.from_ms < period.to_ms
        assert [a.rule_number for a in period.actions] == sorted(r.rule_number for r in active)
        forever = {r.rule_number for r in active if r.age is None}
        assert not any(a.delete for a in period.actions if a.rule_number in forever)


@settings(max_examples=300)
@given(st.data(), rule_sets(), nows)
def test_job_deletes_exactly_what_the_rules_say(data: st.DataObject, rules: list[RetentionRule], now: int) -> None:
    periods = process_periods(rules, now)
    for record in data.draw(records(rules, [now])):
        assert job_deleted(periods, record) == oracle_deleted(rules, record, now), record


def stroom_like_trackers(periods: list[Period], last_run: int) -> dict[str, int]:
    return {p.tracker_age: last_run for p in periods}


@settings(max_examples=300)
@given(st.data(), rule_sets(), nows, st.integers(0, 400 * DAY))
def test_tracked_periods_lie_inside_the_full_ones(data: st.DataObject, rules: list[RetentionRule], now: int,
                                                  since: int) -> None:
    full = process_periods(rules, now)
    keys = sorted({p.tracker_age for p in full})
    kept = data.draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    trackers = {key: now - since for key in kept}
    tracked = process_periods(rules, now, trackers)
    assert len(tracked) == len(full)
    only_fixed_units = all(r.age is None or r.age.unit in FIXED_UNITS for r in rules)
    for short, whole in zip(tracked, full, strict=True):
        assert (short.to_ms, short.tracker_age) == (whole.to_ms, whole.tracker_age)
        assert whole.from_ms <= short.from_ms <= short.to_ms
        if short.tracker_age not in trackers:
            assert short == whole
        elif only_fixed_units:
            # Stroom's formula exactly: the period reaches back `now − last_run` from its end
            assert short.from_ms == max(whole.from_ms, whole.to_ms - since)
        # the actions are those of the period's own start
        assert [a.delete for a in short.actions] == [
            r.age is not None and short.from_ms < r.cutoff_ms(now)
            for r in sorted((r for r in rules if r.enabled and r.expression.enabled), key=lambda r: r.rule_number)]


@st.composite
def month_end_nows(draw: st.DrawFn) -> int:
    """Times on the last days of a month, where calendar cutoffs jump by several days in one."""
    year, month = draw(st.integers(2000, 2039)), draw(st.integers(1, 12))
    day = calendar.monthrange(year, month)[1] - draw(st.sampled_from([0, 0, 0, 1, 2]))
    midnight = (datetime(year, month, day, tzinfo=UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
    return midnight + draw(st.sampled_from([0, 1, DAY - 1, DAY // 2]))


@settings(max_examples=400)
@given(st.data(), rule_sets(), st.one_of(nows, month_end_nows()),
       st.one_of(st.integers(0, 3 * DAY), st.integers(0, 400 * DAY)))
def test_incremental_run_with_trackers_finishes_the_work(data: st.DataObject, rules: list[RetentionRule],
                                                         first: int, gap: int) -> None:
    """A complete run at `first` saves every period's tracker; a run `gap` later, shortened by
    them, deletes everything the rules say is expired by then, and nothing they retain."""
    check_two_runs(data, rules, first, first + gap)


def check_two_runs(data: st.DataObject, rules: list[RetentionRule], first: int, second: int) -> None:
    before = process_periods(rules, first)
    after = process_periods(rules, second, stroom_like_trackers(before, first))
    for record in data.draw(records(rules, [first, second])):
        deleted_second = job_deleted(after, record)
        assert not deleted_second or oracle_deleted(rules, record, second), (record, after)
        # a calendar cutoff can step back (see test_catalog_rules_ages), so what the first run
        # deleted may look young again at the second; the union is what both runs' rules expire
        expired_by_either = oracle_deleted(rules, record, first) or oracle_deleted(rules, record, second)
        assert (job_deleted(before, record) or deleted_second) == expired_by_either, (record, after)


def test_calendar_cutoffs_move_further_than_the_clock() -> None:
    # the reason the tracked start is computed per cutoff: one day of clock, four days of cutoff
    one_month = Age(1, TimeUnit.MONTHS)
    first, second = 1_677_542_400_000, 1_677_628_800_000  # 2023-02-28, 2023-03-01
    assert minus(second, one_month) - minus(first, one_month) == 4 * DAY


calendar_ages = st.builds(Age, st.integers(1, 13), st.sampled_from([TimeUnit.MONTHS, TimeUnit.YEARS]))


@st.composite
def enabled_rule_sets(draw: st.DrawFn) -> list[RetentionRule]:
    """One to four active rules, mostly calendar ages: every rule takes part."""
    numbers = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4, unique=True))
    age = st.one_of(calendar_ages, st.builds(Age, st.integers(1, 20), st.just(TimeUnit.DAYS)), st.none())
    return [RetentionRule(n, f"rule {n}", True, Term("Feed", Condition.EQUALS, f"F{n}"), draw(age)) for n in numbers]


@settings(max_examples=300)
@given(st.data(), enabled_rule_sets(), month_end_nows(),
       st.one_of(st.integers(1, 4).map(lambda days: days * DAY), st.integers(0, 4 * DAY)))
def test_daily_runs_across_month_ends_miss_nothing(data: st.DataObject, rules: list[RetentionRule], first: int,
                                                   gap: int) -> None:
    # the same property where it is hardest: calendar ages, runs a few days apart around month ends
    check_two_runs(data, rules, first, first + gap)
