"""Escaping of control characters in human output (tidekeep.printable and the CLI output layer),
against a brute-force oracle built from Unicode categories, and the exactness of `--json`."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
import unicodedata
from collections.abc import Callable, Iterator

from hypothesis import given
from hypothesis import strategies as st

from tidekeep.cli.output import emit, emit_json, emit_json_line, emit_table, fields
from tidekeep.printable import PrintableFormatter, json_safe, printable

BIDI_CONTROLS = {"\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))}


def unsafe(char: str) -> bool:
    """Oracle: controls (Cc), line/paragraph separators (Zl, Zp), surrogates (Cs), bidi controls."""
    return unicodedata.category(char) in {"Cc", "Zl", "Zp", "Cs"} or char in BIDI_CONTROLS


def oracle(text: str) -> str:
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    out = []
    for char in text:
        if not unsafe(char):
            out.append(char)
        elif char in named:
            out.append(named[char])
        elif ord(char) < 0x100:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(f"\\u{ord(char):04x}")
    return "".join(out)


DANGEROUS = ["\n", "\r", "\t", "\x00", "\x1b", "\x1b[2J", "\x7f", "\x85", "\x9b", "\u2028", "\u2029", "\u202e",
             "\u2066", "\u200f", "\udcff", "[bold]", "\\", "é", "😀", " "]
texts = st.lists(st.one_of(st.characters(exclude_categories=()), st.sampled_from(DANGEROUS)),
                 max_size=20).map("".join)


@contextlib.contextmanager
def captured() -> Iterator[Callable[[], str]]:
    out = io.BytesIO()
    wrapper = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
    saved, sys.stdout = sys.stdout, wrapper
    try:
        # strict decoding: nothing unencodable reached the bytes; the wrapper is referenced so that
        # it is not collected (and closes the buffer) before the test reads it
        yield lambda: (wrapper, out.getvalue().decode("utf-8"))[1]
    finally:
        sys.stdout = saved


def no_unsafe_but_line_ends(text: str) -> None:
    assert not any(unsafe(c) for c in text.replace("\n", "")), repr(text)


@given(texts)
def test_printable_matches_the_oracle(text: str) -> None:
    escaped = printable(text)
    assert escaped == oracle(text)
    assert printable(escaped) == escaped  # escaping twice changes nothing
    assert len(escaped.splitlines()) <= 1


@given(st.lists(st.lists(texts, min_size=3, max_size=3), max_size=5), texts)
def test_tables_print_one_line_per_row(rows: list[list[str]], label: str) -> None:
    with captured() as output:
        emit_table(["A", "B", "C"], rows)
    text = output()
    lines = text.split("\n")
    assert lines[-1] == "" and len(lines) == len(rows) + 2
    assert len(text.splitlines()) == len(rows) + 1  # no other line break Python knows of
    no_unsafe_but_line_ends(text)
    for line, row in zip(lines[1:], rows, strict=False):
        for cell in row:
            assert oracle(cell).strip() in line

    with captured() as output:
        fields([("label", label), ("other", "x")])
        emit(label)
    text = output()
    assert len(text.splitlines()) == 3 and text.endswith("\n")
    no_unsafe_but_line_ends(text)
    assert text.splitlines()[2] == oracle(label)


@given(st.lists(texts, max_size=5))
def test_json_output_is_exact_and_inert(values: list[str]) -> None:
    for write in (emit_json, emit_json_line):
        with captured() as output:
            write({"values": values})
        text = output()
        assert json.loads(text) == {"values": values}
        no_unsafe_but_line_ends(text)
    assert json.loads(json_safe(json.dumps(values, ensure_ascii=False))) == values


def test_log_messages_are_one_line() -> None:
    formatter = PrintableFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord("tidekeep", logging.WARNING, __file__, 1, "skipped %s", ("a\nFAKE\x1b[2J",), None)
    assert formatter.format(record) == "WARNING skipped a\\nFAKE\\x1b[2J"


def test_an_exported_rule_file_reads_back_the_same_after_escaping() -> None:
    from tidekeep.catalog.rules import parse_rules_text, to_yaml_text

    text = ('rules:\n  - number: 1\n    name: "a\\u202eb\\x1bc\\nd"\n'
            '    expression: "feed = \\"q\\u202e\\""\n    age: 1d\n')
    ruleset = parse_rules_text(text)
    assert ruleset.rules[0].name == "a\u202eb\x1bc\nd"
    shown = "\n".join(printable(line) for line in to_yaml_text(ruleset).split("\n"))  # what `rules export` prints
    no_unsafe_but_line_ends(shown)
    assert parse_rules_text(shown) == ruleset
