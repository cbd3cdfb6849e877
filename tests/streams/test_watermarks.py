"""Watermark computation and reader time windows, the pure core (docs/watermarks.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import GRID, ScaledStream, draw_offsets, make_id, scaled_streams, valid_cut_frontiers
from tidekeep.errors import InvalidInput, InvalidStreamCut
from tidekeep.streams.cuts import CutOrder, check_cut, compare_cuts
from tidekeep.streams.model import Segment
from tidekeep.streams.watermarks import (
    TimeWindow,
    Watermark,
    WindowTracker,
    WriterMark,
    active_writers,
    advance,
    compare,
    last_passed,
    next_watermark,
    time_window,
)

AT_OR_BEFORE = {CutOrder.BEFORE, CutOrder.EQUAL}


# ---- random scenarios ---------------------------------------------------------------------------------


@dataclass
class Scenario:
    stream: ScaledStream
    chains: list[list[dict[int, int]]]  # per writer, per round: its position (part of an ordered valid cut)


@st.composite
def repartitioned_streams(draw: st.DrawFn) -> ScaledStream:
    """scaled_streams only splits one segment or merges whole ones; add up to two many-to-many scales
    (2..3 adjacent active segments replaced by 2 at a different boundary, as in Pravega's
    WatermarkWorkflowTest.testWatermarkingWorkflow). Those are what open key-range gaps that the cut
    computation has to fill."""
    stream = draw(scaled_streams(max_scales=3))
    segments, grid, epoch = dict(stream.segments), dict(stream.grid), stream.epoch
    next_number = max(s & 0xFFFFFFFF for s in segments) + 1
    for _ in range(draw(st.integers(0, 2))):
        active = sorted((s for s, seg in segments.items() if not seg.sealed), key=lambda s: grid[s][0])
        if len(active) < 2:
            break
        start = draw(st.integers(0, len(active) - 2))
        sealed = active[start:start + draw(st.integers(2, min(3, len(active) - start)))]
        low, high = grid[sealed[0]][0], grid[sealed[-1]][1]
        inner = [b for b in range(low + 1, high) if b not in {grid[s][1] for s in sealed}]
        if not inner:
            continue
        point = draw(st.sampled_from(inner))
        epoch += 1
        for s in sealed:
            segments[s] = replace(segments[s], sealed=True, sealed_epoch=epoch)
        for lo, hi in ((low, point), (point, high)):
            seg = make_id(epoch, next_number)
            next_number += 1
            grid[seg] = (lo, hi)
            segments[seg] = Segment(seg, lo / GRID, hi / GRID, tail=draw(st.integers(0, 40)))
    return ScaledStream(segments, grid, epoch)


@st.composite
def scenarios(draw: st.DrawFn, rounds: int = 4) -> Scenario:
    stream = draw(repartitioned_streams())
    frontiers = sorted(valid_cut_frontiers(stream).items(), key=lambda item: sorted(item[0]))
    chains = []
    for _ in range(draw(st.integers(1, 3))):
        chain: list[dict[int, int]] = []
        cut: dict[int, int] = {}
        done: frozenset[int] | None = None
        for _ in range(rounds):
            later = [item for item in frontiers if done is None or done <= item[1]]
            segs, done = draw(st.sampled_from(later))
            cut = draw_offsets(draw, stream, segs, {s: o for s, o in cut.items() if s in segs})
            # a writer holds only some of the segments (routing keys it uses)
            part = draw(st.sets(st.sampled_from(sorted(cut)), min_size=1))
            chain.append({s: cut[s] for s in sorted(part)})
        chains.append(chain)
    return Scenario(stream, chains)


def at_or_after_position(cut: dict[int, int], position: dict[int, int], stream: ScaledStream) -> bool:
    return compare_cuts(position, cut, stream.ranges) in AT_OR_BEFORE


@settings(max_examples=150, deadline=None)
@given(scenarios(rounds=1), st.data())
def test_first_watermark_is_a_complete_valid_upper_bound(scenario: Scenario, data: st.DataObject) -> None:
    stream = scenario.stream
    marks = [WriterMark(f"w{i}", data.draw(st.integers(0, 1000)), chain[0], 0)
             for i, chain in enumerate(scenario.chains)]
    wm = next_watermark(marks, None, stream.segments, now_ms=0, aggregation_timeout_ms=60_000)
    assert wm is not None
    check_cut(wm.cut, stream.segments, "s/t")
    for mark in marks:
        assert at_or_after_position(wm.cut, mark.positions, stream), (wm.cut, mark.positions)
    assert wm.lower_time_ms == min(m.time_ms for m in marks)
    assert wm.upper_time_ms == max(m.time_ms for m in marks)
    assert wm.revision == 0


@settings(max_examples=150, deadline=None)
@given(scenarios(rounds=4), st.data())
def test_sequence_of_emissions(scenario: Scenario, data: st.DataObject) -> None:
    """Writers note (or stay silent) round by round; every cycle is checked against the rules computed
    here independently: active/participating, emission, times, cut."""
    stream = scenario.stream
    timeout = data.draw(st.integers(0, 30), label="timeout")
    history: list[WriterMark] = []
    last: dict[str, WriterMark] = {}
    previous: Watermark | None = None
    emitted: list[Watermark] = []
    now = 0
    for rnd in range(4):
        now += data.draw(st.integers(0, 20))
        for i, chain in enumerate(scenario.chains):
            writer = f"w{i}"
            if rnd == 0 or data.draw(st.booleans()):
                time = (last[writer].time_ms if writer in last else 0) + data.draw(st.integers(0, 50))
                mark = WriterMark(writer, time, chain[rnd], now)
                history.append(mark)
                last[writer] = mark
        now += data.draw(st.integers(0, 20))
        wm = next_watermark(history, previous, stream.segments, now, timeout)

        participating = {w for w, m in last.items() if previous is None or m.time_ms > previous.lower_time_ms}
        active = {w for w, m in last.items() if w in participating or now - m.noted_ms < timeout}
        assert {m.writer_id for m in active_writers(history, previous, now, timeout)} == active
        if not active or not active <= participating:
            assert wm is None
            continue
        assert wm is not None
        assert wm.lower_time_ms == min(last[w].time_ms for w in active)
        assert wm.upper_time_ms == max([last[w].time_ms for w in active]
                                       + ([previous.upper_time_ms] if previous else []))
        check_cut(wm.cut, stream.segments, "s/t")
        # every writer's position, also a timed-out one's: its events before it were noted below lower
        for w in last:
            assert at_or_after_position(wm.cut, last[w].positions, stream)
        if previous is not None:
            assert wm.revision == previous.revision + 1
            assert wm.lower_time_ms > previous.lower_time_ms
            assert wm.upper_time_ms >= previous.upper_time_ms
            assert compare_cuts(previous.cut, wm.cut, stream.ranges) in AT_OR_BEFORE
        else:
            assert wm.revision == 0
        # asked again with nothing new, the lower time does not advance: no emission
        assert next_watermark(history, wm, stream.segments, now, timeout) is None or any(
            now - last[w].noted_ms >= timeout and last[w].time_ms <= wm.lower_time_ms for w in active)
        previous = wm
        emitted.append(wm)
    assert [w.revision for w in emitted] == list(range(len(emitted)))


def one_segment_stream() -> dict[int, Segment]:
    return {0: Segment(0, 0.0, 1.0, tail=1000)}


def test_timed_out_writer_stops_holding_back_and_rejoins() -> None:
    segments = one_segment_stream()
    timeout = 50
    marks = [WriterMark("slow", 100, {0: 10}, noted_ms=0), WriterMark("fast", 100, {0: 20}, noted_ms=0)]
    wm0 = next_watermark(marks, None, segments, 0, timeout)
    assert wm0 is not None and (wm0.lower_time_ms, wm0.revision) == (100, 0)
    marks.append(WriterMark("fast", 200, {0: 30}, noted_ms=10))
    # slow has not advanced past the watermark but noted 10 ms ago: it holds the watermark back
    assert next_watermark(marks, wm0, segments, 10, timeout) is None
    assert [m.writer_id for m in active_writers(marks, wm0, 10, timeout)] == ["fast", "slow"]
    # 50 ms after its last note it no longer counts
    assert [m.writer_id for m in active_writers(marks, wm0, 50, timeout)] == ["fast"]
    wm1 = next_watermark(marks, wm0, segments, 50, timeout)
    assert wm1 is not None and (wm1.lower_time_ms, wm1.upper_time_ms, wm1.revision) == (200, 200, 1)
    assert wm1.cut == {0: 30}
    # it notes again, but below the watermark: active, not participating -> nothing until it times out
    marks.append(WriterMark("slow", 150, {0: 40}, noted_ms=60))
    marks.append(WriterMark("fast", 300, {0: 50}, noted_ms=60))
    assert next_watermark(marks, wm1, segments, 70, timeout) is None
    # a later note above the watermark: it rejoins and bounds the lower time
    marks.append(WriterMark("slow", 250, {0: 60}, noted_ms=80))
    wm2 = next_watermark(marks, wm1, segments, 80, timeout)
    assert wm2 is not None and (wm2.lower_time_ms, wm2.upper_time_ms, wm2.cut) == (250, 300, {0: 60})


def test_closed_writer_never_holds_back_but_its_last_position_bounds_the_cut() -> None:
    segments = one_segment_stream()
    wm0 = next_watermark([WriterMark("a", 10, {0: 1}, 0), WriterMark("b", 10, {0: 2}, 0)], None, segments, 0, 60_000)
    assert wm0 is not None
    # b wrote up to offset 5 after noting 10, then closed: its time no longer counts (a alone moves the
    # watermark at once, although b is within the timeout and below the watermark), but events up to 5
    # were noted at 10 — a cut before 5 would let a reader pass lower 20 and then read them
    closed = WriterMark("b", 10, {0: 5}, 1, closed=True)
    assert active_writers([WriterMark("a", 20, {0: 3}, 1), closed], wm0, 1, 60_000) == [
        WriterMark("a", 20, {0: 3}, 1)]
    wm1 = next_watermark([WriterMark("a", 20, {0: 3}, 1), closed], wm0, segments, 1, 60_000)
    assert wm1 is not None and (wm1.lower_time_ms, wm1.cut) == (20, {0: 5})
    # only closed writers left: no time to bound, nothing is emitted
    assert next_watermark([closed], wm0, segments, 1, 60_000) is None


def test_timed_out_writer_still_bounds_the_cut_with_its_last_position() -> None:
    segments = one_segment_stream()
    wm0 = next_watermark([WriterMark("a", 10, {0: 1}, 0), WriterMark("b", 10, {0: 1}, 0)], None, segments, 0, 5)
    assert wm0 is not None and wm0.cut == {0: 1}
    # b writes up to 4 and notes 10 again (not above the watermark), then stops and times out; a moves on
    # to 2 at time 20: the cut goes to b's 4 (Pravega's would stop at a's 2, before b's events noted at 10)
    marks = [WriterMark("a", 20, {0: 2}, 10), WriterMark("b", 10, {0: 4}, 1)]
    assert [m.writer_id for m in active_writers(marks, wm0, 10, 5)] == ["a"]
    wm1 = next_watermark(marks, wm0, segments, 10, 5)
    assert wm1 is not None and (wm1.lower_time_ms, wm1.cut) == (20, {0: 4})


# ---- Pravega's worked example (WatermarkWorkflowTest.testWatermarkingWorkflow; docs/watermarks.md) -----


def test_pravegas_watermarking_workflow_example() -> None:
    third = 1 / 3
    s0, s1, s2 = make_id(0, 0), make_id(0, 1), make_id(0, 2)
    s3, s4 = make_id(1, 3), make_id(1, 4)
    segments = {
        s0: Segment(s0, 0.0, third, tail=1000, sealed=True, sealed_epoch=1),
        s1: Segment(s1, third, 2 * third, tail=1000, sealed=True, sealed_epoch=1),
        s2: Segment(s2, 2 * third, 1.0, tail=1000, sealed=True, sealed_epoch=1),
        s3: Segment(s3, 0.0, 0.5, tail=1000),
        s4: Segment(s4, 0.5, 1.0, tail=1000),
    }
    marks = [
        WriterMark("w1", 302, {s0: 300, s1: 400}, 0),
        WriterMark("w2", 301, {s1: 100, s2: 400}, 0),
        WriterMark("w3", 300, {s3: 100}, 0),
    ]
    previous = Watermark(7, 200, 250, {s0: 200, s1: 300, s2: 300})
    wm = next_watermark(marks, previous, segments, now_ms=0, aggregation_timeout_ms=60_000)
    assert wm == Watermark(8, 300, 302, {s3: 100, s4: 0})
    assert wm.to_dict() == {"revision": 8, "lower_time_ms": 300, "upper_time_ms": 302,
                            "cut": {"1.3": 100, "1.4": 0}}


def test_lineage_is_respected_where_pravega_would_not_fill() -> None:
    """A and N merge into B, B splits into C and D. Writers at A and D leave no gap, but {A, D} is no
    cut (B would lie partly before, partly after): the cut moves A's keys on to C at its start."""
    a, n, b, c, d = make_id(0, 0), make_id(0, 1), make_id(1, 2), make_id(2, 3), make_id(2, 4)
    segments = {
        a: Segment(a, 0.0, 0.5, tail=100, sealed=True, sealed_epoch=1),
        n: Segment(n, 0.5, 1.0, tail=100, sealed=True, sealed_epoch=1),
        b: Segment(b, 0.0, 1.0, tail=100, sealed=True, sealed_epoch=2),
        c: Segment(c, 0.0, 0.5, tail=100),
        d: Segment(d, 0.5, 1.0, tail=100),
    }
    wm = next_watermark([WriterMark("x", 5, {a: 40}, 0), WriterMark("y", 6, {d: 7}, 0)], None, segments, 0, 10)
    assert wm is not None and wm.cut == {c: 0, d: 7}
    check_cut(wm.cut, segments, "s/t")


