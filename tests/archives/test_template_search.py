"""Ruling rows of a template-encoded archive out before decoding (archives/template_search.py) never
rules out a row that matches: compared with the query matched on the text, over random messages
and queries cut from them."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import example, given
from hypothesis import strategies as st

from tidekeep.archives.archive_format import GROUPED_FORMAT, encode_rows, restore_rows
from tidekeep.archives.model import ARCHIVE_SCHEMA
from tidekeep.archives.query import compile_query
from tidekeep.archives.template_search import template_filter

PIECES = ["-0", "0", "007", "+5", "1e5", "9223372036854775808", "-31.90", "00.10", "1.2.3.4", "\x11", "\x12",
          "\x13", "\\", "=", "level=INFO", "cafe", "be", "caf\u00e9", "\u212a", "\u017f", " ", "\n", "-", ".", "_",
          "node-17", "id.", "ERROR", "error", "k", "S", "user=alice", "2024-10-07T13:55:36.123Z ",
          "2024-10-07 13:55:36,123 ", "Oct  7 13:55:36 ", "1728309336123 ", "[2024-10-07T13:55:36Z] "]
STAMP = 1_728_309_336_123
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)
message = st.lists(st.one_of(st.sampled_from(PIECES), texts), max_size=10).map("".join)


def encoded(messages: list[str], stamps: list[int | None]) -> pa.Table:
    table = pa.table({"timestamp": pa.array(stamps, pa.int64()), "message": messages,
                      "source": ["a.log"] * len(messages)}, schema=ARCHIVE_SCHEMA)
    # written as format 3 and read back as a search reads a row group: values in row order again
    return restore_rows(GROUPED_FORMAT, encode_rows(table, "UTC"))


def escaped(text: str) -> str:
    return "".join("\\" + c if c in "*?\\" else c for c in text)


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[str], list[int | None], str, bool, bool]:
    messages = draw(st.lists(message, min_size=1, max_size=8))
    # some start with a timestamp text that is their timestamp, so it is taken out of the text
    stamps = [STAMP if m.startswith(("2024-10-07", "Oct  7", "1728309336123", "[2024")) and draw(st.booleans())
              else None for m in messages]
    source = draw(st.sampled_from(messages))
    start = draw(st.integers(0, len(source)))
    cut = source[start:draw(st.integers(start, len(source)))]
    wild = draw(st.lists(st.integers(0, max(0, len(cut) - 1)), max_size=2))
    regex = draw(st.booleans())
    quote = re.escape if regex else escaped
    pieces, last = [], 0
    for at in sorted(set(wild)):
        pieces.append(quote(cut[last:at]))
        pieces.append(draw(st.sampled_from(["(?s:.*)", "(?s:.)", "[0-9]+", "(a|b)?"] if regex else ["*", "?"])))
        last = at + 1
    pieces.append(quote(cut[last:]))
    query = ("".join(pieces) or "(?s:.*)") if regex else "*" + "".join(pieces) + "*"
    ignore_case = draw(st.booleans())
    if ignore_case:
        query = "".join(c.swapcase() if draw(st.booleans()) and c.isalpha() else c for c in query) if not regex \
            else query
    return messages, stamps, query, ignore_case, regex


@given(cases())
@example((["Task 12 done on node-17", "disk full"], [None, None], "*node-17*", False, False))
@example((["2024-10-07T13:55:36.123Z level=INFO x"], [STAMP], "*36.123Z lev*", False, False))
@example((["2024-10-07T13:55:36.123Z level=INFO x"], [STAMP], "*13:55*", False, False))
@example((["\u212a=1"], [None], "*k=1*", True, False))
@example((["\u212aS=1 \u017f"], [None], "ks=1 S", True, True))
@example((["Task 12 done", "x -31.90 y"], [None, None], "*12*", False, False))  # in a number variable
@example((["Task 12 done", "x -31.90 y"], [None, None], "*1.9*", False, False))
@example((["a\\\x11b"], [None], "*\\\\\x11b*", False, False))
@example((["latency_ms\":120 x"], [None], 'latency_ms":[0-9]{3,}', False, True))
def test_no_row_that_matches_is_ruled_out(case: tuple[list[str], list[int | None], str, bool, bool]) -> None:
    messages, stamps, query, ignore_case, regex = case
    # in the order the encoding keeps rows (source, then timestamp; one source here)
    messages, stamps = zip(*sorted(zip(messages, stamps, strict=True), key=lambda p: p[1] is None), strict=True)
    messages, stamps = list(messages), list(stamps)
    matcher = compile_query(query, ignore_case=ignore_case, regex=regex)
    truth = matcher.mask(pa.array(messages, pa.string())).to_pylist()
    rule = template_filter(matcher)
    if rule is None:
        return
    table = encoded(messages, stamps)
    # dense, and as a search reads them: Arrow dictionaries of the distinct values
    variables = table.column("variables")
    for logtypes, values in ((table.column("logtype"), variables),
                             (pc.dictionary_encode(table.column("logtype")),
                              variables.cast(pa.list_(pa.dictionary(pa.int32(), pa.binary()))))):
        kept = rule.candidates(pc.dictionary_encode(table.column("timestamp_format")), logtypes, values)
        assert all(k for t, k in zip(truth, kept, strict=True) if t), (messages, query, list(kept))


def test_rows_whose_log_type_and_variables_cannot_match_are_ruled_out() -> None:
    messages = ["Task 12 done on node-17", "disk full on node-3", "user=alice logged in", "level=ERROR x=1",
                "2024-10-07T13:55:36.123Z cache miss"]
    table = encoded(messages, [STAMP] * len(messages))  # one timestamp: rows keep their order
    assert table.column("timestamp_format")[4].is_valid  # the timestamp text was taken out

    def kept(query: str, ignore_case: bool = False) -> list[str]:
        rule = template_filter(compile_query(query, ignore_case=ignore_case))
        assert rule is not None
        mask = rule.candidates(table.column("timestamp_format"), table.column("logtype"), table.column("variables"))
        return [m for m, k in zip(messages, mask, strict=True) if k]

    assert kept("*disk*") == ["disk full on node-3"]  # static text only
    assert kept("*node-17*") == ["Task 12 done on node-17"]  # in one row's dictionary variable
    assert kept("*ERROR*") == ["level=ERROR x=1"]  # a dictionary variable after '='
    assert kept("*Error*", ignore_case=True) == ["level=ERROR x=1"]
    assert kept("*done on*") == ["Task 12 done on node-17"]
    assert kept("*cache*miss*") == ["2024-10-07T13:55:36.123Z cache miss"]
    # a run that may lie in the timestamp text keeps the rows whose timestamp text was taken out
    assert kept("*13:55*") == ["2024-10-07T13:55:36.123Z cache miss"]
    # a run of digits may lie in any variable or timestamp text: only rows with none are ruled out
    assert kept("*12*") == messages
    assert kept("*12 done*") == ["Task 12 done on node-17"]


def test_queries_that_rule_nothing_out_have_no_filter() -> None:
    assert template_filter(compile_query("*")) is None
    assert template_filter(compile_query("a|b", regex=True)) is None
    assert template_filter(compile_query("[a-z]+\\d", regex=True)) is None
    assert template_filter(compile_query("?")) is None
    assert template_filter(compile_query("*ks*", ignore_case=True)) is None  # both fold beyond ASCII
    assert template_filter(compile_query("*\u00e9*", ignore_case=True)) is None


def test_ignore_case_and_regex_queries_are_tested_by_their_plain_parts() -> None:
    [test] = template_filter(compile_query("*kind*", ignore_case=True)).tests  # k folds with the Kelvin sign
    assert test.literal == "ind"
    assert [t.literal for t in template_filter(compile_query("*failed password*", ignore_case=True)).tests] == [
        "failed pa", "word"]
    assert [t.literal for t in template_filter(compile_query('latency_ms":[0-9]{3,}', regex=True)).tests] == [
        'latency_ms":']
