"""Points in time given by a user: epoch milliseconds or ISO-8601 text, parsed one way everywhere.

Every CLI option and argument that takes a point in time (`watermark note TIME`, `retention preview
--at`, `archives search --begin/--end`) goes through `parse_time_ms`, so they all accept the same
forms (docs/cli.md, "Times"):

- an integer: milliseconds since 1970-01-01T00:00:00Z, e.g. 1717243200000;
- ISO-8601 text: `2024-06-01T12:00:00Z`, `2024-06-01T14:00:00.250+02:00`, `2024-06-01 12:00`,
  `2024-06-01`. Text without a zone is UTC.

Sub-millisecond digits round down, or up with `round_up` (the begin of an inclusive range). The
conversion is exact integer arithmetic (no float seconds), so `parse_time_ms(format_time_ms(ms))`
is `ms` for every millisecond. Bad input is one InvalidInput line naming the option.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from .errors import InvalidInput

INT64_MAX = 2**63 - 1  # the metadata store's time columns are 64-bit
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTEGER = re.compile(r"[+-]?\d+")
EXAMPLE = "2024-06-01T12:00:00Z"


def parse_time_ms(value: int | str, what: str, *, round_up: bool = False) -> int:
    """Epoch milliseconds (>= 0) from an integer, integer text or ISO-8601 text; `what` names the
    option in the error (e.g. "--begin")."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInput(f"invalid {what} {value!r}: expected epoch milliseconds or an ISO-8601 time like {EXAMPLE}")
    text = str(value).strip()
    ms = _integer_ms(text, what, value) if _INTEGER.fullmatch(text) else _iso_ms(text, what, value, round_up)
    if ms < 0:
        raise InvalidInput(f"invalid {what} {value!r}: before 1970-01-01T00:00:00Z")
    if ms > INT64_MAX:
        raise InvalidInput(f"invalid {what} {value!r}: outside the 64-bit range of milliseconds")
    return ms


def _integer_ms(text: str, what: str, value: object) -> int:
    # longer than any 64-bit number: refused before int(), which raises on over 4300 digits
    if len(text.lstrip("+-").lstrip("0")) > 19:
        raise InvalidInput(f"invalid {what} {value!r}: outside the 64-bit range of milliseconds")
    return int(text)


def _iso_ms(text: str, what: str, value: object, round_up: bool) -> int:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"invalid {what} {value!r}: expected epoch milliseconds or an ISO-8601 time "
                           f"like {EXAMPLE} (no zone: UTC)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        micros = (parsed - _EPOCH) // timedelta(microseconds=1)
    except OverflowError:  # an offset that moves year 1 or 9999 out of datetime's range
        raise InvalidInput(f"invalid {what} {value!r}: out of range") from None
    return -((-micros) // 1000) if round_up else micros // 1000


def format_time_ms(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, e.g. 2024-06-01T12:00:00.250Z (the form the CLI prints)."""
    return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


__all__ = ["INT64_MAX", "format_time_ms", "parse_time_ms"]