def test_unwritten_segment_is_filled_at_its_start_so_readers_get_a_lower_bound() -> None:
    """Pravega #6510: no writer ever wrote to segment 1; its cut entry is 0 (not -1), so a reader that
    passed the writers' position gets a lower bound."""
    s0, s1 = make_id(0, 0), make_id(0, 1)
    segments = {s0: Segment(s0, 0.0, 0.5, tail=100), s1: Segment(s1, 0.5, 1.0, tail=0)}
    wm = next_watermark([WriterMark("w", 42, {s0: 30}, 0)], None, segments, 0, 1000)
    assert wm is not None and wm.cut == {s0: 30, s1: 0}
    assert time_window({s0: 30, s1: 0}, [wm], segments) == TimeWindow(42, None)
    assert time_window({s0: 10, s1: 0}, [wm], segments) == TimeWindow(None, 42)


# ---- the reader's window: Pravega's WatermarkReaderImpl (docs/watermarks.md) ----------------------------


S0, S1, S2, S3 = make_id(0, 0), make_id(0, 1), make_id(1, 2), make_id(2, 3)
D6_SEGMENTS = {
    S0: Segment(S0, 0.0, 0.5, tail=100), S1: Segment(S1, 0.5, 1.0, tail=100),
    S2: Segment(S2, 0.0, 0.5, tail=100), S3: Segment(S3, 0.5, 1.0, tail=100),
}


