"""Create-time slices (docs/design/catalog.md#slices) against Stroom's own loop as the oracle."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tidekeep.catalog.slices import slice_ends


def stroom_slices(create_times: list[int], batch_size: int) -> list[list[int]]:
    """Stroom's loop, literally: from startInc, take the first batch_size remaining rows by create
    time, delete every remaining row in [min, max + 1), repeat until nothing is left."""
    remaining = list(range(len(create_times)))
    slices = []
    while remaining:
        first = sorted(remaining, key=lambda i: create_times[i])[:batch_size]
        low, high = min(create_times[i] for i in first), max(create_times[i] for i in first) + 1
        chosen = [i for i in remaining if low <= create_times[i] < high]
        slices.append(chosen)
        remaining = [i for i in remaining if i not in chosen]
    return slices


@given(st.lists(st.integers(0, 30), max_size=60).map(sorted), st.integers(1, 8))
def test_slices_are_stroom_slices(create_times: list[int], batch_size: int) -> None:
    ends = slice_ends(create_times, batch_size)
    mine, start = [], 0
    for end in ends:
        mine.append(list(range(start, end)))
        start = end
    assert mine == stroom_slices(create_times, batch_size)


def test_a_slice_takes_every_row_tied_at_its_boundary() -> None:
    # batch size 2, three rows at the same millisecond: one slice of three (it exceeds the batch)
    assert slice_ends([5, 7, 7, 7, 9], 2) == [4, 5]
    assert slice_ends([], 3) == []
    assert slice_ends([1, 2, 3, 4, 5], 2) == [2, 4, 5]


def test_small_periods_get_one_partition_and_big_ones_spark_parallelism() -> None:
    from tidekeep.catalog.job import partition_count

    assert partition_count(0, 8, 2_000) == 1
    assert partition_count(0, 8, 120_000) == 3
    assert partition_count(0, 8, 10_000_000) == 8
    assert partition_count(0, 8, 0) == 1
    assert partition_count(5, 8, 10) == 5  # catalog.partitions, when set, wins
