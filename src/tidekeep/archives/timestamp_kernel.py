"""Matching the built-in timestamp forms at the start of lines, compiled (numba): what
`pc.extract_regex(lines, timestamps.BUILTIN_PATTERN)` finds, with the same priorities, as numbers
instead of twenty text columns. Ingest reads every line's start this way (docs/benchmarks.md,
"Ingest"); a user's `--timestamp-format` still goes through RE2.

The pattern is anchored and each of its choices can be decided by looking ahead, so the matcher
needs no backtracking search; where the regex would back off, the comments say why the other
branch cannot match. tests/archives/test_timestamp_kernel.py checks it against RE2 on generated and
adversarial lines.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compiled import compiled

NONE, ISO, SYSLOG, EPOCH_SECONDS, EPOCH_MILLIS = 0, 1, 2, 3, 4
BAD_OFFSET = 1 << 62  # an impossible zone offset (hour > 23 or minute > 59)
_MONTHS = np.frombuffer(b"JanFebMarAprMayJunJulAugSepOctNovDec", dtype=np.uint8).reshape(12, 3)
_ZERO, _NINE = ord("0"), ord("9")
_LESS, _GREATER, _BRACKET, _SPACE, _COLON, _DOT, _COMMA = (ord(c) for c in "<>[ :.,")
_MINUS, _PLUS, _T, _Z = ord("-"), ord("+"), ord("T"), ord("Z")


@compiled(inline=True)
def _is_digit(data: np.ndarray, at: int, end: int) -> bool:
    return at < end and _ZERO <= data[at] <= _NINE


@compiled(inline=True)
def _digit_run(data: np.ndarray, at: int, end: int) -> int:
    start = at
    while at < end and _ZERO <= data[at] <= _NINE:
        at += 1
    return at - start


@compiled(inline=True)
def _number(data: np.ndarray, at: int, count: int) -> int:
    value = 0
    for position in range(at, at + count):
        value = value * 10 + int(data[position] - _ZERO)
    return value


@compiled(inline=True)
def _two_digits(data: np.ndarray, at: int, end: int) -> int:
    """The value of two digits at `at`, -1 if they are not there."""
    if at + 2 <= end and _ZERO <= data[at] <= _NINE and _ZERO <= data[at + 1] <= _NINE:
        return int(data[at] - _ZERO) * 10 + int(data[at + 1] - _ZERO)
    return -1


@compiled(inline=True)
def _ends(data: np.ndarray, at: int, end: int) -> bool:
    """The pattern's END: the end of the line or a byte that is no digit."""
    return at >= end or not (_ZERO <= data[at] <= _NINE)


@compiled(inline=True)
def _millis(data: np.ndarray, at: int, count: int) -> int:
    """A fraction's first three digits as ms (fewer digits padded with zeros on the right)."""
    value = 0
    for place in range(3):
        value = value * 10 + (int(data[at + place] - _ZERO) if place < count else 0)
    return value


@compiled(inline=True)
def _zone(data: np.ndarray, at: int, end: int) -> tuple[int, int]:
    """(where the zone ends, its offset ms) for the first zone form at `at` followed by END, in the
    regex's order (`Z`, then `+HH:MM`, then `+HHMM`); (at, 0) for no zone when END holds at `at`;
    (-1, 0) when nothing fits."""
    if at < end:
        byte = data[at]
        if byte == _Z and _ends(data, at + 1, end):
            return at + 1, 0
        if byte in (_PLUS, _MINUS):
            hours = _two_digits(data, at + 1, end)
            if hours >= 0:
                sign = -1 if byte == _MINUS else 1
                for colon in (1, 0):  # `:?` is greedy: with the colon first
                    if colon and not (at + 3 < end and data[at + 3] == _COLON):
                        continue
                    minutes = _two_digits(data, at + 3 + colon, end)
                    zone_end = at + 5 + colon
                    if minutes >= 0 and _ends(data, zone_end, end):
                        if hours > 23 or minutes > 59:
                            return zone_end, BAD_OFFSET
                        return zone_end, sign * (hours * 3_600_000 + minutes * 60_000)
    if _ends(data, at, end):
        return at, 0
    return -1, 0


