"""The forecast document (tidekeep/forecast.py): the days against their definition (day 0 is now, day d
is (now + (d−1)·24h, now + d·24h]), lines adding up, unknown counts staying unknown, the horizon's bounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.errors import InvalidInput
from tidekeep.forecast import DAY_MS, MAX_DAYS, Family, Forecast, Tally, Unit, check_days, day_end, day_of, day_start

NOW = 1_700_000_000_000


@given(st.integers(0, 400 * DAY_MS))
def test_a_moment_falls_in_exactly_the_day_whose_window_holds_it(offset: int) -> None:
    t = NOW + offset
    holding = [d for d in range(402) if (t == NOW if d == 0 else day_start(NOW, d) < t <= day_end(NOW, d))]
    assert holding == [day_of(NOW, t)]


def test_a_moment_before_now_is_no_day() -> None:
    with pytest.raises(ValueError):
        day_of(NOW, NOW - 1)


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["a", "b"]), st.integers(0, 100),
                          st.none() | st.integers(0, 9), st.integers(0, 50)), max_size=12))
def test_lines_add_up_per_day_and_rule_and_an_unknown_count_stays_unknown(adds: list) -> None:
    tally = Tally(NOW, Unit.EVENTS)
    for day, rule, size, items, held in adds:
        tally.add(day, rule, bytes=size, items=items, held_bytes=held, ids=[f"{day}{rule}{size}"])
    forecast = Forecast(Family.STREAMS, "s/t", NOW, 3, Unit.EVENTS, {}, tally.lines())
    for line in forecast.lines:
        mine = [a for a in adds if (a[0], a[1]) == (line.day, line.rule)]
        assert line.bytes == sum(a[2] for a in mine) and line.held_bytes == sum(a[4] for a in mine)
        assert line.items == (None if any(a[3] is None for a in mine) else sum(a[3] for a in mine))
        assert list(line.ids) == [f"{a[0]}{a[1]}{a[2]}" for a in mine]
        assert (line.start_ms, line.end_ms) == (day_start(NOW, line.day), day_end(NOW, line.day))
    assert [line.day for line in forecast.lines] == sorted(line.day for line in forecast.lines)
    by_day = forecast.by_day()
    assert [d["day"] for d in by_day] == [0, 1, 2, 3]
    assert sum(d["bytes"] for d in by_day) == forecast.totals()["bytes"] == sum(a[2] for a in adds)
    assert forecast.totals()["items"] == (None if any(a[3] is None for a in adds) else sum(a[3] for a in adds))


@pytest.mark.parametrize("days", [-1, MAX_DAYS + 1, True, 1.5, "7"])
def test_a_bad_horizon_is_refused_in_one_line(days: object) -> None:
    with pytest.raises(InvalidInput, match=rf"^invalid --days {days!r}: expected a whole number of days from 0 "
                                           rf"to {MAX_DAYS}$".replace("(", r"\(").replace(")", r"\)")):
        check_days(days, "--days")


def test_the_document_has_every_day_and_the_proposal() -> None:
    doc = Forecast(Family.ARCHIVES, "web", NOW, 2, Unit.ARCHIVES, {"current": True}, (), ("a note",)).to_dict()
    assert doc["by_day"] == [{"day": d, "start_ms": day_start(NOW, d), "end_ms": day_end(NOW, d), "bytes": 0,
                              "items": 0, "held_bytes": 0, "held_items": 0} for d in range(3)]
    assert (doc["family"], doc["unit"], doc["proposal"], doc["notes"]) == ("archives", "archives", {"current": True},
                                                                           ["a note"])
