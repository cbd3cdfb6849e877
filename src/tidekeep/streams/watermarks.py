"""Watermarks (docs/watermarks.md): the pure computation and the reader's time window.

Nothing here touches a store or a clock: `now_ms` is an argument, marks and watermarks are values.

**Writer marks.** A `WriterMark` says "writer W had reached time T when its committed events ended at
these offsets" (only the segments W wrote to; offsets are after its last committed event, never -1;
empty for a writer that has committed nothing yet: it then bounds the time only).
A list of marks may hold a writer's history in the order noted; its last mark counts. Time or an
offset going backwards within one writer's marks is refused (docs/watermarks.md).

**Active writers** (docs/watermarks.md). Against the previous watermark, a writer *participates* if its
time is above the previous lower time (or there is no previous watermark). A non-participating writer
stays *active* — and holds watermarks back — while `now - noted_ms < timeout`; after that it is left
out until its next note (it rejoins as soon as it notes a time above the watermark). A *closed*
writer's mark (`closed=True`: the writer was closed, its position is where its last event ended) is
never active: closing takes a writer out of the time aggregation at once (docs/watermarks.md).

**Positions of writers that do not count for time.** The cut is at or after the position of EVERY
writer with a mark — active, timed out or closed — not only the active ones as in Pravega. A writer
that timed out or closed has events before its last position that were noted below the new lower
time; if the cut did not cover them, a reader could pass the watermark and then read those events
with a lower bound above their time. Covering them only moves the cut further ahead, which is always
safe (a reader passes it later).

**Emission** (docs/watermarks.md). If any active writer is not participating, nothing is emitted: we wait
for it to note or time out. Otherwise lower = min of the active writers' times, and a watermark is
emitted only if lower is strictly above the previous lower. revision = previous.revision + 1 (0 first).

**The cut** (docs/watermarks.md; computed on predecessor-closed "done" sets instead of Pravega's
add/evict loop).
A segment's predecessors are the segments with a lower id whose key ranges overlap it (model.py).
1. D = the predecessors of every segment in an active writer's position and in the previous cut:
   the cut must be at or past all of them (a writer at a successor has moved past its predecessors;
   this is Pravega's eviction in `addToUpperBound`, and it keeps the cut never behind the previous one).
2. Close D under predecessors. The cut is the *ready* set of D (segments not in D whose predecessors
   are all in D). Ready segments never overlap one another.
3. Where a key is not covered (the key-range gaps), take the earliest segment holding that key that is
   not in D; its predecessors are not all done, so add them to D and repeat. D only grows, and the
   active segments of the last epoch always tile, so this ends with a complete valid cut.
4. Offsets: a ready segment stands at the maximum of the writers' offsets and the previous cut's
   offset in it, else at **0** — its start.
This gives the gap-filling example of tests/streams/test_watermarks_store.py exactly ({3:100, 4:0}).

**Where we deliberately differ from Pravega.**
- Never-written segments: Pravega fills a never-written segment with the writers' -1, which readers treat as "beyond
  everything", so their lower bound stays null forever. We fill it at offset 0, its start: nothing was
  written before 0, so the claim "every event before the cut was noted at or after lower" holds, and a
  reader anywhere in that segment has passed the mark.
- A writer that is not participating times out `timeout` after its last note (`noted_ms`), not after
  the controller first *saw* it lagging: the rule is "has not advanced for that long", it needs no
  in-memory timer, and a failover does not restart it.
- Pravega can build a cut that violates lineage: writers at {A} and {C} where B, merged from A and
  a neighbour, was later split into C and another segment — no gap, so no filling, but B lies
  partly before and partly after. The done-set construction above cannot produce that.
- upper = max(active writers' times, previous upper): a writer that timed out still noted its time
  before the (only growing) cut, so the upper bound must not shrink below what it already covered.
- The timeout is an argument here; the stream setting's default is 60 s (not Pravega's 0, which drops
  every slow writer at once: docs/watermarks.md).
- The reader window below follows Pravega's reader (the same sequence of windows for the same
  watermarks).

**Reader time window** (docs/watermarks.md). `WindowTracker` reads watermarks oldest-first and keeps the last one the
position has passed (its lower time is the window's lower bound) and the in-flight ones that the
position has not passed (the last one's upper time is the window's upper bound). It only moves
forward. `compare` is Pravega's: per reader segment, the mark's same segment (offsets compared) or
else every overlapping mark segment (ids compared); being exactly at a mark counts as past it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidInput, InvalidStreamCut
from .cuts import check_cut
from .model import Segment, segment_name


@dataclass(frozen=True)
class WriterMark:
    writer_id: str
    time_ms: int
    positions: dict[int, int]  # segment id -> offset after the writer's last committed event
    noted_ms: int  # controller time at which the mark was recorded
    closed: bool = False  # the writer was closed: its position still bounds the cut, its time no longer counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "writer_id": self.writer_id,
            "time_ms": self.time_ms,
            "positions": {segment_name(s): o for s, o in sorted(self.positions.items())},
            "noted_ms": self.noted_ms,
            "closed": self.closed,
        }


@dataclass(frozen=True)
class Watermark:
    revision: int
    lower_time_ms: int
    upper_time_ms: int
    cut: dict[int, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "revision": self.revision,
            "lower_time_ms": self.lower_time_ms,
            "upper_time_ms": self.upper_time_ms,
            "cut": {segment_name(s): o for s, o in sorted(self.cut.items())},
        }


@dataclass(frozen=True)
class TimeWindow:
    lower_ms: int | None  # None: near the head (no watermark passed yet)
    upper_ms: int | None  # None: near the tail (no watermark ahead yet)

    def to_dict(self) -> dict[str, Any]:
        return {"lower_ms": self.lower_ms, "upper_ms": self.upper_ms}


# ---- writer marks ----------------------------------------------------------------------------------


def latest_marks(marks: Iterable[WriterMark], segments: Mapping[int, Segment]) -> dict[str, WriterMark]:
    """Each writer's last mark, after checking the marks against the stream and one another."""
    latest: dict[str, WriterMark] = {}
    for mark in marks:
        for seg, offset in mark.positions.items():
            if seg not in segments:
                raise InvalidStreamCut(
                    f"writer {mark.writer_id}: mark names segment {segment_name(seg)}, which the stream does not have"
                )
            if not 0 <= offset <= segments[seg].tail:
                raise InvalidStreamCut(
                    f"writer {mark.writer_id}: offset {offset} in segment {segment_name(seg)} is outside "
                    f"[0, {segments[seg].tail}]"
                )
        before = latest.get(mark.writer_id)
        if before is not None:
            if mark.time_ms < before.time_ms:
                raise InvalidInput(
                    f"writer {mark.writer_id}: time went backwards from {before.time_ms} to {mark.time_ms} ms"
                )
            for seg, offset in mark.positions.items():
                if seg in before.positions and offset < before.positions[seg]:
                    raise InvalidInput(
                        f"writer {mark.writer_id}: position in segment {segment_name(seg)} went backwards "
                        f"from {before.positions[seg]} to {offset}"
                    )
        latest[mark.writer_id] = mark
    return latest