@compiled()
def _match(data: np.ndarray, offsets: np.ndarray, kind: np.ndarray, spans: np.ndarray, fields: np.ndarray) -> None:
    """Per line: its form (kind), spans[i] = (prefix end, body end, zone end) relative to the line
    start, and fields[i] = (year, month, day, hour, minute, second, ms, zone offset ms, epoch ms)."""
    for line in range(len(offsets) - 1):
        start, end = offsets[line], offsets[line + 1]
        at = start
        # the prefix `(?:<\d{1,3}>(?:\d{1,2} )?)?\[?`: when a part of it is there, leaving it out
        # leaves a `<`, a digit and a space or a `[` where every form needs four digits or a month
        if at < end and data[at] == _LESS:
            digits = _digit_run(data, at + 1, end)
            if 1 <= digits <= 3 and at + 1 + digits < end and data[at + 1 + digits] == _GREATER:
                at += 2 + digits
                version = _digit_run(data, at, end)
                if 1 <= version <= 2 and at + version < end and data[at + version] == _SPACE:
                    at += version + 1
        if at < end and data[at] == _BRACKET:
            at += 1
        prefix_end = at
        found = NONE
        body_end = zone_end = at
        year = month = day = hour = minute = second = millis = offset = epoch = 0
        # ISO: 0000-00-00[T ]00:00:00, then an optional fraction and zone and END
        if at + 19 <= end and _digit_run(data, at, at + 4) == 4 and data[at + 4] == _MINUS \
                and data[at + 7] == _MINUS and (data[at + 10] == _T or data[at + 10] == _SPACE) \
                and data[at + 13] == _COLON and data[at + 16] == _COLON:
            month, day = _two_digits(data, at + 5, end), _two_digits(data, at + 8, end)
            hour, minute = _two_digits(data, at + 11, end), _two_digits(data, at + 14, end)
            second = _two_digits(data, at + 17, end)
            if min(month, day, hour, minute, second) >= 0:
                year = _number(data, at, 4)
                seconds_end = at + 19
                # a fraction takes every digit (a shorter one leaves a digit where END or a zone is
                # needed); when nothing fits after it, the form ends before the `.` or `,` instead
                fraction = 0
                if seconds_end < end and (data[seconds_end] == _DOT or data[seconds_end] == _COMMA):
                    fraction = _digit_run(data, seconds_end + 1, end)
                if fraction:
                    body_end = seconds_end + 1 + fraction
                    zone_end, offset = _zone(data, body_end, end)
                    if zone_end >= 0:
                        millis = _millis(data, seconds_end + 1, fraction)
                        found = ISO
                if found == NONE:
                    body_end = seconds_end
                    zone_end, offset = _zone(data, body_end, end)
                    if zone_end >= 0:
                        found = ISO
        # syslog: Mmm, one or two spaces, a day of one or two digits, 00:00:00, an optional fraction
        if found == NONE and at + 3 <= end:
            month = 0
            for index in range(12):
                if data[at] == _MONTHS[index, 0] and data[at + 1] == _MONTHS[index, 1] \
                        and data[at + 2] == _MONTHS[index, 2]:
                    month = index + 1
                    break
            if month:
                day_at = at + 3
                if day_at < end and data[day_at] == _SPACE:
                    day_at += 1
                    if day_at < end and data[day_at] == _SPACE:
                        day_at += 1  # ` {1,2}` is greedy, and with one space the day would start at a space
                    digits = min(_digit_run(data, day_at, end), 2)
                    time_at = day_at + digits + 1
                    if digits and time_at + 8 <= end and data[time_at - 1] == _SPACE \
                            and data[time_at + 2] == _COLON and data[time_at + 5] == _COLON:
                        hour, minute = _two_digits(data, time_at, end), _two_digits(data, time_at + 3, end)
                        second = _two_digits(data, time_at + 6, end)
                        seconds_end = time_at + 8
                        if min(hour, minute, second) >= 0:
                            fraction = 0
                            if seconds_end < end and data[seconds_end] == _DOT:
                                fraction = _digit_run(data, seconds_end + 1, end)
                            if fraction:
                                body_end = seconds_end + 1 + fraction  # every digit: END holds after it
                                millis = _millis(data, seconds_end + 1, fraction)
                                found = SYSLOG
                            elif _ends(data, seconds_end, end):
                                body_end = seconds_end
                                found = SYSLOG
                            if found == SYSLOG:
                                day = _number(data, day_at, digits)
                                zone_end = body_end
            if found == NONE:
                month = 0
        # epoch seconds: ten digits, an optional fraction, END; epoch ms: thirteen digits, END
        if found == NONE:
            digits = _digit_run(data, at, end)
            seconds_end = at + 10
            if digits == 10:
                fraction = 0
                if seconds_end < end and data[seconds_end] == _DOT:
                    fraction = _digit_run(data, seconds_end + 1, end)
                body_end = seconds_end + 1 + fraction if fraction else seconds_end
                epoch = _number(data, at, 10) * 1000 + (_millis(data, seconds_end + 1, fraction) if fraction else 0)
                found = EPOCH_SECONDS
            elif digits == 13:
                body_end = at + 13
                epoch = _number(data, at, 13)
                found = EPOCH_MILLIS
            zone_end = body_end
        kind[line] = found
        if found == NONE:
            spans[line, 0] = spans[line, 1] = spans[line, 2] = 0
            fields[line, :] = 0
            continue
        spans[line, 0], spans[line, 1], spans[line, 2] = prefix_end - start, body_end - start, zone_end - start
        fields[line, 0], fields[line, 1], fields[line, 2] = year, month, day
        fields[line, 3], fields[line, 4], fields[line, 5] = hour, minute, second
        fields[line, 6], fields[line, 7], fields[line, 8] = millis, offset, epoch


