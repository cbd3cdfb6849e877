"""One parser for points in time (tidekeep.times): epoch milliseconds or ISO-8601, used by every CLI
time option. Properties against an oracle built from datetime, and the typed error for bad input."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.cli.retention import parse_at
from tidekeep.errors import InvalidInput
from tidekeep.times import INT64_MAX, format_time_ms, parse_time_ms

MAX_CALENDAR_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
calendar_ms = st.integers(0, MAX_CALENDAR_MS)
offsets = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda minutes: timezone(timedelta(minutes=minutes)))


@settings(max_examples=500, deadline=None)
@given(calendar_ms)
def test_iso_of_format_round_trips(ms: int) -> None:
    text = format_time_ms(ms)
    assert text.endswith("Z")
    assert parse_time_ms(text, "--at") == ms == parse_time_ms(text, "--at", round_up=True)
    assert parse_time_ms(str(ms), "--at") == ms  # epoch milliseconds as given


@settings(max_examples=500, deadline=None)
@given(calendar_ms, offsets, st.booleans())
def test_any_zone_means_the_same_instant(ms: int, zone: timezone, naive: bool) -> None:
    moment = EPOCH + timedelta(milliseconds=ms)
    if moment.year < 2 or moment.year > 9998:
        return  # an offset would move it out of datetime's range: not a time anyone writes
    local = moment.astimezone(zone)
    text = local.replace(tzinfo=None).isoformat() if naive else local.isoformat()
    # oracle: a naive time is read as UTC; an aware one as the instant it names
    expected = ms if not naive else (local.replace(tzinfo=UTC) - EPOCH) // timedelta(milliseconds=1)
    if expected < 0:  # a naive wall time west of Greenwich on 1970-01-01, read as UTC
        with pytest.raises(InvalidInput, match="before 1970"):
            parse_time_ms(text, "--at")
    else:
        assert parse_time_ms(text, "--at") == expected


@settings(max_examples=300, deadline=None)
@given(calendar_ms)
def test_retention_at_uses_the_same_exact_parser(ms: int) -> None:
    # --at used float seconds and lost a millisecond on some inputs
    assert parse_at(format_time_ms(ms), now_ms=0) == ms
    assert parse_at("+1s", now_ms=ms) == ms + 1_000


@pytest.mark.parametrize(("text", "expected"), [
    ("2024-06-01T12:00:00Z", 1_717_243_200_000),
    ("2024-06-01T12:00:00", 1_717_243_200_000),  # naive: UTC
    ("2024-06-01T14:00:00.250+02:00", 1_717_243_200_250),
    ("2024-06-01", 1_717_200_000_000),
    (" 1717243200000 ", 1_717_243_200_000),
    (str(INT64_MAX), INT64_MAX),  # epoch ms beyond the calendar: a writer's own time may be that large
    (0, 0),
])
def test_accepted_forms(text: str | int, expected: int) -> None:
    assert parse_time_ms(text, "time") == expected


@pytest.mark.parametrize(("value", "message"), [
    ("yesterday", "expected epoch milliseconds or an ISO-8601 time like 2024-06-01T12:00:00Z"),
    ("2024-02-30", "expected epoch milliseconds or an ISO-8601 time"),
    ("", "expected epoch milliseconds or an ISO-8601 time"),
    ("-1", "before 1970-01-01T00:00:00Z"),
    ("1969-12-31T23:59:59Z", "before 1970-01-01T00:00:00Z"),
    (str(INT64_MAX + 1), "outside the 64-bit range"),
    ("9" * 5000, "outside the 64-bit range"),  # int() itself refuses this many digits
    ("-" + "9" * 5000, "outside the 64-bit range"),
    (1.5, "expected epoch milliseconds"),
    (True, "expected epoch milliseconds"),
])
def test_bad_times_are_one_typed_line_naming_the_option(value: object, message: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_time_ms(value, "--at")  # type: ignore[arg-type]
    assert str(info.value).startswith("invalid --at ") and "\n" not in str(info.value)
    assert message in str(info.value)
