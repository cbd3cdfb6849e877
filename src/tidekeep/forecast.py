"""What-if retention: the one document of a retention forecast, whichever family it is about
(docs/retention.md#what-if-retention). Pure: the families compute the deletions, this module only
gives them days and a shape.

A forecast covers days 0..N after `now`. Day 0 is what a run at `now` would delete; day d (1..N) is
what becomes deletable during (now + (d−1)·24h, now + d·24h]. Each line is one day and one rule (or
case) with its bytes and items — events of a stream, archives of a dataset, records of the catalog
— and, apart, what a hold keeps that would otherwise go. `by_day` has every day, zeros included
(a chart's bars), and `totals` the sums.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInput

DAY_MS = 86_400_000
DEFAULT_DAYS = 7
MAX_DAYS = 366  # a year and a day: every forecast's horizon, whichever family


class Family(enum.StrEnum):
    STREAMS = "streams"
    ARCHIVES = "archives"
    CATALOG = "catalog"


class Unit(enum.StrEnum):
    """What a forecast counts besides bytes."""

    EVENTS = "events"
    ARCHIVES = "archives"
    RECORDS = "records"


def check_days(days: object, what: str = "days") -> int:
    """The horizon: a whole number of days, 0..MAX_DAYS (0: only what a run now would delete);
    `what` names it in the error (the CLI's "--days")."""
    if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_DAYS:
        raise InvalidInput(f"invalid {what} {days!r}: expected a whole number of days from 0 to {MAX_DAYS}")
    return days


def day_end(now_ms: int, day: int) -> int:
    """The last moment of `day`: now + day·24h (day 0 is `now` itself)."""
    return now_ms + day * DAY_MS


def day_start(now_ms: int, day: int) -> int:
    """Where `day` begins, exclusive for days 1..N: now + (day−1)·24h; day 0 begins and ends at now."""
    return now_ms if day == 0 else now_ms + (day - 1) * DAY_MS


def day_of(now_ms: int, time_ms: int) -> int:
    """The day a moment at or after `now` falls in: 0 for `now`, d for (now + (d−1)·24h, now + d·24h]."""
    if time_ms < now_ms:
        raise ValueError(f"time {time_ms} is before now {now_ms}")
    return -(-(time_ms - now_ms) // DAY_MS)


def _sum(values: Iterable[int | None]) -> int | None:
    """Counts add up unless one is unknown (None): then the sum is unknown too."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


@dataclass(frozen=True)
class ForecastLine:
    """One day and one rule (or case): what goes, and what a hold keeps that would otherwise go.
    `items` is None where the family cannot count them without reading data (docs/retention.md)."""

    day: int
    start_ms: int
    end_ms: int
    unit: Unit
    rule: str
    case: str | None = None
    name: str | None = None  # a rule's name (catalog), what a held deletion would be (streams)
    bytes: int = 0
    items: int | None = 0
    held_bytes: int | None = 0  # None: not known (the catalog counts held records, not their bytes)
    held_items: int | None = 0
    ids: tuple[str, ...] = ()  # the archives, for a dataset

    def to_dict(self) -> dict[str, Any]:
        return {"day": self.day, "start_ms": self.start_ms, "end_ms": self.end_ms, "unit": self.unit.value,
                "rule": self.rule, "case": self.case, "name": self.name, "bytes": self.bytes, "items": self.items,
                "held_bytes": self.held_bytes, "held_items": self.held_items, "ids": list(self.ids)}


@dataclass
class Tally:
    """Adds deletions up into lines, one per (day, rule, case, name), in the order first seen."""

    now_ms: int
    unit: Unit
    _lines: dict[tuple[int, str, str | None, str | None], ForecastLine] = field(default_factory=dict, init=False,
                                                                               repr=False)

    def add(self, day: int, rule: str, *, case: str | None = None, name: str | None = None, bytes: int = 0,
            items: int | None = 0, held_bytes: int | None = 0, held_items: int | None = 0,
            ids: Iterable[str] = ()) -> None:
        key = (day, rule, case, name)
        old = self._lines.get(key) or ForecastLine(day, day_start(self.now_ms, day), day_end(self.now_ms, day),
                                                   self.unit, rule, case, name)
        self._lines[key] = ForecastLine(
            day, old.start_ms, old.end_ms, self.unit, rule, case, name, old.bytes + bytes,
            _sum((old.items, items)), _sum((old.held_bytes, held_bytes)), _sum((old.held_items, held_items)),
            old.ids + tuple(ids))

    def lines(self) -> tuple[ForecastLine, ...]:
        """By day, then in the order the rules were first seen that day."""
        return tuple(sorted(self._lines.values(), key=lambda line: line.day))


@dataclass(frozen=True)
class Forecast:
    """A forecast of one target (a stream, a dataset, the catalog) under one proposal (a policy, a
    retention period, a rule set; the current one when none is proposed). `details`: what the
    family adds about `now` (a stream's decision, a dataset's safe expiry)."""

    family: Family
    target: str
    now_ms: int
    days: int
    unit: Unit
    proposal: Mapping[str, Any]
    lines: tuple[ForecastLine, ...]
    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)

    def by_day(self) -> list[dict[str, Any]]:
        """Every day 0..N with its sums (zeros for a day that deletes nothing)."""
        days = []
        for day in range(self.days + 1):
            lines = [line for line in self.lines if line.day == day]
            days.append({"day": day, "start_ms": day_start(self.now_ms, day), "end_ms": day_end(self.now_ms, day),
                         **_sums(lines)})
        return days

    def totals(self) -> dict[str, Any]:
        return _sums(self.lines)

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family.value, "target": self.target, "now_ms": self.now_ms, "days": self.days,
                "unit": self.unit.value, "proposal": dict(self.proposal),
                "lines": [line.to_dict() for line in self.lines], "by_day": self.by_day(), "totals": self.totals(),
                "notes": list(self.notes), "details": dict(self.details)}


def _sums(lines: Iterable[ForecastLine]) -> dict[str, Any]:
    lines = list(lines)
    return {"bytes": sum(line.bytes for line in lines), "items": _sum(line.items for line in lines),
            "held_bytes": _sum(line.held_bytes for line in lines),
            "held_items": _sum(line.held_items for line in lines)}


__all__ = ["DAY_MS", "DEFAULT_DAYS", "MAX_DAYS", "Family", "Forecast", "ForecastLine", "Tally", "Unit", "check_days",
           "day_end", "day_of", "day_start"]
