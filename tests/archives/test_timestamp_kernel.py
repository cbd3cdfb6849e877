"""The compiled matcher of the built-in timestamp forms (archives/timestamp_kernel.py) against its
oracle, RE2's matches of timestamps.BUILTIN_PATTERN and of SPAN_PATTERN (below), on lines built
from the pieces where the pattern has to choose (prefix digits, fractions, zones, month names, a
digit right after a form)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tidekeep.archives.arrow_bytes import string_bytes
from tidekeep.archives.timestamp_kernel import EPOCH_MILLIS, EPOCH_SECONDS, ISO, NONE, SYSLOG, match_builtin
from tidekeep.archives.timestamps import BUILTIN_PATTERN, PREFIX, ZONE

# BUILTIN_PATTERN with its end check moved after the alternatives (A E|B E == (A|B) E, the same
# matches in the same priority) and groups for the spans: `pre` the prefix, `iso`/`sys`/`ep` the
# form's text without zone, `iz` the ISO zone
SPAN_PATTERN = (
    rf"(?P<pre>{PREFIX})(?:"
    rf"(?P<iso>\d{{4}}-\d{{2}}-\d{{2}}[T ]\d{{2}}:\d{{2}}:\d{{2}}(?:[.,]\d+)?)(?P<iz>{ZONE})?"
    r"|(?P<sys>(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) {1,2}\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)"
    r"|(?P<ep>\d{10}(?:\.\d+)?|\d{13})"
    r")(?:[^0-9]|$)"
)

PIECES = ["<", ">", "<13>", "<1>", "<1234>", "<13>1 ", "<13>12 ", "<13>123 ", "[", "]", "2024", "-", "07", "01", "T",
          " ", "  ", "12", ":", "00", "59", "1", "9", ".", ",", "123", "123456789", "Z", "+", "+02:00", "-0530",
          "+2500", "+02:001", "Jul", "Dec", "jul", "Ju", "1720000000", "1720000000123", "17200000001", "x", "é", "\t",
          "2024-07-01T12:00:00", "2024-07-01 12:00:00", "Jul  1 12:00:00", "Feb 29 23:59:59"]
PREFIXES = ["", "<13>", "<13>1 ", "<13>12 ", "<13>123 ", "<1234>", "[", "<13>[", "<13>1 [", "[<13>", "<>", "<13>1"]
FORMS = ["2024-07-01T12:00:00", "2024-07-01 12:00:00", "2024-13-45 25:61:61", "2024-07-01 12:00", "Jul  1 12:00:00",
         "Jul 31 23:59:59", "Jul 1 12:00:00", "Jul   1 12:00:00", "Jul 123 12:00:00", "jul  1 12:00:00", "1720000000",
         "172000000", "1720000000123", "17200000001234", "99999999999"]
TAILS = ["", " x", "1", ".", ",", ".5", ",123456789", ".123Z", ".5+02:00", "Z", "Z1", "+02:00", "+0200", "-05:30x",
         "+02:001", "+2500", "+02:75", "+02", "+02:0", ".7-0100 1", "é", "\t", ". 1"]
lines = st.one_of(
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=12).map("".join),
    st.tuples(st.sampled_from(PREFIXES), st.sampled_from(FORMS), st.sampled_from(TAILS), st.sampled_from(TAILS))
    .map("".join))

BAD_OFFSET = 1 << 62


def _number(text: str) -> int:
    return int(text) if text else 0


def _millis(fraction: str) -> int:
    return int((fraction[:3]).ljust(3, "0")) if fraction else 0


def _zone_ms(zone: str) -> tuple[bool, int]:
    if not zone:
        return False, 0
    if zone == "Z":
        return True, 0
    digits = zone[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:])
    if hours > 23 or minutes > 59:
        return True, BAD_OFFSET
    return True, (-1 if zone[0] == "-" else 1) * (hours * 3_600_000 + minutes * 60_000)


def oracle(texts: list[str]) -> list[tuple[object, ...]]:
    """Per line, what RE2 matches: (kind, spans in bytes, fields) as match_builtin reports them."""
    column = pa.array(texts, pa.string())
    found = pc.extract_regex(column, BUILTIN_PATTERN).to_pylist()
    spans = pc.extract_regex(column, SPAN_PATTERN).to_pylist()
    months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    out: list[tuple[object, ...]] = []
    for groups, span in zip(found, spans, strict=True):
        if groups is None:
            assert span is None
            out.append((NONE, (0, 0, 0), (0,) * 9, False))
            continue
        pre = len(span["pre"].encode())
        body = pre + len((span["iso"] or span["sys"] or span["ep"]).encode())
        zone = body + len(span["iz"].encode())
        if groups["iY"]:
            has_zone, offset = _zone_ms(groups["iz"])
            fields = (int(groups["iY"]), int(groups["im"]), int(groups["id"]), int(groups["iH"]), int(groups["iM"]),
                      int(groups["iS"]), _millis(groups["if"]), offset, 0)
            out.append((ISO, (pre, body, zone), fields, has_zone))
        elif groups["sb"]:
            fields = (0, months.index(groups["sb"]) + 1, int(groups["sd"]), int(groups["sH"]), int(groups["sM"]),
                      int(groups["sS"]), _millis(groups["sf"]), 0, 0)
            out.append((SYSLOG, (pre, body, zone), fields, False))
        elif groups["es"]:
            epoch = _number(groups["es"]) * 1000 + _millis(groups["ef"])
            out.append((EPOCH_SECONDS, (pre, body, zone), (0,) * 8 + (epoch,), False))
        else:
            out.append((EPOCH_MILLIS, (pre, body, zone), (0,) * 8 + (int(groups["em"]),), False))
    return out


def matched(texts: list[str]) -> list[tuple[object, ...]]:
    found = match_builtin(*string_bytes(pa.array(texts, pa.string())))
    out: list[tuple[object, ...]] = []
    for i in range(len(texts)):
        fields = (found.year[i], found.month[i], found.day[i], found.hour[i], found.minute[i], found.second[i],
                  found.millis[i], found.offset_ms[i], found.epoch_ms[i])
        kind = int(found.kind[i])
        if kind in (EPOCH_SECONDS, EPOCH_MILLIS):
            fields = (0,) * 8 + (found.epoch_ms[i],)
        out.append((kind, tuple(int(v) for v in found.spans[i]), tuple(int(v) for v in fields),
                    bool(found.has_zone[i])))
    return out


@settings(max_examples=400)
@given(st.lists(lines, min_size=1, max_size=20))
@example(["2024-07-01 12:00:00,123 INFO", "2024-07-01T12:00:00.5+02:00 y", "<13>1 2024-07-01T12:00:00Z a",
          "[Jul  1 12:00:00] b", "Jul 11 12:00:00.123456 c", "1720000000.25 d", "1720000000123 e", "17200000001 f",
          "2024-07-01 12:00:001", "", "2024-07-01 12:00:00.123+02:001", "2024-07-01 12:00:00+2500 z",
          "<1>12 Jul  1 00:00:00", "2024-07-01 12:00:00.Z", "2024-07-01 12:00:00.5Z5", "Jul  1 12:00:00.", "Jul 1",
          "<13>", "<13>1720000000", "[1720000000123]", "2024-07-01 12:00:00+02:0", "Jul 123 12:00:00"])
def test_the_matcher_finds_what_re2_finds(texts: list[str]) -> None:
    assert matched(texts) == oracle(texts)


def test_a_slice_of_a_longer_column_is_matched_where_it_is() -> None:
    column = pa.array(["x", "2024-07-01 12:00:00 a", "Jul  1 12:00:00 b", "y"], pa.string()).slice(1, 2)
    found = match_builtin(*string_bytes(column))
    assert found.kind.tolist() == [ISO, SYSLOG] and found.spans[:, 1].tolist() == [19, 15]
