"""digit_filter: a regex's literal text followed by digits, tested on log types and numbers before
decoding. The filter may keep rows that do not match, never drop one that does: checked against
RE2 on the messages themselves, with their timestamps taken out as ingest takes them out."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from tidekeep.archives.digit_filter import ANY_PLACEHOLDER, DigitTest, digit_candidates, digit_tests
from tidekeep.archives.query import compile_query, regex_digit_runs
from tidekeep.archives.template_columns import encode_column
from tidekeep.archives.timestamp_text import split_timestamps
from tidekeep.archives.timestamps import make_rules, parse_timestamps


@pytest.mark.parametrize(("pattern", "runs"), [
    (r"duration\(ns\): [0-9]{10,}", (("duration(ns): ", 10),)), ('latency_ms":\\d{3,}', (('latency_ms":', 3),)),
    ("a[0-9]", (("a", 1),)), (r"x\d+y", (("x", 1),)), (r"x\d*", ()), ("x[0-9]?", ()), ("x[0-9]{0,3}", ()),
    ("ab?[0-9]{3}", ()), ("(x)[0-9]{3}", ()), ("a|b[0-9]", ()), ("(?i)a[0-9]", ()), ("[0-9]{4}", ()),
    ("x[0-9]{2}[0-9]", (("x", 2),)), ("x[[:digit:]]{2,5}?", (("x", 2),)), ("x[0-9a]{3}", ()),
    ("a.b [0-9]{2} c=[0-9]{3}", (("b ", 2), (" c=", 3))),
])
def test_regex_digit_runs(pattern: str, runs: tuple[tuple[str, int], ...]) -> None:
    assert regex_digit_runs(pattern) == runs


digit_atoms = st.sampled_from(["a", "b", " ", ":", "=", "-", ".", "1", "7", "0"]).map(re.escape)
digit_classes = st.sampled_from([r"\d", "[0-9]", "[[:digit:]]", "[0-9a]", "."])
quantifiers = st.sampled_from(["", "*", "+", "?", "{2}", "{1,3}", "{3,}", "{2}?"])


@st.composite
def digit_regexes(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.one_of(st.tuples(digit_atoms, quantifiers), st.tuples(digit_classes, quantifiers)),
                           min_size=1, max_size=6))
    return "".join(a + q for a, q in pieces)


@settings(max_examples=400, deadline=None)
@given(digit_regexes(), st.lists(st.text(alphabet="ab :=-.1709", max_size=12), min_size=1, max_size=8))
def test_every_match_holds_each_run_and_its_digits(pattern: str, texts: list[str]) -> None:
    """RE2 (what searches run) decides what matches."""
    matches = pc.match_substring_regex(pa.array(texts), pattern).to_pylist()
    for run, digits in regex_digit_runs(pattern):
        holds = pc.match_substring_regex(pa.array(texts), re.escape(run) + f"[0-9]{{{digits}}}").to_pylist()
        assert all(held for held, match in zip(holds, matches, strict=True) if match), (pattern, texts)


def shapes(pattern: str, ignore_case: bool = False) -> list[list[bytes | None]]:
    """Each test's shapes, each as runs of bytes split where a placeholder goes (None)."""
    out = []
    for test in digit_tests(compile_query(pattern, regex=True, ignore_case=ignore_case)):
        for shape in test.shapes:
            pieces: list[bytes | None] = [b""]
            for byte in shape:
                if byte == ANY_PLACEHOLDER:
                    pieces += [None, b""]
                else:
                    pieces[-1] += bytes([byte])  # type: ignore[operator]
            out.append([piece for piece in pieces if piece != b""])
    return out


