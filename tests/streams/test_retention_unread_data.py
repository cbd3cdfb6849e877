"""Consumption-based retention never drops unread data without cause: a property test of the pure
decision against a brute-force model of the stream's history (docs/retention.md, "How LB is judged").

The model: a random scaled stream, a chain of tail cuts P0 (the start) <= P1 <= ... <= Pn (the tail)
reached at increasing times T0 < T1 < ... < Tn, and a true write time for every byte -- the bytes
between P(i-1) and Pi were written in (T(i-1), Ti], in reading order. The retention set is a subset
of the chain, each recorded at its time (so a record's time is at or after the write time of every
byte before it, and before that of every byte after it). The head is a chain point; the subscriber
lower bound LB is any valid cut, usually moved up to the head as the retention cycle does.

Property: a cut that is not at or before LB (by the per-key oracle) is chosen only if LB keeps more
than max by the policy's own measure -- SIZE: the exact bytes from LB to the tail; TIME: the true age
of the oldest byte at or after LB (both counted from LB itself, also where a raw LB lies behind the
head, as the decision does). Alongside: the cut moves strictly forward from the head, frees
exactly the bytes between them, drops nothing younger than min (TIME) and keeps at least min bytes
(SIZE); and where LB provably keeps more than max and a cut within the limits exists, the max still
overrides the subscribers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from helpers.two_segments import S0, S1, rec, two_segments
from strategies import GRID, ScaledStream, cell_of, position_in, streams_with_cuts, valid_cut_frontiers
from tidekeep.streams.config import RetentionKind, RetentionPolicy
from tidekeep.streams.retention import (
    BEHIND_HEAD,
    Consumption,
    RetentionDecision,
    RetentionRecord,
    RetentionStream,
    decide,
)
from tidekeep.streams.subscribers import upper_bound

T_START = 1_700_000_000_000
STEP = 1_000  # ms: chain points lie 1..4 steps apart


# ---- the oracle ---------------------------------------------------------------------------------------


def key_position(stream: ScaledStream, cut: dict[int, int], cell: int) -> tuple[int, int]:
    seg = cell_of(stream, cut, cell)
    return seg, cut[seg]


def at_or_before(stream: ScaledStream, a: dict[int, int], b: dict[int, int]) -> bool:
    """Stream-cut order by its definition: at every routing key, a's (segment id, offset) <= b's."""
    return all(key_position(stream, a, cell) <= key_position(stream, b, cell) for cell in range(GRID))


def offsets(stream: ScaledStream, cut: dict[int, int]) -> dict[int, int]:
    """Where the cut lies in every segment of the stream (the key-based oracle of strategies.py)."""
    return {s: position_in(stream, cut, s) for s in stream.segments}


@dataclass(frozen=True)
class World:
    stream: ScaledStream
    write_time: dict[tuple[int, int], int]  # (segment, offset) -> when that byte was written
    records: list[RetentionRecord]
    head: dict[int, int]
    lb: dict[int, int]
    policy: RetentionPolicy
    now: int

    def absolute(self, cut: dict[int, int]) -> int:
        return sum(offsets(self.stream, cut).values())

    @property
    def tail_size(self) -> int:
        return sum(seg.tail for seg in self.stream.segments.values())

    def bytes_from(self, cut: dict[int, int]) -> int:
        return self.tail_size - self.absolute(cut)

    def bytes_at_or_after(self, cut: dict[int, int]) -> list[tuple[int, int]]:
        where = offsets(self.stream, cut)
        return [(s, o) for s, seg in self.stream.segments.items() for o in range(where[s], seg.tail)]

    def true_age(self, cut: dict[int, int]) -> int | None:
        """now minus the write time of the oldest byte at or after the cut (None: nothing there)."""
        times = [self.write_time[b] for b in self.bytes_at_or_after(cut)]
        return None if not times else self.now - min(times)

    def dropped(self, cut: dict[int, int]) -> list[tuple[int, int]]:
        """The bytes a truncation at `cut` removes: after the head, before the cut."""
        head, end = offsets(self.stream, self.head), offsets(self.stream, cut)
        return [(s, o) for s in self.stream.segments for o in range(head[s], end[s])]


def boundaries(values: list[int]) -> st.SearchStrategy[int]:
    """Limits at, just below and just above the amounts the records keep, or anything in between."""
    near = sorted({max(v + d, 0) for v in values for d in (-1, 0, 1)})
    return st.one_of(st.sampled_from(near), st.integers(0, max(values) + 2))


@st.composite
def worlds(draw: st.DrawFn, kind: RetentionKind) -> World:
    count = draw(st.integers(1, 5))
    stream, cuts = draw(streams_with_cuts(count=count, ordered=True, max_initial=3, max_scales=3, max_tail=20))
    assume(any(seg.tail for seg in stream.segments.values()))  # an empty stream has nothing to keep
    start = {s: 0 for s, seg in stream.segments.items() if seg.epoch == 0}
    tail = {s: seg.tail for s, seg in stream.segments.items() if not seg.sealed}
    chain = [start, *cuts, tail]
    for earlier, later in itertools.pairwise(chain):
        assert at_or_before(stream, earlier, later)  # the generator's promise; the model depends on it
    times = [T_START]
    for _ in chain[1:]:
        times.append(times[-1] + draw(st.integers(1, 4)) * STEP + draw(st.sampled_from([0, 1, 499])))
    rnd = draw(st.randoms(use_true_random=True))  # uniform: hypothesis biases its own draws to small values
    write_time: dict[tuple[int, int], int] = {}
    for i in range(1, len(chain)):
        lo, hi = offsets(stream, chain[i - 1]), offsets(stream, chain[i])
        window = [(s, o) for s in sorted(stream.segments) for o in range(lo[s], hi[s])]  # reading order
        stamps = sorted(rnd.randint(times[i - 1] + 1, times[i]) for _ in window)
        write_time.update(zip(window, stamps, strict=True))
    recorded = [i for i in range(1, len(chain)) if draw(st.booleans())] or [len(chain) - 1]
    records = [RetentionRecord(times[i], sum(offsets(stream, chain[i]).values()), dict(chain[i])) for i in recorded]
    now = times[-1] + draw(st.sampled_from([0, 1, STEP, 3 * STEP + 7]))
    head = dict(start if draw(st.booleans()) else chain[rnd.randint(0, len(chain) // 2)])
    if draw(st.integers(0, 2)) == 0:
        raw = dict(chain[rnd.randint(0, len(chain) - 1)])  # LB exactly at a chain point (maybe a record)
    else:
        segs = rnd.choice(sorted(valid_cut_frontiers(stream), key=sorted))
        raw = {s: rnd.randint(0, stream.segments[s].tail) for s in sorted(segs)}  # uniform, not shrunk to 0
    # the retention cycle moves LB up to the head (docs/retention.md, "A bound behind the head"); now and
    # then the raw bound, to cover the pure decision's whole domain
    lb = upper_bound([raw, head], stream.segments) if draw(st.integers(0, 4)) else raw
    total = sum(seg.tail for seg in stream.segments.values())
    if kind is RetentionKind.SIZE:
        amounts = [total - r.recording_size for r in records] + [total]
    else:
        amounts = [now - r.recording_time_ms for r in records] + [now - T_START]
    low = draw(boundaries(amounts))
    high = draw(st.one_of(st.none(), boundaries(amounts).filter(lambda x: x >= low)))
    return World(stream, write_time, records, head, lb, RetentionPolicy(kind, low, high), now)


# ---- the property --------------------------------------------------------------------------------------


def decide_in(world: World) -> RetentionDecision:
    return decide(RetentionStream.of(world.stream.segments, world.head, world.tail_size), world.records, world.policy,
                  world.now, consumption=Consumption(world.lb))


def check_unread_data_goes_only_with_cause(world: World, d: RetentionDecision) -> None:
    if d.cut is None or at_or_before(world.stream, d.cut, world.lb):
        return
    # unread data goes: only because LB keeps more than max, by the policy's own measure
    policy = world.policy
    assert policy.max is not None, d.reason
    if policy.kind is RetentionKind.SIZE:
        assert world.bytes_from(world.lb) > policy.max, d.reason
    else:
        age = world.true_age(world.lb)
        assert age is not None and age > policy.max, (age, d.reason)


def check_forward_and_min(world: World, d: RetentionDecision) -> None:
    if d.cut is None:
        assert d.freed_bytes == 0
        return
    assert at_or_before(world.stream, world.head, d.cut) and d.cut != world.head, d.reason
    dropped = world.dropped(d.cut)
    # (it may free nothing: a cut in a successor of finished segments lies after one at their ends by
    # the cut order, with no byte between -- the size/time rules do the same; not this property's concern)
    assert d.freed_bytes == len(dropped)
    policy = world.policy
    if policy.kind is RetentionKind.SIZE:
        assert world.bytes_from(d.cut) >= policy.min and d.retained == world.bytes_from(d.cut)
    else:
        # nothing written within the last min goes
        assert all(world.write_time[b] <= world.now - policy.min for b in dropped), d.reason
        if d.chosen is not None:
            assert d.retained == world.now - d.chosen.recording_time_ms >= policy.min


def check_max_where_lb_provably_keeps_more(world: World, d: RetentionDecision) -> None:
    """The fix must not disarm the max: where LB provably keeps more than max and a recorded cut keeps
    within the limits, the max overrides the subscribers and the stream is brought within it."""
    policy = world.policy
    if policy.max is None or d.cmax is None or d.case is None:
        return  # no max, no cut within the limits, or a guard (below min, ...) decided
    if policy.kind is RetentionKind.SIZE:
        if world.bytes_from(world.lb) <= policy.max:
            return
        assert d.case in ("iii", "v") and (d.cut is not None or d.rule == BEHIND_HEAD), d.reason
        assert d.cut is None or world.bytes_from(d.cut) <= policy.max
        return
    lb = offsets(world.stream, world.lb)
    old = [r for r in world.records if world.now - r.recording_time_ms > policy.max]
    if not any(any(lb[s] < o for s, o in offsets(world.stream, r.positions).items()) for r in old):
        return  # nothing proves the data at LB older than max
    assert d.case in ("iii", "v") and (d.cut is not None or d.rule == BEHIND_HEAD), d.reason
    if d.cut is not None:  # everything recorded more than max ago goes
        assert all(at_or_before(world.stream, r.positions, d.cut) for r in old), d.reason


@pytest.mark.parametrize("kind", [RetentionKind.SIZE, RetentionKind.TIME], ids=["size", "time"])
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_retention_keeps_unread_data_unless_lb_keeps_more_than_max(kind: RetentionKind, data: st.DataObject) -> None:
    world = data.draw(worlds(kind))
    d = decide_in(world)
    assert d.lower_bound == world.lb
    check_unread_data_goes_only_with_cause(world, d)
    check_forward_and_min(world, d)
    check_max_where_lb_provably_keeps_more(world, d)


def test_the_model_replays_the_defect() -> None:
    """The defect the property guards against, spelled out in the model: TIME, min 1 s, max 8 s; the
    only cut older than max is (50, 50), recorded 9 s ago; LB (70, 80) lies after it and before Cmax
    (100, 100), recorded 7 s ago. The oldest byte at LB was written 7.5 s ago, within max: truncating
    at Cmax would drop unread data for nothing. LB is the cut."""
    stream = ScaledStream(segments=two_segments(300, 300), grid={S0: (0, GRID // 2), S1: (GRID // 2, GRID)},
                          epoch=0)
    written = {0: T_START + 1_000, 50: T_START + 2_500, 100: T_START + 3_500}  # from offset: time
    write_time = {(s, o): written[max(k for k in written if k <= o)] for s in (S0, S1) for o in range(300)}
    records = [rec(T_START + 1_000, 50, 50), rec(T_START + 3_000, 100, 100), rec(T_START + 9_000, 300, 300)]
    world = World(stream, write_time, records, {S0: 0, S1: 0}, {S0: 70, S1: 80},
                  RetentionPolicy.by_time(1_000, 8_000), T_START + 10_000)
    d = decide_in(world)
    assert world.true_age(world.lb) == 7_500
    assert d.cmax == records[1] and (d.case, d.cut) == ("i", {S0: 70, S1: 80})
