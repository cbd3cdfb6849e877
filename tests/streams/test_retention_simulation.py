"""What-if retention of a stream, the pure part (streams/retention_simulation.py): the day stepping
against a brute-force oracle — a literal re-run of the cycles with `decide` alone (recording, the
lower bound raised to the head, pruning by the definition, holds) whose deletions are summed day by
day over the day windows and whose events are counted byte by byte — over random scaled streams,
retention sets, subscribers, chunks and holds; the cycle spacing; and worked examples."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.two_segments import S0, S1, rec, two_segments
from strategies import streams_with_cuts
from tidekeep.forecast import DAY_MS, day_end, day_start
from tidekeep.streams.config import RetentionPolicy
from tidekeep.streams.cuts import CutOrder, Topology
from tidekeep.streams.retention import (
    BEHIND_HEAD,
    Consumption,
    RetentionDecision,
    RetentionRecord,
    RetentionStream,
    SubscriberView,
    decide,
    held,
)
from tidekeep.streams.retention_simulation import (
    ChunkSpan,
    HoldOn,
    StreamSnapshot,
    cycle_spacing,
    cycle_times,
    simulate,
)
from tidekeep.streams.subscribers import lower_bound, unconsumed_bytes, upper_bound

HOUR = 3_600_000
NOW = 1_700_000_000_000


# ---- the oracle -----------------------------------------------------------------------------------
def brute_events(topology: Topology, chunks: Mapping[int, Sequence[ChunkSpan]], start: Mapping[int, int],
                 end: Mapping[int, int]) -> int | None:
    """Byte by byte: the chunks each byte between the cuts lies in; None if a byte lies in no chunk
    or a touched chunk reaches outside the range."""
    touched: dict[tuple[int, int], ChunkSpan] = {}
    ranges: dict[int, tuple[int, int]] = {}
    for segment in topology.segments.values():
        low, high = topology.position_in(segment, start), topology.position_in(segment, end)
        if high <= low:
            continue
        ranges[segment.id] = (low, high)
        for byte in range(low, high):
            holding = [c for c in chunks.get(segment.id, ()) if c.base <= byte < c.base + c.length]
            if not holding:
                return None
            touched[(segment.id, holding[0].base)] = holding[0]
    for (segment, _), chunk in touched.items():
        low, high = ranges[segment]
        if chunk.base < low or chunk.base + chunk.length > high:
            return None
    return sum(c.events for c in touched.values())


@dataclass
class OracleCycle:
    time_ms: int
    decision: RetentionDecision
    freed: int
    events: int | None


def pruned(records: list[RetentionRecord], cut: Mapping[int, int], topology: Topology) -> list[RetentionRecord]:
    """The definition (docs/retention.md): the latest record at or before the cut and every record
    recorded no later than it go."""
    at_or_before = [r.recording_time_ms for r in records
                    if topology.compare(r.positions, cut) in (CutOrder.BEFORE, CutOrder.EQUAL)]
    if not at_or_before:
        return records
    return [r for r in records if r.recording_time_ms > max(at_or_before)]


def oracle_run(snap: StreamSnapshot, policy: RetentionPolicy | None, times: Sequence[int], frequency: int,
               holds: bool) -> list[OracleCycle]:
    """The cycles, literally: record the tail when the newest record is more than the frequency old,
    decide with the subscribers' lower bound raised to the head (and what they have not consumed
    counted from it), truncate and prune, or on a held stream keep the head."""
    topology = Topology(snap.segments)
    tail_size = topology.size_at(snap.tail)
    bound = lower_bound([v.positions for v in snap.views], snap.segments) if snap.views else None
    head, records = dict(snap.head), list(snap.records)
    done = []
    for t in times:
        newest = max((r.recording_time_ms for r in records), default=None)
        recorded = None
        if policy is not None and (newest is None or t - newest > frequency):
            recorded = RetentionRecord(t, tail_size, dict(snap.tail))
            records.append(recorded)
        views = tuple(SubscriberView(v.reader_group, v.generation, v.positions, v.acknowledged, v.updated_ms,
                                     unconsumed_bytes(v.positions, head, snap.tail, topology)) for v in snap.views)
        consumption = None if bound is None else Consumption(upper_bound([bound, head], snap.segments), views)
        d = decide(RetentionStream(topology, head, tail_size, snap.name), records, policy, t, recorded=recorded,
                   consumption=consumption)
        if d.cut is not None and holds:
            done.append(OracleCycle(t, held(d, snap.holds[0].id, snap.holds[0].reason), 0, 0))
        elif d.cut is not None:
            done.append(OracleCycle(t, d, topology.size_between(head, d.cut), brute_events(topology, snap.chunks,
                                                                                          head, d.cut)))
            records, head = pruned(records, d.cut, topology), dict(d.cut)
        else:
            if d.rule == BEHIND_HEAD and d.chosen is not None and topology.compare(
                    d.chosen.positions, head) in (CutOrder.BEFORE, CutOrder.EQUAL):
                records = pruned(records, d.chosen.positions, topology)
            done.append(OracleCycle(t, d, 0, 0))
    return done


def add(total: int | None, more: int | None) -> int | None:
    return None if total is None or more is None else total + more


def oracle_lines(now: int, days: int, cycles: list[OracleCycle],
                 unheld: list[OracleCycle] | None) -> dict[tuple[int, str, str | None, str | None], list[Any]]:
    """(day, rule, case, name) -> [bytes, events, held bytes, held events], day by day over the windows."""
    lines: dict[tuple[int, str, str | None, str | None], list[Any]] = {}
    for day in range(days + 1):
        start, end = day_start(now, day), day_end(now, day)
        inside = [i for i, c in enumerate(cycles) if (c.time_ms == now if day == 0 else start < c.time_ms <= end)]
        for i in inside:
            c = cycles[i]
            if c.freed:
                entry = lines.setdefault((day, str(c.decision.rule), c.decision.case, None), [0, 0, 0, 0])
                entry[0] += c.freed
                entry[1] = add(entry[1], c.events)
            if unheld is not None and unheld[i].freed:
                u = unheld[i]
                entry = lines.setdefault((day, "held", u.decision.case, str(u.decision.rule)), [0, 0, 0, 0])
                entry[2] += u.freed
                entry[3] = add(entry[3], u.events)
    return lines


# ---- generated situations -------------------------------------------------------------------------
@st.composite
def chunk_spans(draw: st.DrawFn, tail: int) -> tuple[ChunkSpan, ...]:
    spans, base = [], 0
    while base < tail:
        length = draw(st.integers(1, 8))
        length = min(length, tail - base)
        spans.append(ChunkSpan(base, length, draw(st.integers(1, 4))))
        base += length
    return tuple(spans)


@st.composite
def situations(draw: st.DrawFn) -> dict[str, Any]:
    count = draw(st.integers(2, 7))
    stream, cuts = draw(streams_with_cuts(count=count, ordered=True, max_tail=40))
    topology = Topology(stream.segments)
    tail = {s: stream.segments[s].tail for s in stream.active}
    ages = sorted(draw(st.sets(st.integers(0, 6 * 24), min_size=count - 1, max_size=count - 1)), reverse=True)
    records = tuple(RetentionRecord(NOW - age * HOUR, topology.size_at(c), c) for age, c in zip(ages, cuts[1:],
                                                                                                  strict=True))
    views = tuple(SubscriberView(f"g{i}", 1, draw(st.sampled_from(cuts)), True, NOW - HOUR, 0)
                  for i in range(draw(st.integers(0, 2))))
    # hypothesis draws small integers most often: the rare cases are the large ones
    chunks = {s: draw(chunk_spans(seg.tail)) for s, seg in stream.segments.items() if draw(st.integers(0, 9)) < 9}
    holds = (HoldOn(7, "litigation 7"),) if draw(st.integers(0, 3)) == 3 else ()
    total = topology.size_at(tail)
    if draw(st.booleans()):
        low = draw(st.integers(0, total + 5))
        high = draw(st.none() | st.integers(low, total + 10))
        policy: RetentionPolicy | None = RetentionPolicy.by_size(low, high)
    else:
        low = draw(st.integers(0, 5 * 24)) * HOUR
        high_h = draw(st.none() | st.integers(low // HOUR, 8 * 24))
        policy = RetentionPolicy.by_time(low, None if high_h is None else high_h * HOUR)
    if draw(st.integers(0, 9)) == 9:
        policy = None
    snap = StreamSnapshot("s/sim", stream.segments, cuts[0], tail, records, views, holds, chunks)
    return {"snap": snap, "policy": policy, "days": draw(st.integers(0, 4)),
            "frequency": draw(st.sampled_from([HOUR, 5 * HOUR, 12 * HOUR, DAY_MS, 2 * DAY_MS])),
            "max_cycles": draw(st.sampled_from([3, 10, 40, 1500]))}


@settings(max_examples=400)
@given(situations())
def test_the_day_stepping_matches_the_brute_force_oracle(situation: dict[str, Any]) -> None:
    snap, policy, days, frequency = situation["snap"], situation["policy"], situation["days"], situation["frequency"]
    sim = simulate(snap, policy, NOW, days, frequency, max_cycles=situation["max_cycles"])
    times = [c.time_ms for c in sim.cycles]
    assert times == cycle_times(NOW, days, sim.spacing_ms)
    expected = oracle_run(snap, policy, times, frequency, holds=bool(snap.holds))
    unheld = oracle_run(snap, policy, times, frequency, holds=False) if snap.holds else None
    for k, cycle in enumerate(sim.cycles):  # every decision, as the oracle's literal re-run makes it
        assert cycle.decision.to_dict() == expected[k].decision.to_dict(), k
        assert (cycle.freed_bytes, cycle.freed_events) == (expected[k].freed, expected[k].events), k
        if unheld is not None:
            assert cycle.freed_bytes == 0 and cycle.held_decision is not None
            assert cycle.held_decision.to_dict() == unheld[k].decision.to_dict(), k
            assert (cycle.held_bytes, cycle.held_events) == (unheld[k].freed, unheld[k].events), k
    forecast = sim.forecast()
    got = {(line.day, line.rule, line.case, line.name): [line.bytes, line.items, line.held_bytes, line.held_items]
           for line in forecast.lines}
    assert got == oracle_lines(NOW, days, expected, unheld)
    # every day 0..N once, its sums those of its lines; the totals cover everything the cycles freed
    assert [d["day"] for d in forecast.by_day()] == list(range(days + 1))
    topology = Topology(snap.segments)
    final_head = next((c.decision.cut for c in reversed(expected) if c.decision.cut is not None), snap.head)
    assert forecast.totals()["bytes"] == topology.size_between(snap.head, final_head)
    assert forecast.totals()["held_bytes"] == sum(c.freed for c in (unheld or []))


@given(st.integers(0, 366), st.integers(0, 3 * DAY_MS), st.integers(1, 2000))
def test_cycles_are_spaced_as_the_service_spaces_them_within_the_budget(days: int, frequency: int,
                                                                        budget: int) -> None:
    spacing = cycle_spacing(days, frequency, budget)
    times = cycle_times(NOW, days, spacing)
    assert times[0] == NOW and all(b - a == spacing for a, b in itertools.pairwise(times))
    assert times[-1] <= NOW + days * DAY_MS < times[-1] + spacing  # the last cycle within the horizon
    assert spacing >= frequency + 1  # the service's cycles are more than the frequency apart: each records
    assert len(times) <= budget + 1
    if (days * DAY_MS) // (frequency + 1) <= budget:
        assert spacing == frequency + 1  # within the budget: exactly the service's spacing


# ---- worked examples ------------------------------------------------------------------------------
def snapshot(holds: tuple[HoldOn, ...] = (), chunk: int = 5) -> StreamSnapshot:
    """Two segments of 300 bytes; records every 6 hours over the last 2 days at 25-byte steps per segment;
    chunks of `chunk` bytes of 2 events each."""
    records = tuple(rec(NOW - (8 - i) * 6 * HOUR, 25 * i, 25 * i) for i in range(1, 9))
    chunks = {s: tuple(ChunkSpan(b, chunk, 2) for b in range(0, 300, chunk)) for s in (S0, S1)}
    return StreamSnapshot("s/w", two_segments(300, 300), {S0: 0, S1: 0}, {S0: 300, S1: 300}, records, (), holds,
                          chunks)


def test_time_policy_deletes_a_day_of_records_each_day() -> None:
    # keep at least 1 day: now the records older than a day go (the one 24h old keeps exactly 1 day: Cmin);
    # then each record as it turns a day old — the cycles are 6h + 1 ms apart, so the one that takes the
    # record made at now runs 4 ms into day 2 — and on day 2 the tail, first recorded at the cycle 6h + 1 ms
    # after now (the newest record was made at now). 5-byte chunks of 2 events: 40 events per 100 bytes
    sim = simulate(snapshot(), RetentionPolicy.by_time("1d"), NOW, 3, 6 * HOUR)
    by_day = [(d["day"], d["bytes"], d["items"]) for d in sim.forecast().by_day()]
    assert by_day == [(0, 200, 80), (1, 150, 60), (2, 250, 100), (3, 0, 0)]
    assert sim.cycles[0].decision.rule.value == "no-max" and sim.cycles[0].decision.cut == {S0: 100, S1: 100}
    assert sim.spacing_ms == 6 * HOUR + 1 and len(sim.cycles) == 12  # 3 days of 6h + 1 ms, and now


def test_a_held_stream_deletes_nothing_and_reports_what_the_hold_keeps() -> None:
    sim = simulate(snapshot((HoldOn(3, "litigation"),)), RetentionPolicy.by_time("1d"), NOW, 3, 6 * HOUR)
    doc = sim.forecast().to_dict()
    assert doc["totals"] == {"bytes": 0, "items": 0, "held_bytes": 600, "held_items": 240}
    assert [d["held_bytes"] for d in doc["by_day"]] == [200, 150, 250, 0]
    assert {(line["rule"], line["name"]) for line in doc["lines"]} == {("held", "no-max")}
    assert doc["details"]["now"]["rule"] == "held" and doc["details"]["now"]["held_bytes"] == 200
    assert doc["details"]["now"]["reason"].startswith("held by hold 3 (litigation)")
    assert any("held by hold 3" in note for note in doc["notes"])


def test_events_are_unknown_where_a_cut_divides_a_chunk() -> None:
    # 40-byte chunks: the cut at 100 lies inside the chunk [80, 120) of each segment
    sim = simulate(snapshot(chunk=40), RetentionPolicy.by_time("1d"), NOW, 0, 6 * HOUR)
    doc = sim.forecast().to_dict()
    assert doc["lines"][0]["bytes"] == 200 and doc["lines"][0]["items"] is None
    assert doc["totals"]["items"] is None and any("divides a chunk" in note for note in doc["notes"])


def test_a_size_policy_without_writes_stops_after_its_first_cut() -> None:
    # keep at least 250 bytes of 600: Cmin is the record at 350 (keeps 250) now; then no record (the tail
    # keeps 0) keeps the minimum, and nothing more goes
    sim = simulate(snapshot(), RetentionPolicy.by_size(250), NOW, 2, 6 * HOUR)
    assert [d["bytes"] for d in sim.forecast().by_day()] == [350, 0, 0]
    assert [c.decision.rule.value for c in sim.cycles[1:]] == ["no-cmin"] * (len(sim.cycles) - 1)


@pytest.mark.parametrize("policy", [None, RetentionPolicy.by_size(10**9)])
def test_nothing_to_delete_gives_no_lines(policy: RetentionPolicy | None) -> None:
    doc = simulate(snapshot(), policy, NOW, 2, 6 * HOUR).forecast().to_dict()
    assert doc["lines"] == [] and doc["totals"] == {"bytes": 0, "items": 0, "held_bytes": 0, "held_items": 0}
    assert (doc["proposal"]["policy_text"] == "none") == (policy is None)
