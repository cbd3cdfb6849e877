"""Stream cuts and their algebra (pure).

A stream cut maps segments to logical offsets at event boundaries so that the segments' key ranges
tile [0, 1) and the cut is consistent with the segments' lineage (no segment lies partly before
and partly after the cut). Order runs head -> tail: `a <= b` means a is at or before b for every
routing key. Two cuts overlap when neither is <= the other. A cut may carry its stream's uid, which
ties it to one incarnation of the stream (`check_incarnation`).
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidStreamCut
from ..names import split_stream_name
from .model import Segment, ranges_overlap, segment_id, segment_name


class CutOrder(enum.Enum):
    EQUAL = "equal"
    BEFORE = "before"
    AFTER = "after"
    OVERLAPS = "overlaps"


UID_PATTERN = re.compile(r"[0-9a-f]{32}", re.ASCII)  # a stream's uid: uuid4().hex (StreamController.create_stream)


@dataclass(frozen=True)
class StreamCut:
    """A position in a stream. `ranges` (segment -> key range) makes a cut self-describing so it can
    be compared without the metadata store; `uid` names the stream's incarnation (a stream deleted
    and re-created under the same name has a new uid), so a cut of an earlier one is refused. Cuts
    from the client always carry both. Neither takes part in equality: a cut parsed from a form
    without them equals the cut it was made from."""

    stream: str
    positions: Mapping[int, int]
    ranges: Mapping[int, tuple[float, float]] | None = field(default=None, compare=False, hash=False)
    uid: str | None = field(default=None, compare=False, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "positions", dict(sorted(self.positions.items())))
        if self.ranges is not None:
            object.__setattr__(self, "ranges", dict(sorted(self.ranges.items())))

    def __hash__(self) -> int:
        return hash((self.stream, tuple(self.positions.items())))

    # ---- forms -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        entries = []
        for seg, offset in self.positions.items():
            entry: dict[str, Any] = {"segment": segment_name(seg), "offset": offset}
            if self.ranges is not None and seg in self.ranges:
                entry["range"] = list(self.ranges[seg])
            entries.append(entry)
        data: dict[str, Any] = {"stream": self.stream, "positions": entries}
        if self.uid is not None:
            data["uid"] = self.uid
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def __str__(self) -> str:
        """Compact form: "scope/stream:0.0=120,0.1=0,1.2=55@<uid>" (segment epoch.number=offset, then
        the stream's uid when the cut carries it)."""
        return self.display() + ("" if self.uid is None else f"@{self.uid}")

    def display(self) -> str:
        """The compact form without the uid, for messages that name the stream anyway."""
        body = ",".join(f"{segment_name(seg)}={off}" for seg, off in self.positions.items())
        return f"{self.stream}:{body}"

    @staticmethod
    def parse(text: str) -> StreamCut:
        """Either form, JSON or compact. The result may lack key ranges (compact form)."""
        if not isinstance(text, str):
            raise InvalidStreamCut(f"malformed stream cut {text!r}: expected a string")
        stripped = text.strip()
        if stripped.startswith("{"):
            return _parse_json(stripped)
        return _parse_compact(stripped)

    @staticmethod
    def from_dict(data: Any) -> StreamCut:
        return _from_dict(data)

    # ---- order -------------------------------------------------------------------------------
    def compare(self, other: StreamCut) -> CutOrder:
        if self.stream != other.stream:
            raise InvalidStreamCut(f"cannot compare cuts of different streams {self.stream!r} and {other.stream!r}")
        if self.uid is not None and other.uid is not None and self.uid != other.uid:
            raise InvalidStreamCut(f"cannot compare cuts of different incarnations of stream {self.stream} "
                                   f"(uid {self.uid} and uid {other.uid})")
        return compare_cuts(self.positions, other.positions, _ranges_of(self, other))

    def __le__(self, other: StreamCut) -> bool:
        return self.compare(other) in (CutOrder.EQUAL, CutOrder.BEFORE)

    def __ge__(self, other: StreamCut) -> bool:
        return self.compare(other) in (CutOrder.EQUAL, CutOrder.AFTER)

    def __lt__(self, other: StreamCut) -> bool:
        return self.compare(other) is CutOrder.BEFORE

    def __gt__(self, other: StreamCut) -> bool:
        return self.compare(other) is CutOrder.AFTER

    def overlaps(self, other: StreamCut) -> bool:
        return self.compare(other) is CutOrder.OVERLAPS


def _ranges_of(*cuts: StreamCut) -> dict[int, tuple[float, float]]:
    ranges: dict[int, tuple[float, float]] = {}
    for cut in cuts:
        if cut.ranges is None:
            raise InvalidStreamCut(
                f"stream cut {cut} carries no key ranges; resolve it first with client.stream(name).resolve_cut()"
            )
        ranges.update(cut.ranges)
    return ranges


def check_incarnation(cut: StreamCut, stream: str, uid: str) -> None:
    """Refuse a cut that names another incarnation of the stream (one with another uid). A cut
    without a uid (compact text without `@uid`, JSON of older clients) passes: only the checks
    against the stream's segments apply to it (docs/streams.md)."""
    if cut.uid is not None and cut.uid != uid:
        raise InvalidStreamCut(f"cut of an earlier incarnation of stream {stream} (uid {cut.uid}), the stream now "
                               f"has uid {uid}")


def _check_uid(uid: object, bad: Callable[[str], InvalidStreamCut]) -> str:
    if not isinstance(uid, str) or not UID_PATTERN.fullmatch(uid):
        raise bad(f"uid {uid!r} is not 32 lowercase hex digits")
    return uid


_COMPACT_ENTRY = re.compile(r"(\d{1,10})\.(\d{1,10})=(\d{1,19})", re.ASCII)


def _parse_compact(text: str) -> StreamCut:
    shown = text if len(text) <= 80 else text[:77] + "..."
    stream, sep, body = text.rpartition(":")
    if not sep:
        raise InvalidStreamCut(f"malformed stream cut {shown!r}: expected 'scope/stream:E.N=OFFSET,...[@UID]'")
    body, at, uid_text = body.partition("@")
    uid = None
    if at:
        uid = _check_uid(uid_text.strip(), lambda why: InvalidStreamCut(f"malformed stream cut {shown!r}: {why}"))
    try:
        split_stream_name(stream)
    except Exception:
        raise InvalidStreamCut(f"malformed stream cut {shown!r}: {stream!r} is not a 'scope/stream' name") from None
    positions: dict[int, int] = {}
    for item in body.split(","):
        match = _COMPACT_ENTRY.fullmatch(item.strip())
        if not match:
            raise InvalidStreamCut(f"malformed stream cut {shown!r}: bad entry {item.strip()!r}, expected E.N=OFFSET")
        epoch, number, offset = (int(g) for g in match.groups())
        _add_position(positions, epoch, number, offset, shown)
    return StreamCut(stream, positions, uid=uid)


def _add_position(positions: dict[int, int], epoch: int, number: int, offset: int, shown: str) -> int:
    if epoch >= 2**31 or number >= 2**32:
        raise InvalidStreamCut(f"malformed stream cut {shown!r}: segment {epoch}.{number} is out of range")
    if offset >= 2**63:
        raise InvalidStreamCut(f"malformed stream cut {shown!r}: offset {offset} is out of range")
    seg = segment_id(epoch, number)
    if seg in positions:
        raise InvalidStreamCut(f"malformed stream cut {shown!r}: segment {epoch}.{number} appears twice")
    positions[seg] = offset
    return seg


def _parse_json(text: str) -> StreamCut:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidStreamCut(f"malformed stream cut JSON: {exc.msg} at position {exc.pos}") from None
    except RecursionError:  # json.loads recurses per nesting level; hostile input must not crash us
        raise InvalidStreamCut("malformed stream cut JSON: nested too deeply") from None
    return _from_dict(data)


def _from_dict(data: Any) -> StreamCut:
    def bad(why: str) -> InvalidStreamCut:
        return InvalidStreamCut(f"malformed stream cut JSON: {why}")

    if not isinstance(data, dict) or not {"stream", "positions"} <= set(data) <= {"stream", "positions", "uid"}:
        raise bad("expected an object with the keys 'stream' and 'positions' (and optionally 'uid')")
    uid = _check_uid(data["uid"], bad) if "uid" in data else None
    stream = data["stream"]
    try:
        split_stream_name(stream)
    except Exception:
        raise bad(f"{stream!r} is not a 'scope/stream' name") from None
    entries = data["positions"]
    if not isinstance(entries, list) or not entries:
        raise bad("'positions' must be a non-empty list")
    positions: dict[int, int] = {}
    ranges: dict[int, tuple[float, float]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not {"segment", "offset"} <= set(entry) <= {"segment", "offset", "range"}:
            raise bad("each position needs 'segment' and 'offset' (and optionally 'range')")
        name, offset = entry["segment"], entry["offset"]
        match = re.fullmatch(r"(\d{1,10})\.(\d{1,10})", name, re.ASCII) if isinstance(name, str) else None
        if not match:
            raise bad(f"segment {name!r} is not 'epoch.number'")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise bad(f"offset {offset!r} of segment {name} is not a non-negative integer")
        seg = _add_position(positions, int(match.group(1)), int(match.group(2)), offset, name)
        if "range" in entry:
            rng = entry["range"]
            if (
                not isinstance(rng, list)
                or len(rng) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in rng)
                or not 0 <= rng[0] < rng[1] <= 1
            ):
                raise bad(f"range {rng!r} of segment {name} is not [low, high) within [0, 1)")
            ranges[seg] = (float(rng[0]), float(rng[1]))
    if ranges and set(ranges) != set(positions):
        raise bad("either every position has a 'range' or none has")
    return StreamCut(stream, positions, ranges or None, uid)


# ---- the algebra on plain maps -------------------------------------------------------------------


def compare_cuts(
    a: Mapping[int, int], b: Mapping[int, int], ranges: Mapping[int, tuple[float, float]]
) -> CutOrder:
    """Per routing key, where a stands relative to b. Same segment: compare offsets; overlapping
    different segments: the higher id is later. Pairs that share no key do not matter. The primitive
    on key ranges alone: cuts of a stream compare through its `Topology`, self-describing cuts
    through `StreamCut.compare`."""
    less = greater = False
    for sa, oa in a.items():
        la, ha = ranges[sa]
        for sb, ob in b.items():
            if sa == sb:
                if oa < ob:
                    less = True
                elif oa > ob:
                    greater = True
            elif ranges_overlap(la, ha, *ranges[sb]):
                if sa < sb:
                    less = True
                else:
                    greater = True
            if less and greater:
                return CutOrder.OVERLAPS
    if less:
        return CutOrder.BEFORE
    if greater:
        return CutOrder.AFTER
    return CutOrder.EQUAL


def check_cut(
    positions: Mapping[int, int],
    segments: Mapping[int, Segment],
    stream: str,
    is_event_boundary: Callable[[int, int], bool] | None = None,
) -> None:
    """Raise InvalidStreamCut unless `positions` is a valid cut of the stream whose segments are
    given: known segments, offsets within [0, tail] at event boundaries, key ranges tiling [0, 1),
    and no segment of the stream lying partly before and partly after the cut."""
    if not positions:
        raise InvalidStreamCut(f"invalid stream cut for {stream}: it names no segments")
    for seg, offset in positions.items():
        if seg not in segments:
            raise InvalidStreamCut(f"invalid stream cut for {stream}: segment {segment_name(seg)} does not exist")
        if offset < 0:
            raise InvalidStreamCut(f"invalid stream cut for {stream}: negative offset {offset} in {segment_name(seg)}")
        if offset > segments[seg].tail:
            raise InvalidStreamCut(
                f"invalid stream cut for {stream}: offset {offset} in segment {segment_name(seg)} "
                f"is beyond its tail {segments[seg].tail}"
            )
    ordered = sorted(positions, key=lambda s: segments[s].key_low)
    cursor = 0.0
    for seg in ordered:
        low, high = segments[seg].key_low, segments[seg].key_high
        if low < cursor:
            raise InvalidStreamCut(
                f"invalid stream cut for {stream}: segments overlap at key {low} ({segment_name(seg)})"
            )
        if low > cursor:
            raise InvalidStreamCut(f"invalid stream cut for {stream}: key range [{cursor}, {low}) is not covered")
        cursor = high
    if cursor < 1.0:
        raise InvalidStreamCut(f"invalid stream cut for {stream}: key range [{cursor}, 1.0) is not covered")
    for other in segments.values():
        if other.id in positions:
            continue
        overlapping = [s for s in positions if other.overlaps(segments[s])]
        if any(s < other.id for s in overlapping) and any(s > other.id for s in overlapping):
            raise InvalidStreamCut(
                f"invalid stream cut for {stream}: segment {segment_name(other.id)} would lie partly "
                "before and partly after the cut"
            )
    if is_event_boundary is not None:
        for seg, offset in positions.items():
            if not is_event_boundary(seg, offset):
                raise InvalidStreamCut(
                    f"invalid stream cut for {stream}: offset {offset} in segment {segment_name(seg)} "
                    "is not at an event boundary"
                )


@dataclass(frozen=True)
class SegmentRange:
    segment: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class Topology:
    """A stream's segments, with their key ranges computed once: the one place that orders two cuts
    of the stream (`compare`) and measures what lies between them (`ranges_between`,
    `size_between`). Cuts are plain position maps, valid for these segments (check_cut)."""

    segments: Mapping[int, Segment]
    ranges: Mapping[int, tuple[float, float]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranges", {s.id: (s.key_low, s.key_high) for s in self.segments.values()})

    def compare(self, a: Mapping[int, int], b: Mapping[int, int]) -> CutOrder:
        return compare_cuts(a, b, self.ranges)

    def at_or_before(self, a: Mapping[int, int], b: Mapping[int, int]) -> bool:
        return self.compare(a, b) in (CutOrder.BEFORE, CutOrder.EQUAL)

    def position_in(self, segment: Segment, cut: Mapping[int, int]) -> int:
        """The offset in `segment` that corresponds to `cut`: its own offset if it is in the cut, its
        full length if the cut lies after it, 0 if the cut lies before it."""
        if segment.id in cut:
            return cut[segment.id]
        for seg in cut:
            if segment.overlaps(self.segments[seg]):
                return segment.tail if seg > segment.id else 0
        raise InvalidStreamCut(f"segment {segment_name(segment.id)} is not covered by the cut")  # pragma: no cover

    def ranges_between(self, start: Mapping[int, int], end: Mapping[int, int]) -> list[SegmentRange]:
        """The byte ranges of each segment that lie between two valid cuts, in ascending segment id,
        which is an order that reads every predecessor before its successors."""
        result = []
        for seg_id in sorted(self.segments):
            segment = self.segments[seg_id]
            lo = self.position_in(segment, start)
            hi = self.position_in(segment, end)
            if hi > lo:
                result.append(SegmentRange(seg_id, lo, hi))
        return result

    def size_between(self, start: Mapping[int, int], end: Mapping[int, int]) -> int:
        return sum(r.size for r in self.ranges_between(start, end))

    def initial_cut(self) -> dict[int, int]:
        return initial_cut(self.segments.values())

    def size_at(self, positions: Mapping[int, int]) -> int:
        """The absolute logical size at a cut: the bytes from where the stream began up to it."""
        return self.size_between(self.initial_cut(), positions)


def furthest(a: Mapping[int, int], b: Mapping[int, int]) -> dict[int, int]:
    """Per segment, the further of two (partial) positions: a writer's position only moves forward."""
    merged = dict(a)
    for seg, offset in b.items():
        merged[seg] = max(offset, merged.get(seg, offset))
    return merged


def initial_cut(segments: Iterable[Segment]) -> dict[int, int]:
    """The cut at offset 0 of the epoch-0 segments: where the stream began."""
    return {s.id: 0 for s in segments if s.epoch == 0}
