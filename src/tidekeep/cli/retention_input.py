"""The options the retention commands parse alike (`retention preview --at`, `stream policy
--size/--time`, `stream create --retention-*`, `retention simulate`): a policy's limits and a
decision time. Light imports: the command tree is built for `tidekeep --help`."""

from __future__ import annotations

from ..errors import InvalidInput
from ..streams.config import RetentionKind, RetentionPolicy
from ..times import parse_time_ms
from ..units import parse_duration_ms


def parse_limits(text: str, kind: RetentionKind) -> RetentionPolicy:
    """"MIN" or "MIN:MAX" as a policy of `kind`, e.g. "20GB:100GB" or "7d:30d"."""
    low, sep, high = text.partition(":")
    if not low.strip() or (sep and not high.strip()):
        raise InvalidInput(f"invalid retention limits {text!r}: expected MIN or MIN:MAX, like 20GB:100GB or 7d")
    if kind is RetentionKind.SIZE:
        return RetentionPolicy.by_size(low.strip(), high.strip() if sep else None)
    return RetentionPolicy.by_time(low.strip(), high.strip() if sep else None)


def policy_from_options(size: str | None, time: str | None, none: bool = False) -> RetentionPolicy | None:
    """At most one of the size, time and none options; None means no policy."""
    given = [flag for flag, value in (("size", size), ("time", time), ("none", none)) if value]
    if len(given) > 1:
        raise InvalidInput(f"give only one retention option, not {' and '.join(given)}")
    if size is not None:
        return parse_limits(size, RetentionKind.SIZE)
    if time is not None:
        return parse_limits(time, RetentionKind.TIME)
    return None


def parse_at(text: str, now_ms: int) -> int:
    """--at: "+DURATION" from now (e.g. +2h), or a time (times.parse_time_ms: epoch ms or ISO-8601)."""
    stripped = text.strip()
    if stripped.startswith("+"):
        return now_ms + parse_duration_ms(stripped[1:])
    return parse_time_ms(stripped, "--at")


__all__ = ["parse_at", "parse_limits", "policy_from_options"]