def test_compare_as_in_pravega_testCompare() -> None:
    mark = {S1: 1, S2: 2}
    assert compare({S1: 1, S2: 2}, mark, D6_SEGMENTS) == 1  # exactly at the mark counts as passed
    for before in ({S0: 0, S1: 1}, {S1: 0, S2: 1}, {S1: 1, S2: 1}):
        assert compare(before, mark, D6_SEGMENTS) == -1
    for after in ({S2: 2, S3: 3}, {S1: 2, S2: 3}, {S1: 1, S2: 3}):
        assert compare(after, mark, D6_SEGMENTS) == 1
    for overlap in ({S0: 0, S3: 3}, {S1: 0, S2: 3}, {S1: 3, S2: 0}):
        assert compare(overlap, mark, D6_SEGMENTS) == 0


def test_pravegas_watermark_reader_updatesUpdates_sequence() -> None:
    cuts = [
        {S0: 0, S1: 0}, {S0: 2, S1: 0}, {S0: 2, S1: 2}, {S2: 0, S1: 2},
        {S2: 4, S1: 2}, {S2: 4, S1: 4}, {S2: 4, S3: 0}, {S2: 6, S3: 4},
    ]
    marks = [Watermark(i, 10 * (i + 1), 10 * (i + 1) + 9, cut) for i, cut in enumerate(cuts)]
    tracker = WindowTracker(marks, D6_SEGMENTS)
    assert tracker.window == TimeWindow(None, None)
    steps = [
        ({S0: 1, S1: 0}, (10, 29)), ({S0: 3, S1: 0}, (20, 49)), ({S0: 5, S1: 0}, (20, 49)),
        ({S0: 6, S1: 0}, (20, 49)), ({S0: 6, S1: 1}, (20, 49)), ({S0: 6, S1: 3}, (30, 69)),
        ({S2: 0, S1: 3}, (40, 69)), ({S2: 4, S1: 3}, (50, 69)), ({S2: 4, S1: 5}, (60, 79)),
        ({S2: 4, S3: 1}, (70, 89)), ({S2: 5, S3: 1}, (70, 89)), ({S2: 5, S3: 5}, (70, 89)),
        ({S2: 6, S3: 5}, (80, None)), ({S2: 7, S3: 7}, (80, None)),
    ]
    for position, (lower, upper) in steps:
        assert tracker.advance_to(position) == TimeWindow(lower, upper), position
        assert tracker.window == TimeWindow(lower, upper)


