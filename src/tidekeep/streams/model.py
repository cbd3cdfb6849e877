"""Pure stream model: segments, key ranges, routing, and scaling decisions.

Segment id = (epoch << 32) | number, as in Pravega (store/segment_ids.py): the creation epoch sits
in the high bits, so among segments whose key ranges overlap, a higher id is always a later segment. Key ranges are
half-open [low, high) inside [0, 1).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidInput

# the chunk format's vocabulary (chunk files name segments and size events so): defined with the
# store's chunks, offered here as the stream model's own
from ..store.segment_ids import EVENT_HEADER_BYTES as EVENT_HEADER_BYTES
from ..store.segment_ids import segment_epoch as segment_epoch
from ..store.segment_ids import segment_id as segment_id
from ..store.segment_ids import segment_name as segment_name
from ..store.segment_ids import segment_number as segment_number

if TYPE_CHECKING:
    import numpy as np


def segment_key(seg_id: int) -> str:
    """A segment as stored in JSON columns: the decimal 64-bit id, also for a SegmentId (whose str()
    is "epoch.number", the form for people, not for what the store reads back)."""
    return str(int(seg_id))


MAX_EPOCH = 2**31 - 1  # ids are signed 64-bit columns in the metadata store
MAX_NUMBER = 2**32 - 1
_SEGMENT_TEXT = re.compile(r"(\d{1,10})\.(\d{1,10})|(\d{1,19})", re.ASCII)


class SegmentId(int):
    """A segment, as the API hands it out (`Event.segment`, `Position.segment`): the 64-bit id
    `(epoch << 32) | number` it is for `int()`, comparison, hashing and arithmetic, written
    "epoch.number" wherever it is shown (`str`, f-strings, `repr`) — the one way segments are
    written everywhere (docs/streams.md). `SegmentId("1.4")` and `SegmentId(4294967300)` are the
    same segment; anything else is InvalidInput."""

    __slots__ = ()

    def __new__(cls, ref: int | str) -> SegmentId:
        return super().__new__(cls, _segment_value(ref))

    @property
    def epoch(self) -> int:
        return segment_epoch(self)

    @property
    def number(self) -> int:
        return segment_number(self)

    def __str__(self) -> str:
        return segment_name(self)

    def __repr__(self) -> str:
        return f"SegmentId('{segment_name(self)}')"

    def __format__(self, spec: str) -> str:
        # an empty spec is str(); a numeric spec ("d", "x", ">12") formats the integer id
        return segment_name(self) if not spec else int.__format__(int(self), spec)


def _segment_value(ref: object) -> int:
    """The integer id of a segment given as an id or as "epoch.number" text (digits alone: the id)."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        if ref >= 0 and segment_epoch(ref) <= MAX_EPOCH:
            return int(ref)
    elif isinstance(ref, str):
        match = _SEGMENT_TEXT.fullmatch(ref.strip())
        if match and match.group(3) is not None:
            return _segment_value(int(match.group(3)))
        if match and int(match.group(1)) <= MAX_EPOCH and int(match.group(2)) <= MAX_NUMBER:
            return segment_id(int(match.group(1)), int(match.group(2)))
    shown = ref if not isinstance(ref, str) or len(ref) <= 40 else ref[:37] + "..."
    raise InvalidInput(f"invalid segment {shown!r}: expected 'epoch.number' like '0.1' (epoch up to {MAX_EPOCH}, "
                       f"number up to {MAX_NUMBER}) or a segment id")


def ranges_overlap(a_low: float, a_high: float, b_low: float, b_high: float) -> bool:
    return b_low < a_high and b_high > a_low


@dataclass(frozen=True)
class Segment:
    id: int
    key_low: float
    key_high: float
    head: int = 0  # logical offset of the first readable byte (moves on truncation)
    tail: int = 0  # logical length; final once sealed
    sealed: bool = False
    sealed_epoch: int | None = None  # first epoch in which the segment is no longer active

    @property
    def epoch(self) -> int:
        return segment_epoch(self.id)

    @property
    def number(self) -> int:
        return segment_number(self.id)

    def overlaps(self, other: Segment) -> bool:
        return ranges_overlap(self.key_low, self.key_high, other.key_low, other.key_high)

    def active_in(self, epoch: int) -> bool:
        return self.epoch <= epoch and (self.sealed_epoch is None or epoch < self.sealed_epoch)


_BELOW_ONE = 1.0 - 2.0**-53


def routing_key_position(routing_key: str) -> float:
    """Where a routing key falls in [0, 1): the BLAKE2b digest of the key's UTF-8 bytes computed with
    digest_size=8 (BLAKE2b-64, which differs from the first 8 bytes of the default 64-byte digest),
    read big-endian, divided by 2**64. Stable across processes, hosts and Python versions (documented in
    docs/streams.md), so a key always maps to the same segment of a given epoch."""
    digest = hashlib.blake2b(routing_key.encode("utf-8"), digest_size=8).digest()
    # the float division can round the very top hashes up to 1.0; keep the result inside [0, 1)
    return min(int.from_bytes(digest, "big") / 18446744073709551616.0, _BELOW_ONE)


