"""Where the next micro-batch of a streaming read ends (pure).

Offsets of the streaming source are stream cuts. Given the batch's start cut S, a bound T (the
tail, or the Trigger.AvailableNow target) and a byte budget, `next_end` picks the end cut E with
S <= E <= T. Two rules shape it:

**One hop across scaling per batch.** A successor segment appears in E only when every one of
its predecessors was complete at S (sealed and read to its tail) and T lies past them. Within one
micro-batch Spark reads partitions in no particular order, so if a predecessor's last events and
its successor's first events were in the same batch a key's events could be seen out of order;
with the rule, the batch that reads a successor holds nothing of its predecessors.

Construction, on done sets (as the watermark cut in streams/watermarks.py): D_S = every ancestor
of S's segments. A segment of S that is complete at S and absent from T is a *candidate*; put all
candidates in D and look at the ready set R(D) (segments not in D whose predecessors are all in
D). Where R(D) leaves a key uncovered, the candidate holding that key cannot be passed yet (one of
its successors there still waits for another predecessor), so it leaves D; repeat until R(D)
tiles [0, 1). D only shrinks and R(D_S) is S's own segment set, so this ends with a valid cut.

**The byte budget.** Offsets only move to given *boundaries* (chunk ends, which are event
boundaries, and T's positions), so no event is ever split. Each segment of the frontier with data
first gets an equal share of the budget, then the rest goes to segments in id order. If nothing
fits but there is data, the smallest first step is taken anyway: every batch with data makes
progress even when one chunk exceeds the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidStreamCut
from ..streams.cuts import StreamCut
from ..streams.model import Segment
from ..streams.watermarks import first_gap


def offset_of(cut: StreamCut) -> dict[str, Any]:
    """A cut as a Spark offset: its self-describing JSON dict (with key ranges)."""
    return cut.to_dict()


def cut_of(offset: Mapping[str, Any], stream: str) -> StreamCut:
    """A Spark offset back as a cut of `stream` (InvalidStreamCut if it is malformed or another stream's)."""
    cut = StreamCut.from_dict(dict(offset))
    if cut.stream != stream:
        raise InvalidStreamCut(f"offset {cut} is for stream {cut.stream!r}, not {stream!r}")
    return cut


def _predecessors(seg: int, segments: Mapping[int, Segment]) -> set[int]:
    s = segments[seg]
    return {o for o in segments if o < seg and s.overlaps(segments[o])}


def _ancestors(cut: Mapping[int, int], preds: Mapping[int, set[int]]) -> set[int]:
    done: set[int] = set()
    todo = [p for seg in cut for p in preds[seg]]
    while todo:
        seg = todo.pop()
        if seg not in done:
            done.add(seg)
            todo.extend(preds[seg])
    return done


def frontier(start: Mapping[int, int], bound: Mapping[int, int], segments: Mapping[int, Segment]) -> list[int]:
    """The segments of the next end cut: S's own, with the candidates passed where they can be (module
    docstring). `start` and `bound` are valid cuts with start <= bound."""
    preds = {s: _predecessors(s, segments) for s in segments}
    base = _ancestors(start, preds)
    candidates = {s for s, off in start.items()
                  if segments[s].sealed and off == segments[s].tail and s not in bound}
    passed = set(candidates)
    while True:
        done = base | passed
        ready = [s for s in sorted(segments) if s not in done and preds[s] <= done]
        gap = first_gap(ready, segments)
        if gap is None:
            return ready
        holding = [s for s in passed if segments[s].key_low <= gap < segments[s].key_high]
        if not holding:  # cannot happen for valid cuts: R(D_S) is S's segment set
            raise InvalidStreamCut(f"start cut leaves key {gap} uncovered")
        passed -= set(holding)


def position_in(seg: int, cut: Mapping[int, int], segments: Mapping[int, Segment]) -> int:
    """How far a valid cut lies into `seg`: its offset there, the tail if the cut is past it, else 0."""
    if seg in cut:
        return cut[seg]
    for other in cut:
        if segments[seg].overlaps(segments[other]):
            return segments[seg].tail if other > seg else 0
    return 0


def next_end(start: Mapping[int, int], bound: Mapping[int, int], segments: Mapping[int, Segment],
             boundaries: Mapping[int, Sequence[int]], budget: int | None) -> dict[int, int]:
    """The end cut of the batch that starts at `start` (module docstring). `boundaries[s]`: offsets
    of segment s where an end may lie (event boundaries); the bound's own positions always may.
    `budget`: logical bytes the batch may read, None for no limit."""
    segs = frontier(start, bound, segments)
    lows = {s: start.get(s, 0) for s in segs}
    highs = {s: max(lows[s], position_in(s, bound, segments)) for s in segs}
    steps = {s: sorted({b for b in boundaries.get(s, ()) if lows[s] < b < highs[s]} | {highs[s]} - {lows[s]})
             for s in segs}
    if budget is None:
        return {s: highs[s] for s in segs}
    end = dict(lows)
    with_data = [s for s in segs if steps[s]]
    left = budget

    def take(seg: int, allowance: int) -> int:
        """Move seg's end over whole steps within `allowance`; returns the bytes taken."""
        used = 0
        for b in steps[seg]:
            if b <= end[seg]:
                continue
            if used + b - end[seg] > allowance:
                break
            used += b - end[seg]
            end[seg] = b
        return used

    if with_data:
        share = budget // len(with_data)
        for s in with_data:
            left -= take(s, share)
        for s in with_data:
            left -= take(s, left)
        if all(end[s] == lows[s] for s in with_data):
            # nothing fits: take the smallest first step, so the query always progresses
            first = min(with_data, key=lambda s: (steps[s][0] - lows[s], s))
            end[first] = steps[first][0]
    return end


__all__ = ["cut_of", "frontier", "next_end", "offset_of", "position_in"]