def test_advance_never_moves_a_window_backwards() -> None:
    assert advance(TimeWindow(20, 49), TimeWindow(10, 29)) == TimeWindow(20, 49)
    assert advance(TimeWindow(20, 49), TimeWindow(30, 69)) == TimeWindow(30, 69)
    assert advance(TimeWindow(None, None), TimeWindow(10, 29)) == TimeWindow(10, 29)
    assert advance(TimeWindow(80, 89), TimeWindow(80, None)) == TimeWindow(80, None)


# ---- bad input -------------------------------------------------------------------------------------------


def test_mark_naming_a_segment_the_stream_does_not_have() -> None:
    with pytest.raises(InvalidStreamCut) as err:
        next_watermark([WriterMark("w", 1, {make_id(3, 9): 0}, 0)], None, one_segment_stream(), 0, 10)
    assert str(err.value) == "writer w: mark names segment 3.9, which the stream does not have"


def test_offset_beyond_the_tail() -> None:
    with pytest.raises(InvalidStreamCut) as err:
        next_watermark([WriterMark("w", 1, {0: 1001}, 0)], None, one_segment_stream(), 0, 10)
    assert str(err.value) == "writer w: offset 1001 in segment 0.0 is outside [0, 1000]"


def test_negative_timeout() -> None:
    with pytest.raises(InvalidInput) as err:
        next_watermark([WriterMark("w", 1, {0: 1}, 0)], None, one_segment_stream(), 0, -5)
    assert str(err.value) == "invalid timestamp aggregation timeout -5 ms: must be >= 0"
    with pytest.raises(InvalidInput):
        active_writers([], None, 0, -1)


