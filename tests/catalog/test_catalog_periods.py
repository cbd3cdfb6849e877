"""Processing periods: Stroom's TestDataRetentionPolicyExecutor scenarios, the four-rule example of
docs/catalog-rules.md, and the decision helpers. Expected times are written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidekeep.catalog.ages import Age, TimeUnit, parse_age
from tidekeep.catalog.expressions.ast import Condition, Op, Operator, Term
from tidekeep.catalog.periods import Period, RuleAction, decide, deciding_rule, expired, process_periods
from tidekeep.catalog.rules import RetentionRule

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = 86_400_000
NOW = "2020-10-15T12:34:56.789"  # mid-month, with milliseconds: Stroom's formulas and ours agree here


def ms(text: str) -> int:
    return (datetime.fromisoformat(text).replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)


def rule(number: int, age: str, enabled: bool = True) -> RetentionRule:
    # like Stroom's test helper: each rule tests its own feed
    return RetentionRule(number, f"Rule{number}_{age}", enabled, Term("Feed", Condition.EQUALS, f"RULE_{number}FEED"),
                         parse_age(age))


def shape(periods: list[Period]) -> list[tuple[int, int, str, str]]:
    """(from, to, tracker key, outcomes by rule number) per period, e.g. "1D 2R"."""
    return [(p.from_ms, p.to_ms, p.tracker_age,
             " ".join(f"{a.rule_number}{'D' if a.delete else 'R'}" for a in p.actions)) for p in periods]


def test_gh1636() -> None:
    periods = process_periods([rule(1, "2 days"), rule(2, "1 month")], ms(NOW))
    assert shape(periods) == [
        (ms("2020-09-15T12:34:56.789"), ms("2020-10-13T12:34:56.789"), "1 Month", "1D 2R"),
        (0, ms("2020-09-15T12:34:56.789"), "Forever", "1D 2D"),
    ]


def test_four_rules_1() -> None:
    periods = process_periods([rule(1, "10 days"), rule(2, "1 month"), rule(3, "1 year"), rule(4, "forever")],
                              ms(NOW))
    assert shape(periods) == [
        (ms("2020-09-15T12:34:56.789"), ms("2020-10-05T12:34:56.789"), "1 Month", "1D 2R 3R 4R"),
        (ms("2019-10-15T12:34:56.789"), ms("2020-09-15T12:34:56.789"), "1 Year", "1D 2D 3R 4R"),
        (0, ms("2019-10-15T12:34:56.789"), "Forever", "1D 2D 3D 4R"),
    ]


def test_four_rules_2_forever_first() -> None:
    periods = process_periods([rule(1, "forever"), rule(2, "1 year"), rule(3, "1 month"), rule(4, "1 day")],
                              ms(NOW))
    assert shape(periods) == [
        (ms("2020-09-15T12:34:56.789"), ms("2020-10-14T12:34:56.789"), "1 Month", "1R 2R 3R 4D"),
        (ms("2019-10-15T12:34:56.789"), ms("2020-09-15T12:34:56.789"), "1 Year", "1R 2R 3D 4D"),
        (0, ms("2019-10-15T12:34:56.789"), "Forever", "1R 2D 3D 4D"),
    ]


def stroom_trackers(rules: list[RetentionRule], now: int, last_run: int) -> dict[str, int]:
    """Stroom's createTrackers: one per rule age plus "Forever", except the youngest age's
    (never saved: the data younger than the newest cutoff is never processed)."""
    youngest = max(rules, key=lambda r: r.cutoff_ms(now))
    trackers = {r.age_string: last_run for r in rules if r is not youngest}
    trackers["Forever"] = last_run
    return trackers


def test_four_rules_with_recent_tracker() -> None:
    rules = [rule(1, "10 days"), rule(2, "1 month"), rule(3, "1 year"), rule(4, "forever")]
    periods = process_periods(rules, ms(NOW), stroom_trackers(rules, ms(NOW), ms(NOW) - 2 * DAY))
    assert shape(periods) == [
        (ms("2020-10-03T12:34:56.789"), ms("2020-10-05T12:34:56.789"), "1 Month", "1D 2R 3R 4R"),
        (ms("2020-09-13T12:34:56.789"), ms("2020-09-15T12:34:56.789"), "1 Year", "1D 2D 3R 4R"),
        (ms("2019-10-13T12:34:56.789"), ms("2019-10-15T12:34:56.789"), "Forever", "1D 2D 3D 4R"),
    ]


def test_four_rules_with_old_tracker() -> None:
    # a 90-day-old tracker is longer than the first two periods: they are processed whole
    rules = [rule(1, "10 days"), rule(2, "1 month"), rule(3, "2 months"), rule(4, "1 year")]
    periods = process_periods(rules, ms(NOW), stroom_trackers(rules, ms(NOW), ms(NOW) - 90 * DAY))
    assert shape(periods) == [
        (ms("2020-09-15T12:34:56.789"), ms("2020-10-05T12:34:56.789"), "1 Month", "1D 2R 3R 4R"),
        (ms("2020-08-15T12:34:56.789"), ms("2020-09-15T12:34:56.789"), "2 Months", "1D 2D 3R 4R"),
        (ms("2020-05-17T12:34:56.789"), ms("2020-08-15T12:34:56.789"), "1 Year", "1D 2D 3D 4R"),
        (ms("2019-07-17T12:34:56.789"), ms("2019-10-15T12:34:56.789"), "Forever", "1D 2D 3D 4D"),
    ]


def test_four_rules_with_missing_tracker() -> None:
    # Stroom's own fixed date; the "1 Month" and "1 Year" trackers are missing
    rules = [rule(1, "10 days"), rule(2, "1 month"), rule(3, "2 months"), rule(4, "1 year")]
    now = ms("2020-10-01T00:00:00")
    trackers = stroom_trackers(rules, now, now - DAY)
    del trackers["1 Month"], trackers["1 Year"]
    assert sorted(trackers) == ["2 Months", "Forever"]
    periods = process_periods(rules, now, trackers)
    assert shape(periods) == [
        (ms("2020-09-01T00:00:00"), ms("2020-09-21T00:00:00"), "1 Month", "1D 2R 3R 4R"),  # no tracker: whole
        # Stroom starts this one at 2020-08-31 (one day before the one-month cutoff). But at the last
        # run (2020-09-30) the one-month cutoff stood at 2020-08-30, so records created on 08-30 have
        # expired since; Stroom would never look at them again. We start where the cutoff stood.
        (ms("2020-08-30T00:00:00"), ms("2020-09-01T00:00:00"), "2 Months", "1D 2D 3R 4R"),
        (ms("2019-10-01T00:00:00"), ms("2020-08-01T00:00:00"), "1 Year", "1D 2D 3D 4R"),  # no tracker: whole
        (ms("2019-09-30T00:00:00"), ms("2019-10-01T00:00:00"), "Forever", "1D 2D 3D 4D"),
    ]


def test_no_rules_no_periods() -> None:
    assert process_periods([], ms(NOW)) == []
    assert process_periods([rule(1, "forever")], ms(NOW)) == []  # forever retains all: nothing to process
    assert process_periods([rule(1, "1 day", enabled=False)], ms(NOW)) == []


def test_one_rule() -> None:
    assert shape(process_periods([rule(1, "2 months")], ms(NOW))) == [
        (0, ms("2020-08-15T12:34:56.789"), "Forever", "1D")]


def test_two_active_one_inactive() -> None:
    periods = process_periods([rule(1, "1 month"), rule(2, "2 months", enabled=False), rule(3, "3 months")],
                              ms(NOW))
    assert shape(periods) == [
        (ms("2020-07-15T12:34:56.789"), ms("2020-09-15T12:34:56.789"), "3 Months", "1D 3R"),
        (0, ms("2020-07-15T12:34:56.789"), "Forever", "1D 3D"),
    ]


def test_a_rule_with_a_disabled_expression_is_inactive() -> None:
    disabled = RetentionRule(2, "off", True, Operator(Op.AND, (), enabled=False), Age(2, TimeUnit.MONTHS))
    all_children_disabled = RetentionRule(
        3, "all", True, Operator(Op.AND, (Term("Feed", Condition.EQUALS, "X", enabled=False),)),
        Age(3, TimeUnit.MONTHS))
    periods = process_periods([rule(1, "1 month"), disabled, all_children_disabled], ms(NOW))
    assert shape(periods) == [  # rule 3 still takes part: its expression matches everything
        (ms("2020-07-15T12:34:56.789"), ms("2020-09-15T12:34:56.789"), "3 Months", "1D 3R"),
        (0, ms("2020-07-15T12:34:56.789"), "Forever", "1D 3D"),
    ]


def test_same_rule_ages_share_a_period() -> None:
    assert shape(process_periods([rule(1, "2 months"), rule(2, "2 months")], ms(NOW))) == [
        (0, ms("2020-08-15T12:34:56.789"), "Forever", "1D 2D")]
    # different ages with one cutoff ("1 Week" = "7 Days") also share one; the key is the lower-numbered rule's
    assert shape(process_periods([rule(1, "1 day"), rule(3, "7 days"), rule(2, "1 week")], ms(NOW))) == [
        (ms("2020-10-08T12:34:56.789"), ms("2020-10-14T12:34:56.789"), "1 Week", "1D 2R 3R"),
        (0, ms("2020-10-08T12:34:56.789"), "Forever", "1D 2D 3D")]


def test_actions_follow_rule_numbers_not_list_order() -> None:
    periods = process_periods([rule(9, "1 year"), rule(2, "1 day"), rule(5, "forever")], ms(NOW))
    assert [[a.rule_number for a in p.actions] for p in periods] == [[2, 5, 9], [2, 5, 9]]


def test_the_four_rule_example() -> None:
    special = RetentionRule(1, "Special", True, Term("Feed", Condition.EQUALS, "SPECIAL_DATA"), Age(10, "YEARS"))
    internal = RetentionRule(2, "Internal", True, Term("Feed", Condition.EQUALS, "INTERNAL_LOGS"), Age(3, "MONTHS"))
    everything = RetentionRule(3, "All feeds", True, Term("Feed", Condition.EQUALS, "*"), Age(5, "YEARS"))
    default = RetentionRule(4, "Default forever rule", True, Operator(), None)
    rules = [special, internal, everything, default]
    now = ms("2020-01-01T00:00:00")
    assert shape(process_periods(rules, now)) == [
        (ms("2015-01-01T00:00:00"), ms("2019-10-01T00:00:00"), "5 Years", "1R 2D 3R 4R"),
        (ms("2010-01-01T00:00:00"), ms("2015-01-01T00:00:00"), "10 Years", "1R 2D 3D 4R"),
        # a forever rule always retains, in the oldest period too (docs/design/catalog.md#precedence)
        (0, ms("2010-01-01T00:00:00"), "Forever", "1D 2D 3D 4R"),
    ]
    # the next day, with the trackers of that run: every period is one day long
    next_day = ms("2020-01-02T00:00:00")
    trackers = {"5 Years": now, "10 Years": now, "Forever": now}
    assert shape(process_periods(rules, next_day, trackers)) == [
        (ms("2019-10-01T00:00:00"), ms("2019-10-02T00:00:00"), "5 Years", "1R 2D 3R 4R"),
        (ms("2015-01-01T00:00:00"), ms("2015-01-02T00:00:00"), "10 Years", "1R 2D 3D 4R"),
        (ms("2010-01-01T00:00:00"), ms("2010-01-02T00:00:00"), "Forever", "1D 2D 3D 4R"),
    ]


def test_calendar_gap_that_stroom_misses_is_processed() -> None:
    # one month: at 2023-02-28 the cutoff is 2023-01-28, a day later it is 2023-02-01 (four days on).
    # Stroom's period would be [2023-01-31, 2023-02-01) and skip a record created on 2023-01-29.
    rules = [rule(1, "1 day"), rule(2, "1 month")]
    first, second = ms("2023-02-28T00:00:00"), ms("2023-03-01T00:00:00")
    record = ms("2023-01-29T10:00:00")
    assert not any(record in p and p.actions[1].delete for p in process_periods(rules, first))
    trackers = {p.tracker_age: first for p in process_periods(rules, first)}
    periods = process_periods(rules, second, trackers)
    assert shape(periods) == [
        (ms("2023-02-27T00:00:00"), ms("2023-02-28T00:00:00"), "1 Month", "1D 2R"),
        (ms("2023-01-28T00:00:00"), ms("2023-02-01T00:00:00"), "Forever", "1D 2D"),
    ]
    assert record in periods[1]


def test_tracker_from_the_future_gives_an_empty_period() -> None:
    periods = process_periods([rule(1, "1 day"), rule(2, "1 month")], ms(NOW), {"Forever": ms(NOW) + DAY})
    assert [p.empty for p in periods] == [False, True]
    assert periods[1].from_ms == periods[1].to_ms == ms("2020-09-15T12:34:56.789")


def test_boundary_record_is_retained() -> None:
    one_month = rule(1, "1 month")
    now = ms("2024-03-31T00:00:00")
    cutoff = ms("2024-02-29T00:00:00")
    assert one_month.cutoff_ms(now) == cutoff
    assert not expired(one_month, cutoff, now) and expired(one_month, cutoff - 1, now)
    (period,) = process_periods([one_month], now)
    assert cutoff not in period and cutoff - 1 in period and period.actions[0].delete


def test_decide_takes_the_first_matching_rule() -> None:
    actions = (RuleAction(1, "keep", False), RuleAction(2, "drop", True))
    assert decide([True, True], actions) == actions[0]  # rule 1 (forever) beats rule 2
    assert decide([False, True], actions) == actions[1]
    assert decide([False, False], actions) is None
    with pytest.raises(ValueError, match="1 match flags for 2 rule actions"):
        decide([True], actions)


def test_deciding_rule_and_precedence() -> None:
    forever, one_day = rule(1, "forever"), rule(2, "1 day")
    now = ms(NOW)
    old = now - 10 * DAY
    chosen = deciding_rule([one_day, forever], {1: True, 2: True})
    assert chosen is forever and not expired(chosen, old, now)
    swapped = [RetentionRule(2, "f", True, forever.expression, None), RetentionRule(1, "d", True,
                                                                                   one_day.expression, Age(1, "DAYS"))]
    chosen = deciding_rule(swapped, {1: True, 2: True})
    assert chosen is swapped[1] and expired(chosen, old, now)
    assert deciding_rule([forever, one_day], {1: False, 2: False}) is None and not expired(None, old, now)
