"""Hypothesis strategies for catalog expressions and records, shared by the expression tests.

Values and record texts are built from a few pieces (with the characters that need escaping in
LIKE, GLOB and regexes) so random terms match some random records and not others.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.catalog.expressions import Condition, Operator, Term, validate
from tidekeep.catalog.expressions.ast import Op
from tidekeep.catalog.expressions.bind import check_term

C = Condition
# texts are built from a few pieces, so random values and record texts overlap often (a random
# term then splits the records instead of matching none or all); quotes and case are covered by the
# scenario tests
PIECES = ("a", "A", "_", "%", "*", "?", "[", "\\", "é", "\n", "a_", "%a", "aé", "ab")
short_text = st.lists(st.sampled_from(PIECES), max_size=3).map("".join)
item_text = short_text
nonempty_text = st.lists(st.sampled_from(PIECES), min_size=1, max_size=2).map("".join)
record_text = st.lists(st.sampled_from((*PIECES, "")), min_size=1, max_size=4).map("".join)  # rarely empty


def _glob(leading: bool, parts: list[str], trailing: bool) -> str:
    if not leading and not trailing and len(parts) == 1:
        trailing = True  # at least one `*`
    return ("*" if leading else "") + "*".join(parts) + ("*" if trailing else "")


# wildcard values whose fixed parts are not empty, so a wrongly anchored pattern shows
wildcards = st.builds(_glob, st.booleans(), st.lists(nonempty_text, min_size=1, max_size=2), st.booleans())
TEXT_FIELDS = ("Feed", "Type", "Pipeline", "attr.k1", "attr.k-2")
INTEGER_FIELDS = ("Id", "Parent Id", "File Size", "Raw Size")
DATE_FIELDS = ("Create Time", "Effective Time", "Status Time")
STATUSES = ("UNLOCKED", "LOCKED", "DELETED")
DICTIONARIES = {"d1": ["a", "A", "é", "a b"], "d2": ["%", "_", "*", "%a"], "empty": []}
NOW_MS = 100_000


@st.composite
def regexes(draw: st.DrawFn) -> str:
    """Patterns in the supported subset, built from pieces."""
    pieces = st.sampled_from(
        ["a", "A", "b", "_", "é", ".", r"\.", r"\*", r"\\", r"\d", r"\w", r"\s", r"\W", "[ab]", "[^a]", r"[a-z\]]",
         "(a|b)", "(?:%|_)", " ", r"\n", "'", '"', "%"]
    )
    quantifiers = st.sampled_from(["", "", "", "*", "+", "?", "{1,2}", "{2}"])
    body = "".join(draw(st.lists(st.tuples(pieces, quantifiers).map("".join), min_size=1, max_size=4)))
    return draw(st.sampled_from(["", "^"])) + body + draw(st.sampled_from(["", "$"]))


def _int_value() -> st.SearchStrategy[str]:
    return st.integers(-2, 12).map(str)


def _date_value() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(0, 200_000).map(str),
        st.integers(0, 200).map(lambda s: f"now()-{s}s"),
        st.integers(0, 100).map(lambda s: f"minute()+{s}s"),
        st.integers(0, 200).map(lambda s: f"1970-01-01T00:{s // 60:02d}:{s % 60:02d}Z"),
    )


@st.composite
def terms(draw: st.DrawFn) -> Term:
    kind = draw(st.sampled_from(["text", "text", "status", "integer", "date"]))
    if kind == "text":
        field = draw(st.sampled_from(TEXT_FIELDS))
        condition = draw(st.sampled_from(_TEXT_CONDITIONS))
        if condition in (C.IS_NULL, C.IS_NOT_NULL):
            value = None
        elif condition is C.IN:
            value = ",".join(draw(st.lists(item_text, max_size=3)))
        elif condition is C.IN_DICTIONARY:
            value = draw(st.sampled_from(sorted(DICTIONARIES)))
        elif condition is C.MATCHES_REGEX:
            value = draw(regexes())
        elif condition in (C.EQUALS, C.NOT_EQUALS):  # wildcards often: they are the easiest to get wrong
            value = draw(st.one_of(nonempty_text, wildcards, st.just("")))
        else:
            value = draw(st.one_of(nonempty_text, nonempty_text, st.just("")))
    elif kind == "status":
        field = "Status"
        condition = draw(st.sampled_from([C.EQUALS, C.NOT_EQUALS, C.IN, C.IS_NULL, C.IS_NOT_NULL]))
        if condition in (C.IS_NULL, C.IS_NOT_NULL):
            value = None
        elif condition is C.IN:
            value = ",".join(draw(st.lists(st.sampled_from(STATUSES), max_size=3)))
        else:
            value = draw(st.sampled_from(STATUSES))
    else:
        field = draw(st.sampled_from(INTEGER_FIELDS if kind == "integer" else DATE_FIELDS))
        values = _int_value() if kind == "integer" else _date_value()
        condition = draw(st.sampled_from([C.EQUALS, C.NOT_EQUALS, C.IN, C.IS_NULL, C.IS_NOT_NULL, *_ORDERING]))
        if condition in (C.IS_NULL, C.IS_NOT_NULL):
            value = None
        elif condition is C.IN:
            value = ",".join(draw(st.lists(values, max_size=3)))
        elif condition is C.BETWEEN:
            value = f"{draw(values)},{draw(values)}"
        else:
            value = draw(values)
    enabled = draw(st.booleans()) if draw(st.integers(0, 9)) == 0 else True
    return check_term(Term(field, condition, value, enabled))


_ORDERING = (C.GREATER_THAN, C.GREATER_THAN_OR_EQUAL_TO, C.LESS_THAN, C.LESS_THAN_OR_EQUAL_TO, C.BETWEEN)
# weighted towards the conditions whose SQL differs most between engines
_TEXT_CONDITIONS = (
    [c for c in C if c not in _ORDERING]
    + [C.EQUALS, C.NOT_EQUALS] * 3
    + [C.CONTAINS, C.STARTS_WITH, C.ENDS_WITH, C.MATCHES_REGEX] * 2
)


def expressions(max_leaves: int = 6) -> st.SearchStrategy:
    def extend(children: st.SearchStrategy) -> st.SearchStrategy:
        return st.builds(
            Operator,
            st.sampled_from(list(Op)),
            st.lists(children, max_size=3).map(tuple),
            st.integers(0, 9).map(lambda n: n != 0),
        )

    return st.recursive(terms(), extend, max_leaves=max_leaves)


def _maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


@st.composite
def records(draw: st.DrawFn, record_id: int | None = None) -> dict:
    attributes = draw(
        _maybe(st.dictionaries(st.sampled_from(["k1", "k-2", "other"]), record_text, max_size=3))
    )
    return {
        "id": record_id if record_id is not None else draw(st.integers(-2, 12)),
        "feed": draw(record_text),
        "type": draw(record_text),
        "create_time": draw(st.integers(0, 200_000)),
        "effective_time": draw(_maybe(st.integers(0, 200_000))),
        "status": draw(st.sampled_from(STATUSES)),
        "status_time": draw(st.integers(0, 200_000)),
        "parent_id": draw(_maybe(st.integers(-2, 12))),
        "pipeline": draw(_maybe(record_text)),
        "file_size": draw(_maybe(st.sampled_from([0, 1, 5, 12, 1000, 1024, 2000]))),
        "raw_size": draw(_maybe(st.integers(-2, 12))),
        "location": None,
        "attributes": None if attributes is None else json.dumps(attributes, sort_keys=True, separators=(",", ":")),
    }


@settings(max_examples=200, deadline=None)
@given(expressions())
def test_generated_expressions_are_valid(expr) -> None:
    validate(expr)  # every generated term is canonical and valid; a strategy bug would fail here