class Router:
    """Maps key positions to the active segments of one epoch."""

    def __init__(self, active: Iterable[Segment]) -> None:
        ordered = sorted(active, key=lambda s: s.key_low)
        self._lows = [s.key_low for s in ordered]
        self._ids = [s.id for s in ordered]

    @property
    def segment_ids(self) -> list[int]:
        return list(self._ids)

    def segment_for(self, position: float) -> int:
        return self._ids[bisect.bisect_right(self._lows, position) - 1]

    def segments_for(self, positions: np.ndarray) -> np.ndarray:
        """segment_for over an array of positions."""
        import numpy as np  # only writers route arrays of keys; describing a stream needs no numpy

        ids = np.array(self._ids, dtype=np.int64)
        return ids[np.searchsorted(np.array(self._lows), positions, side="right") - 1]


def check_key_ranges_cover(ranges: Sequence[tuple[float, float]], low: float, high: float, what: str) -> None:
    """Ranges must tile [low, high) exactly: no gap, no overlap, no empty range."""
    if not ranges:
        raise InvalidInput(f"{what}: no key ranges given")
    for lo, hi in ranges:
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi)):
            raise InvalidInput(f"{what}: key range ({lo!r}, {hi!r}) is not a pair of numbers")
        if not (0.0 <= lo < hi <= 1.0):
            raise InvalidInput(f"{what}: key range [{lo}, {hi}) is empty or outside [0, 1)")
    ordered = sorted(ranges)
    if ordered[0][0] != low:
        raise InvalidInput(f"{what}: key ranges start at {ordered[0][0]} but must start at {low}")
    for (lo1, hi1), (lo2, hi2) in itertools.pairwise(ordered):
        if lo2 < hi1:
            raise InvalidInput(f"{what}: key ranges [{lo1}, {hi1}) and [{lo2}, {hi2}) overlap")
        if lo2 > hi1:
            raise InvalidInput(f"{what}: key ranges leave the gap [{hi1}, {lo2}) uncovered")
    if ordered[-1][1] != high:
        raise InvalidInput(f"{what}: key ranges end at {ordered[-1][1]} but must end at {high}")


def equal_ranges(low: float, high: float, parts: int) -> list[tuple[float, float]]:
    if not isinstance(parts, int) or isinstance(parts, bool) or parts < 1:
        raise InvalidInput(f"invalid number of parts {parts!r}: must be an integer >= 1")
    bounds = [low + (high - low) * i / parts for i in range(parts)] + [high]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


@dataclass(frozen=True)
class ScalePlan:
    sealed: list[int]
    new_segments: list[Segment]
    new_epoch: int


def plan_scale(
    segments: Mapping[int, Segment],
    current_epoch: int,
    next_number: int,
    seal: Sequence[int],
    new_ranges: Sequence[tuple[float, float]],
) -> ScalePlan:
    """Validate a scale request and decide the new segments (pure)."""
    if not seal:
        raise InvalidInput("scale: no segments to seal")
    if len(set(seal)) != len(seal):
        raise InvalidInput("scale: a segment is listed twice in seal")
    for seg_id in seal:
        seg = segments.get(seg_id)
        if seg is None:
            raise InvalidInput(f"scale: segment {segment_name(seg_id)} does not exist")
        if not seg.active_in(current_epoch) or seg.sealed:
            raise InvalidInput(f"scale: segment {segment_name(seg_id)} is not active")
    sealed_ranges = sorted((segments[s].key_low, segments[s].key_high) for s in seal)
    for (_, hi1), (lo2, _) in itertools.pairwise(sealed_ranges):
        if lo2 != hi1:
            raise InvalidInput("scale: the segments to seal are not adjacent")
    if not all(isinstance(r, (tuple, list)) for r in new_ranges):  # a bare number is not a range
        raise InvalidInput("scale: each new range must be a (low, high) pair")
    pairs = [tuple(r) for r in new_ranges]
    if any(len(p) != 2 for p in pairs):
        raise InvalidInput("scale: each new range must be a (low, high) pair")
    check_key_ranges_cover(pairs, sealed_ranges[0][0], sealed_ranges[-1][1], "scale")  # type: ignore[arg-type]
    new_epoch = current_epoch + 1
    new_segments = [
        Segment(id=segment_id(new_epoch, next_number + i), key_low=float(lo), key_high=float(hi))
        for i, (lo, hi) in enumerate(sorted(pairs))
    ]
    return ScalePlan(sealed=list(seal), new_segments=new_segments, new_epoch=new_epoch)


def initial_segments(count: int) -> list[Segment]:
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise InvalidInput(f"invalid segment count {count!r}: must be an integer >= 1")
    if count > 10_000:
        raise InvalidInput(f"invalid segment count {count}: at most 10000")
    ranges = equal_ranges(0.0, 1.0, count)
    return [Segment(id=segment_id(0, i), key_low=lo, key_high=hi) for i, (lo, hi) in enumerate(ranges)]
