"""Timestamp detection (archives/timestamps.py): property tests against a datetime/zoneinfo oracle,
fuzzing, worked examples, and the format compiler's errors."""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidekeep.archives.timestamps import MAX_MS, compile_format, make_rules, parse_timestamp, parse_timestamps
from tidekeep.errors import InvalidInput

ZONES = ["UTC", "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham",
         "America/St_Johns", "Africa/Monrovia", "Europe/Dublin"]
UTC = dt.UTC
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

walls = st.datetimes(min_value=dt.datetime(1969, 12, 30), max_value=dt.datetime(9999, 12, 31, 23, 59, 59))
zones = st.sampled_from(ZONES)
suffixes = st.sampled_from([" INFO message", "", "\tx", " 12345", "? no", "] bracket", "ms later"])


def oracle_ms(wall: dt.datetime, zone: str | None, offset_minutes: int | None, micros: int) -> int | None:
    """UTC ms the way Python reads it: an explicit offset wins, otherwise the zone with fold=0;
    out-of-range instants are no timestamp."""
    wall = wall.replace(microsecond=micros - micros % 1000)
    try:
        if offset_minutes is not None:
            instant = wall.replace(tzinfo=dt.timezone(dt.timedelta(minutes=offset_minutes)))
        else:
            instant = wall.replace(tzinfo=zoneinfo.ZoneInfo(zone or "UTC"), fold=0)
        utc = instant.astimezone(UTC)
    except OverflowError:
        return None
    value = int((utc - dt.datetime(1970, 1, 1, tzinfo=UTC)) / dt.timedelta(milliseconds=1))
    return value if 0 <= value <= MAX_MS else None


def offset_text(minutes: int, style: str) -> str:
    if style == "Z":
        return "Z"
    sign = "-" if minutes < 0 else "+"
    hours, mins = divmod(abs(minutes), 60)
    return f"{sign}{hours:02d}{':' if style == 'colon' else ''}{mins:02d}"


@SETTINGS
@given(wall=walls, zone=zones, separator=st.sampled_from(["T", " "]), fraction_sep=st.sampled_from([".", ","]),
       digits=st.integers(0, 9), micros=st.integers(0, 999_999), zone_style=st.sampled_from(["none", "Z", "colon",
                                                                                            "plain"]),
       offset=st.integers(-(24 * 60 - 1), 24 * 60 - 1), prefix=st.sampled_from(["", "[", "<13>", "<34>1 ", "<13>["]),
       suffix=suffixes)
def test_iso_forms_match_the_oracle(wall, zone, separator, fraction_sep, digits, micros, zone_style, offset, prefix,
                                    suffix) -> None:
    fraction = f"{micros:06d}{'0' * 3}"[:digits]
    text = wall.strftime(f"%Y-%m-%d{separator}%H:%M:%S")
    if digits:
        text += fraction_sep + fraction
    offset_minutes = None
    if zone_style != "none":
        offset_minutes = 0 if zone_style == "Z" else offset
        text += offset_text(offset_minutes, zone_style)
    if suffix.startswith(" 1") and zone_style == "none" and not digits:
        suffix = " x" + suffix  # "...:SS 12345" is still a timestamp; keep the case simple to state
    kept_micros = int((fraction + "000000")[:6]) if digits else 0
    expected = oracle_ms(wall, zone, offset_minutes, kept_micros)
    rules = make_rules(zone, None, 0)
    assert parse_timestamp(prefix + text + suffix, rules) == expected, (prefix + text + suffix, zone)


@SETTINGS
@given(now=st.integers(0, MAX_MS - 400 * 86_400_000), zone=zones, month=st.integers(1, 12), day=st.integers(1, 31),
       hour=st.integers(0, 23), minute=st.integers(0, 59), second=st.integers(0, 59))
def test_syslog_takes_the_year_of_now_unless_that_is_more_than_a_day_ahead(now, zone, month, day, hour, minute,
                                                                           second) -> None:
    tz = zoneinfo.ZoneInfo(zone)
    year = dt.datetime.fromtimestamp(now / 1000, tz).year
    name = dt.date(2000, month, 1).strftime("%b")
    line = f"{name} {day:>2} {hour:02d}:{minute:02d}:{second:02d} host app[1]: hello"

    def at(y: int) -> int | None:
        try:
            wall = dt.datetime(y, month, day, hour, minute, second)
        except ValueError:
            return None
        return oracle_ms(wall, zone, None, 0)

    expected = at(year)
    if expected is not None and expected > now + 86_400_000:
        expected = at(year - 1)
    assert parse_timestamp(line, make_rules(zone, None, now)) == expected, (line, now, zone)


