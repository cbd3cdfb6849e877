"""Parsing of durations ("90s", "7d") into milliseconds and sizes ("20GB", "512MiB") into bytes, and
their printed forms.

Plain numbers are milliseconds for durations and bytes for sizes. Negative, non-finite, empty or
unknown-unit values are rejected with InvalidInput naming the value. One convention for sizes
(docs/configuration.md): KB, MB, GB, TB, PB are powers of 1000 and KiB, MiB, GiB, TiB, PiB powers
of 1024, in parsing and printing alike.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import overload

from .errors import InvalidInput

_INT64_MAX = 2**63 - 1

DURATION_UNITS_MS: dict[str, int] = {
    "ms": 1,
    "s": 1_000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 7 * 86_400_000,
}

SIZE_UNITS: dict[str, int] = {
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "pb": 1000**5,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "pib": 1024**5,
}

_QUANTITY = re.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z]*)\s*$", re.ASCII)


def _from_number(value: int | float, what: str) -> int:
    if isinstance(value, bool):
        raise InvalidInput(f"invalid {what} {value!r}: expected a number or a string like {_example(what)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"invalid {what} {value!r}: must be finite")
    if value < 0:
        raise InvalidInput(f"invalid {what} {value!r}: must not be negative")
    result = int(value)
    if result != value:
        raise InvalidInput(f"invalid {what} {value!r}: must be a whole number")
    if result > _INT64_MAX:
        raise InvalidInput(f"invalid {what} {value!r}: too large")
    return result


def _example(what: str) -> str:
    return '"90s" or "7d"' if what == "duration" else '"20GB" or "512MiB"'


def _parse(text: str, units: dict[str, int], what: str, default_unit: str) -> int:
    match = _QUANTITY.match(text)
    if not match:
        raise InvalidInput(f"invalid {what} {text!r}: expected a number and a unit, like {_example(what)}")
    unit = match.group("unit").lower() or default_unit
    if unit not in units:
        known = ", ".join(units)
        raise InvalidInput(f"invalid {what} {text!r}: unknown unit {match.group('unit')!r} (known: {known})")
    try:
        amount = Decimal(match.group("num")) * units[unit]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only plain decimals
        raise InvalidInput(f"invalid {what} {text!r}") from exc
    if amount != amount.to_integral_value():
        raise InvalidInput(f"invalid {what} {text!r}: not a whole number of {'ms' if what == 'duration' else 'bytes'}")
    result = int(amount)
    if result > _INT64_MAX:
        raise InvalidInput(f"invalid {what} {text!r}: too large")
    return result


def parse_duration_ms(value: str | int | float | timedelta) -> int:
    """A duration in milliseconds from "90s", "7d", "1.5h", a timedelta, or a number of ms."""
    if isinstance(value, timedelta):
        if value < timedelta(0):
            raise InvalidInput(f"invalid duration {value}: must not be negative")
        return _from_number(value // timedelta(milliseconds=1), "duration")
    if isinstance(value, (int, float)):
        return _from_number(value, "duration")
    if isinstance(value, str):
        return _parse(value, DURATION_UNITS_MS, "duration", "ms")
    raise InvalidInput(f"invalid duration {value!r}: expected a string like \"90s\" or a number of ms")


def parse_size_bytes(value: str | int | float) -> int:
    """A size in bytes from "20GB" (decimal), "512MiB" (binary), or a number of bytes."""
    if isinstance(value, (int, float)):
        return _from_number(value, "size")
    if isinstance(value, str):
        return _parse(value, SIZE_UNITS, "size", "b")
    raise InvalidInput(f"invalid size {value!r}: expected a string like \"20GB\" or a number of bytes")


# largest first; a decimal and a binary unit never have the same size
_PRINTED_SIZE_UNITS = sorted(((size, name) for name, size in (
    ("KB", 1000), ("MB", 1000**2), ("GB", 1000**3), ("TB", 1000**4), ("PB", 1000**5),
    ("KiB", 1024), ("MiB", 1024**2), ("GiB", 1024**3), ("TiB", 1024**4), ("PiB", 1024**5))), reverse=True)


def format_size(n: int) -> str:
    """An exact size, as settings and retention policies are shown: the count in the largest unit
    (decimal or binary) that divides it, so "2KB" prints as "2 KB", "512MiB" as "512 MiB" and 1500
    as "1500 B"; parse_size_bytes reads it back as the same number of bytes."""
    for size, name in _PRINTED_SIZE_UNITS:
        if n >= size and n % size == 0:
            return f"{n // size} {name}"
    return f"{n} B"


def human_size(n: int) -> str:
    """A measured byte count for people (table cells, summaries): below 1 KiB the exact count, above
    it one decimal in binary units ("1.9 KiB", "12.0 MiB"); --json output carries the exact count."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(value) < 1024 or unit == "PiB":
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def parse_minutes(value: str | int) -> int:
    """A whole number of minutes above zero, as CLP's minute settings take it: a plain number is
    minutes ("60", 60); a duration with a unit ("30d", "12h", "90m") is converted and must be a
    whole number of minutes."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInput(f"expected a number of minutes or a duration like \"30d\", got {value!r}")
    if isinstance(value, int) or value.strip().lstrip("-").isdigit():
        minutes = int(value)
    else:
        ms = parse_duration_ms(value)
        if ms % 60_000:
            raise InvalidInput(f"invalid duration {value!r}: not a whole number of minutes")
        minutes = ms // 60_000
    if minutes <= 0:
        raise InvalidInput(f"must be a whole number of minutes above zero, got {value!r}")
    return minutes


def format_duration(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@overload
def iso_utc(ms: int) -> str: ...


@overload
def iso_utc(ms: None) -> None: ...


@overload
def iso_utc(ms: int | None) -> str | None: ...


def iso_utc(ms: int | None) -> str | None:
    """Milliseconds since the epoch as ISO-8601 UTC with milliseconds, e.g. 2024-05-01T12:00:00.123Z.
    Built from a timedelta, not a float division, so every millisecond survives exactly."""
    if ms is None:
        return None
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