def test_a_run_becomes_what_log_types_hold_for_it() -> None:
    # the leading token may go on before the run: the end of static text, or a placeholder
    assert shapes(r"duration\(ns\): [0-9]{10,}") == [[b"duration(ns): "], [None, b"(ns): "]]
    assert shapes('latency_ms":[0-9]{3,}') == [[b'latency_ms":'], [None, b'":']]
    assert shapes('"latency_ms":[0-9]{3,}') == [[b'"latency_ms":']]  # a whole token: static
    assert shapes("x1 took [0-9]{2}") == [[None, b" took "]]  # with a digit: a variable
    assert shapes(" id=cafe size=\\d+") == [[b" id=", None, b" size="]]  # hex, after '=': variables
    assert shapes(" C:\\\\x \x11: \\d") == [[b" C:\\\\x \\\x11: "]]  # escaped as log types escape it
    assert shapes("user[0-9]+") == []  # the digits go on a token
    assert digit_tests(compile_query("user: [0-9]+", regex=False)) == ()  # a wildcard query has none
    assert shapes("User: [0-9]", ignore_case=True) == [[b": "]]
    assert shapes("é:[0-9]", ignore_case=True) == []
    assert shapes("é:[0-9]") == [["é:".encode()]]
    assert digit_tests(compile_query("a: [0-9]{3} b=[0-9]", regex=True)) == (
        DigitTest("a: ", 3, (tuple(b"a: "), (ANY_PLACEHOLDER, *b": "))), DigitTest(" b=", 1, (tuple(b" b="),)))


def candidates(pattern: str, messages: list[str], *, dictionary: bool = False,
               ignore_case: bool = False) -> list[bool]:
    """The filter's verdict on messages archived as ingest archives them (timestamps taken out)."""
    lines = pa.array([m.split("\n")[0] for m in messages], pa.string())
    stamps = parse_timestamps(lines, make_rules("Europe/Berlin", now_ms=1_800_000_000_000))
    formats, rest = split_timestamps(pa.array(messages, pa.string()), stamps, "Europe/Berlin")
    encoded = encode_column(rest)
    logtypes = pc.dictionary_encode(encoded.logtypes) if dictionary else encoded.logtypes
    tests = digit_tests(compile_query(pattern, regex=True, ignore_case=ignore_case))
    return digit_candidates(tests, formats, logtypes, encoded.numbers).tolist()


def test_numbers_too_short_are_ruled_out() -> None:
    messages = ["op duration(ns): 123 ok", "op duration(ns): 12345678901 ok", "op duration(ns): -12345678901",
                "op duration(ns): 1234567890.5", "op duration(ns): 123456789.5", "op duration(ns): 0123456789x",
                "op duration(ns): 7 then duration(ns): 98765432109", "no duration here 12345678901",
                "op duration(ns): 9223372036854775807", "op duration(ns): 12345678901234567890123"]
    assert candidates(r"duration\(ns\): [0-9]{10,}", messages) == \
        [False, True, False, True, False, True, True, False, True, True]
    assert candidates(r"duration\(ns\): [0-9]{10,}", messages, dictionary=True) == \
        candidates(r"duration\(ns\): [0-9]{10,}", messages)
    # no int64 has 20 digits; a dictionary variable is kept unread
    assert candidates(r": \d{20}", messages) == [False] * 5 + [True] + [False] * 3 + [True]
    assert candidates(r": \d", ["a: -1", "a: 0", "a: .5", "a: 0.5", "a: -0.5"]) == [False, True, False, True, False]


def test_a_timestamp_that_could_hold_the_digits_keeps_its_row() -> None:
    # the timestamp is taken out of the message: " 12" after the date is not in the log type
    messages = ["2024-07-01 12:00:00 x", "2024-07-01T12:00:00Z x", "<13>Jul  1 12:00:00 x", "x 12"]
    assert candidates(r" [0-9]{2}", messages) == [True, False, True, True]
    assert candidates(r":[0-9]{2}", messages) == [True, True, True, False]


# messages made of what the filter has to decide on: words, the delimiters the patterns end in, and
# numbers of every kind around each pattern's digit count (integers, floats, negatives, leading
# zeros, dictionary variables, placeholder bytes), after timestamps that may hold the digits
WORDS = ["", "", "x", "id", "duration(ns)", "latency_ms\"", "é", "\\", "\x11", "x\x13", "cafe", "7id", "x1 took",
         "=id", "took", "id=cafe size", "=cafe size", "\"latency_ms\"", "ID", "x7latency_ms\"", "=latency_ms\"",
         "7duration(ns)"]
DELIMITERS = [": ", ":", " ", "= ", "=", "-", ".", "é", "\x11 ", "\\", '":', " - "]
NUMBERS = ["0", "7", "9", "10", "99", "100", "999", "1000", "99999", "100000", "-42", "-100", "007", "1.5", "12.25",
           "99.5", "100.5", "-1.5", ".5", "0.001", "1e5", "abc123", "9999999999", "10000000000",
           "9223372036854775807", "-9223372036854775808", "92233720368547758070", "1234567890.5"]
