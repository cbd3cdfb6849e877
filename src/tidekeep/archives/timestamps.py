"""Finding the timestamp at the start of log lines, vectorised over Arrow arrays (pure: no store,
storage or Spark).

A timestamp is recognised only at the very start of a line, optionally after a syslog `<PRI>`
(with an optional RFC 5424 version, `<34>1 `) and/or one `[`. Built-in forms (tried together, in
one RE2 pass):

- ISO-8601 and its log variants: `2024-07-01T12:00:00`, `2024-07-01 12:00:00,123`,
  `2024-07-01T12:00:00.123456Z`, `2024-07-01T12:00:00+02:00`, `...-0500` (any fraction length;
  digits past milliseconds are truncated);
- syslog `Jul  1 12:00:00` (no year: see `syslog year` below);
- epoch seconds (10 digits, optional `.fraction`) and epoch milliseconds (13 digits), each
  followed by a non-digit or the end of the line.

Each built-in form must be followed by a non-digit or the end of the line, so `2024-07-01 12:00:001`
or a 14-digit number is no timestamp.

A user format (`--timestamp-format`, strptime syntax) replaces the built-in forms: it is compiled
once to an RE2 pattern with named groups, so a misdetected built-in form (say, a 10-digit id at the
start of a line) can be switched off by giving the format explicitly.

Zones: an explicit offset (`Z`, `+02:00`, `-0500`) wins; otherwise the timestamp is wall-clock
time in the ingest's zone (an IANA name, default UTC). A wall-clock time that a DST change makes
ambiguous takes the earlier instant (Python's fold=0); one that falls in a DST gap is read with the
offset in force before the gap (also fold=0: 02:30 on a spring-forward night in New York is 07:30
UTC). Epoch forms are UTC by definition.

Syslog year: the year of the ingest's fixed `now` in the ingest zone; if that puts the time more
than one day after `now`, the previous year (a December line read on 2 January belongs to last
year). Feb 29 in a year that is not a leap year is no timestamp.

Anything impossible — month 13, Feb 30, hour 24, second 60 — or an instant outside
1970-01-01T00:00:00Z .. 9999-12-31T23:59:59.999Z is treated as no timestamp: the line is then a
continuation of the message before it, never an error.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..civil_dates import days_from_civil
from ..errors import InvalidInput
from .arrow_bytes import string_bytes
from .timestamp_kernel import BAD_OFFSET, EPOCH_MILLIS, EPOCH_SECONDS, ISO, SYSLOG, match_builtin

MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
DAY_MS = 86_400_000
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
MONTH_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
               "november", "december")
DAY_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

PREFIX = r"^(?:<\d{1,3}>(?:\d{1,2} )?)?\[?"
END = r"(?:[^0-9]|$)"
ZONE = r"Z|[+-]\d{2}:?\d{2}"

# one pass finds every built-in form; group names carry the form ("i" ISO, "s" syslog, "e" epoch)
BUILTIN_PATTERN = PREFIX + (
    r"(?:(?P<iY>\d{4})-(?P<im>\d{2})-(?P<id>\d{2})[T ](?P<iH>\d{2}):(?P<iM>\d{2}):(?P<iS>\d{2})"
    rf"(?:[.,](?P<if>\d+))?(?P<iz>{ZONE})?{END}"
    r"|(?P<sb>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}(?P<sd>\d{1,2}) "
    rf"(?P<sH>\d{{2}}):(?P<sM>\d{{2}}):(?P<sS>\d{{2}})(?:\.(?P<sf>\d+))?{END}"
    rf"|(?P<es>\d{{10}})(?:\.(?P<ef>\d+))?{END}"
    rf"|(?P<em>\d{{13}}){END})"
)

# strptime directive -> (group name, RE2 pattern)
DIRECTIVES: dict[str, tuple[str | None, str]] = {
    "Y": ("Y", r"\d{4}"),
    "y": ("y", r"\d{2}"),
    "m": ("m", r"\d{1,2}"),
    "d": ("d", r"\d{1,2}"),
    "b": ("b", "(?i:" + "|".join(MONTHS) + ")"),
    "h": ("b", "(?i:" + "|".join(MONTHS) + ")"),
    "B": ("B", "(?i:" + "|".join(MONTH_NAMES) + ")"),
    "j": ("j", r"\d{1,3}"),
    "H": ("H", r"\d{1,2}"),
    "I": ("I", r"\d{1,2}"),
    "p": ("p", "(?i:am|pm)"),
    "M": ("M", r"\d{1,2}"),
    "S": ("S", r"\d{1,2}"),
    "f": ("f", r"\d{1,9}"),
    "z": ("z", f"(?:{ZONE})"),
    "a": (None, "(?i:" + "|".join(n[:3] for n in DAY_NAMES) + ")"),
    "A": (None, "(?i:" + "|".join(DAY_NAMES) + ")"),
}


@dataclass(frozen=True)
class TimestampRules:
    """How one ingest reads timestamps: the zone for zone-less times, the optional user format
    (already compiled to a pattern) and the ingest's fixed `now` (for the syslog year)."""

    timezone: str = "UTC"
    now_ms: int = 0
    timestamp_format: str | None = None
    pattern: str = BUILTIN_PATTERN


