"""Retention ages: calendar arithmetic against dateutil's relativedelta (Java's LocalDateTime
semantics: keep the day of month, clamp to the month's end), the age strings trackers are keyed
by, parsing, and bad input."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime, timedelta

import pytest
from dateutil.relativedelta import relativedelta
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.catalog.ages import (
    FOREVER,
    Age,
    TimeUnit,
    age_string,
    cutoff_ms,
    minus,
    parse_age,
    plus,
    retain_until_ms,
)
from tidekeep.errors import InvalidInput

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DAY = 86_400_000
GREGORIAN_CYCLE_MS = 146_097 * DAY  # the calendar repeats every 400 years


def ms(text: str) -> int:
    return (datetime.fromisoformat(text).replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)


def to_dt(value: int) -> datetime:
    return EPOCH + timedelta(milliseconds=value)


def oracle_delta(age: Age) -> relativedelta:
    return {
        TimeUnit.MINUTES: relativedelta(minutes=age.amount),
        TimeUnit.HOURS: relativedelta(hours=age.amount),
        TimeUnit.DAYS: relativedelta(days=age.amount),
        TimeUnit.WEEKS: relativedelta(weeks=age.amount),
        TimeUnit.MONTHS: relativedelta(months=age.amount),
        TimeUnit.YEARS: relativedelta(years=age.amount),
    }[age.unit]


ages = st.builds(Age, st.integers(1, 9999), st.sampled_from(list(TimeUnit)))
# keep every result inside datetime's years 1..9999 so the oracle can compute it
small_ages = st.builds(Age, st.integers(1, 900), st.sampled_from(list(TimeUnit)))


# results stay inside datetime's years 1..9999, so the oracle can compute them
@given(st.integers(ms("1000-01-01T00:00:00"), ms("8000-12-31T23:59:59")), small_ages)
def test_minus_and_plus_match_relativedelta(now: int, age: Age) -> None:
    delta = oracle_delta(age)
    assert minus(now, age) == (to_dt(now) - delta - EPOCH) // timedelta(milliseconds=1)
    assert plus(now, age) == (to_dt(now) + delta - EPOCH) // timedelta(milliseconds=1)


@st.composite
def month_ends(draw: st.DrawFn) -> int:
    """A time on the last day of a month (28th, 29th, 30th or 31st), where clamping matters."""
    year, month = draw(st.integers(1600, 2400)), draw(st.integers(1, 12))
    last_day = calendar.monthrange(year, month)[1]
    return ms(f"{year:04d}-{month:02d}-{last_day:02d}T00:00:00") + draw(st.integers(0, DAY - 1))


@given(month_ends(), st.integers(1, 120), st.sampled_from([TimeUnit.MONTHS, TimeUnit.YEARS]))
def test_month_ends_and_leap_days_clamp_like_relativedelta(now: int, amount: int, unit: TimeUnit) -> None:
    age = Age(amount, unit)
    assert minus(now, age) == (to_dt(now) - oracle_delta(age) - EPOCH) // timedelta(milliseconds=1)
    assert plus(now, age) == (to_dt(now) + oracle_delta(age) - EPOCH) // timedelta(milliseconds=1)


@given(st.integers(-(10**16), 10**16), ages)
def test_arithmetic_repeats_every_gregorian_cycle(now: int, age: Age) -> None:
    # beyond datetime's range (9999-year ages reach far before year 1) the calendar still repeats
    # every 400 years, so shifting `now` by a whole cycle shifts the result by the same amount
    assert minus(now + GREGORIAN_CYCLE_MS, age) == minus(now, age) + GREGORIAN_CYCLE_MS
    assert plus(now - GREGORIAN_CYCLE_MS, age) == plus(now, age) - GREGORIAN_CYCLE_MS


@given(st.integers(-(10**15), 10**15), ages)
def test_minus_is_before_now_and_plus_after(now: int, age: Age) -> None:
    assert minus(now, age) < now < plus(now, age)


@given(st.integers(-(10**15), 10**15), st.builds(Age, st.integers(1, 9999), st.sampled_from(
    [TimeUnit.MINUTES, TimeUnit.HOURS, TimeUnit.DAYS, TimeUnit.WEEKS])), st.integers(0, 10**12))
def test_fixed_length_cutoffs_move_with_the_clock(now: int, age: Age, later: int) -> None:
    assert minus(now + later, age) - minus(now, age) == later


def test_calendar_cutoffs_can_step_back_as_in_java() -> None:
    # clamping keeps the time of day, so across a clamped day the cutoff steps back (LocalDateTime does
    # the same): a record deleted just before midnight may look retained again just after it
    one_month = Age(1, TimeUnit.MONTHS)
    assert minus(ms("2000-03-29T23:59:59.999"), one_month) == ms("2000-02-29T23:59:59.999")
    assert minus(ms("2000-03-30T00:00:00"), one_month) == ms("2000-02-29T00:00:00")
    assert minus(ms("2000-03-31T23:59:59.999"), one_month) == ms("2000-02-29T23:59:59.999")
    assert minus(ms("2000-04-01T00:00:00"), one_month) == ms("2000-03-01T00:00:00")


def test_calendar_edge_from_the_issue() -> None:
    now = ms("2024-03-31T00:00:00")
    assert minus(now, Age(1, TimeUnit.MONTHS)) == ms("2024-02-29T00:00:00")
    assert minus(ms("2023-03-31T00:00:00"), Age(1, TimeUnit.MONTHS)) == ms("2023-02-28T00:00:00")
    assert minus(ms("2024-02-29T06:30:00"), Age(1, TimeUnit.YEARS)) == ms("2023-02-28T06:30:00")
    assert minus(ms("2024-02-29T06:30:00"), Age(4, TimeUnit.YEARS)) == ms("2020-02-29T06:30:00")
    assert plus(ms("2024-01-31T00:00:00"), Age(1, TimeUnit.MONTHS)) == ms("2024-02-29T00:00:00")
    assert minus(ms("2024-03-10T02:30:00"), Age(1, TimeUnit.DAYS)) == ms("2024-03-09T02:30:00")  # UTC: no DST


def test_cutoff_and_retain_until() -> None:
    now = ms("2024-03-31T00:00:00")
    assert cutoff_ms(now, None) == 0
    assert cutoff_ms(now, Age(2, TimeUnit.WEEKS)) == ms("2024-03-17T00:00:00")
    assert retain_until_ms(now, None) is None
    assert retain_until_ms(ms("2023-02-28T00:00:00"), Age(1, TimeUnit.YEARS)) == ms("2024-02-28T00:00:00")


@pytest.mark.parametrize(("age", "text"), [
    (Age(1, TimeUnit.MONTHS), "1 Month"),
    (Age(30, TimeUnit.DAYS), "30 Days"),
    (Age(1, TimeUnit.YEARS), "1 Year"),
    (Age(10, TimeUnit.YEARS), "10 Years"),
    (Age(1, TimeUnit.MINUTES), "1 Minute"),
    (Age(90, TimeUnit.MINUTES), "90 Minutes"),
    (Age(1, TimeUnit.HOURS), "1 Hour"),
    (Age(2, TimeUnit.WEEKS), "2 Weeks"),
    (None, "Forever"),
])
def test_age_strings_are_stroom_s(age: Age | None, text: str) -> None:
    assert age_string(age) == text
    assert parse_age(text) == age  # the tracker key reads back as the same age
    assert FOREVER == "Forever"


@pytest.mark.parametrize(("text", "expected"), [
    ("30d", Age(30, TimeUnit.DAYS)),
    ("30 days", Age(30, TimeUnit.DAYS)),
    ("1 month", Age(1, TimeUnit.MONTHS)),
    ("3mo", Age(3, TimeUnit.MONTHS)),
    (" 10 YEARS ", Age(10, TimeUnit.YEARS)),
    ("5y", Age(5, TimeUnit.YEARS)),
    ("12h", Age(12, TimeUnit.HOURS)),
    ("45 min", Age(45, TimeUnit.MINUTES)),
    ("2w", Age(2, TimeUnit.WEEKS)),
    ("9999 years", Age(9999, TimeUnit.YEARS)),
    ("forever", None),
    ("Forever", None),
    ((3, "months"), Age(3, TimeUnit.MONTHS)),
    ((7, TimeUnit.DAYS), Age(7, TimeUnit.DAYS)),
    ([1, "YEARS"], Age(1, TimeUnit.YEARS)),
])
def test_parse_age(text: object, expected: Age | None) -> None:
    assert parse_age(text) == expected


@given(ages)
def test_age_string_round_trips(age: Age) -> None:
    assert parse_age(age_string(age)) == age
    assert parse_age((age.amount, age.unit.value)) == age


@pytest.mark.parametrize(("value", "message"), [
    ("0 days", "rule 3: age: amount 0 out of range: expected 1..9999"),
    ("-2 days", "rule 3: age: amount -2 out of range"),
    ("10000 years", "rule 3: age: amount 10000 out of range"),
    ("3 fortnights", "rule 3: age: unknown unit 'fortnights'"),
    ("3m", "rule 3: age: ambiguous unit 'm'"),
    ("30", "rule 3: age: '30' has no unit"),
    ("soon", "rule 3: age: invalid 'soon'"),
    ("1.5 days", "rule 3: age: invalid '1.5 days'"),
    ((0, "days"), "rule 3: age: amount 0 out of range"),
    ((True, "days"), "rule 3: age: amount True is not a whole number"),
    ((3, "eons"), "rule 3: age: unknown unit 'eons'"),
    (3, "rule 3: age: invalid 3"),
])
def test_bad_ages_name_the_place(value: object, message: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse_age(value, where="rule 3: age")
    assert str(raised.value).startswith(message), str(raised.value)


def test_age_constructor_validates() -> None:
    with pytest.raises(InvalidInput, match="amount 0 out of range"):
        Age(0, TimeUnit.DAYS)
    with pytest.raises(InvalidInput, match="unknown unit 'DECADES'"):
        Age(1, "DECADES")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="not a whole number"):
        Age(1.0, TimeUnit.DAYS)  # type: ignore[arg-type]
    assert Age(2, "weeks") == Age(2, TimeUnit.WEEKS)  # type: ignore[arg-type]