TIMESTAMPS = ["", "", "2024-07-01 12:00:00,123 ", "2024-07-01T12:00:00Z ", "Jul  1 12:00:00 ", "1719835200 ",
              "<13>1 2024-07-01T12:00:00+02:00 ", "[2024-07-01 12:00:00] "]
PATTERNS = [r"duration\(ns\): [0-9]{10,}", r": \d{2,}", r":\d", r"\": ?[0-9]{3}", r"= [0-9]+", r" [0-9]{2}",
            r"-[0-9]{3,}", r"\.[0-9]{2}", "é[0-9]", r"\x11 [0-9]", r"x: [0-9]{5}x", r"\\[0-9]", r"[0-9] [0-9]{2}",
            r"=\d{3}", r" - [[:digit:]]{6}", 'latency_ms":[0-9]{3,}', r"id: \d{2,}", r"x1 took: [0-9]{2}",
            r"id=cafe size=\d+", r" size=[0-9]{3}", r"ID: [0-9]{2}", r"took :\d{3}", r"00 id: \d{2}", r"Z x: [0-9]",
            r"3 \d", r"0\] \d"]
message_parts = st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(DELIMITERS), st.sampled_from(NUMBERS)),
                         max_size=4)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(TIMESTAMPS), message_parts), min_size=1, max_size=10),
       st.sampled_from(PATTERNS), st.booleans(), st.booleans())
@example([("", [("x", ": ", "12")]), ("2024-07-01 12:00:00 ", [("", ": ", "9")])], r": \d{2,}", False, False)
@example([("", [("", ":", "0"), ("", ":", "-42")])], r":\d", False, False)
@example([("", [("", "=", "abc123"), ("", "=", "100")])], r"=\d{3}", False, False)
@example([("", [("", "=", "99.5"), ("", "=", "100.5")])], r"=\d{3}", False, False)
@example([("", [("\x11", ": ", "123"), ("", " ", "7")])], r": \d{2,}", False, False)  # an escaped 0x11 is no number
@example([("", [("x7latency_ms\"", ":", "100")])], 'latency_ms":[0-9]{3,}', False, False)  # a variable's tail
@example([("", [("id=cafe size", "=", "7")])], r"id=cafe size=\d+", False, False)  # a variable inside the run
@example([("Jul  1 12:00:00 ", [("id", ": ", "42")])], r"00 id: \d{2}", False, False)  # begins in the timestamp
def test_no_row_that_matches_is_ruled_out(rows: list[tuple[str, list[tuple[str, str, str]]]], pattern: str,
                                         dictionary: bool, ignore_case: bool) -> None:
    messages = [stamp + "".join(word + delimiter + number for word, delimiter, number in parts)
                for stamp, parts in rows]
    matches = pc.match_substring_regex(pa.array(messages), pattern, ignore_case=ignore_case).to_pylist()
    kept = candidates(pattern, messages, dictionary=dictionary, ignore_case=ignore_case)
    assert all(keep for keep, match in zip(kept, matches, strict=True) if match), (messages, kept, matches)
    event(f"rows ruled out: {'some' if not all(kept) else 'none'}")


def test_damaged_rows_are_kept_for_decoding_to_report() -> None:
    test = (DigitTest("a: ", 3, (tuple(b"a: "),)),)
    formats = pa.nulls(3, pa.string())
    logtypes = pa.array([b"a: \x11", b"a: \x13", None], pa.binary())
    numbers = pa.array([[], [1 << 62], []], pa.list_(pa.int64()))  # no number; bits no float has
    assert digit_candidates(test, formats, logtypes, numbers).tolist() == [True, True, True]


def test_a_run_that_begins_in_the_timestamp_keeps_its_row() -> None:
    """The run's start can be the end of the timestamp text, which is not in the log type."""
    messages = ["2024-07-01 12:00:00 GET /x: 123", "2024-07-01T12:00:00Z id: 42", "GET /x: 123"]
    assert candidates(r"00 GET /x: [0-9]{3}", messages) == [True, False, False]
    assert candidates(r"Z id: [0-9]", messages) == [False, True, False]