def _check_timeout(aggregation_timeout_ms: int) -> None:
    if aggregation_timeout_ms < 0:
        raise InvalidInput(f"invalid timestamp aggregation timeout {aggregation_timeout_ms} ms: must be >= 0")


def _participates(mark: WriterMark, previous: Watermark | None) -> bool:
    return previous is None or mark.time_ms > previous.lower_time_ms


def active_writers(
    marks: Iterable[WriterMark], previous: Watermark | None, now_ms: int, aggregation_timeout_ms: int,
    segments: Mapping[int, Segment] | None = None,
) -> list[WriterMark]:
    """The writers that hold watermarks back (their last marks, by writer id): participating ones, and
    non-participating ones whose last note is younger than the timeout. `segments`, when given, is
    used to check the marks' positions."""
    _check_timeout(aggregation_timeout_ms)
    marks = list(marks)
    if segments is None:
        # without the stream, check only the marks' order: every named segment is taken as known
        segments = {s: Segment(s, 0.0, 1.0, tail=max(m.positions[s] for m in marks if s in m.positions))
                    for m in marks for s in m.positions}
    latest = latest_marks(marks, segments)
    return _active(latest, previous, now_ms, aggregation_timeout_ms)


def _active(latest: Mapping[str, WriterMark], previous: Watermark | None, now_ms: int,
            aggregation_timeout_ms: int) -> list[WriterMark]:
    return [
        m for _, m in sorted(latest.items())
        if not m.closed and (_participates(m, previous) or now_ms - m.noted_ms < aggregation_timeout_ms)
    ]