def check_timezone(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"--timezone: expected an IANA zone name such as UTC or America/New_York, got {name!r}")
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(f"--timezone: unknown time zone {name!r} (expected an IANA name such as "
                           "UTC or America/New_York)") from None
    return name


def compile_format(fmt: str) -> str:
    """The RE2 pattern (with PREFIX) of a strptime format; InvalidInput naming the problem when the
    format uses an unsupported directive, repeats a field or cannot place a time."""
    if not isinstance(fmt, str) or not fmt.strip():
        raise InvalidInput("--timestamp-format: empty format")
    parts: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%":
            if i + 1 >= len(fmt):
                raise InvalidInput(f"--timestamp-format {fmt!r}: ends with a lone '%'")
            code = fmt[i + 1]
            i += 2
            if code == "%":
                parts.append("%")
                continue
            if code not in DIRECTIVES:
                raise InvalidInput(f"--timestamp-format {fmt!r}: unsupported directive %{code} (supported: "
                                   + " ".join("%" + c for c in DIRECTIVES) + " %%)")
            group, pattern = DIRECTIVES[code]
            if group is None:
                parts.append(pattern)
                continue
            if group in seen:
                raise InvalidInput(f"--timestamp-format {fmt!r}: %{code} appears twice")
            seen.add(group)
            parts.append(f"(?P<{group}>{pattern})")
        elif ch.isspace():
            while i < len(fmt) and fmt[i].isspace():
                i += 1
            parts.append(r"\s+")
        else:
            parts.append(re.escape(ch))
            i += 1
    has_date = ("j" in seen) or (("m" in seen or "b" in seen or "B" in seen) and "d" in seen)
    if {"Y", "y"} <= seen or {"b", "B"} <= seen or {"m", "b"} <= seen or {"m", "B"} <= seen:
        raise InvalidInput(f"--timestamp-format {fmt!r}: gives the same field twice (year or month)")
    if "j" in seen and ({"m", "b", "B", "d"} & seen):
        raise InvalidInput(f"--timestamp-format {fmt!r}: %j (day of year) cannot be combined with month or day")
    if "I" in seen and "p" not in seen:
        raise InvalidInput(f"--timestamp-format {fmt!r}: %I (12-hour clock) needs %p (AM/PM)")
    if "I" in seen and "H" in seen:
        raise InvalidInput(f"--timestamp-format {fmt!r}: gives the hour twice (%H and %I)")
    if not has_date or not ({"H", "I"} & seen):
        raise InvalidInput(f"--timestamp-format {fmt!r}: not enough fields to place a time: needs a date "
                           "(%m or %b/%B with %d, or %j; the year %Y/%y is optional) and an hour (%H, or %I with %p)")
    return PREFIX + "".join(parts)


