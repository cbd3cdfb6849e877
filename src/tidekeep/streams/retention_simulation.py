"""What-if retention of one stream (docs/retention.md#what-if-retention): a copy of the stream as
stored now, stepped through the retention cycles of the next N days with the service's own pure
functions — `record_due` (the tail record a cycle adds), `decide`, `prune`, and `held` for a held
stream — changing nothing. Pure: the shell (retention_forecast.py) loads the snapshot.

The model: no new writes (the tail stays where it is) and subscribers that do not move (their lower
bound stays; each cycle raises it to the simulated head as the service's `clamp_to_head` does, and
counts what they have not consumed from there).
Cycles run at `now` (day 0, exactly what `retention preview` decides) and then every `spacing`
ms: the retention frequency + 1 ms, the service's spacing (it counts the frequency from the end of
a run, so its cycles are a little more than the frequency apart and each records the tail),
stretched so that the horizon holds at most MAX_CYCLES cycles. A cycle that truncates moves the
simulated head to its cut and prunes the set by it; a cycle that finds its cut behind the head
prunes by the chosen record — both as `RetentionManager.run`. On a held stream a run records the
tail and is then refused, so the head stays; what it would delete is simulated apart, without the
holds, and reported as held.

Events are counted from the chunks' metadata (offset, length, event count), never from the data:
a range whose ends fall on chunk boundaries counts exactly; one that cuts a chunk (a consumption
cut inside a chunk, or records that compaction merged chunks across) has an unknown count, None.
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..forecast import DAY_MS, Family, Forecast, ForecastLine, Tally, Unit, day_of
from ..units import format_duration
from .config import RetentionPolicy
from .cuts import Topology
from .model import Segment
from .retention import (
    BEHIND_HEAD,
    HELD,
    Consumption,
    RetentionDecision,
    RetentionRecord,
    RetentionStream,
    SubscriberView,
    decide,
    held,
    prune,
    record_due,
)
from .subscribers import lower_bound, unconsumed_bytes, upper_bound

# at most this many cycles over the horizon (beyond, they are spaced further apart): every decision
# walks the whole retention set, which grows by one record per cycle while no cut reaches the tail
MAX_CYCLES = 1500


@dataclass(frozen=True)
class ChunkSpan:
    """A chunk of a segment as its metadata row gives it."""

    base: int
    length: int
    events: int


@dataclass(frozen=True)
class HoldOn:
    """A hold on the stream: its id and reason, as a preview names it."""

    id: int
    reason: str


@dataclass(frozen=True)
class StreamSnapshot:
    """The stream as one read of the store gives it (RetentionManager.inputs), with its chunks."""

    name: str
    segments: Mapping[int, Segment]
    head: Mapping[int, int]
    tail: Mapping[int, int]
    records: tuple[RetentionRecord, ...]  # the retention set, oldest first
    views: tuple[SubscriberView, ...] = ()
    holds: tuple[HoldOn, ...] = ()  # oldest first: a preview names the first
    chunks: Mapping[int, tuple[ChunkSpan, ...]] = dataclasses.field(default_factory=dict)  # by segment, by base


@dataclass(frozen=True)
class SimulatedCycle:
    """One cycle: its decision as a preview at `time_ms` would report it (HELD on a held stream),
    what it deletes (bytes, events), and what the same cycle of the stream without holds deletes."""

    time_ms: int
    decision: RetentionDecision
    freed_bytes: int
    freed_events: int | None
    held_bytes: int = 0
    held_events: int | None = 0
    held_decision: RetentionDecision | None = None  # the cycle without the holds (held streams only)


@dataclass(frozen=True)
class StreamSimulation:
    snapshot: StreamSnapshot
    policy: RetentionPolicy | None
    current: bool  # the stream's own policy (no other was proposed)
    now_ms: int
    days: int
    frequency_ms: int
    spacing_ms: int
    cycles: tuple[SimulatedCycle, ...]

    def forecast(self) -> Forecast:
        """The forecast document (tidekeep/forecast.py): per day and rule (and consumption case) the
        bytes and events the cycles delete, and on a held stream what they would delete without the
        holds, as held."""
        tally = Tally(self.now_ms, Unit.EVENTS)
        for cycle in self.cycles:
            day = day_of(self.now_ms, cycle.time_ms)
            if cycle.freed_bytes:
                tally.add(day, cycle.decision.rule.value, case=cycle.decision.case, bytes=cycle.freed_bytes,
                          items=cycle.freed_events)
            if cycle.held_bytes and cycle.held_decision is not None:
                tally.add(day, HELD.value, case=cycle.held_decision.case, name=cycle.held_decision.rule.value,
                          held_bytes=cycle.held_bytes, held_items=cycle.held_events)
        lines = tally.lines()
        return Forecast(Family.STREAMS, self.snapshot.name, self.now_ms, self.days, Unit.EVENTS, self.proposal(),
                        lines, self.notes(lines), self.details())

    def proposal(self) -> dict[str, Any]:
        policy = self.policy
        return {"current": self.current, "policy": None if policy is None else policy.to_dict(),
                "policy_text": "none" if policy is None else policy.describe()}

    def details(self) -> dict[str, Any]:
        """What a run at now would do, as `retention preview` says it, and how the cycles were spaced."""
        first = self.cycles[0]
        decision = first.decision.to_dict()
        now = {key: decision[key] for key in ("rule", "case", "reason", "cut", "retained", "freed_bytes")}
        now["held_bytes"] = first.held_bytes
        return {"now": now, "holds": [{"id": h.id, "reason": h.reason} for h in self.snapshot.holds],
                "cycles": len(self.cycles), "spacing_ms": self.spacing_ms, "frequency_ms": self.frequency_ms}

    def notes(self, lines: Sequence[ForecastLine]) -> tuple[str, ...]:
        notes = ["assumes no new writes and subscribers that do not move"]
        if self.policy is None:
            notes.append("no retention policy: retention deletes nothing")
        if self.snapshot.holds:
            hold = self.snapshot.holds[0]
            notes.append(f"held by hold {hold.id} ({hold.reason}): nothing is deleted while a hold is active; "
                         "held_bytes is what would go without the holds")
        if self.spacing_ms > self.frequency_ms + 1:
            notes.append(f"cycles {format_duration(self.spacing_ms)} apart rather than every "
                         f"{format_duration(self.frequency_ms)} (retention.frequency): at most {MAX_CYCLES} cycles "
                         "over the horizon")
        if any(line.items is None or line.held_items is None for line in lines):
            notes.append("events unknown where a cut divides a chunk: its metadata does not say how many of its "
                         "events lie on either side")
        return tuple(notes)


def cycle_spacing(days: int, frequency_ms: int, max_cycles: int = MAX_CYCLES) -> int:
    """The time between two simulated cycles: the service's (frequency + 1 ms), or wider so that the
    horizon holds at most `max_cycles` after the one at now."""
    return max(frequency_ms + 1, days * DAY_MS // (max_cycles + 1) + 1)


def cycle_times(now_ms: int, days: int, spacing_ms: int) -> list[int]:
    """now, then every `spacing_ms` up to the end of the last day."""
    return [now_ms + k * spacing_ms for k in range(days * DAY_MS // spacing_ms + 1)]


class ChunkIndex:
    """The chunks of each segment by offset, for counting the events between two cuts."""

    def __init__(self, chunks: Mapping[int, Sequence[ChunkSpan]]) -> None:
        self.spans = {segment: sorted(spans, key=lambda s: s.base) for segment, spans in chunks.items()}
        self.bases = {segment: [s.base for s in spans] for segment, spans in self.spans.items()}

    def events_between(self, topology: Topology, start: Mapping[int, int], end: Mapping[int, int]) -> int | None:
        """The events between two cuts, or None if a cut divides a chunk (its events on either side
        are not recorded) or a chunk of the range is unknown."""
        total = 0
        for part in topology.ranges_between(start, end):
            spans = self.spans.get(part.segment, [])
            first = max(bisect_right(self.bases.get(part.segment, []), part.start) - 1, 0)
            covered = 0
            for span in spans[first:]:
                if span.base >= part.end:
                    break
                if span.base + span.length <= part.start:
                    continue
                if span.base < part.start or span.base + span.length > part.end:
                    return None
                covered += span.length
                total += span.events
            if covered != part.size:
                return None
        return total


@dataclass(frozen=True)
class _State:
    head: Mapping[int, int]
    records: tuple[RetentionRecord, ...]


class _Cycles:
    """One trajectory of the simulated stream: with its holds (what happens) or without (what the
    holds keep)."""

    def __init__(self, snapshot: StreamSnapshot, policy: RetentionPolicy | None, frequency_ms: int,
                 holds: Sequence[HoldOn]) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.frequency_ms = frequency_ms
        self.holds = holds
        self.topology = Topology(snapshot.segments)
        self.tail_size = self.topology.size_at(snapshot.tail)
        self.chunks = ChunkIndex(snapshot.chunks)
        # subscribers that do not move: their lower bound is fixed; each cycle clamps it to the head
        self.bound = None if not snapshot.views else lower_bound([v.positions for v in snapshot.views],
                                                                 snapshot.segments)

    def step(self, state: _State, now_ms: int) -> tuple[RetentionDecision, _State, int, int | None]:
        """One cycle at `now_ms`: (its decision, the state after it, bytes and events it deletes)."""
        records = list(state.records)
        recorded = None
        if self.policy is not None and record_due(records, now_ms, self.frequency_ms):
            recorded = RetentionRecord(now_ms, self.tail_size, dict(self.snapshot.tail))  # tail_record
            records.append(recorded)
        consumption = None
        if self.bound is not None:  # RetentionManager._decide: clamp_to_head(lower_bound(...))
            # what each subscriber has not consumed counts from the simulated head (SubscriberStore.views)
            views = tuple(dataclasses.replace(v, unconsumed_bytes=unconsumed_bytes(
                v.positions, state.head, self.snapshot.tail, self.topology)) for v in self.snapshot.views)
            consumption = Consumption(upper_bound([self.bound, state.head], self.snapshot.segments), views)
        stream = RetentionStream(self.topology, state.head, self.tail_size, self.snapshot.name)
        decision = decide(stream, records, self.policy, now_ms, recorded=recorded, consumption=consumption)
        if decision.cut is not None:
            if self.holds:  # a run records the tail, then its truncation is refused: nothing else changes
                return held(decision, self.holds[0].id, self.holds[0].reason), _State(state.head, tuple(records)), 0, 0
            freed = self.chunks.events_between(self.topology, state.head, decision.cut)
            after = _State(dict(decision.cut), tuple(prune(records, decision.cut, self.topology)))
            return decision, after, decision.freed_bytes, freed
        if decision.chosen is not None and decision.rule == BEHIND_HEAD and self.topology.at_or_before(
                decision.chosen.positions, state.head):
            records = prune(records, decision.chosen.positions, self.topology)
        return decision, _State(state.head, tuple(records)), 0, 0

    def run(self, times: Sequence[int]) -> list[tuple[RetentionDecision, int, int | None]]:
        state = _State(dict(self.snapshot.head), tuple(self.snapshot.records))
        done = []
        for now_ms in times:
            decision, state, freed, events = self.step(state, now_ms)
            done.append((decision, freed, events))
        return done


def simulate(snapshot: StreamSnapshot, policy: RetentionPolicy | None, now_ms: int, days: int,
             frequency_ms: int, *, current: bool = True, max_cycles: int = MAX_CYCLES) -> StreamSimulation:
    """The stream's retention cycles over days 0..`days` under `policy` (docs/retention.md#what-if-retention)."""
    spacing = cycle_spacing(days, frequency_ms, max_cycles)
    times = cycle_times(now_ms, days, spacing)
    actual = _Cycles(snapshot, policy, frequency_ms, snapshot.holds).run(times)
    unheld = _Cycles(snapshot, policy, frequency_ms, ()).run(times) if snapshot.holds else None
    cycles = []
    for index, (time_ms, (decision, freed, events)) in enumerate(zip(times, actual, strict=True)):
        if unheld is None:
            cycles.append(SimulatedCycle(time_ms, decision, freed, events))
        else:
            inner, held_bytes, held_events = unheld[index]
            cycles.append(SimulatedCycle(time_ms, decision, freed, events, held_bytes, held_events, inner))
    return StreamSimulation(snapshot, policy, current, now_ms, days, frequency_ms, spacing, tuple(cycles))


__all__ = ["MAX_CYCLES", "ChunkIndex", "ChunkSpan", "HoldOn", "SimulatedCycle", "StreamSimulation", "StreamSnapshot",
           "cycle_spacing", "cycle_times", "simulate"]