# ---- the cut -----------------------------------------------------------------------------------------


def _predecessors(seg: int, segments: Mapping[int, Segment]) -> set[int]:
    s = segments[seg]
    return {o for o in segments if o < seg and s.overlaps(segments[o])}


def _ready(done: set[int], preds: Mapping[int, set[int]]) -> list[int]:
    return [s for s in sorted(preds) if s not in done and preds[s] <= done]


def first_gap(ready: Sequence[int], segments: Mapping[int, Segment]) -> float | None:
    """The lowest key the ready segments do not cover, or None if they tile [0, 1)."""
    cursor = 0.0
    for seg in sorted(ready, key=lambda s: segments[s].key_low):
        if segments[seg].key_low > cursor:
            return cursor
        cursor = max(cursor, segments[seg].key_high)
    return None if cursor >= 1.0 else cursor


def watermark_cut(
    positions: Sequence[Mapping[int, int]], previous_cut: Mapping[int, int] | None, segments: Mapping[int, Segment]
) -> dict[int, int]:
    """The earliest-filled complete valid cut at or after every position and the previous cut (see the
    module docstring, "The cut"). Positions must name known segments."""
    preds = {s: _predecessors(s, segments) for s in segments}
    sources = [*positions, *([previous_cut] if previous_cut is not None else [])]
    done: set[int] = set()
    for source in sources:
        for seg in source:
            done |= preds[seg]
    while True:
        # close under predecessors: a done segment's predecessors are done too
        closed = set(done)
        for seg in done:
            closed |= preds[seg]
        done = closed
        ready = _ready(done, preds)
        gap = first_gap(ready, segments)
        if gap is None:
            break
        holding = [s for s in sorted(segments) if s not in done and segments[s].key_low <= gap < segments[s].key_high]
        # the earliest segment at the gap is not ready: its missing predecessors must be passed
        done |= preds[holding[0]]
    cut = {}
    for seg in ready:
        cut[seg] = max([source[seg] for source in sources if seg in source], default=0)
    return cut


# ---- the computation ---------------------------------------------------------------------------------


def next_watermark(
    marks: Iterable[WriterMark],
    previous: Watermark | None,
    segments: Mapping[int, Segment],
    now_ms: int,
    aggregation_timeout_ms: int,
) -> Watermark | None:
    """The watermark to append after `previous`, or None (no active writer, an active writer that has
    not noted past `previous`, or a lower time that does not advance). Times come from the active
    writers; the cut covers every writer's position."""
    _check_timeout(aggregation_timeout_ms)
    if previous is not None:
        check_cut(previous.cut, segments, "the previous watermark")
    latest = latest_marks(marks, segments)
    active = _active(latest, previous, now_ms, aggregation_timeout_ms)
    if not active:
        return None
    if not all(_participates(m, previous) for m in active):
        return None  # wait until the lagging writer notes or times out (docs/watermarks.md)
    lower = min(m.time_ms for m in active)
    upper = max(m.time_ms for m in active)
    if previous is not None:
        # every active writer participates, so lower > previous.lower_time_ms here: the lower time advances
        upper = max(upper, previous.upper_time_ms)
    # every writer's position, not only the active ones' (module docstring)
    cut = watermark_cut([m.positions for _, m in sorted(latest.items())], previous.cut if previous else None,
                        segments)
    revision = 0 if previous is None else previous.revision + 1
    return Watermark(revision, lower, upper, cut)


# ---- the reader's time window ----------------------------------------------------------------------