def test_time_going_backwards_within_a_writer() -> None:
    marks = [WriterMark("w", 100, {0: 1}, 0), WriterMark("w", 99, {0: 2}, 1)]
    with pytest.raises(InvalidInput) as err:
        next_watermark(marks, None, one_segment_stream(), 1, 10)
    assert str(err.value) == "writer w: time went backwards from 100 to 99 ms"


def test_position_going_backwards_within_a_writer() -> None:
    marks = [WriterMark("w", 100, {0: 5}, 0), WriterMark("w", 100, {0: 4}, 1)]
    with pytest.raises(InvalidInput) as err:
        next_watermark(marks, None, one_segment_stream(), 1, 10)
    assert str(err.value) == "writer w: position in segment 0.0 went backwards from 5 to 4"


def test_previous_watermark_of_another_stream() -> None:
    previous = Watermark(0, 1, 1, {make_id(1, 7): 0})
    with pytest.raises(InvalidStreamCut) as err:
        next_watermark([WriterMark("w", 2, {0: 1}, 0)], previous, one_segment_stream(), 0, 10)
    assert str(err.value) == "invalid stream cut for the previous watermark: segment 1.7 does not exist"


def emitted_watermarks(scenario: Scenario) -> list[Watermark]:
    """The watermarks a run of four cycles emits, every writer noting each round (timeout 0)."""
    marks: list[WriterMark] = []
    emitted: list[Watermark] = []
    previous: Watermark | None = None
    for rnd in range(4):
        for i, chain in enumerate(scenario.chains):
            marks.append(WriterMark(f"w{i}", 10 * rnd + i, chain[rnd], rnd))
        wm = next_watermark(marks, previous, scenario.stream.segments, rnd, 0)
        if wm is not None:
            emitted.append(wm)
            previous = wm
    return emitted


