"""The dashboard's shared filters (web/render.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidekeep.units import parse_duration_ms
from tidekeep.web.render import environment

duration = environment.filters["duration"]


def test_exact_durations_read_as_settings_do() -> None:
    assert [duration(ms) for ms in (None, 0, 250, 1000, 1_800_000, 86_400_000)] == [
        "—", "0ms", "250ms", "1s", "30m", "1d"]


def test_measured_durations_show_their_two_largest_units() -> None:
    assert duration(91_710) == "1m 31s"
    assert duration(3 * 86_400_000 + 5 * 3_600_000 + 7) == "3d 5h"
    assert duration(3_600_000 + 1) == "1h 0m"


@given(st.integers(min_value=1000, max_value=10**12))
def test_a_measured_duration_is_within_one_of_its_smallest_unit(ms: int) -> None:
    text = duration(ms)
    shown = sum(parse_duration_ms(part) for part in text.split())
    smallest = parse_duration_ms("1" + text.split()[-1].lstrip("0123456789"))
    assert shown <= ms < shown + smallest
