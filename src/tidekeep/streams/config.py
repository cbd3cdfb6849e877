"""Stream configuration values: StreamConfig and RetentionPolicy (validated on construction)."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, cast

from ..errors import InvalidInput
from ..units import format_duration, format_size, parse_duration_ms, parse_size_bytes

DEFAULT_TIMESTAMP_AGGREGATION_TIMEOUT_MS = 60_000


class RetentionKind(enum.Enum):
    TIME = "time"
    SIZE = "size"


class RetentionType(enum.StrEnum):
    """How a reader group holds its streams back (docs/reader-groups.md): NONE does not; MANUAL groups
    acknowledge cuts by hand; AUTOMATIC groups at each completed checkpoint. Stored by value."""

    NONE = "NONE"
    MANUAL_RELEASE_AT_USER_STREAMCUT = "MANUAL_RELEASE_AT_USER_STREAMCUT"
    AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT = "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"

    @classmethod
    def named(cls, text: str) -> RetentionType:
        """The type named `text` (any case); an unknown name is refused with the valid ones."""
        try:
            return cls[text.upper()]
        except KeyError:
            raise InvalidInput(f"invalid retention type {text!r}: use one of "
                               f"{', '.join(r.name for r in cls)}") from None


@dataclass(frozen=True)
class RetentionPolicy:
    """Keep at least `min` and at most `max` (None: no max) of a stream, by time (ms) or size (bytes).

    min may be 0: with subscribers the stream then acts as a message queue that keeps only what some
    subscriber has not consumed (docs/retention.md); without subscribers min 0 lets size/time retention
    truncate up to the newest recorded cut (Cmin is the newest record, which retains 0 or more)."""

    kind: RetentionKind
    min: int
    max: int | None = None

    def __post_init__(self) -> None:
        if self.min < 0:
            raise InvalidInput(f"invalid retention policy: min must not be negative, got {self.min}")
        if self.max is not None and self.max < self.min:
            fmt = format_duration if self.kind is RetentionKind.TIME else format_size
            raise InvalidInput(f"invalid retention policy: max {fmt(self.max)} is less than min {fmt(self.min)}")

    @staticmethod
    def by_time(min: str | int | timedelta, max: str | int | timedelta | None = None) -> RetentionPolicy:
        return RetentionPolicy(RetentionKind.TIME, parse_duration_ms(min),
                               None if max is None else parse_duration_ms(max))

    @staticmethod
    def by_size(min: str | int, max: str | int | None = None) -> RetentionPolicy:
        return RetentionPolicy(RetentionKind.SIZE, parse_size_bytes(min),
                               None if max is None else parse_size_bytes(max))

    def describe(self) -> str:
        fmt = format_duration if self.kind is RetentionKind.TIME else format_size
        what = "time" if self.kind is RetentionKind.TIME else "size"
        text = f"by {what}: keep at least {fmt(self.min)}"
        return text + (f" and at most {fmt(self.max)}" if self.max is not None else " (no maximum)")

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind.value, "min": self.min, "max": self.max}

    @staticmethod
    def from_dict(data: dict[str, Any]) -> RetentionPolicy:
        return RetentionPolicy(RetentionKind(data["kind"]), int(data["min"]),
                               None if data.get("max") is None else int(data["max"]))


@dataclass(frozen=True)
class StreamConfig:
    segments: int = 1
    retention: RetentionPolicy | None = None
    timestamp_aggregation_timeout: int | str | timedelta = field(default=DEFAULT_TIMESTAMP_AGGREGATION_TIMEOUT_MS)

    def __post_init__(self) -> None:
        if not isinstance(self.segments, int) or isinstance(self.segments, bool) or self.segments < 1:
            raise InvalidInput(f"invalid segment count {self.segments!r}: must be an integer >= 1")
        if self.segments > 10_000:
            raise InvalidInput(f"invalid segment count {self.segments}: at most 10000")
        if self.retention is not None and not isinstance(self.retention, RetentionPolicy):
            raise InvalidInput(f"invalid retention {self.retention!r}: use RetentionPolicy.by_time/by_size")
        try:
            timeout = parse_duration_ms(self.timestamp_aggregation_timeout)
        except InvalidInput as exc:
            raise InvalidInput(f"invalid timestamp_aggregation_timeout: {exc}") from None
        object.__setattr__(self, "timestamp_aggregation_timeout", timeout)

    @property
    def timestamp_aggregation_timeout_ms(self) -> int:
        return cast(int, self.timestamp_aggregation_timeout)  # normalised to ms in __post_init__

    def to_json(self) -> str:
        return json.dumps({
            "segments": self.segments,
            "retention": None if self.retention is None else self.retention.to_dict(),
            "timestamp_aggregation_timeout_ms": self.timestamp_aggregation_timeout_ms,
        })

    @staticmethod
    def from_json(text: str) -> StreamConfig:
        data = json.loads(text)
        retention = data.get("retention")
        return StreamConfig(
            segments=data["segments"],
            retention=None if retention is None else RetentionPolicy.from_dict(retention),
            timestamp_aggregation_timeout=data["timestamp_aggregation_timeout_ms"],
        )
