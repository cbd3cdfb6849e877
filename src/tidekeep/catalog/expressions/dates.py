"""Date values in expressions: absolute ISO-8601, epoch milliseconds, and relative dates like
Stroom's DateExpressionParser (`now()-7d`, `day()+2h`, `month()-1M`).

Pure: `now_ms` always comes in as an argument. Calendar units (months `M`, years `y`) clamp to the
last valid day of the month, as Java's LocalDateTime.minusMonths does; every other unit is a fixed
number of milliseconds. All times are UTC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dateutil.relativedelta import relativedelta

from ...errors import InvalidInput

MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z

BASES = ("now", "second", "minute", "hour", "day", "week", "month", "year")
UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}
CALENDAR_UNITS = ("M", "y")

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTEGER = re.compile(r"-?[0-9]+")
_RELATIVE = re.compile(r"\s*(?P<base>[A-Za-z]+)\s*\(\s*\)(?P<offsets>(?:\s*[+-]\s*[0-9]+\s*[smhdwMy])*)\s*")
_OFFSET = re.compile(r"\s*(?P<sign>[+-])\s*(?P<amount>[0-9]+)\s*(?P<unit>[smhdwMy])")
# the bare form the text syntax accepts without quotes (no surrounding whitespace)
RELATIVE_TOKEN = re.compile(r"[A-Za-z]+\(\)(?:\s*[+-]\s*[0-9]+\s*[smhdwMy])*")


@dataclass(frozen=True)
class DateSpec:
    """A parsed date value: either an absolute time or a base unit plus offsets."""

    absolute_ms: int | None = None
    base: str | None = None
    offsets: tuple[tuple[int, str], ...] = ()  # (signed amount, unit)


def parse_date(text: str) -> DateSpec:
    """Check a date value's syntax (no `now` needed). InvalidInput says what is wrong."""
    if not isinstance(text, str):
        raise InvalidInput(f"invalid date {text!r}: expected text")
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped):
        ms = int(stripped)
        _check_range(ms, text)
        return DateSpec(absolute_ms=ms)
    relative = _RELATIVE.fullmatch(text)
    if relative:
        base = relative.group("base").lower()
        if base not in BASES:
            known = ", ".join(f"{b}()" for b in BASES)
            raise InvalidInput(f"invalid date {text!r}: unknown function {relative.group('base')}() (known: {known})")
        offsets = tuple(
            (int(m.group("amount")) * (1 if m.group("sign") == "+" else -1), m.group("unit"))
            for m in _OFFSET.finditer(relative.group("offsets"))
        )
        return DateSpec(base=base, offsets=offsets)
    return DateSpec(absolute_ms=_parse_iso(text))


def resolve_date(text: str, now_ms: int) -> int:
    """A date value as ms since the epoch, relative ones counted from `now_ms`."""
    spec = parse_date(text)
    if spec.absolute_ms is not None:
        return spec.absolute_ms
    assert spec.base is not None
    moment = _start_of(spec.base, _to_datetime(now_ms, text))
    try:
        for amount, unit in spec.offsets:
            if unit == "M":
                moment = moment + relativedelta(months=amount)
            elif unit == "y":
                moment = moment + relativedelta(years=amount)
            else:
                moment = moment + timedelta(milliseconds=amount * UNIT_MS[unit])
    except (OverflowError, ValueError):
        raise InvalidInput(f"invalid date {text!r}: out of range (years 1 to 9999)") from None
    ms = _to_ms(moment)
    _check_range(ms, text)
    return ms


def _parse_iso(text: str) -> int:
    stripped = text.strip()
    candidate = stripped[:-1] + "+00:00" if stripped[-1:] in ("Z", "z") else stripped
    # fromisoformat also takes odd forms ("2024-01-01 00:00"); all of them are unambiguous ISO-8601
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError:
        raise InvalidInput(
            f"invalid date {text!r}: expected ISO-8601 (2024-01-01T00:00:00Z), epoch ms,"
            " or a relative date like now()-7d"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)  # zone-less dates are UTC
    try:
        ms = _to_ms(moment)
    except OverflowError:
        raise InvalidInput(f"invalid date {text!r}: out of range (years 1 to 9999)") from None
    _check_range(ms, text)
    return ms


def _start_of(base: str, moment: datetime) -> datetime:
    if base == "now":
        return moment
    if base == "second":
        return moment.replace(microsecond=0)
    if base == "minute":
        return moment.replace(second=0, microsecond=0)
    if base == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.replace(hour=0, minute=0, second=0, microsecond=0)
    if base == "day":
        return day
    if base == "week":  # weeks start on Monday
        return day - timedelta(days=day.weekday())
    if base == "month":
        return day.replace(day=1)
    return day.replace(month=1, day=1)


def _to_datetime(ms: int, text: str) -> datetime:
    _check_range(ms, text)
    return _EPOCH + timedelta(milliseconds=ms)


def _to_ms(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _check_range(ms: int, text: str) -> None:
    if not MIN_MS <= ms <= MAX_MS:
        raise InvalidInput(f"invalid date {text!r}: out of range (years 1 to 9999)")


__all__ = ["MAX_MS", "MIN_MS", "RELATIVE_TOKEN", "DateSpec", "parse_date", "resolve_date"]