@SETTINGS
@given(value=st.integers(0, 9_999_999_999), fraction=st.text("0123456789", min_size=0, max_size=7),
       millis=st.integers(0, 9_999_999_999_999), zone=zones, suffix=suffixes)
def test_epoch_seconds_and_millis_are_utc_whatever_the_zone(value, fraction, millis, zone, suffix) -> None:
    rules = make_rules(zone, None, 0)
    seconds_line = f"{value:010d}" + (f".{fraction}" if fraction else "") + suffix
    expected = value * 1000 + (int((fraction + "000")[:3]) if fraction else 0)
    assert parse_timestamp(seconds_line, rules) == expected
    assert parse_timestamp(f"{millis:013d}{suffix}", rules) == millis
    # one digit more or less is no epoch form
    assert parse_timestamp(f"{value:010d}7{suffix}", rules) is None
    assert parse_timestamp(f"{millis:013d}0{suffix}", rules) is None


FORMATS = ["%d/%b/%Y:%H:%M:%S %z", "%Y%m%d %H%M%S", "%m/%d/%y %I:%M:%S %p", "%Y-%j %H:%M", "%a %b %d %H:%M:%S.%f %Y",
           "%d.%m.%Y %H:%M:%S", "%B %d, %Y %H:%M", "%b %d %H:%M:%S"]


@SETTINGS
@given(wall=st.datetimes(min_value=dt.datetime(1970, 1, 3), max_value=dt.datetime(2068, 12, 31)), zone=zones,
       fmt=st.sampled_from(FORMATS), offset=st.integers(-12 * 60, 14 * 60), now=st.integers(0, 3_000_000_000_000))
def test_user_formats_match_python_strptime(wall, zone, fmt, offset, now) -> None:
    if "%z" in fmt:
        aware = wall.replace(tzinfo=dt.timezone(dt.timedelta(minutes=offset)))
        text = aware.strftime(fmt)
    else:
        text = wall.strftime(fmt)
    line = text + " rest of the line"
    parsed = dt.datetime.strptime(text, fmt)
    if "%Y" not in fmt and "%y" not in fmt:
        year = dt.datetime.fromtimestamp(now / 1000, zoneinfo.ZoneInfo(zone)).year
        candidates = []
        for y in (year, year - 1):
            try:
                candidates.append(oracle_ms(parsed.replace(year=y), zone, None, parsed.microsecond))
            except ValueError:
                candidates.append(None)
        expected = candidates[0]
        if expected is not None and expected > now + 86_400_000:
            expected = candidates[1]
    elif parsed.tzinfo is not None:
        expected = oracle_ms(parsed.replace(tzinfo=None), None, offset, parsed.microsecond)
    else:
        expected = oracle_ms(parsed, zone, None, parsed.microsecond)
    assert parse_timestamp(line, make_rules(zone, fmt, now)) == expected, (line, fmt, zone)


@settings(max_examples=500, deadline=None)
@given(lines=st.lists(st.text(max_size=60) | st.from_regex(r"\A[0-9 :T.,+\-Z<>\[\]A-Za-z]{0,40}\Z"), max_size=20),
       zone=zones)
def test_random_text_never_raises_and_gives_only_in_range_instants(lines, zone) -> None:
    values = parse_timestamps(pa.array(lines, type=pa.string()), make_rules(zone, None, 1_700_000_000_000))
    assert len(values) == len(lines)
    for line, value in zip(lines, values.to_pylist(), strict=True):
        assert value is None or 0 <= value <= MAX_MS
        if value is not None:
            assert line[:1] in set("0123456789<[JFMASOND")  # found only at the start of a line