def compare(position: Mapping[int, int], mark_cut: Mapping[int, int], segments: Mapping[int, Segment]) -> int:
    """-1: the position is before the mark; 0: partly before, partly after; +1: at or after it."""
    below = above = False
    for seg, offset in position.items():
        if seg in mark_cut:
            pairs = [(seg, mark_cut[seg])]
        else:
            pairs = [(s, o) for s, o in mark_cut.items() if segments[seg].overlaps(segments[s])]
        for mseg, moffset in pairs:
            mine, theirs = (offset, moffset) if mseg == seg else (seg, mseg)
            if mine < theirs:
                below = True
            elif mine > theirs:
                above = True
    if below and above:
        return 0
    return -1 if below else 1


@dataclass
class WindowTracker:
    """One reader group's time window over a stream's watermarks (oldest first). `advance_to` is fed
    the group's positions as it reads; the window only moves forward."""

    watermarks: Sequence[Watermark]
    segments: Mapping[int, Segment]
    _next: int = 0
    _passed: Watermark | None = None
    _inflight: list[Watermark] = field(default_factory=list)

    @property
    def window(self) -> TimeWindow:
        return TimeWindow(
            self._passed.lower_time_ms if self._passed else None,
            self._inflight[-1].upper_time_ms if self._inflight else None,
        )

    @property
    def consumed_all(self) -> bool:
        """Every watermark handed to the tracker has been looked at: it may need the next ones."""
        return self._next >= len(self.watermarks)

    def add(self, watermarks: Iterable[Watermark]) -> None:
        """Append watermarks stored since (oldest first), forgetting the ones already consumed, so a
        long-lived tracker keeps only the in-flight marks and those not yet looked at."""
        self.watermarks = [*self.watermarks[self._next:], *watermarks]
        self._next = 0

    def advance_to(self, position: Mapping[int, int]) -> TimeWindow:
        for seg in position:
            if seg not in self.segments:
                raise InvalidStreamCut(
                    f"reader position names segment {segment_name(seg)}, which the stream does not have"
                )
        while self._inflight and compare(position, self._inflight[0].cut, self.segments) > 0:
            self._passed = self._inflight.pop(0)
        while not self._inflight or compare(position, self._inflight[-1].cut, self.segments) >= 0:
            if self._next >= len(self.watermarks):
                break
            mark = self.watermarks[self._next]
            self._next += 1
            if compare(position, mark.cut, self.segments) <= 0:
                self._inflight.append(mark)
            else:
                self._passed = mark
        return self.window


def last_passed(position: Mapping[int, int], low: int, high: int, get: Callable[[int], Watermark | None],
                segments: Mapping[int, Segment]) -> int | None:
    """The highest revision in [low, high] whose watermark `position` has passed (compare > 0), found
    with O(log n) calls of `get`: watermark cuts never go backwards, so the passed ones form a prefix.
    None if it has passed none, or if `get` returns None (a revision pruned meanwhile) or a cut naming
    a segment `segments` does not know: the caller then reads from the oldest."""
    passed = None
    while low <= high:
        middle = (low + high) // 2
        mark = get(middle)
        if mark is None or any(seg not in segments for seg in mark.cut):
            return None
        if compare(position, mark.cut, segments) > 0:
            passed, low = middle, middle + 1
        else:
            high = middle - 1
    return passed


def time_window(
    reader_positions: Mapping[int, int], watermarks: Sequence[Watermark], segments: Mapping[int, Segment]
) -> TimeWindow:
    """The window at one position, read from the start of the watermarks: lower from the latest mark the
    position has passed, upper from the last in-flight mark (None near the head or the tail)."""
    return WindowTracker(watermarks, segments).advance_to(reader_positions)


def advance(previous: TimeWindow, new: TimeWindow) -> TimeWindow:
    """Never let a window shown to a reader move backwards (a lower bound None means 'unknown')."""
    lower = new.lower_ms if previous.lower_ms is None or (
        new.lower_ms is not None and new.lower_ms >= previous.lower_ms) else previous.lower_ms
    upper = new.upper_ms
    if previous.upper_ms is not None and new.upper_ms is not None and new.upper_ms < previous.upper_ms:
        upper = previous.upper_ms
    return TimeWindow(lower, upper)


__all__ = [
    "TimeWindow", "Watermark", "WindowTracker", "WriterMark", "active_writers", "advance", "compare",
    "last_passed", "latest_marks", "next_watermark", "time_window", "watermark_cut",
]