@dataclass(frozen=True)
class BuiltinMatches:
    """What the built-in forms match at the start of each line (0 in every field of a line without
    one). `spans` are (prefix end, form end, zone end), in bytes from the line's start."""

    kind: np.ndarray  # int8: NONE, ISO, SYSLOG, EPOCH_SECONDS or EPOCH_MILLIS
    spans: np.ndarray  # int64 (n, 3)
    year: np.ndarray
    month: np.ndarray  # 1-12 (a syslog month name too)
    day: np.ndarray
    hour: np.ndarray
    minute: np.ndarray
    second: np.ndarray
    millis: np.ndarray  # the fraction's first three digits
    offset_ms: np.ndarray  # the ISO zone's offset east of UTC, BAD_OFFSET when impossible
    has_zone: np.ndarray  # bool
    epoch_ms: np.ndarray  # the epoch forms' instant


def match_builtin(data: np.ndarray, offsets: np.ndarray) -> BuiltinMatches:
    """Match every line data[offsets[i]:offsets[i+1]] (uint8 bytes, int64 offsets)."""
    count = len(offsets) - 1
    kind = np.empty(count, dtype=np.int8)
    spans = np.empty((count, 3), dtype=np.int64)
    fields = np.empty((count, 9), dtype=np.int64)
    _match(data, offsets, kind, spans, fields)
    has_zone = (kind == ISO) & (spans[:, 2] > spans[:, 1])
    year, month, day, hour, minute, second, millis, offset_ms, epoch_ms = fields.T
    return BuiltinMatches(kind, spans, year, month, day, hour, minute, second, millis, offset_ms, has_zone, epoch_ms)


__all__ = ["BAD_OFFSET", "EPOCH_MILLIS", "EPOCH_SECONDS", "ISO", "NONE", "SYSLOG", "BuiltinMatches", "match_builtin"]