@settings(max_examples=100, deadline=None)
@given(scenarios(rounds=4), st.data())
def test_reader_window_only_moves_forward_and_brackets_the_position(scenario: Scenario, data: st.DataObject) -> None:
    """Watermarks from a run of cycles; a reader moving forward through ordered valid cuts. The lower
    bound comes from a mark the reader is at or past, the upper from a mark it has not passed, and
    neither moves backwards (upper may become None near the tail)."""
    stream = scenario.stream
    emitted = emitted_watermarks(scenario)
    frontiers = sorted(valid_cut_frontiers(stream).items(), key=lambda item: sorted(item[0]))
    tracker = WindowTracker(emitted, stream.segments)
    cut: dict[int, int] = {}
    done: frozenset[int] | None = None
    seen: list[TimeWindow] = []
    for _ in range(5):
        later = [item for item in frontiers if done is None or done <= item[1]]
        segs, done = data.draw(st.sampled_from(later))
        cut = draw_offsets(data.draw, stream, segs, {s: o for s, o in cut.items() if s in segs})
        window = tracker.advance_to(cut)
        if window.lower_ms is not None:
            passed = [w for w in emitted if w.lower_time_ms == window.lower_ms]
            assert passed and compare(cut, passed[0].cut, stream.segments) == 1
        if window.upper_ms is not None:
            assert any(compare(cut, w.cut, stream.segments) <= 0 for w in emitted if w.upper_time_ms == window.upper_ms)
        if seen:
            last = seen[-1]
            assert last.lower_ms is None or (window.lower_ms is not None and window.lower_ms >= last.lower_ms)
            assert last.upper_ms is None or window.upper_ms is None or window.upper_ms >= last.upper_ms
        seen.append(window)


@settings(max_examples=100, deadline=None)
@given(scenarios(rounds=4), st.data())
def test_reader_starting_at_the_last_passed_watermark_sees_the_window_of_a_full_scan(
        scenario: Scenario, data: st.DataObject) -> None:
    """A reader's first window is found by binary search for the last watermark its position has passed
    (reader_window.py) instead of reading every watermark since revision 0: the window must be exactly
    the full scan's, and the search must agree with a linear scan (the passed marks form a prefix)."""
    stream = scenario.stream
    emitted = emitted_watermarks(scenario)
    frontiers = sorted(valid_cut_frontiers(stream).items(), key=lambda item: sorted(item[0]))
    segs, _ = data.draw(st.sampled_from(frontiers))
    position = draw_offsets(data.draw, stream, segs, {})
    passed_flags = [compare(position, w.cut, stream.segments) > 0 for w in emitted]
    assert passed_flags == sorted(passed_flags, reverse=True), "the passed watermarks are not a prefix"
    linear = max((i for i, p in enumerate(passed_flags) if p), default=None)
    found = last_passed(position, 0, len(emitted) - 1, lambda r: emitted[r], stream.segments) if emitted else None
    assert found == linear
    start = 0 if found is None else found
    assert time_window(position, emitted[start:], stream.segments) == time_window(position, emitted, stream.segments)
