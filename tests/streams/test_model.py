"""The pure stream model: segment ids, routing, and scale planning."""

from __future__ import annotations

import hashlib
import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.errors import InvalidInput
from tidekeep.streams.model import (
    Router,
    Segment,
    equal_ranges,
    initial_segments,
    plan_scale,
    routing_key_position,
    segment_epoch,
    segment_id,
    segment_name,
    segment_number,
)

# ---- ids and routing ------------------------------------------------------------------------------


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**32 - 1))
def test_segment_id_layout(epoch: int, number: int) -> None:
    seg = segment_id(epoch, number)
    assert seg == epoch * 2**32 + number
    assert (segment_epoch(seg), segment_number(seg)) == (epoch, number)
    assert segment_name(seg) == f"{epoch}.{number}"


def documented_position(key: str) -> float:
    """docs/streams.md: the 8-byte BLAKE2b digest (BLAKE2b-64) of the UTF-8 key, big-endian, / 2**64."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big") / 2**64


# Pinned: a key must map to the same place forever, or data written before an upgrade would be
# routed differently after it.
PINNED = {
    "sensor-7": 0xAFE8CF489862E351,
    "": 0xE4A6A0577479B2B4,
    "ü": 0x55F19DF5C1392F37,
    "k0": 0xA59C811A6CD19397,
}


@pytest.mark.parametrize(("key", "digest"), sorted(PINNED.items()))
def test_routing_key_position_is_pinned(key: str, digest: int) -> None:
    assert routing_key_position(key) == digest / 2**64 == documented_position(key)


@settings(max_examples=300)
@given(st.text())
def test_routing_key_position_follows_the_documented_definition(key: str) -> None:
    position = routing_key_position(key)
    assert position == documented_position(key)
    assert 0.0 <= position < 1.0
    assert routing_key_position(key) == position  # stable within a process too


def test_routing_keys_spread_evenly() -> None:
    quarters = [0, 0, 0, 0]
    for i in range(10_000):
        quarters[int(routing_key_position(f"key-{i}") * 4)] += 1
    assert all(1500 <= q <= 3500 for q in quarters), quarters


@st.composite
def tilings(draw: st.DrawFn) -> list[Segment]:
    cuts = sorted(draw(st.sets(st.integers(1, 1023), max_size=12)))
    bounds = [0, *cuts, 1024]
    ids = draw(st.permutations(range(len(bounds) - 1)))
    return [Segment(segment_id(3, ids[i]), bounds[i] / 1024, bounds[i + 1] / 1024) for i in range(len(bounds) - 1)]


@settings(max_examples=200)
@given(tilings(), st.lists(st.floats(0.0, 1.0, exclude_max=True), min_size=1, max_size=30))
def test_router_picks_the_segment_whose_range_holds_the_position(segments: list[Segment],
                                                                 positions: list[float]) -> None:
    router = Router(reversed(segments))
    assert sorted(router.segment_ids) == sorted(s.id for s in segments)
    for position in [*positions, *(s.key_low for s in segments)]:
        expected = [s.id for s in segments if s.key_low <= position < s.key_high]
        assert [router.segment_for(position)] == expected


def test_router_routes_keys_consistently() -> None:
    segments = initial_segments(4)
    router = Router(segments)
    for key in ("a", "b", "sensor-7"):
        position = routing_key_position(key)
        assert router.segment_for(position) == segment_id(0, int(position * 4))


# ---- initial segments and equal ranges ------------------------------------------------------------


@given(st.integers(1, 200))
def test_initial_segments_tile_the_key_space(count: int) -> None:
    segments = initial_segments(count)
    assert [s.id for s in segments] == [segment_id(0, i) for i in range(count)]
    assert segments[0].key_low == 0.0 and segments[-1].key_high == 1.0
    assert all(a.key_high == b.key_low for a, b in itertools.pairwise(segments))
    assert all(s.key_low < s.key_high for s in segments)


@pytest.mark.parametrize("count", [0, -1, 10_001, True, 1.5, "4", None])
def test_bad_segment_counts(count: object) -> None:
    with pytest.raises(InvalidInput, match=r"invalid segment count"):
        initial_segments(count)  # type: ignore[arg-type]


@pytest.mark.parametrize("parts", [0, -2, True, 2.0, "2"])
def test_bad_part_counts(parts: object) -> None:
    with pytest.raises(InvalidInput) as exc:
        equal_ranges(0.0, 1.0, parts)  # type: ignore[arg-type]
    assert str(exc.value) == f"invalid number of parts {parts!r}: must be an integer >= 1"


# ---- scale validation -----------------------------------------------------------------------------

S00, S01, S02, S03 = (segment_id(0, i) for i in range(4))
S14, S15 = segment_id(1, 4), segment_id(1, 5)


def stream_after_one_split() -> dict[int, Segment]:
    """Epoch 0: four quarters; epoch 1: 0.0 split into 1.4 [0, 1/8) and 1.5 [1/8, 1/4)."""
    return {
        S00: Segment(S00, 0.0, 0.25, tail=10, sealed=True, sealed_epoch=1),
        S01: Segment(S01, 0.25, 0.5),
        S02: Segment(S02, 0.5, 0.75),
        S03: Segment(S03, 0.75, 1.0),
        S14: Segment(S14, 0.0, 0.125),
        S15: Segment(S15, 0.125, 0.25),
    }


def refused(seal: list[int], new_ranges: object, segments: dict[int, Segment] | None = None) -> str:
    with pytest.raises(InvalidInput) as exc:
        plan_scale(segments or stream_after_one_split(), 1, 6, seal, new_ranges)  # type: ignore[arg-type]
    message = str(exc.value)
    assert "\n" not in message and message.startswith("scale: ")
    return message


@pytest.mark.parametrize(("seal", "new_ranges", "message"), [
    ([S01], [(0.25, 0.3), (0.4, 0.5)], "scale: key ranges leave the gap [0.3, 0.4) uncovered"),
    ([S01], [(0.25, 0.4), (0.3, 0.5)], "scale: key ranges [0.25, 0.4) and [0.3, 0.5) overlap"),
    ([S01], [(0.25, 0.4)], "scale: key ranges end at 0.4 but must end at 0.5"),
    ([S01], [(0.3, 0.5)], "scale: key ranges start at 0.3 but must start at 0.25"),
    ([S01], [(0.25, 0.6)], "scale: key ranges end at 0.6 but must end at 0.5"),
    ([S01], [(0.25, 0.25), (0.25, 0.5)], "scale: key range [0.25, 0.25) is empty or outside [0, 1)"),
    ([S01], [(0.4, 0.3)], "scale: key range [0.4, 0.3) is empty or outside [0, 1)"),
    ([S03], [(0.75, 1.5)], "scale: key range [0.75, 1.5) is empty or outside [0, 1)"),
    ([S14], [(-0.125, 0.125)], "scale: key range [-0.125, 0.125) is empty or outside [0, 1)"),
    ([S01], [(0.25, math.nan)], "scale: key range [0.25, nan) is empty or outside [0, 1)"),
    ([S01], [("0.25", "0.5")], "scale: key range ('0.25', '0.5') is not a pair of numbers"),
    ([S01], [], "scale: no key ranges given"),
    ([S01], [(0.25, 0.4, 0.5)], "scale: each new range must be a (low, high) pair"),
    ([S01], [0.25, 0.5], "scale: each new range must be a (low, high) pair"),
    ([S01], [(0.25, True)], "scale: key range (0.25, True) is not a pair of numbers"),
    ([], [(0.25, 0.5)], "scale: no segments to seal"),
    ([S01, S01], [(0.25, 0.5)], "scale: a segment is listed twice in seal"),
    ([segment_id(7, 7)], [(0.25, 0.5)], "scale: segment 7.7 does not exist"),
    ([S00], [(0.0, 0.25)], "scale: segment 0.0 is not active"),
    ([S14, S01], [(0.0, 0.125), (0.25, 0.5)], "scale: the segments to seal are not adjacent"),
    ([S01, S03], [(0.25, 0.5), (0.75, 1.0)], "scale: the segments to seal are not adjacent"),
])
def test_scale_requests_are_validated(seal: list[int], new_ranges: object, message: str) -> None:
    assert refused(seal, new_ranges) == message


def test_a_segment_created_by_a_future_epoch_is_not_active() -> None:
    segments = stream_after_one_split()
    with pytest.raises(InvalidInput, match=r"segment 1\.4 is not active"):
        plan_scale(segments, 0, 6, [S14], [(0.0, 0.125)])


def test_a_valid_merge_of_a_predecessor_free_pair() -> None:
    plan = plan_scale(stream_after_one_split(), 1, 6, [S15, S01], [(0.125, 0.5)])
    assert plan.new_epoch == 2 and plan.sealed == [S15, S01]
    assert [(s.id, s.key_low, s.key_high, s.tail, s.sealed) for s in plan.new_segments] == [
        (segment_id(2, 6), 0.125, 0.5, 0, False)]


# ---- property: random histories of splits and merges ---------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 8), st.data())
def test_random_histories_keep_the_lineage_invariants(initial: int, data: st.DataObject) -> None:
    segments = {s.id: s for s in initial_segments(initial)}
    epoch, next_number = 0, initial
    created_in = dict.fromkeys(segments, 0)
    for _ in range(data.draw(st.integers(1, 8))):
        active = sorted((s for s in segments.values() if s.active_in(epoch) and not s.sealed),
                        key=lambda s: s.key_low)
        if len(active) > 1 and data.draw(st.booleans()):
            start = data.draw(st.integers(0, len(active) - 2))
            chosen = active[start:start + data.draw(st.integers(2, min(4, len(active) - start)))]
            new_ranges = [(chosen[0].key_low, chosen[-1].key_high)]
        else:
            chosen = [data.draw(st.sampled_from(active))]
            low, high = chosen[0].key_low, chosen[0].key_high
            fractions = sorted(data.draw(st.sets(st.sampled_from([0.25, 0.5, 0.75]), max_size=3)))
            points = [low, *(low + (high - low) * f for f in fractions), high]
            new_ranges = [(a, b) for a, b in itertools.pairwise(points)]
        seal = [s.id for s in chosen]
        plan = plan_scale(segments, epoch, next_number, data.draw(st.permutations(seal)), new_ranges)

        assert plan.new_epoch == epoch + 1
        assert sorted(plan.sealed) == sorted(seal)
        assert [s.id for s in plan.new_segments] == [
            segment_id(plan.new_epoch, next_number + i) for i in range(len(new_ranges))]
        older = list(segments.values())
        for new in plan.new_segments:
            assert new.epoch == plan.new_epoch and not new.sealed and new.tail == 0
            assert all(new.id > old.id for old in older if old.overlaps(new)), "successor ids must be larger"
        for seg_id in plan.sealed:
            segments[seg_id] = Segment(seg_id, segments[seg_id].key_low, segments[seg_id].key_high,
                                       sealed=True, sealed_epoch=plan.new_epoch)
        for new in plan.new_segments:
            segments[new.id] = new
            created_in[new.id] = plan.new_epoch
        epoch, next_number = plan.new_epoch, next_number + len(plan.new_segments)

        active_now = sorted((s for s in segments.values() if s.active_in(epoch)), key=lambda s: s.key_low)
        assert all(not s.sealed for s in active_now)
        assert active_now[0].key_low == 0.0 and active_now[-1].key_high == 1.0
        assert all(a.key_high == b.key_low for a, b in itertools.pairwise(active_now))
    assert all(segment_epoch(s) == e for s, e in created_in.items())
    assert len({segment_number(s) for s in segments}) == len(segments), "numbers are never reused"
    # in every epoch, the segments active then also tile [0, 1)
    for e in range(epoch + 1):
        then = sorted((s for s in segments.values() if s.active_in(e)), key=lambda s: s.key_low)
        assert then[0].key_low == 0.0 and then[-1].key_high == 1.0
        assert all(a.key_high == b.key_low for a, b in itertools.pairwise(then))