@pytest.mark.parametrize("line", [
    "2024-02-30 10:00:00 impossible date", "2023-02-29T00:00:00Z not a leap year", "2024-13-01 00:00:00 month",
    "2024-07-01 24:00:00 hour", "2024-07-01 12:60:00 minute", "2024-07-01 12:00:60 leap second",
    "1969-12-31T23:59:59Z before the epoch", "9999-12-31T23:00:00-05:00 after 9999", " 2024-07-01 12:00:00 indented",
    "\tat com.example.Foo(Foo.java:1)", "2024-07-01 12:00:001 digit after", "17198352001 eleven digits",
    "171983520012345 fifteen digits", "Jly  1 12:00:00 month", "2024-07-01", "x 2024-07-01T12:00:00Z",
    "2024-07-01T12:00:00+24:00 a day's offset", "2024-07-01T12:00:00-05:60 minute 60 in the offset"])
def test_impossible_or_misplaced_times_are_no_timestamp(line: str) -> None:
    assert parse_timestamp(line, make_rules("UTC", None, 1_720_000_000_000)) is None


def test_the_utc_minus_4_zone_example_and_dst_edges() -> None:
    ny = make_rules("America/New_York", None, 0)
    assert parse_timestamp("2024-07-01 16:00:00 app", ny) == 1_719_864_000_000  # 20:00 UTC, not 16:00
    assert parse_timestamp("2024-07-01 12:00:00 app", ny) == 1_719_849_600_000  # 16:00 UTC
    # fall back: 01:30 happens twice; fold=0 takes the first (EDT, UTC-4)
    assert parse_timestamp("2024-11-03 01:30:00", ny) == 1_730_611_800_000
    # spring forward: 02:30 does not exist; read with the offset before the gap (EST, UTC-5)
    assert parse_timestamp("2024-03-10 02:30:00", ny) == 1_710_055_800_000
    # after 2037 the rules still apply (Arrow's zone data alone would drop DST here)
    assert parse_timestamp("2050-07-01 12:00:00", ny) == int(dt.datetime(2050, 7, 1, 16, tzinfo=UTC).timestamp()
                                                             * 1000)


def test_a_december_syslog_line_read_in_january_belongs_to_last_year() -> None:
    now = int(dt.datetime(2025, 1, 2, 9, tzinfo=UTC).timestamp() * 1000)
    rules = make_rules("UTC", None, now)
    assert parse_timestamp("Dec 31 23:59:59 host x", rules) == int(dt.datetime(2024, 12, 31, 23, 59, 59,
                                                                               tzinfo=UTC).timestamp() * 1000)
    assert parse_timestamp("Jan  3 08:00:00 host x", rules) == int(dt.datetime(2025, 1, 3, 8,
                                                                               tzinfo=UTC).timestamp() * 1000)
    assert parse_timestamp("Jan  3 09:00:01 host x", rules) == int(dt.datetime(2024, 1, 3, 9, 0, 1,
                                                                               tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize("fmt, message", [
    ("", "empty format"),
    ("%Y-%m-%d", "not enough fields to place a time"),
    ("%H:%M:%S", "not enough fields to place a time"),
    ("%Y-%m-%d %H:%M %Q", "unsupported directive %Q"),
    ("%Y-%m-%d %H:%M:%S %Y", "%Y appears twice"),
    ("%Y %y-%m-%d %H", "same field twice"),
    ("%m/%d %I:%M", "%I (12-hour clock) needs %p"),
    ("%Y-%j-%d %H", "cannot be combined"),
    ("%Y-%m-%d %H:%M %", "lone '%'"),
])
def test_bad_formats_are_rejected_naming_the_flag(fmt: str, message: str) -> None:
    with pytest.raises(InvalidInput, match="--timestamp-format") as caught:
        compile_format(fmt)
    assert message in str(caught.value)


def test_unknown_zones_are_rejected_naming_the_zone() -> None:
    for bad in ("Mars/Olympus", "", "../etc/passwd", "EST5EDT!"):
        with pytest.raises(InvalidInput, match="--timezone"):
            make_rules(bad)


def test_the_format_compiler_escapes_literals() -> None:
    rules = make_rules("UTC", "(%Y.%m.%d) [%H|%M]", 0)
    assert parse_timestamp("(2024.07.01) [12|30] x", rules) == 1_719_837_000_000
    assert parse_timestamp("(2024x07.01) [12|30] x", rules) is None
    assert parse_timestamp("100% 2024-07-01 12:30", make_rules("UTC", "100%% %Y-%m-%d %H:%M", 0)) == 1_719_837_000_000