def make_rules(timezone: str = "UTC", timestamp_format: str | None = None, now_ms: int = 0) -> TimestampRules:
    """Validated rules for an ingest (bad zone or format: InvalidInput naming the flag)."""
    zone = check_timezone(timezone)
    pattern = BUILTIN_PATTERN if timestamp_format is None else compile_format(timestamp_format)
    return TimestampRules(zone, int(now_ms), timestamp_format, pattern)


# ---- vectorised arithmetic -----------------------------------------------------------------------


def _ints(field: pa.Array, present: np.ndarray) -> np.ndarray:
    """Digits as int64 (0 where absent)."""
    text = pc.if_else(pa.array(present), field, pa.scalar("0"))
    return np.asarray(pc.cast(text, pa.int64()).to_numpy(zero_copy_only=False), dtype=np.int64)


def _present(field: pa.Array) -> np.ndarray:
    """True where an optional group took part in the match (extract_regex gives "" otherwise, and
    null for the rows that did not match at all)."""
    return np.asarray(pc.fill_null(pc.not_equal(field, ""), False).to_numpy(zero_copy_only=False), dtype=bool)


def _fraction_ms(field: pa.Array, present: np.ndarray) -> np.ndarray:
    digits = pc.utf8_rpad(pc.utf8_slice_codeunits(field, 0, 3), width=3, padding="0")
    return _ints(digits, present)


def _month_index(field: pa.Array, names: tuple[str, ...]) -> np.ndarray:
    """1..12 from a month name (any case); 0 where absent."""
    found = pc.index_in(pc.utf8_lower(field), value_set=pa.array(names))
    return np.asarray(pc.fill_null(found, -1).to_numpy(zero_copy_only=False), dtype=np.int64) + 1


def _is_leap(year: np.ndarray) -> np.ndarray:
    return ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)


