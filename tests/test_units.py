"""Durations ("90s", "7d") to milliseconds and sizes ("20GB", "512MiB") to bytes."""

from __future__ import annotations

import math
from datetime import timedelta
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.errors import InvalidInput
from tidekeep.units import (
    format_duration,
    format_size,
    human_size,
    parse_duration_ms,
    parse_minutes,
    parse_size_bytes,
)

INT64_MAX = 2**63 - 1

# written out independently of units.py's tables
DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000,
                  "w": 604_800_000}
SIZE_UNITS = {"b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "pb": 10**15,
              "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "pib": 2**50}
PARSERS = {"duration": parse_duration_ms, "size": parse_size_bytes}


@pytest.mark.parametrize(("text", "ms"), [
    ("90s", 90_000), ("7d", 604_800_000), ("1.5h", 5_400_000), ("250ms", 250), ("5m", 300_000),
    ("5min", 300_000), ("2w", 1_209_600_000), ("0s", 0), ("1500", 1500), ("  30 s ", 30_000), ("1H", 3_600_000),
    ("0.5s", 500), ("0.001s", 1),
])
def test_duration_strings(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize(("text", "size"), [
    ("20GB", 20_000_000_000), ("512MiB", 536_870_912), ("1KiB", 1024), ("1kb", 1000), ("1.5KiB", 1536),
    ("100", 100), ("7b", 7), ("2 TB", 2 * 10**12), ("1PiB", 2**50), ("0GB", 0), ("1.5GB", 1_500_000_000),
])
def test_size_strings(text: str, size: int) -> None:
    assert parse_size_bytes(text) == size


def test_numbers_and_timedeltas() -> None:
    assert parse_duration_ms(1500) == 1500
    assert parse_duration_ms(2.0) == 2
    assert parse_duration_ms(timedelta(minutes=2, milliseconds=5)) == 120_005
    assert parse_duration_ms(timedelta(0)) == 0
    assert parse_duration_ms(INT64_MAX) == INT64_MAX
    assert parse_size_bytes(4096) == 4096
    assert parse_size_bytes(1e9) == 10**9
    assert parse_size_bytes(0) == 0


@settings(max_examples=300)
@given(st.integers(0, 10**6), st.sampled_from(sorted(DURATION_UNITS)), st.sampled_from(["", " ", "  "]),
       st.sampled_from([str.lower, str.upper, str.title]))
def test_duration_round_trip(n: int, unit: str, space: str, case) -> None:  # type: ignore[no-untyped-def]
    assert parse_duration_ms(f"{n}{space}{case(unit)}") == n * DURATION_UNITS[unit]


@settings(max_examples=300)
@given(st.integers(0, 10**6), st.sampled_from(sorted(SIZE_UNITS)), st.sampled_from([str.lower, str.upper]))
def test_size_round_trip(n: int, unit: str, case) -> None:  # type: ignore[no-untyped-def]
    text = f"{n}{case(unit)}"
    if n * SIZE_UNITS[unit] > INT64_MAX:
        with pytest.raises(InvalidInput, match="too large"):
            parse_size_bytes(text)
    else:
        assert parse_size_bytes(text) == n * SIZE_UNITS[unit]


@settings(max_examples=300)
@given(st.sampled_from(["duration", "size"]), st.integers(0, 10**9), st.integers(0, 999))
def test_decimal_fractions_are_exact(what: str, whole: int, thousandths: int) -> None:
    units = DURATION_UNITS if what == "duration" else SIZE_UNITS
    unit = max(units, key=units.get)  # type: ignore[arg-type]
    text = f"{whole}.{thousandths:03d}{unit}"
    expected = Decimal(f"{whole}.{thousandths:03d}") * units[unit]
    if expected != expected.to_integral_value():
        with pytest.raises(InvalidInput, match="not a whole number"):
            PARSERS[what](text)
    elif expected > INT64_MAX:
        with pytest.raises(InvalidInput, match="too large"):
            PARSERS[what](text)
    else:
        assert PARSERS[what](text) == int(expected)


@settings(max_examples=200)
@given(st.integers(0, INT64_MAX))
def test_plain_integers_and_their_strings_are_taken_as_base_units(n: int) -> None:
    assert parse_duration_ms(n) == n == parse_duration_ms(str(n))
    assert parse_size_bytes(n) == n == parse_size_bytes(str(n))


def rejected(what: str, value: object) -> str:
    with pytest.raises(InvalidInput) as exc:
        PARSERS[what](value)  # type: ignore[operator]
    message = str(exc.value)
    assert "\n" not in message
    assert message.startswith(f"invalid {what} ")
    return message


GARBAGE = ["", "   ", "abc", "s", "-5s", "-1", "5 parsecs", "1e3", "1,000", "1..5s", ".5s", "5.s", "nan", "inf",
           "NaN", "-inf", "5s5", "5 s s", "0x10", "+5s", "5_000", "½s", "5\x00s", "٣s", "３MB"]


@pytest.mark.parametrize("what", ["duration", "size"])
@pytest.mark.parametrize("text", GARBAGE)
def test_garbage_strings_are_rejected_naming_the_value(what: str, text: str) -> None:
    # messages are one line: runs of whitespace, also inside the quoted value, collapse to one space
    assert " ".join(repr(text).split()) in rejected(what, text)


@pytest.mark.parametrize(("what", "text", "reason"), [
    ("duration", "5 fortnights", "unknown unit 'fortnights'"),
    ("duration", "5GB", "unknown unit 'GB'"),
    ("size", "5s", "unknown unit 's'"),
    ("size", "5 bytes", "unknown unit 'bytes'"),
    ("duration", "0.5ms", "not a whole number of ms"),
    ("size", "1.5b", "not a whole number of bytes"),
    ("size", "0.1KiB", "not a whole number of bytes"),
    ("duration", "9223372036854775808", "too large"),
    ("duration", "10000000000000d", "too large"),
    ("size", "9223372036854775808", "too large"),
    ("size", "8.0001KiB", "not a whole number of bytes"),
    ("size", "100000PiB", "too large"),
    ("size", "9" * 5000 + "GB", "too large"),
])
def test_units_fractions_and_overflow(what: str, text: str, reason: str) -> None:
    assert reason in rejected(what, text)


@pytest.mark.parametrize("what", ["duration", "size"])
@pytest.mark.parametrize(("value", "reason"), [
    (-1, "must not be negative"), (-0.5, "must not be negative"), (1.5, "must be a whole number"),
    (math.nan, "must be finite"), (math.inf, "must be finite"), (-math.inf, "must be finite"),
    (True, "expected a number"), (False, "expected a number"), (2**63, "too large"), (1e300, "too large"),
    (None, "expected a string"), ([5], "expected a string"), (b"5s", "expected a string"),
])
def test_bad_non_strings_are_rejected(what: str, value: object, reason: str) -> None:
    message = rejected(what, value)
    assert reason in message
    assert repr(value) in message


def test_timedelta_is_a_duration_only() -> None:
    message = rejected("duration", timedelta(seconds=-1))
    assert "must not be negative" in message and str(timedelta(seconds=-1)) in message
    assert "expected a string" in rejected("size", timedelta(seconds=1))


@settings(max_examples=500)
@given(st.one_of(
    st.text(),
    st.text(alphabet="0123456789. -+eEsmhdwbkKMGTPiIBn", max_size=12),
    st.builds(lambda n, u: f"{n}{u}", st.floats(allow_nan=True, allow_infinity=True) | st.integers(), st.text(
        alphabet="abdeghikmnsw BKMGTPi", max_size=4)),
))
def test_fuzz_gives_a_non_negative_int_or_invalid_input(text: str) -> None:
    for parse in (parse_duration_ms, parse_size_bytes):
        try:
            result = parse(text)
        except InvalidInput as exc:
            assert "\n" not in str(exc)
            continue
        assert type(result) is int and 0 <= result <= INT64_MAX


@settings(max_examples=300)
@given(st.one_of(st.floats(), st.integers(-(2**70), 2**70), st.timedeltas()))
def test_fuzz_numbers_give_a_non_negative_int_or_invalid_input(value: float | int | timedelta) -> None:
    parsers = [parse_duration_ms] if isinstance(value, timedelta) else [parse_duration_ms, parse_size_bytes]
    for parse in parsers:
        try:
            result = parse(value)  # type: ignore[arg-type]
        except InvalidInput:
            continue
        assert type(result) is int and 0 <= result <= INT64_MAX
        if not isinstance(value, timedelta):
            assert result == value


# ---- printed forms ---------------------------------------------------------------------------

PRINTED_SIZES = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "PB": 10**15,
                 "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}


def size_oracle(n: int) -> str:
    """The largest unit dividing n, by brute force over every unit."""
    dividing = [(size, name) for name, size in PRINTED_SIZES.items() if n >= size and n % size == 0]
    if not dividing:
        return f"{n} B"
    size, name = max(dividing)
    return f"{n // size} {name}"


multiples = st.builds(lambda k, unit: k * unit, st.integers(0, 10**6), st.sampled_from(list(PRINTED_SIZES.values())))
sizes = st.one_of(st.integers(0, INT64_MAX), st.integers(0, 10**6), multiples.filter(lambda n: n <= INT64_MAX))


@settings(max_examples=500)
@given(sizes)
def test_format_size_round_trips_and_picks_the_largest_dividing_unit(n: int) -> None:
    assert parse_size_bytes(format_size(n)) == n
    assert format_size(n) == size_oracle(n)


@settings(max_examples=300)
@given(st.one_of(st.integers(0, INT64_MAX), st.builds(lambda k, unit: k * unit, st.integers(0, 10**6),
                                                     st.sampled_from(sorted(set(DURATION_UNITS.values()))))))
def test_format_duration_round_trips(ms: int) -> None:
    assert parse_duration_ms(format_duration(ms)) == ms


@pytest.mark.parametrize(("written", "printed"), [
    ("1KB", "1 KB"), ("2KB", "2 KB"), ("1KiB", "1 KiB"), ("2000KiB", "2000 KiB"), ("20GB", "20 GB"),
    ("512MiB", "512 MiB"), ("1.5GB", "1500 MB"), ("1.5GiB", "1536 MiB"), ("1500", "1500 B"), ("0", "0 B"),
    ("1000", "1 KB"), ("1024", "1 KiB"), ("1024000", "1000 KiB"), ("1024MB", "1024 MB"),
])
def test_a_configured_size_prints_in_the_units_it_was_written_in(written: str, printed: str) -> None:
    assert format_size(parse_size_bytes(written)) == printed


@given(st.integers(0, 2**60))
def test_human_size_is_binary_with_one_decimal(n: int) -> None:
    text = human_size(n)
    number, unit = text.split(" ")
    if n < 1024:
        assert text == f"{n} B"
        return
    scale = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50}[unit]
    assert 1 <= n / scale < 1024 or unit == "PiB"
    assert abs(float(number) - n / scale) <= 0.05 + 1e-9


@pytest.mark.parametrize(("value", "minutes"), [
    (60, 60), ("60", 60), (" 43200 ", 43200), ("30d", 43200), ("12h", 720), ("90m", 90), ("1w", 10080),
    ("1.5h", 90), ("120s", 2), ("2min", 2),
])
def test_minutes_take_plain_numbers_or_durations(value: int | str, minutes: int) -> None:
    assert parse_minutes(value) == minutes


@pytest.mark.parametrize(("value", "message"), [
    (0, "above zero"), ("0", "above zero"), ("-5", "above zero"), ("0d", "above zero"),
    ("90s", "not a whole number of minutes"), ("1.5", "not a whole number"), ("30x", "unknown unit"),
    (True, "expected a number of minutes"), (1.5, "expected a number of minutes"), (None, "expected a number"),
])
def test_bad_minutes_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_minutes(value)  # type: ignore[arg-type]


@given(st.integers(1, 10**9))
def test_minutes_round_trip_through_a_duration(minutes: int) -> None:
    assert parse_minutes(str(minutes)) == minutes
    assert parse_minutes(format_duration(minutes * 60_000)) == minutes
