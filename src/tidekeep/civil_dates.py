"""Day numbers and proleptic Gregorian dates, for one integer or a numpy array of them at once.

Days count from 1970-01-01. The arithmetic is H. Hinnant's `days_from_civil` / `civil_from_days`:
integer operations only, exact for every year an int64 day count reaches, with no table and no
branch, so the same code serves a scalar (catalog ages) and a column (archive timestamps).
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np

Ints = TypeVar("Ints", int, np.ndarray)

_EPOCH_SHIFT = 719_468  # days from 0000-03-01 to 1970-01-01
_DAYS_PER_ERA = 146_097  # 400 Gregorian years


def days_from_civil(year: Ints, month: Ints, day: Ints) -> Ints:
    """Days since 1970-01-01 of the date year-month-day (month 1..12, day 1..31, not checked)."""
    march_year = year - (month <= 2)  # the year counted from March, so February's leap day is last
    era = march_year // 400
    year_of_era = march_year - era * 400
    day_of_year = (153 * (month - 3 + 12 * (month <= 2)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * _DAYS_PER_ERA + day_of_era - _EPOCH_SHIFT


def civil_from_days(days: Ints) -> tuple[Ints, Ints, Ints]:
    """(year, month, day) of a day number since 1970-01-01; the inverse of days_from_civil."""
    shifted = days + _EPOCH_SHIFT
    era = shifted // _DAYS_PER_ERA
    day_of_era = shifted - era * _DAYS_PER_ERA
    year_of_era = (day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    march_month = (5 * day_of_year + 2) // 153  # 0 is March
    day = day_of_year - (153 * march_month + 2) // 5 + 1
    month = march_month + 3 - 12 * (march_month >= 10)
    return year_of_era + era * 400 + (month <= 2), month, day


__all__ = ["civil_from_days", "days_from_civil"]
