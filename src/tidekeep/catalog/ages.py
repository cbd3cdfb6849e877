"""Retention ages: an amount of minutes, hours, days, weeks, months or years (Stroom's rule ages).

Minutes to weeks are fixed lengths of time. Months and years are calendar arithmetic in UTC, as
Stroom does with Java's LocalDateTime: the day of the month is kept and clamped to the last day of
the target month, so 2024-03-31 minus 1 month is 2024-02-29 and 2024-02-29 minus 1 year is
2023-02-28. Clamping keeps the time of day, so a calendar cutoff can step back as the clock moves
on (2000-03-29T23:59 minus a month is 2000-02-29T23:59, 2000-03-30T00:00 minus a month is
2000-02-29T00:00), exactly as in Java. The arithmetic is done on integers over the proleptic
Gregorian calendar, so it has no year-1..9999 limit: a 9999-year cutoff is simply far before the
epoch.

A forever age is `None` wherever an `Age | None` is taken; its cutoff is the epoch.

Pure: no storage, no clock. `now` always comes in as an argument.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..civil_dates import civil_from_days, days_from_civil
from ..errors import InvalidInput

MIN_AMOUNT = 1
MAX_AMOUNT = 9999  # the rule editor's limit (docs/design/catalog.md#expressions)
EPOCH_MS = 0
FOREVER = "Forever"  # the age string of a forever rule and of the epoch period's tracker

_MS_PER_DAY = 86_400_000


class TimeUnit(StrEnum):
    """Values are Stroom's TimeUnit names, as they appear in a DataRetentionRules document."""

    MINUTES = "MINUTES"
    HOURS = "HOURS"
    DAYS = "DAYS"
    WEEKS = "WEEKS"
    MONTHS = "MONTHS"
    YEARS = "YEARS"

    @property
    def display(self) -> str:
        """Stroom's display value, used in the age string: "Minutes", "Months", ..."""
        return self.value.capitalize()


_FIXED_MS: dict[TimeUnit, int] = {
    TimeUnit.MINUTES: 60_000,
    TimeUnit.HOURS: 3_600_000,
    TimeUnit.DAYS: _MS_PER_DAY,
    TimeUnit.WEEKS: 7 * _MS_PER_DAY,
}

# spellings accepted when parsing; a bare "m" is refused because it means minutes in durations
# ("90m") and months in everyday speech, and guessing wrong would delete data 43,800 times early
_UNIT_WORDS: dict[str, TimeUnit] = {}
for _unit, _words in {
    TimeUnit.MINUTES: ("min", "mins", "minute", "minutes"),
    TimeUnit.HOURS: ("h", "hr", "hrs", "hour", "hours"),
    TimeUnit.DAYS: ("d", "day", "days"),
    TimeUnit.WEEKS: ("w", "wk", "wks", "week", "weeks"),
    TimeUnit.MONTHS: ("mo", "mon", "mons", "month", "months"),
    TimeUnit.YEARS: ("y", "yr", "yrs", "year", "years"),
}.items():
    for _word in _words:
        _UNIT_WORDS[_word] = _unit

_AGE_TEXT = re.compile(r"^\s*(?P<amount>[+-]?\d+)\s*(?P<unit>[A-Za-z]*)\s*$", re.ASCII)


def parse_unit(value: object, where: str = "age") -> TimeUnit:
    """A unit from Stroom's name ("MONTHS") or a spelling such as "month", "mo", "d"; any case."""
    if isinstance(value, TimeUnit):
        return value
    if isinstance(value, str):
        word = value.strip().lower()
        if word.upper() in TimeUnit.__members__:
            return TimeUnit[word.upper()]
        if word in _UNIT_WORDS:
            return _UNIT_WORDS[word]
        if word == "m":
            raise InvalidInput(f"{where}: ambiguous unit 'm': write 'min' for minutes or 'mo' for months")
    raise InvalidInput(f"{where}: unknown unit {value!r}: expected minutes, hours, days, weeks, months or years")


