"""The cut algebra (streams/cuts.py) against brute-force oracles on random scaled streams.

Validity oracle: a set of segments is a valid cut iff it is the ready set of some
predecessor-closed set of done segments and covers every key once (strategies.valid_cut_frontiers).
Order oracle: per routing key, a cut's position is (id of the cut segment holding the key, offset);
two cuts compare as those pairs do over every key. Size oracle: per segment, where each cut lies
in it (before: 0, inside: its offset, after: the whole tail), judged key by key.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import (
    GRID,
    ScaledStream,
    cell_of,
    draw_offsets,
    make_id,
    position_in,
    predecessors,
    scaled_streams,
    streams_with_cuts,
    tiling_sets,
    valid_cut_frontiers,
)
from tidekeep.errors import InvalidStreamCut
from tidekeep.streams.cuts import (
    CutOrder,
    StreamCut,
    Topology,
    check_cut,
    compare_cuts,
    initial_cut,
)
from tidekeep.streams.model import Segment

STREAM = "sc/st"
FAST = settings(max_examples=150, deadline=None)


def accepts(positions: dict[int, int], stream: ScaledStream) -> bool:
    try:
        check_cut(positions, stream.segments, STREAM)
    except InvalidStreamCut as exc:
        message = str(exc)
        assert "\n" not in message and STREAM in message
        return False
    return True


# ---- validity -------------------------------------------------------------------------------------


@FAST
@given(st.data())
def test_every_oracle_valid_cut_is_accepted(data: st.DataObject) -> None:
    stream = data.draw(scaled_streams())
    frontiers = valid_cut_frontiers(stream)
    assert frontiers, "every stream has at least its head and tail cuts"
    assert frozenset(stream.active) in frontiers  # the tail
    for segs in frontiers:
        positions = draw_offsets(data.draw, stream, segs)
        assert accepts(positions, stream), f"rejected valid cut {positions}"


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_random_segment_sets_are_accepted_exactly_when_the_oracle_says_valid(data: st.DataObject) -> None:
    stream = data.draw(scaled_streams())
    valid = set(valid_cut_frontiers(stream))
    ids = sorted(stream.segments)
    if len(ids) <= 8:
        candidates = [frozenset(c) for n in range(1, len(ids) + 1) for c in itertools.combinations(ids, n)]
    else:
        candidates = [frozenset(data.draw(st.sets(st.sampled_from(ids), min_size=1))) for _ in range(30)]
    # every key-space tiling too: for those only the lineage rule decides
    tilings = tiling_sets(stream)
    assert valid <= tilings
    candidates += sorted(tilings, key=sorted)
    rng = data.draw(st.randoms(use_true_random=False))  # cheaper than a hypothesis draw per offset
    for segs in candidates:
        positions = {s: rng.randint(0, stream.segments[s].tail) for s in sorted(segs)}
        assert accepts(positions, stream) == (segs in valid), f"segments {sorted(segs)} at {positions}"


@FAST
@given(streams_with_cuts(count=1), st.data())
def test_offsets_outside_zero_to_tail_are_rejected(stream_and_cuts, data: st.DataObject) -> None:
    stream, (cut,) = stream_and_cuts
    seg = data.draw(st.sampled_from(sorted(cut)))
    beyond = dict(cut)
    beyond[seg] = stream.segments[seg].tail + data.draw(st.integers(1, 10**12))
    with pytest.raises(InvalidStreamCut, match=r"beyond its tail"):
        check_cut(beyond, stream.segments, STREAM)
    negative = dict(cut)
    negative[seg] = -data.draw(st.integers(1, 10**12))
    with pytest.raises(InvalidStreamCut, match=r"negative offset"):
        check_cut(negative, stream.segments, STREAM)


@FAST
@given(streams_with_cuts(count=1), st.data())
def test_unknown_segments_and_event_boundaries_are_checked(stream_and_cuts, data: st.DataObject) -> None:
    stream, (cut,) = stream_and_cuts
    unknown = make_id(stream.epoch + 1, 10**6)
    with pytest.raises(InvalidStreamCut, match=r"segment \d+\.1000000 does not exist"):
        check_cut({**cut, unknown: 0}, stream.segments, STREAM)
    with pytest.raises(InvalidStreamCut, match="names no segments"):
        check_cut({}, stream.segments, STREAM)
    off_boundary = data.draw(st.sampled_from(sorted(cut)))
    seen: list[tuple[int, int]] = []

    def boundary(seg: int, offset: int) -> bool:
        seen.append((seg, offset))
        return seg != off_boundary

    with pytest.raises(InvalidStreamCut, match="is not at an event boundary"):
        check_cut(cut, stream.segments, STREAM, boundary)
    assert (off_boundary, cut[off_boundary]) in seen
    check_cut(cut, stream.segments, STREAM, lambda seg, offset: True)


# ---- order ----------------------------------------------------------------------------------------


def oracle_order(stream: ScaledStream, a: dict[int, int], b: dict[int, int]) -> CutOrder:
    """Compare (segment id, offset) per key over every grid cell (each cell holds a whole sample of
    keys: all segment boundaries are cell boundaries) and at every boundary key itself."""
    less = greater = False
    for cell in range(GRID):
        sa, sb = cell_of(stream, a, cell), cell_of(stream, b, cell)
        pa, pb = (sa, a[sa]), (sb, b[sb])
        less |= pa < pb
        greater |= pa > pb
    if less and greater:
        return CutOrder.OVERLAPS
    return CutOrder.BEFORE if less else CutOrder.AFTER if greater else CutOrder.EQUAL


def at_key(cut: dict[int, int], ranges: dict[int, tuple[float, float]], key: float) -> tuple[int, int]:
    seg = next(s for s in cut if ranges[s][0] <= key < ranges[s][1])
    return seg, cut[seg]


@FAST
@given(streams_with_cuts(count=2))
def test_compare_matches_per_key_positions(stream_and_cuts) -> None:
    stream, (a, b) = stream_and_cuts
    expected = oracle_order(stream, a, b)
    assert compare_cuts(a, b, stream.ranges) is expected
    # the same verdict from the float keys themselves: cell midpoints and every segment boundary
    ranges = stream.ranges
    keys = {(cell + 0.5) / GRID for cell in range(GRID)} | {lo for lo, _ in ranges.values()}
    keys |= {hi for _, hi in ranges.values() if hi < 1.0}
    less = any(at_key(a, ranges, k) < at_key(b, ranges, k) for k in keys)
    greater = any(at_key(a, ranges, k) > at_key(b, ranges, k) for k in keys)
    by_keys = CutOrder.OVERLAPS if less and greater else (
        CutOrder.BEFORE if less else CutOrder.AFTER if greater else CutOrder.EQUAL)
    assert by_keys is expected


@FAST
@given(streams_with_cuts(count=2), st.data())
def test_compare_is_antisymmetric_and_equal_means_identical(stream_and_cuts, data: st.DataObject) -> None:
    stream, (a, b) = stream_and_cuts
    if data.draw(st.booleans()):
        b = dict(a)  # make EQUAL and near-equal pairs common
        if data.draw(st.booleans()):
            seg = data.draw(st.sampled_from(sorted(b)))
            b[seg] = data.draw(st.integers(0, stream.segments[seg].tail))
    forward, backward = compare_cuts(a, b, stream.ranges), compare_cuts(b, a, stream.ranges)
    mirror = {CutOrder.BEFORE: CutOrder.AFTER, CutOrder.AFTER: CutOrder.BEFORE,
              CutOrder.EQUAL: CutOrder.EQUAL, CutOrder.OVERLAPS: CutOrder.OVERLAPS}
    assert backward is mirror[forward]
    assert (forward is CutOrder.EQUAL) == (a == b)
    assert compare_cuts(a, a, stream.ranges) is CutOrder.EQUAL


@FAST
@given(streams_with_cuts(count=3))
def test_at_or_before_is_transitive(stream_and_cuts) -> None:
    stream, (a, b, c) = stream_and_cuts
    at_or_before = {CutOrder.BEFORE, CutOrder.EQUAL}
    if compare_cuts(a, b, stream.ranges) in at_or_before and compare_cuts(b, c, stream.ranges) in at_or_before:
        assert compare_cuts(a, c, stream.ranges) in at_or_before


@FAST
@given(streams_with_cuts(count=3, ordered=True))
def test_ordered_cuts_compare_in_order(stream_and_cuts) -> None:
    stream, (a, b, c) = stream_and_cuts
    for x, y in ((a, b), (b, c), (a, c)):
        assert compare_cuts(x, y, stream.ranges) in (CutOrder.BEFORE, CutOrder.EQUAL)
        assert oracle_order(stream, x, y) in (CutOrder.BEFORE, CutOrder.EQUAL)


# ---- sizes and ranges -----------------------------------------------------------------------------


def oracle_size(stream: ScaledStream, a: dict[int, int], b: dict[int, int]) -> int:
    return sum(max(0, position_in(stream, b, s) - position_in(stream, a, s)) for s in stream.segments)


def absolute_size(stream: ScaledStream, cut: dict[int, int]) -> int:
    """Every byte ever written before the cut (a retention record's absolute size, docs/retention.md)."""
    return sum(position_in(stream, cut, s) for s in stream.segments)


@FAST
@given(streams_with_cuts(count=3, ordered=True))
def test_size_between_matches_the_per_segment_oracle(stream_and_cuts) -> None:
    stream, (a, b, c) = stream_and_cuts
    topology = Topology(stream.segments)
    for x, y in ((a, b), (b, c), (a, c)):
        assert topology.size_between(x, y) == oracle_size(stream, x, y)
        assert topology.size_between(x, y) == absolute_size(stream, y) - absolute_size(stream, x)
    assert topology.size_between(a, c) == topology.size_between(a, b) + topology.size_between(b, c)
    assert topology.size_between(a, a) == 0


@FAST
@given(streams_with_cuts(count=2, ordered=True))
def test_ranges_between_lists_each_segment_once_predecessors_first(stream_and_cuts) -> None:
    stream, (a, b) = stream_and_cuts
    listed = Topology(stream.segments).ranges_between(a, b)
    ids = [r.segment for r in listed]
    assert ids == sorted(set(ids))
    for index, r in enumerate(listed):
        assert r.start == position_in(stream, a, r.segment)
        assert r.end == position_in(stream, b, r.segment)
        assert 0 <= r.start < r.end <= stream.segments[r.segment].tail
        earlier = set(ids[:index])
        assert predecessors(stream, r.segment) & set(ids) <= earlier
    missing = {s for s in stream.segments if s not in ids}
    assert all(position_in(stream, a, s) == position_in(stream, b, s) for s in missing)


@FAST
@given(streams_with_cuts(count=2), st.sampled_from(["0123456789abcdef0123456789abcdef", None]))
def test_a_topology_orders_and_measures_cuts_as_the_oracles_do(stream_and_cuts, uid: str | None) -> None:
    """The topology is the one place that computes a stream's key ranges, orders its cuts and
    measures what lies between them: each answer against the brute-force oracles, and the order
    against self-describing cuts (StreamCut.compare, which has only the cuts' own key ranges)."""
    stream, (a, b) = stream_and_cuts
    topology = Topology(stream.segments)
    assert topology.ranges == stream.ranges
    order = oracle_order(stream, a, b)
    assert topology.compare(a, b) is order
    assert topology.at_or_before(a, b) == (order in (CutOrder.BEFORE, CutOrder.EQUAL))
    resolved = [StreamCut(STREAM, cut, {s: stream.ranges[s] for s in cut}, uid) for cut in (a, b)]
    assert resolved[0].compare(resolved[1]) is order
    for cut in (a, b):
        assert topology.size_at(cut) == absolute_size(stream, cut)
        for seg in stream.segments.values():
            assert topology.position_in(seg, cut) == position_in(stream, cut, seg.id)
    if order in (CutOrder.BEFORE, CutOrder.EQUAL):
        assert topology.size_between(a, b) == oracle_size(stream, a, b)
        assert [(r.segment, r.start, r.end) for r in topology.ranges_between(a, b)] == [
            (s, position_in(stream, a, s), position_in(stream, b, s)) for s in sorted(stream.segments)
            if position_in(stream, b, s) > position_in(stream, a, s)]
    assert topology.initial_cut() == initial_cut(stream.segments.values())


@FAST
@given(scaled_streams())
def test_initial_cut_is_valid_and_the_tail_holds_everything(stream: ScaledStream) -> None:
    start = initial_cut(stream.segments.values())
    assert accepts(start, stream)
    tail = {s: stream.segments[s].tail for s in stream.active}
    assert Topology(stream.segments).size_between(start, tail) == sum(seg.tail for seg in stream.segments.values())


# ---- worked example (Pravega's SMTT.sizeBasedRetentionStreamTest) ---------------------------------


def test_worked_example_sealed_segments_count_in_full() -> None:
    """Segments 0 and 1 sealed at 70 bytes each, then the cut {2:29, 3:30} has size 199."""
    s0, s1, s2, s3 = (make_id(0, 0), make_id(0, 1), make_id(1, 2), make_id(1, 3))
    segments = {
        s0: Segment(s0, 0.0, 0.5, tail=70, sealed=True, sealed_epoch=1),
        s1: Segment(s1, 0.5, 1.0, tail=70, sealed=True, sealed_epoch=1),
        s2: Segment(s2, 0.0, 0.5, tail=29),
        s3: Segment(s3, 0.5, 1.0, tail=30),
    }
    start = initial_cut(segments.values())
    assert start == {s0: 0, s1: 0}
    cut = {s2: 29, s3: 30}
    check_cut(cut, segments, STREAM)
    assert Topology(segments).size_between(start, cut) == 199
    # the earlier cuts of that test: {0:9, 1:10} is 19 bytes in, {0:60, 1:60} 120
    assert Topology(segments).size_between(start, {s0: 9, s1: 10}) == 19
    assert Topology(segments).size_between(start, {s0: 60, s1: 60}) == 120
    assert Topology(segments).size_between({s0: 60, s1: 60}, cut) == 199 - 120
    assert compare_cuts({s0: 70, s1: 70}, {s2: 0, s3: 0}, {s: (g.key_low, g.key_high) for s, g in segments.items()}) \
        is CutOrder.BEFORE
    # a cut mixing a sealed predecessor and a successor is fine while they do not overlap
    check_cut({s0: 70, s3: 0}, segments, STREAM)
    with pytest.raises(InvalidStreamCut, match="overlap"):
        check_cut({s0: 70, s2: 0, s3: 0}, segments, STREAM)


def test_worked_example_across_a_merge() -> None:
    """0 [0,.5) and 1 [.5,1) merge into 2 [0,1), which splits into 3 [0,.5) and 4 [.5,1). The cut
    {0, 4} covers the key space but segment 2 lies partly before and partly after it."""
    s0, s1, s2, s3, s4 = make_id(0, 0), make_id(0, 1), make_id(1, 2), make_id(2, 3), make_id(2, 4)
    segments = {
        s0: Segment(s0, 0.0, 0.5, tail=10, sealed=True, sealed_epoch=1),
        s1: Segment(s1, 0.5, 1.0, tail=20, sealed=True, sealed_epoch=1),
        s2: Segment(s2, 0.0, 1.0, tail=30, sealed=True, sealed_epoch=2),
        s3: Segment(s3, 0.0, 0.5, tail=40),
        s4: Segment(s4, 0.5, 1.0, tail=50),
    }
    with pytest.raises(InvalidStreamCut, match=r"segment 1\.2 would lie partly before and partly after"):
        check_cut({s0: 0, s4: 0}, segments, STREAM)
    check_cut({s2: 15}, segments, STREAM)
    assert Topology(segments).size_between({s0: 5, s1: 0}, {s2: 15}) == 5 + 20 + 15
    assert Topology(segments).size_between({s2: 15}, {s3: 1, s4: 2}) == 15 + 1 + 2
