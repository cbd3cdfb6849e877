"""Planning a period into balanced create-time slices from grouped counts (catalog/slice_plan.py),
against a brute-force oracle over the create times themselves."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from tidekeep.catalog.slice_plan import Slice, plan_slices, span_bounds, span_of, widen


def counter(times: list[int], calls: list[tuple[int, int, int]] | None = None):  # type: ignore[no-untyped-def]
    """The database's grouped count, by brute force: candidates per span of span_bounds."""

    def count_spans(low: int, high: int, n: int) -> list[int]:
        if calls is not None:
            calls.append((low, high, n))
        counts = [0] * n
        for t in times:
            if low <= t < high:
                counts[span_of(t, low, high, n)] += 1
        return counts

    return count_spans


times_strategy = st.one_of(
    st.lists(st.integers(0, 10_000), max_size=300),
    # skewed: most rows in a few milliseconds, the rest spread out
    st.tuples(st.lists(st.sampled_from([5, 6, 7_000]), max_size=200), st.lists(st.integers(0, 10**9), max_size=50))
    .map(lambda parts: parts[0] + parts[1]),
)


@given(st.integers(0, 10**12), st.integers(1, 10**9), st.integers(1, 400))
def test_span_of_agrees_with_span_bounds(low: int, width: int, n: int) -> None:
    high = low + width
    bounds = span_bounds(low, high, n)
    assert bounds[0] == low and bounds[-1] == high and bounds == sorted(set(bounds))
    for i in range(len(bounds) - 1):
        for t in {bounds[i], bounds[i + 1] - 1}:
            assert span_of(t, low, high, n) == i


@given(times_strategy, st.integers(1, 60), st.integers(2, 16))
def test_slices_cover_the_range_and_hold_exactly_the_rows_of_their_range(times: list[int], target: int,
                                                                        buckets: int) -> None:
    low, high = 0, 10**9 + 1
    calls: list[tuple[int, int, int]] = []
    slices = plan_slices(counter(times, calls), low, high, target, buckets)
    if not times:
        assert slices == []
        return
    assert slices[0].low == low and slices[-1].high == high
    assert all(a.high == b.low for a, b in pairwise(slices))  # contiguous, ascending
    assert all(s.low < s.high for s in slices)
    for s in slices:
        exact = sum(1 for t in times if s.low <= t < s.high)
        assert s.rows == exact > 0
        # at most `target` rows, unless one millisecond alone holds more
        assert s.rows <= target or len({t for t in times if s.low <= t < s.high}) == 1
    assert sum(s.rows for s in slices) == len(times)


@given(times_strategy, st.integers(1, 60))
def test_no_two_neighbours_could_have_been_one_slice(times: list[int], target: int) -> None:
    """Balanced: adjacent slices are merged until the next would pass the target, so the plan has
    at most about twice as many slices as the rows need."""
    slices = plan_slices(counter(times), 0, 10**9 + 1, target, 16)
    heavy = sum(1 for s in slices if s.rows > target)
    assert len(slices) <= 2 * -(-len(times) // target) + heavy + 1


@given(st.lists(st.integers(0, 1_000), min_size=1, max_size=200), st.integers(1, 10))
def test_widened_slices_cover_the_period(times: list[int], target: int) -> None:
    slices = plan_slices(counter(times), min(times), max(times) + 1, target, 8)
    widened = widen(slices, -50, 5_000)
    assert widened[0].low == -50 and widened[-1].high == 5_000
    assert [s.rows for s in widened] == [s.rows for s in slices]
    assert all(a.high == b.low for a, b in pairwise(widened))


def test_an_empty_range_or_no_rows_plans_nothing() -> None:
    assert plan_slices(counter([5]), 10, 10, 3) == []
    assert plan_slices(counter([]), 0, 100, 3) == []
    assert widen([], 0, 10) == []
    assert plan_slices(counter([1, 1, 1, 1]), 0, 100, 2) == [Slice(0, 100, 4)]  # one millisecond cannot split
