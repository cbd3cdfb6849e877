"""The pure retention decision (docs/design/streams.md): properties against a brute-force oracle, the
four rules, the worked examples of docs/retention.md, pruning and the record cadence."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.two_segments import S0, S1, rec, two_segments
from strategies import position_in, streams_with_cuts
from tidekeep.streams.config import RetentionKind, RetentionPolicy
from tidekeep.streams.cuts import Topology
from tidekeep.streams.retention import (
    ABOVE_MAX,
    BEHIND_HEAD,
    BELOW_MIN,
    BETWEEN_LIMITS,
    EMPTY_SET,
    NO_CMIN,
    NO_MAX,
    NO_POLICY,
    RetentionRecord,
    RetentionStream,
    decide,
    prune,
    should_record,
)

T0 = 1_700_000_000_000
MIN = 60_000


# ---- the brute-force oracle: the rules of docs/design/streams.md applied literally, per segment ------------


@dataclass(frozen=True)
class Expected:
    rule: str
    cut: dict[int, int] | None
    cmin: RetentionRecord | None
    cmax: RetentionRecord | None
    freed: int


def oracle(head: dict[int, int], tail: dict[int, int], records: list[RetentionRecord], policy: RetentionPolicy | None,
           now: int) -> Expected:
    if policy is None:
        return Expected(NO_POLICY, None, None, None, 0)
    if not records:
        return Expected(EMPTY_SET, None, None, None, 0)
    tail_size = sum(tail.values())

    def retained(r: RetentionRecord) -> int:
        return tail_size - r.recording_size if policy.kind is RetentionKind.SIZE else now - r.recording_time_ms

    def at_or_after_head(r: RetentionRecord) -> bool:
        return all(r.positions[s] >= head[s] for s in head)

    def after_head(r: RetentionRecord) -> bool:
        return at_or_after_head(r) and any(r.positions[s] > head[s] for s in head)

    keeps_min = [r for r in records if retained(r) >= policy.min]
    cmin = min(keeps_min, key=lambda r: (retained(r), r.recording_time_ms), default=None)
    within = [r for r in keeps_min if policy.max is not None and retained(r) <= policy.max]
    cmax = max(within, key=lambda r: (retained(r), -r.recording_time_ms), default=None)
    if policy.kind is RetentionKind.SIZE:
        amount = tail_size - sum(head.values())
    else:
        amount = max([now - r.recording_time_ms for r in records if at_or_after_head(r)], default=0)
    if amount < policy.min:
        return Expected(BELOW_MIN, None, cmin, cmax, 0)
    if cmin is None:
        return Expected(NO_CMIN, None, cmin, cmax, 0)
    if policy.max is None:
        rule, chosen = NO_MAX, cmin
    elif amount > policy.max:
        rule, chosen = ABOVE_MAX, (cmax if cmax is not None else cmin)
    else:
        rule, chosen = BETWEEN_LIMITS, cmin
    if not after_head(chosen):
        return Expected(BEHIND_HEAD, None, cmin, cmax, 0)
    return Expected(rule, dict(chosen.positions), cmin, cmax, sum(chosen.positions[s] - head[s] for s in head))


@st.composite
def situations(draw: st.DrawFn):
    """A two-segment stream: records are tail cuts over time (offsets never go back), the head is
    any cut at or before the tail (possibly ahead of, behind or overlapping records)."""
    n = draw(st.integers(0, 8))
    a = b = 0
    t = T0
    records = []
    for _ in range(n):
        a += draw(st.integers(0, 60))
        b += draw(st.integers(0, 60))
        t += draw(st.integers(1, 3 * MIN))
        records.append(rec(t, a, b))
    tail = {S0: a + draw(st.integers(0, 40)), S1: b + draw(st.integers(0, 40))}
    head = {S0: draw(st.integers(0, tail[S0])), S1: draw(st.integers(0, tail[S1]))}
    if records and draw(st.booleans()):
        head = dict(draw(st.sampled_from(records)).positions)  # the head sits exactly on a record
    now = t + draw(st.integers(0, 3 * MIN))
    kind = draw(st.sampled_from([RetentionKind.SIZE, RetentionKind.TIME]))
    scale = 1 if kind is RetentionKind.SIZE else MIN // 20
    low = draw(st.integers(1, 200)) * scale
    high = draw(st.one_of(st.none(), st.integers(low // scale, 400).map(lambda x: x * scale)))
    policy = draw(st.one_of(st.just(None), st.just(RetentionPolicy(kind, low, high)))) if draw(
        st.integers(0, 9)) == 0 else RetentionPolicy(kind, low, high)
    return head, tail, records, policy, now


@settings(max_examples=400, deadline=None)
@given(situations())
def test_decide_matches_the_brute_force_oracle(situation) -> None:
    head, tail, records, policy, now = situation
    segments = two_segments(tail[S0], tail[S1])
    got = decide(RetentionStream.of(segments, head, sum(tail.values()), "s/x"), records, policy, now)
    want = oracle(head, tail, records, policy, now)
    assert (got.rule, got.cut, got.cmin, got.cmax, got.freed_bytes) == (
        want.rule, want.cut, want.cmin, want.cmax, want.freed)


@settings(max_examples=300, deadline=None)
@given(situations())
def test_a_chosen_cut_keeps_min_moves_the_head_forward_and_respects_max_when_it_can(situation) -> None:
    head, tail, records, policy, now = situation
    segments = two_segments(tail[S0], tail[S1])
    d = decide(RetentionStream.of(segments, head, sum(tail.values())), records, policy, now)
    if d.cut is None:
        assert d.freed_bytes == 0 and d.retained is None
        return
    assert policy is not None and d.retained is not None
    assert d.retained >= policy.min  # never below min
    assert all(d.cut[s] >= head[s] for s in head) and d.cut != head  # monotonic, strictly forward
    assert d.freed_bytes == sum(d.cut[s] - head[s] for s in head) > 0
    if policy.kind is RetentionKind.SIZE:
        assert d.retained == sum(tail.values()) - sum(d.cut.values())  # exactly what stays
    if d.rule == ABOVE_MAX and d.cmax is not None:
        assert d.retained <= policy.max  # type: ignore[operator]


# ---- the four rules -------------------------------------------------------------------------------------

SIZES = [rec(T0 + i * MIN, 50 * i, 50 * i) for i in range(1, 7)]  # sizes 100, 200, ..., 600; tail 600


def size_decision(low: int, high: int | None, head: tuple[int, int] = (0, 0)):
    return decide(RetentionStream.of(two_segments(300, 300), {S0: head[0], S1: head[1]}, 600), SIZES,
                  RetentionPolicy.by_size(low, high), T0 + 10 * MIN)


def test_stream_below_min_truncates_nothing() -> None:
    d = size_decision(700, None)
    assert d.rule == BELOW_MIN and d.cut is None and d.stream_amount == 600


def test_no_max_truncates_at_cmin() -> None:
    d = size_decision(250, None)  # retained: 500, 400, 300, 200, 100, 0 -> Cmin retains 300 (size 300)
    assert d.rule == NO_MAX and d.cmin == SIZES[2] and d.cut == SIZES[2].positions
    assert (d.retained, d.freed_bytes) == (300, 300)


def test_above_max_truncates_at_cmax_the_oldest_cut_within_the_limits() -> None:
    d = size_decision(150, 450)  # stream 600 > 450; within [150, 450]: 400, 300, 200 -> Cmax retains 400
    assert d.rule == ABOVE_MAX and d.cmax == SIZES[1] and d.cmin == SIZES[3]
    assert (d.cut, d.retained, d.freed_bytes) == (SIZES[1].positions, 400, 200)


def test_above_max_without_cmax_falls_back_to_cmin() -> None:
    d = size_decision(210, 290)  # no recorded cut retains within [210, 290]
    assert d.rule == ABOVE_MAX and d.cmax is None and d.cmin == SIZES[2] and d.retained == 300


def test_between_min_and_max_truncates_at_cmin() -> None:
    d = size_decision(150, 550, head=(50, 50))  # stream holds 500, within [150, 550]
    assert d.rule == BETWEEN_LIMITS and d.cmin == SIZES[3] and (d.retained, d.freed_bytes) == (200, 300)


def test_a_manual_truncation_ahead_of_the_chosen_cut_wins() -> None:
    d = size_decision(250, None, head=(160, 160))  # Cmin (size 300) lies behind the head at 320
    assert d.rule == BEHIND_HEAD and d.cut is None and d.chosen == SIZES[2] and d.freed_bytes == 0
    overlapping = size_decision(250, None, head=(200, 100))  # ahead in segment 0, behind in segment 1
    assert overlapping.rule == BEHIND_HEAD and "partly behind" in overlapping.reason


def test_time_policy_uses_record_ages() -> None:
    now = T0 + 10 * MIN  # ages of SIZES: 9, 8, 7, 6, 5, 4 minutes
    d = decide(RetentionStream.of(two_segments(300, 300), {S0: 0, S1: 0}, 600), SIZES,
               RetentionPolicy.by_time("5m", "7m"), now)
    # the oldest record at or after the head is 9 minutes old > max 7: Cmax is the 7-minute record
    assert d.rule == ABOVE_MAX and d.cmax == SIZES[2] and d.cmin == SIZES[4] and d.retained == 7 * MIN
    d2 = decide(RetentionStream.of(two_segments(300, 300), {S0: 150, S1: 150}, 600), SIZES,
                RetentionPolicy.by_time("5m", "7m"), now)
    assert d2.rule == BETWEEN_LIMITS and d2.cut == SIZES[4].positions and d2.retained == 5 * MIN


def test_no_policy_and_empty_set() -> None:
    segments = two_segments(10, 10)
    assert decide(RetentionStream.of(segments, {S0: 0, S1: 0}, 20), SIZES, None, T0).rule == NO_POLICY
    assert decide(RetentionStream.of(segments, {S0: 0, S1: 0}, 20), [], RetentionPolicy.by_size(1),
                  T0).rule == EMPTY_SET


# ---- worked examples (Pravega's SMTT.sizeBasedRetentionStreamTest, min = 100) ----------------------------

A4 = {19: rec(T0, 9, 10), 100: rec(T0 + 1, 50, 50), 120: rec(T0 + 2, 60, 60),
      199: rec(T0 + 3, 99, 100), 221: rec(T0 + 4, 110, 111)}


def test_pravegas_size_example_first_truncation_at_the_size_19_cut() -> None:
    records = [A4[19], A4[100], A4[120]]  # deltas 101, 20, 0
    d = decide(RetentionStream.of(two_segments(60, 60), {S0: 0, S1: 0}, 120), records, RetentionPolicy.by_size(100),
               T0 + 10)
    assert [r.retained for r in d.records] == [101, 20, 0]
    assert d.rule == NO_MAX and d.cut == {S0: 9, S1: 10} and d.freed_bytes == 19


def test_pravegas_size_example_second_truncation_at_the_size_120_cut() -> None:
    records = [A4[100], A4[120], A4[199], A4[221]]  # deltas 121, 101, 22, 0
    head = {S0: 9, S1: 10}
    d = decide(RetentionStream.of(two_segments(110, 111), head, 221), records, RetentionPolicy.by_size(100), T0 + 10)
    assert [r.retained for r in d.records] == [121, 101, 22, 0]
    assert d.cut == {S0: 60, S1: 60} and d.freed_bytes == 120 - 19


def test_pravegas_size_example_with_a_max_truncates_at_cmax() -> None:
    # Adapted: Pravega always truncates at limitMin (the size-120 cut). With max = 150 and the stream
    # holding 202 bytes (> max), the rule "above max -> the cut closest to but below max" picks
    # Cmax, the size-100 cut (retains 121, within [100, 150]); docs/design/streams.md#limits.
    records = [A4[100], A4[120], A4[199], A4[221]]
    d = decide(RetentionStream.of(two_segments(110, 111), {S0: 9, S1: 10}, 221), records,
               RetentionPolicy.by_size(100, 150), T0 + 10)
    assert d.rule == ABOVE_MAX and d.cut == {S0: 50, S1: 50} and d.retained == 121


# ---- pruning ---------------------------------------------------------------------------------------------

TOPOLOGY = Topology(two_segments(200, 200))  # key ranges [0, .5) and [.5, 1)


def test_prune_drops_records_at_or_before_the_truncation_cut() -> None:
    records = [A4[19], A4[100], A4[120], A4[199]]
    assert prune(records, {S0: 60, S1: 60}, TOPOLOGY) == [A4[199]]  # equal record goes too
    assert prune(records, {S0: 70, S1: 65}, TOPOLOGY) == [A4[199]]  # between two records
    assert prune(records, {S0: 5, S1: 5}, TOPOLOGY) == records  # nothing at or before it


def test_prune_drops_everything_recorded_before_the_latest_pruned_record() -> None:
    overlapping = rec(T0 + 1, 40, 90)  # overlaps the truncation cut: not itself <= it, but older than A4[120]
    records = [A4[19], overlapping, A4[120], A4[199]]
    assert prune(records, {S0: 60, S1: 60}, TOPOLOGY) == [A4[199]]


# ---- the record cadence ----------------------------------------------------------------------------------

FREQ = 30 * MIN


@pytest.mark.parametrize(("later", "due"), [(5 * MIN, False), (FREQ, False), (FREQ + 1, True)])
def test_a_record_is_due_only_when_the_newest_is_older_than_the_frequency(later: int, due: bool) -> None:
    assert should_record([rec(T0 - FREQ, 1, 1), rec(T0, 2, 2)], T0 + later, FREQ) is due


def test_an_empty_set_always_records() -> None:
    assert should_record([], T0, FREQ)


def test_decision_to_dict_is_json_ready() -> None:
    import json

    d = size_decision(150, 450)
    data = json.loads(json.dumps(d.to_dict()))
    assert data["rule"] == ABOVE_MAX and data["cut"] == {"0.0": 100, "0.1": 100} and data["freed_bytes"] == 200
    assert [r["retained"] for r in data["records"]] == [500, 400, 300, 200, 100, 0]


# ---- across scales: the oracle judges positions by key (tests/strategies.position_in) ---------------------


@st.composite
def scaled_situations(draw: st.DrawFn):
    """Ordered cuts of a randomly scaled stream: one is the head, the others are records (some
    behind the head); the last cut is the tail."""
    stream, cuts = draw(streams_with_cuts(count=draw(st.integers(2, 6)), ordered=True))
    head = cuts[draw(st.integers(0, len(cuts) - 1))]
    records = [c for c in cuts if c is not head]
    times = sorted(draw(st.lists(st.integers(0, 10 * MIN), min_size=len(records), max_size=len(records),
                                 unique=True)))
    kind = draw(st.sampled_from([RetentionKind.SIZE, RetentionKind.TIME]))
    low = draw(st.integers(1, 40)) if kind is RetentionKind.SIZE else draw(st.integers(1, 10)) * MIN
    high = draw(st.one_of(st.none(), st.integers(low, low * 3)))
    return stream, head, cuts[-1], list(zip(times, records, strict=True)), RetentionPolicy(kind, low, high)


@settings(max_examples=200, deadline=None)
@given(scaled_situations())
def test_decide_matches_the_oracle_across_scales(situation) -> None:
    stream, head, tail, timed, policy = situation

    def absolute(cut: dict[int, int]) -> int:
        return sum(position_in(stream, cut, s) for s in stream.segments)

    def after(a: dict[int, int], b: dict[int, int]) -> bool:
        pa = [position_in(stream, a, s) for s in stream.segments]
        pb = [position_in(stream, b, s) for s in stream.segments]
        return all(x >= y for x, y in zip(pa, pb, strict=True)) and pa != pb

    now = T0 + 11 * MIN
    records = [RetentionRecord(T0 + t, absolute(c), c) for t, c in timed]
    tail_size = absolute(tail)
    got = decide(RetentionStream.of(stream.segments, head, tail_size), records, policy, now)

    def retained(r: RetentionRecord) -> int:
        return tail_size - r.recording_size if policy.kind is RetentionKind.SIZE else now - r.recording_time_ms

    keeps_min = [r for r in records if retained(r) >= policy.min]
    cmin = min(keeps_min, key=lambda r: (retained(r), r.recording_time_ms), default=None)
    within = [r for r in keeps_min if policy.max is not None and retained(r) <= policy.max]
    cmax = max(within, key=lambda r: (retained(r), -r.recording_time_ms), default=None)
    if policy.kind is RetentionKind.SIZE:
        amount = tail_size - absolute(head)
    else:
        amount = max([now - r.recording_time_ms for r in records if not after(head, r.positions)], default=0)
    assert (got.cmin, got.cmax) == (cmin, cmax)
    if policy.kind is RetentionKind.TIME and any(
            not after(r.positions, head) and not after(head, r.positions) and r.positions != head for r in records):
        return  # a record naming the head's position through other segments: the key view cannot order them
    assert got.stream_amount == amount
    if amount < policy.min or cmin is None:
        assert got.cut is None and got.rule in (BELOW_MIN, NO_CMIN)
        return
    chosen = cmin if policy.max is None or amount <= policy.max or cmax is None else cmax
    assert got.chosen == chosen
    same_place = not after(chosen.positions, head) and not after(head, chosen.positions)
    if same_place and chosen.positions != head:
        # the same bytes named through different segments (an empty segment and its successor): moving
        # the head into the successor is allowed, but frees nothing
        assert got.freed_bytes == 0
    elif after(chosen.positions, head):
        assert got.cut == chosen.positions and got.freed_bytes == chosen.recording_size - absolute(head) > 0
    else:
        assert got.rule == BEHIND_HEAD and got.cut is None
