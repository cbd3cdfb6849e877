"""A two-segment stream (keys [0, .5) and [.5, 1), nothing sealed) for the retention decision tests."""

from __future__ import annotations

from tidekeep.streams.model import Segment, segment_id
from tidekeep.streams.retention import RetentionRecord

S0, S1 = segment_id(0, 0), segment_id(0, 1)


def two_segments(tail0: int, tail1: int) -> dict[int, Segment]:
    return {S0: Segment(S0, 0.0, 0.5, 0, tail0), S1: Segment(S1, 0.5, 1.0, 0, tail1)}


def rec(time_ms: int, a: int, b: int) -> RetentionRecord:
    """A record of the two-segment stream: its absolute size is simply a + b (nothing sealed)."""
    return RetentionRecord(time_ms, a + b, {S0: a, S1: b})