@dataclass(frozen=True)
class Age:
    """A retention age: `amount` (1..9999) of `unit`. Construct with a TimeUnit or a unit spelling."""

    amount: int
    unit: TimeUnit

    def __post_init__(self) -> None:
        object.__setattr__(self, "unit", parse_unit(self.unit))
        amount = self.amount
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise InvalidInput(f"age: amount {amount!r} is not a whole number")
        if not MIN_AMOUNT <= amount <= MAX_AMOUNT:
            raise InvalidInput(f"age: amount {amount} out of range: expected {MIN_AMOUNT}..{MAX_AMOUNT} "
                               "(use 'forever' to keep data forever)")

    def __str__(self) -> str:
        return age_string(self)


def age_string(age: Age | None) -> str:
    """Stroom's stable age string ("1 Month", "30 Days", "Forever"): trackers are keyed by it,
    so it must never change for a given age."""
    if age is None:
        return FOREVER
    unit = age.unit.display
    return f"{age.amount} {unit[:-1] if age.amount == 1 else unit}"


def parse_age(value: Any, where: str = "age") -> Age | None:
    """An age from "30d", "30 days", "1 Month", "forever" (-> None), an (amount, unit) pair or an
    Age. Errors are InvalidInput prefixed with `where` (e.g. "rule 3: age")."""
    if value is None or isinstance(value, Age):
        return value
    if isinstance(value, str):
        if value.strip().lower() == "forever":
            return None
        match = _AGE_TEXT.match(value)
        if not match:
            raise InvalidInput(f"{where}: invalid {value!r}: expected an amount and a unit like '30 days', "
                               "'3 months', '10y' or 'forever'")
        if not match.group("unit"):
            raise InvalidInput(f"{where}: {value!r} has no unit: expected minutes, hours, days, weeks, "
                               "months or years")
        return _age(int(match.group("amount")), parse_unit(match.group("unit"), where), where)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        amount, unit = value
        if isinstance(amount, bool) or not isinstance(amount, int):
            raise InvalidInput(f"{where}: amount {amount!r} is not a whole number")
        return _age(amount, parse_unit(unit, where), where)
    raise InvalidInput(f"{where}: invalid {value!r}: expected text like '30 days', (amount, unit) or 'forever'")


def _age(amount: int, unit: TimeUnit, where: str) -> Age:
    try:
        return Age(amount, unit)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}: {str(exc).removeprefix('age: ')}") from None


# ---- calendar arithmetic (proleptic Gregorian, UTC) ----------------------------------------------

def _is_leap(year: int) -> bool:
    return year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)


def days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if _is_leap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _add_months(ms: int, months: int) -> int:
    days, time_of_day = divmod(ms, _MS_PER_DAY)
    year, month, day = civil_from_days(days)
    year, month0 = divmod(year * 12 + (month - 1) + months, 12)
    day = min(day, days_in_month(year, month0 + 1))  # clamp to the month's end, as Java does
    return days_from_civil(year, month0 + 1, day) * _MS_PER_DAY + time_of_day


def _shift(ms: int, age: Age, sign: int) -> int:
    if age.unit in _FIXED_MS:
        return ms + sign * age.amount * _FIXED_MS[age.unit]
    months = age.amount * (12 if age.unit is TimeUnit.YEARS else 1)
    return _add_months(ms, sign * months)


def minus(now_ms: int, age: Age) -> int:
    """`now − age` in UTC with calendar months and years (Stroom's DataRetentionCreationTimeUtil.minus)."""
    return _shift(now_ms, age, -1)


def plus(ms: int, age: Age) -> int:
    """`ms + age`, the mirror of `minus` (used for "retain until")."""
    return _shift(ms, age, 1)


def cutoff_ms(now_ms: int, age: Age | None) -> int:
    """A rule's cutoff: records created before it have expired. Forever ⇒ the epoch."""
    return EPOCH_MS if age is None else minus(now_ms, age)


def retain_until_ms(create_ms: int, age: Age | None) -> int | None:
    """When a record created at `create_ms` expires under `age`; None for forever."""
    return None if age is None else plus(create_ms, age)


__all__ = [
    "EPOCH_MS",
    "FOREVER",
    "MAX_AMOUNT",
    "MIN_AMOUNT",
    "Age",
    "TimeUnit",
    "age_string",
    "cutoff_ms",
    "days_in_month",
    "minus",
    "parse_age",
    "parse_unit",
    "plus",
    "retain_until_ms",
]
