"""civil_dates: day numbers and dates agree with Python's own calendar, for scalars and arrays alike,
and past the years datetime reaches the two functions stay each other's inverse."""

from __future__ import annotations

import datetime as dt

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.civil_dates import civil_from_days, days_from_civil

EPOCH = dt.date(1970, 1, 1)
DATE_DAYS = st.integers(dt.date.min.toordinal() - EPOCH.toordinal(), dt.date.max.toordinal() - EPOCH.toordinal())


@given(DATE_DAYS)
def test_a_day_number_gives_the_date_python_gives(days: int) -> None:
    date = EPOCH + dt.timedelta(days=days)
    assert civil_from_days(days) == (date.year, date.month, date.day)
    assert days_from_civil(date.year, date.month, date.day) == days


@given(st.lists(DATE_DAYS, min_size=1, max_size=50))
def test_arrays_give_what_each_element_gives(days: list[int]) -> None:
    column = np.array(days, dtype=np.int64)
    year, month, day = civil_from_days(column)
    assert list(zip(year.tolist(), month.tolist(), day.tolist(), strict=True)) == [civil_from_days(d) for d in days]
    assert days_from_civil(year, month, day).tolist() == days


@given(st.integers(-(2**40), 2**40))
def test_far_from_datetimes_years_the_functions_stay_inverse(days: int) -> None:
    year, month, day = civil_from_days(days)
    assert 1 <= month <= 12 and 1 <= day <= 31
    assert days_from_civil(year, month, day) == days