_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _valid_date(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    month_ok = (month >= 1) & (month <= 12)
    limit = _DAYS_IN_MONTH[np.clip(month, 0, 12)] + ((month == 2) & _is_leap(year))
    return (year >= 1) & month_ok & (day >= 1) & (day <= limit)


def _zone_offset_ms(zone_text: pa.Array, present: np.ndarray) -> np.ndarray:
    """Offset east of UTC in ms of `Z`, `+HH:MM` or `-HHMM`."""
    text = pc.if_else(pa.array(present), zone_text, pa.scalar("+00:00"))
    text = pc.replace_substring(pc.replace_substring(text, ":", ""), "Z", "+0000")
    sign = np.where(np.asarray(pc.starts_with(text, "-").to_numpy(zero_copy_only=False), dtype=bool), -1, 1)
    hours = np.asarray(pc.cast(pc.utf8_slice_codeunits(text, 1, 3), pa.int64()).to_numpy(zero_copy_only=False))
    minutes = np.asarray(pc.cast(pc.utf8_slice_codeunits(text, 3, 5), pa.int64()).to_numpy(zero_copy_only=False))
    # an offset of a day or more, or minute 60+, is no offset at all: the timestamp is impossible
    impossible = (hours > 23) | (minutes > 59)
    return np.where(impossible, _BAD_OFFSET, sign * (hours * 3_600_000 + minutes * 60_000))


_BAD_OFFSET = BAD_OFFSET  # marks an impossible offset; _to_utc rejects the row


def wall_to_utc_ms(wall_ms: np.ndarray, valid: np.ndarray, timezone: str) -> np.ndarray:
    """UTC ms of wall-clock times (as ms since 1970-01-01 on the wall) in `timezone`, with fold=0:
    an ambiguous time takes the earlier instant, a time in a DST gap the offset before the gap.

    The offset is looked up with zoneinfo once per distinct wall-clock minute (zone changes happen
    on minute boundaries, and a log spans few distinct minutes per block). Not Arrow's
    assume_timezone: its zone database stops applying DST rules after 2037."""
    if timezone == "UTC" or not valid.any():
        return wall_ms
    minutes = wall_ms[valid] // 60_000
    distinct, inverse = np.unique(minutes, return_inverse=True)
    offsets = np.fromiter((_offset_ms(timezone, int(m)) for m in distinct), dtype=np.int64, count=len(distinct))
    out = wall_ms.copy()
    out[valid] = wall_ms[valid] - offsets[inverse.reshape(-1)]
    return out


_EPOCH = dt.datetime(1970, 1, 1)


@functools.lru_cache(maxsize=65_536)
def _offset_ms(timezone: str, wall_minute: int) -> int:
    """The zone's UTC offset (fold=0) at a wall-clock minute; 0 outside datetime's years."""
    try:
        wall = _EPOCH + dt.timedelta(minutes=wall_minute)
    except OverflowError:
        return 0
    offset = wall.replace(tzinfo=zoneinfo.ZoneInfo(timezone)).utcoffset()
    return 0 if offset is None else int(offset.total_seconds() * 1000)


def year_of(now_ms: int, timezone: str) -> int:
    return dt.datetime.fromtimestamp(now_ms / 1000, zoneinfo.ZoneInfo(timezone)).year


@dataclass
class _Fields:
    """Calendar fields of the matched rows (0 where absent) and what is known about them."""

    year: np.ndarray
    has_year: np.ndarray
    month: np.ndarray
    day: np.ndarray
    day_of_year: np.ndarray  # 0 unless %j
    hour: np.ndarray
    minute: np.ndarray
    second: np.ndarray
    millis: np.ndarray
    offset_ms: np.ndarray
    has_zone: np.ndarray
    matched: np.ndarray


def _to_utc(f: _Fields, rules: TimestampRules) -> tuple[np.ndarray, np.ndarray]:
    """(UTC ms, valid) of calendar fields; a year-less row gets the syslog year."""
    def with_year(year: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        uses_doy = f.day_of_year > 0
        month = np.where(uses_doy, 1, f.month)
        day = np.where(uses_doy, 1, f.day)
        valid = f.matched & _valid_date(year, month, day)
        valid &= ~uses_doy | (f.day_of_year <= 365 + _is_leap(year))
        valid &= (f.hour <= 23) & (f.minute <= 59) & (f.second <= 59)
        days = days_from_civil(np.where(valid, year, 1970), np.where(valid, month, 1), np.where(valid, day, 1))
        days = days + np.where(uses_doy, f.day_of_year - 1, 0)
        wall = days * DAY_MS + f.hour * 3_600_000 + f.minute * 60_000 + f.second * 1000 + f.millis
        zoned = wall_to_utc_ms(wall, valid & ~f.has_zone, rules.timezone)
        valid &= ~f.has_zone | (f.offset_ms != _BAD_OFFSET)
        return np.where(f.has_zone, wall - np.where(valid, f.offset_ms, 0), zoned), valid

    if f.has_year.all():
        utc, valid = with_year(f.year)
    else:
        this_year = year_of(rules.now_ms, rules.timezone)
        utc_now, valid_now = with_year(np.where(f.has_year, f.year, this_year))
        utc_prev, valid_prev = with_year(np.where(f.has_year, f.year, this_year - 1))
        previous = ~f.has_year & valid_now & (utc_now > rules.now_ms + DAY_MS)
        utc = np.where(previous, utc_prev, utc_now)
        valid = np.where(previous, valid_prev, valid_now)
    valid &= (utc >= 0) & (utc <= MAX_MS)
    return utc, valid


def _builtin_fields(lines: pa.Array) -> tuple[_Fields, np.ndarray]:
    """Fields of the ISO and syslog rows, and the epoch rows' UTC ms (-1 where not epoch), matched
    by the compiled matcher (timestamp_kernel.py: BUILTIN_PATTERN's matches, as numbers)."""
    found = match_builtin(*string_bytes(lines))
    iso, syslog = found.kind == ISO, found.kind == SYSLOG
    epoch = np.where((found.kind == EPOCH_SECONDS) | (found.kind == EPOCH_MILLIS), found.epoch_ms, -1)
    fields = _Fields(year=found.year, has_year=~syslog, month=found.month, day=found.day,
                     day_of_year=np.zeros(len(lines), dtype=np.int64), hour=found.hour, minute=found.minute,
                     second=found.second, millis=found.millis, offset_ms=found.offset_ms, has_zone=found.has_zone,
                     matched=iso | syslog)
    return fields, epoch


def _format_fields(m: pa.StructArray, names: set[str]) -> _Fields:
    n = len(m)
    zeros = np.zeros(n, dtype=np.int64)
    matched = np.asarray(m.is_valid().to_numpy(zero_copy_only=False), dtype=bool)

    def num(name: str) -> np.ndarray:
        if name not in names:
            return zeros
        field = pc.struct_field(m, name)
        return _ints(field, _present(field))

    if "Y" in names:
        year, has_year = num("Y"), np.ones(n, dtype=bool)
    elif "y" in names:
        short = num("y")
        year, has_year = np.where(short < 69, 2000 + short, 1900 + short), np.ones(n, dtype=bool)
    else:
        year, has_year = zeros, np.zeros(n, dtype=bool)
    if "b" in names:
        month = _month_index(pc.struct_field(m, "b"), MONTHS)
    elif "B" in names:
        month = _month_index(pc.struct_field(m, "B"), MONTH_NAMES)
    else:
        month = num("m")
    hour = num("H")
    if "I" in names:
        twelve = num("I")
        pm = np.asarray(pc.fill_null(pc.equal(pc.utf8_lower(pc.struct_field(m, "p")), "pm"), False)
                        .to_numpy(zero_copy_only=False), dtype=bool)
        hour = np.where((twelve >= 1) & (twelve <= 12), twelve % 12 + np.where(pm, 12, 0), 99)
    if "f" in names:
        fraction = pc.struct_field(m, "f")
        millis = _fraction_ms(fraction, _present(fraction))
    else:
        millis = zeros
    if "z" in names:
        zone = pc.struct_field(m, "z")
        has_zone = _present(zone)
        offset = _zone_offset_ms(zone, has_zone)
    else:
        has_zone, offset = np.zeros(n, dtype=bool), zeros
    day_of_year = num("j")
    # %j 0 is impossible; mark it so with_year rejects it rather than reading it as "no %j"
    if "j" in names:
        matched = matched & (day_of_year >= 1)
    return _Fields(year, has_year, month, num("d"), day_of_year, hour, num("M"), num("S"), millis, offset,
                   has_zone, matched)


def parse_timestamps(lines: pa.Array, rules: TimestampRules) -> pa.Int64Array:
    """The UTC ms of the timestamp at the start of each line (null: no timestamp)."""
    if len(lines) == 0:
        return pa.array([], type=pa.int64())
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if lines.type != pa.string():
        lines = lines.cast(pa.string())
    if rules.timestamp_format is None:
        fields, epoch = _builtin_fields(lines)
        utc, valid = _to_utc(fields, rules)
        utc = np.where(epoch >= 0, epoch, utc)
        valid = (valid | (epoch >= 0)) & (utc >= 0) & (utc <= MAX_MS)
    else:
        m = pc.extract_regex(lines, rules.pattern)
        if isinstance(m, pa.ChunkedArray):
            m = m.combine_chunks()
        names = {f.name for f in m.type}
        utc, valid = _to_utc(_format_fields(m, names), rules)
    return pa.array(utc, type=pa.int64(), mask=~valid)


def parse_timestamp(line: str, rules: TimestampRules) -> int | None:
    """The timestamp of one line (for tests and single lines; ingest uses parse_timestamps)."""
    return parse_timestamps(pa.array([line], type=pa.string()), rules)[0].as_py()


__all__ = ["BUILTIN_PATTERN", "MAX_MS", "TimestampRules", "check_timezone", "compile_format", "make_rules",
           "parse_timestamp", "parse_timestamps", "wall_to_utc_ms"]
