"""The streaming source's pure parts against brute-force oracles on randomly scaled streams:
where a micro-batch ends (offsets.next_end) and the watermark column (watermark_column)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import ScaledStream, position_in, predecessors, streams_with_cuts, valid_cut_frontiers
from tidekeep.spark.offsets import cut_of, frontier, next_end, offset_of
from tidekeep.spark.watermark_column import lower_times, segment_thresholds, watermark_array
from tidekeep.streams.cuts import CutOrder, StreamCut, Topology, check_cut, compare_cuts
from tidekeep.streams.watermarks import Watermark, compare


def ancestors(stream: ScaledStream, cut: dict[int, int]) -> frozenset[int]:
    found: set[int] = set()
    todo = [p for s in cut for p in predecessors(stream, s)]
    while todo:
        seg = todo.pop()
        if seg not in found:
            found.add(seg)
            todo.extend(predecessors(stream, seg))
    return frozenset(found)


def oracle_frontier(stream: ScaledStream, start: dict[int, int], bound: dict[int, int]) -> frozenset[int]:
    """The valid cut with the most passed segments, passing only segments complete at start that
    the bound lies past: enumerate every valid cut's done set."""
    base = ancestors(stream, start)
    candidates = {s for s, o in start.items() if stream.segments[s].sealed and o == stream.segments[s].tail
                  and s not in bound}
    fits = [(ready, done) for ready, done in valid_cut_frontiers(stream).items()
            if base <= done <= base | candidates]
    best_ready, best_done = max(fits, key=lambda item: len(item[1]))
    assert all(done <= best_done for _, done in fits), "the passable done sets have no largest"
    return best_ready


@st.composite
def batch_cases(draw: st.DrawFn) -> tuple[ScaledStream, dict[int, int], dict[int, int], dict[int, list[int]],
                                         int | None]:
    stream, (start, bound) = draw(streams_with_cuts(count=2, ordered=True, max_scales=4, max_tail=30))
    boundaries = {s: sorted(draw(st.sets(st.integers(0, seg.tail), max_size=6)))
                  for s, seg in stream.segments.items()}
    budget = draw(st.none() | st.integers(1, 60))
    return stream, start, bound, boundaries, budget


@settings(max_examples=300, deadline=None)
@given(batch_cases())
def test_next_end_against_oracle(case) -> None:  # type: ignore[no-untyped-def]
    stream, start, bound, boundaries, budget = case
    segments, ranges = stream.segments, stream.ranges
    end = next_end(start, bound, segments, boundaries, budget)

    check_cut(end, segments, "s/t")  # a valid cut
    assert compare_cuts(start, end, ranges) in (CutOrder.BEFORE, CutOrder.EQUAL)
    assert compare_cuts(end, bound, ranges) in (CutOrder.BEFORE, CutOrder.EQUAL)
    assert frozenset(end) == oracle_frontier(stream, start, bound) == frozenset(frontier(start, bound, segments))
    steps = {}
    for seg, offset in end.items():
        low, high = position_in(stream, start, seg), position_in(stream, bound, seg)
        assert low <= offset <= high
        # ends only at given boundaries (event boundaries) or where start and bound stand
        assert offset in (low, high) or offset in boundaries[seg]
        steps[seg] = [b for b in sorted({*boundaries[seg], high}) if low < b <= high]

    # successors only after their predecessors were complete at start
    for seg in segments:
        if position_in(stream, end, seg) > position_in(stream, start, seg):
            for pred in predecessors(stream, seg):
                assert position_in(stream, start, pred) == segments[pred].tail

    read = Topology(segments).size_between(start, end)
    unlimited = next_end(start, bound, segments, boundaries, None)
    available = Topology(segments).size_between(start, unlimited)
    assert unlimited == {s: position_in(stream, bound, s) for s in unlimited}
    if budget is None:
        assert end == unlimited
    else:
        smallest = min((st_[0] - position_in(stream, start, s) for s, st_ in steps.items() if st_), default=0)
        assert read <= budget or read == smallest  # over budget only by one smallest step
        if available:
            assert read > 0  # progress whenever there is data


@settings(max_examples=100, deadline=None)
@given(streams_with_cuts(count=1))
def test_offsets_round_trip(case) -> None:  # type: ignore[no-untyped-def]
    stream, (positions,) = case
    cut = StreamCut("a/b", positions, {s: stream.ranges[s] for s in positions})
    offset = offset_of(cut)
    assert cut_of(offset, "a/b") == cut and cut_of(offset, "a/b").ranges == cut.ranges


def test_offsets_carry_the_stream_uid_and_checkpoints_without_it_still_read() -> None:
    uid = "0123456789abcdef0123456789abcdef"
    cut = StreamCut("a/b", {0: 5}, {0: (0.0, 1.0)}, uid)
    offset = offset_of(cut)
    assert offset["uid"] == uid and cut_of(offset, "a/b").uid == uid
    # an offset from a checkpoint written before offsets carried the uid
    older = {"stream": "a/b", "positions": [{"segment": "0.0", "offset": 5, "range": [0.0, 1.0]}]}
    assert cut_of(older, "a/b") == cut and cut_of(older, "a/b").uid is None
    assert cut_of(older, "a/b").ranges == cut.ranges


@st.composite
def watermark_cases(draw: st.DrawFn) -> tuple[ScaledStream, list[Watermark]]:
    count = draw(st.integers(1, 4))
    stream, cuts = draw(streams_with_cuts(count=count, ordered=True, max_scales=4, max_tail=20))
    times = sorted(draw(st.sets(st.integers(0, 10**6), min_size=count, max_size=count)))
    return stream, [Watermark(i, t, t + 5, c) for i, (t, c) in enumerate(zip(times, cuts, strict=True))]


@settings(max_examples=300, deadline=None)
@given(watermark_cases(), st.data())
def test_watermark_column_against_compare(case, data) -> None:  # type: ignore[no-untyped-def]
    stream, marks = case
    for seg, segment in stream.segments.items():
        offsets = np.arange(segment.tail + 1, dtype=np.int64)
        expected = []
        for o in offsets:
            passed = [m.lower_time_ms for m in marks if compare({seg: int(o)}, m.cut, stream.segments) > 0]
            expected.append(passed[-1] if passed else None)
        values, valid = lower_times(offsets, segment_thresholds(marks, seg, stream.segments))
        assert [int(v) if ok else None for v, ok in zip(values, valid, strict=True)] == expected
        # the reduced thresholds of a read range answer the same inside it
        low = data.draw(st.integers(0, segment.tail))
        high = data.draw(st.integers(low, segment.tail))
        inside = offsets[low:high]
        column = watermark_array(pa.array(inside), segment_thresholds(marks, seg, stream.segments, low, high))
        got = [None if v is None else v // 1000 for v in column.cast(pa.int64()).to_pylist()]  # us -> ms
        assert got == expected[low:high]
