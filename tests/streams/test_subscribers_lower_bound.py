"""The subscriber lower bound (docs/design/streams.md#consumption): properties against a brute-force
oracle on random scaled streams, and Pravega's two worked examples (docs/retention.md): a split, and
the merges and splits of SMTT.consumptionBasedRetentionWithScale2."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import GRID, ScaledStream, cell_of, streams_with_cuts, valid_cut_frontiers
from tidekeep.streams.cuts import CutOrder, check_cut, compare_cuts
from tidekeep.streams.model import Segment, segment_id
from tidekeep.streams.subscribers import lower_bound, upper_bound

# ---- the oracle: positions per grid cell, ordered by (segment id, offset) -----------------------------


def position(stream: ScaledStream, cut: dict[int, int], cell: int) -> tuple[int, int]:
    seg = cell_of(stream, cut, cell)
    return seg, cut[seg]


def at_or_before(stream: ScaledStream, a: dict[int, int], b: dict[int, int]) -> bool:
    return all(position(stream, a, cell) <= position(stream, b, cell) for cell in range(GRID))


def assert_greatest(stream: ScaledStream, inputs: list[dict[int, int]], lb: dict[int, int]) -> None:
    """Every valid cut of the stream (every valid segment set, every offset 0..tail in each) that is at
    or before all inputs is at or before lb. Offsets of different segments constrain different cells
    independently, so the check runs per (segment, offset) instead of over the product of offsets."""
    for segs in valid_cut_frontiers(stream):
        allowed: dict[int, list[int]] = {}
        for seg in segs:
            lo, hi = stream.grid[seg]
            allowed[seg] = [o for o in range(stream.segments[seg].tail + 1)
                            if all((seg, o) <= position(stream, x, cell) for x in inputs for cell in range(lo, hi))]
        if not all(allowed.values()):
            continue  # no cut with these segments is at or before every input
        for seg, offsets in allowed.items():
            lo, hi = stream.grid[seg]
            for o in offsets:
                assert all((seg, o) <= position(stream, lb, cell) for cell in range(lo, hi)), (
                    f"the cut with {seg} at {o} is at or before every input but not at or before {lb}")


cut_lists = st.integers(1, 3).flatmap(lambda n: streams_with_cuts(count=n, max_initial=3, max_scales=4, max_tail=12))


@settings(max_examples=250, deadline=None)
@given(cut_lists)
def test_lower_bound_is_the_greatest_valid_cut_at_or_before_every_input(case) -> None:
    stream, cuts = case
    lb = lower_bound(cuts, stream.segments)
    check_cut(lb, stream.segments, "s/x")  # valid and complete (tidekeep's own check)
    assert frozenset(lb) in valid_cut_frontiers(stream)  # ... and by the independent oracle
    for cut in cuts:
        assert at_or_before(stream, lb, cut)
        assert compare_cuts(lb, cut, stream.ranges) in (CutOrder.BEFORE, CutOrder.EQUAL)
    assert_greatest(stream, cuts, lb)


@settings(max_examples=150, deadline=None)
@given(streams_with_cuts(count=1))
def test_one_cut_is_its_own_lower_bound(case) -> None:
    stream, (cut,) = case
    assert lower_bound([cut], stream.segments) == cut
    assert lower_bound([cut, dict(cut)], stream.segments) == cut


@settings(max_examples=150, deadline=None)
@given(streams_with_cuts(count=3), st.randoms(use_true_random=False))
def test_the_order_of_the_subscribers_does_not_matter(case, rnd) -> None:
    stream, cuts = case
    shuffled = list(cuts)
    rnd.shuffle(shuffled)
    assert lower_bound(shuffled, stream.segments) == lower_bound(cuts, stream.segments)


@settings(max_examples=150, deadline=None)
@given(streams_with_cuts(count=2, ordered=True))
def test_a_cut_at_or_after_another_leaves_the_earlier_one(case) -> None:
    stream, (earlier, later) = case
    assert lower_bound([later, earlier], stream.segments) == earlier


@settings(max_examples=100, deadline=None)
@given(streams_with_cuts(count=3))
def test_lower_bound_is_associative(case) -> None:
    stream, (a, b, c) = case
    pairwise = lower_bound([lower_bound([a, b], stream.segments), c], stream.segments)
    assert pairwise == lower_bound([a, b, c], stream.segments)


# ---- Pravega's worked examples ----------------------------------------------------------------------------


def sid(epoch: int, number: int) -> int:
    return segment_id(epoch, number)


def test_b2_example_1_split_in_either_order() -> None:
    s0, s1, s2, s3 = sid(0, 0), sid(0, 1), sid(1, 2), sid(1, 3)
    segments = {
        s0: Segment(s0, 0.0, 0.5, tail=120),
        s1: Segment(s1, 0.5, 1.0, tail=60, sealed=True, sealed_epoch=1),  # split into s2 and s3
        s2: Segment(s2, 0.5, 0.75, tail=30),
        s3: Segment(s3, 0.75, 1.0, tail=30),
    }
    a = {s0: 100, s1: 50}
    b = {s0: 80, s2: 10, s3: 20}
    for cut in (a, b):
        check_cut(cut, segments, "s/x")
    assert lower_bound([a, b], segments) == {s0: 80, s1: 50}
    assert lower_bound([b, a], segments) == {s0: 80, s1: 50}


def test_b2_example_2_merges_and_splits() -> None:
    s = [sid(0, 0), sid(0, 1), sid(1, 2), sid(1, 3), sid(2, 4), sid(2, 5), sid(3, 6),
         sid(4, 7), sid(4, 8), sid(4, 9), sid(5, 10)]
    ranges = [(0.0, 0.5), (0.5, 1.0), (0.0, 0.6), (0.6, 1.0), (0.6, 0.8), (0.8, 1.0), (0.6, 1.0),
              (0.0, 0.3), (0.3, 0.6), (0.6, 1.0), (0.0, 1.0)]
    tails = [10, 12, 10, 10, 10, 10, 10, 10, 10, 10, 5]
    segments = {seg: Segment(seg, lo, hi, tail=t, sealed=seg != s[10])
                for seg, (lo, hi), t in zip(s, ranges, tails, strict=True)}
    # Pravega's subscriber 2 is {s1: 1, s2: -1}: s2 has not started because s1 is unfinished, so s0
    # (s2's other predecessor, not in the cut) is fully read. tidekeep cuts tile the key space and
    # have no -1 entries: the same position is s0 at its tail, s1 at 1.
    subscriber_2 = {s[0]: 10, s[1]: 1}
    # Pravega's subscriber 1 is {s0: 1, s2: -1, s8: -1, s9: 1}. Its keys [0.5, 0.6) are covered only by
    # the finished s1 and the future s2/s8, which tidekeep cannot express next to s9 (no cut holds s1
    # and s9 together, and none leaves a gap). Its closest tidekeep cut at or before it holds s1 at its
    # tail; Pravega's answer is the same for either form.
    subscriber_1 = {s[0]: 1, s[1]: 12}
    for cut in (subscriber_1, subscriber_2):
        check_cut(cut, segments, "s/x")
    for order in itertools.permutations([subscriber_1, subscriber_2]):
        assert lower_bound(list(order), segments) == {s[0]: 1, s[1]: 1}  # what SMTT asserts
    # a subscriber further on, across every scale, changes nothing: the older positions dominate
    far = {s[10]: 3}
    assert lower_bound([far, subscriber_1, subscriber_2], segments) == {s[0]: 1, s[1]: 1}
    assert lower_bound([far, {s[7]: 4, s[8]: 10, s[9]: 2}], segments) == {s[7]: 4, s[8]: 10, s[9]: 2}


# ---- bad input ------------------------------------------------------------------------------------------


def test_no_subscribers_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="at least one subscriber cut"):
        lower_bound([], {sid(0, 0): Segment(sid(0, 0), 0.0, 1.0, tail=5)})


def test_cuts_that_are_not_cuts_of_the_stream_are_rejected() -> None:
    a, b = sid(0, 0), sid(0, 1)
    segments = {a: Segment(a, 0.0, 0.5, tail=5), b: Segment(b, 0.5, 1.0, tail=5)}
    with pytest.raises(ValueError, match=r"has no segment at key 0\.5"):
        lower_bound([{a: 1}], segments)
    with pytest.raises(ValueError, match=r"names segment 0\.7"):
        lower_bound([{a: 1, sid(0, 7): 0}], segments)


# ---- upper_bound: the mirror image, used to move a lower bound behind the head up to the head ----------


@settings(max_examples=250, deadline=None)
@given(cut_lists)
def test_upper_bound_is_the_pointwise_latest_position_and_a_valid_cut(case) -> None:
    stream, cuts = case
    ub = upper_bound(cuts, stream.segments)
    check_cut(ub, stream.segments, "s/x")
    assert frozenset(ub) in valid_cut_frontiers(stream)
    for cell in range(GRID):  # the latest input position at every key: by the order, the least upper bound
        assert position(stream, ub, cell) == max(position(stream, x, cell) for x in cuts)
    for cut in cuts:
        assert compare_cuts(cut, ub, stream.ranges) in (CutOrder.BEFORE, CutOrder.EQUAL)


@settings(max_examples=150, deadline=None)
@given(streams_with_cuts(count=2))
def test_upper_and_lower_bound_of_two_cuts_bracket_both(case) -> None:
    stream, (a, b) = case
    lb, ub = lower_bound([a, b], stream.segments), upper_bound([a, b], stream.segments)
    assert at_or_before(stream, lb, a) and at_or_before(stream, a, ub)
    assert at_or_before(stream, lb, b) and at_or_before(stream, b, ub)
    assert upper_bound([a], stream.segments) == a


def test_no_cuts_has_no_upper_bound() -> None:
    with pytest.raises(ValueError, match="at least one cut"):
        upper_bound([], {})
