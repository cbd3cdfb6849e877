"""The subscriber lower bound (docs/retention.md): pure.

LB is the latest complete stream cut that is at or before every subscriber's cut. Nothing here
touches the store; the shell loads the subscribers' effective cuts and the stream's segments.

The algorithm works per routing key rather than on Pravega's segment ids and predecessor sets.
At a key k, a valid cut stands at exactly one position (s, o): the cut segment s whose range holds
k, at offset o. All segments holding k overlap one another, so they are ordered by id (a higher id
is later, model.py), and positions at k are ordered lexicographically by (segment id, offset).
`compare_cuts` compares exactly these per-key positions, so `a <= b` iff a's position is at or
before b's at every key. The pointwise minimum over the input cuts is therefore at or before every
input, and every cut at or before every input is at or before it: it is the answer if it is a cut.

It is one, for valid inputs: (1) a segment s that is the minimum at one key is the minimum, with the
same offset, at every key of its range — if another cut Y were earlier than s at a key of s while at
or after s elsewhere, Y would hold either s and an overlapping predecessor of s, or a predecessor and
a successor of s without s, and both make Y invalid; (2) for the same reason no segment outside the
minimum has a predecessor and a successor in it. So the result tiles [0, 1) and respects lineage.

The key space is split at every boundary of the input cuts' segments; within one elementary
interval each input cut has a single segment, so one representative key per interval suffices.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from .cuts import Topology
from .model import Segment, segment_name


def lower_bound(cuts: Sequence[Mapping[int, int]], segments: Mapping[int, Segment]) -> dict[int, int]:
    """The latest complete valid cut at or before every cut in `cuts` ({segment id: offset} each,
    complete and valid cuts of the stream whose segments are `segments`). Raises ValueError on an
    empty list, and on cuts that do not tile the key space consistently (invalid input)."""
    if not cuts:
        raise ValueError("lower_bound needs at least one subscriber cut")
    return _pointwise(cuts, segments, min)


def upper_bound(cuts: Sequence[Mapping[int, int]], segments: Mapping[int, Segment]) -> dict[int, int]:
    """The earliest complete valid cut at or after every cut in `cuts`: the pointwise maximum, by the
    mirror image of the argument above (a segment that is the latest position at one key is the
    latest, at the same offset, across its range). The retention cycle uses it to move a lower bound
    that lies (partly) behind the head up to the head, key by key, also across a scale."""
    if not cuts:
        raise ValueError("upper_bound needs at least one cut")
    return _pointwise(cuts, segments, max)


def unconsumed_bytes(cut: Mapping[int, int], head: Mapping[int, int], tail: Mapping[int, int],
                     topology: Topology) -> int:
    """Bytes from `cut` to the tail that still exist: per segment, from the later of the cut and the
    head. A cut behind the head (retention forced past a slow subscriber) counts only what is left."""
    from_cut = {r.segment: r for r in topology.ranges_between(cut, tail)}
    total = 0
    for kept in topology.ranges_between(head, tail):
        unread = from_cut.get(kept.segment)
        if unread is not None:
            total += kept.end - max(kept.start, unread.start)
    return total


def _pointwise(cuts: Sequence[Mapping[int, int]], segments: Mapping[int, Segment],
               pick: Callable[[Iterable[tuple[int, int]]], tuple[int, int]]) -> dict[int, int]:
    for cut in cuts:
        for seg in cut:
            if seg not in segments:
                raise ValueError(f"cut {_show(cut)} names segment {segment_name(seg)}, which the stream does not have")
    edges = {edge for cut in cuts for seg in cut for edge in (segments[seg].key_low, segments[seg].key_high)}
    boundaries = sorted(edges | {0.0, 1.0})
    result: dict[int, int] = {}
    for key in boundaries[:-1]:
        # the earliest (or latest) position at this key, ordered by segment id, then offset
        seg, offset = pick(_position_at(cut, key, segments) for cut in cuts)
        if result.setdefault(seg, offset) != offset:
            raise ValueError(f"segment {segment_name(seg)} is the chosen position at two keys with different "
                             "offsets: the cuts are not valid cuts of one stream")
    return result


def _position_at(cut: Mapping[int, int], key: float, segments: Mapping[int, Segment]) -> tuple[int, int]:
    holding = [seg for seg in cut if segments[seg].key_low <= key < segments[seg].key_high]
    if len(holding) != 1:
        what = "no segment" if not holding else f"{len(holding)} segments"
        raise ValueError(f"cut {_show(cut)} has {what} at key {key}: it is not a complete valid cut")
    return holding[0], cut[holding[0]]


def _show(cut: Mapping[int, int]) -> str:
    return "{" + ", ".join(f"{segment_name(s)}: {o}" for s, o in sorted(cut.items())) + "}"


__all__ = ["lower_bound", "unconsumed_bytes", "upper_bound"]
