"""The time range of a search (pure): parsing --begin/--end and the inclusive-range rules.

A bound is epoch milliseconds (an integer, e.g. 1717243200000) or ISO-8601 text
(`2024-06-01T12:00:00Z`, `2024-06-01 12:00:00.250+02:00`, `2024-06-01`); text without a zone is
UTC. Both ends are inclusive, as CLP's `begin_timestamp <= search.end AND end_timestamp >=
search.begin`. Sub-millisecond precision rounds inward (begin up, end down), which keeps exactly
the integer-millisecond timestamps inside the written range.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidInput
from ..times import parse_time_ms

MIN_MS = 0  # 1970-01-01T00:00:00.000Z
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


@dataclass(frozen=True)
class TimeRange:
    begin_ms: int | None = None  # inclusive; None: unbounded
    end_ms: int | None = None  # inclusive; None: unbounded

    @property
    def bounded(self) -> bool:
        return self.begin_ms is not None or self.end_ms is not None

    def contains(self, ts: int | None) -> bool:
        """Whether a message timestamp is in range; a message without one only in an unbounded range."""
        if ts is None:
            return not self.bounded
        return (self.begin_ms is None or ts >= self.begin_ms) and (self.end_ms is None or ts <= self.end_ms)

    def overlaps(self, begin_ts: int | None, end_ts: int | None) -> bool:
        """Whether an archive [begin_ts, end_ts] may hold messages in range (None: no timestamps)."""
        if begin_ts is None or end_ts is None:
            return not self.bounded
        return (self.end_ms is None or begin_ts <= self.end_ms) and (self.begin_ms is None or end_ts >= self.begin_ms)


def _check_range(ms: int, flag: str, value: object) -> int:
    if ms < MIN_MS:
        raise InvalidInput(f"invalid {flag} {value!r}: before 1970-01-01T00:00:00Z")
    if ms > MAX_MS:
        raise InvalidInput(f"invalid {flag} {value!r}: after 9999-12-31T23:59:59.999Z")
    return ms


def parse_time(value: int | str | None, flag: str, *, round_up: bool = False) -> int | None:
    """Epoch ms from an integer or text (times.parse_time_ms); `round_up` rounds sub-millisecond text
    up (for a begin). A search bound must lie in years 1970-9999."""
    if value is None:
        return None
    return _check_range(parse_time_ms(value, flag, round_up=round_up), flag, value)


def parse_range(begin: int | str | None, end: int | str | None) -> TimeRange:
    """The inclusive search range from --begin/--end; InvalidInput naming the flag."""
    begin_ms = parse_time(begin, "--begin", round_up=True)
    end_ms = parse_time(end, "--end")
    if begin_ms is not None and end_ms is not None and begin_ms > end_ms:
        raise InvalidInput(f"invalid --begin {begin!r}: it is after --end {end!r}")
    return TimeRange(begin_ms, end_ms)


__all__ = ["MAX_MS", "MIN_MS", "TimeRange", "parse_range", "parse_time"]
