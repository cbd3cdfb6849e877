"""Compile an expression to a plain Python predicate over one record mapping.

The record has catalog_records column names; `attributes` may be the JSON object text the table
stores, a dict, or None. Same meaning as sql.py and spark.py: a term on a missing value is false
(IS_NULL true), NOT is plain negation, matching is case-sensitive. Regexes and `*` wildcards run
on RE2 (google-re2), in time linear in the value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..fields import Field
from .ast import Expr
from .bind import BoundTerm, CompileContext, bind
from .regex import compile_re2, glob_re2, re2_search
from .visitor import BoundCompiler

Record = Mapping[str, Any]
Predicate = Callable[[Record], bool]

Test = Callable[[Any], bool]  # one term's test of a present value


def to_python(expr: Expr, ctx: CompileContext) -> Predicate:
    return _COMPILER.compile(bind(expr, ctx))


class PythonCompiler(BoundCompiler[Predicate, Callable[[Record], Any], Test]):
    """Closures over a record mapping; a term reads its value once and tests it."""

    def constant(self, value: bool) -> Predicate:
        return lambda record: value

    def all_of(self, children: Sequence[Predicate]) -> Predicate:
        return lambda record: all(child(record) for child in children)

    def any_of(self, children: Sequence[Predicate]) -> Predicate:
        return lambda record: any(child(record) for child in children)

    def negate(self, child: Predicate) -> Predicate:
        return lambda record: not child(record)

    def value_of(self, field: Field) -> Callable[[Record], Any]:
        if field.attribute is None:
            column = field.column
            return lambda record: record.get(column)
        name = field.attribute

        def attribute(record: Record) -> Any:
            raw = record.get("attributes")
            if raw is None:
                return None
            values = json.loads(raw) if isinstance(raw, str) else raw
            value = values.get(name) if isinstance(values, dict) else None
            return value if isinstance(value, str) else None

        return attribute

    def is_null(self, value: Callable[[Record], Any]) -> Predicate:
        return lambda record: value(record) is None

    def is_not_null(self, value: Callable[[Record], Any]) -> Predicate:
        return lambda record: value(record) is not None

    def present_and(self, value: Callable[[Record], Any], test: Test) -> Predicate:
        def term(record: Record) -> bool:
            present = value(record)
            return present is not None and bool(test(present))  # two-valued: a missing value is false

        return term

    def eq(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        target = term.value
        return lambda present: bool(present == target)

    def ne(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        target = term.value
        return lambda present: bool(present != target)

    def gt(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        target = term.value
        return lambda present: bool(present > target)

    def ge(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        target = term.value
        return lambda present: bool(present >= target)

    def lt(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        target = term.value
        return lambda present: bool(present < target)

    def le(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        target = term.value
        return lambda present: bool(present <= target)

    def between(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        low, high = term.values
        return lambda present: bool(low <= present <= high)

    def in_(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        members = frozenset(term.values)
        return lambda present: present in members

    def glob(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        pattern = compile_re2(glob_re2(term.parts))
        return lambda present: re2_search(pattern, present)

    def not_glob(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        pattern = compile_re2(glob_re2(term.parts))
        return lambda present: not re2_search(pattern, present)

    def contains(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        text = _text(term)
        return lambda present: text in present

    def starts(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        text = _text(term)
        return lambda present: bool(present.startswith(text))

    def ends(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        text = _text(term)
        return lambda present: bool(present.endswith(text))

    def regex(self, term: BoundTerm, value: Callable[[Record], Any]) -> Test:
        assert term.regex is not None
        compiled = term.regex.compiled()
        return lambda present: re2_search(compiled, present)


def _text(term: BoundTerm) -> str:
    assert isinstance(term.value, str)  # contains / starts / ends carry text
    return term.value


_COMPILER = PythonCompiler()  # at import: a compiler missing a method fails here (visitor.py)


__all__ = ["PythonCompiler", "to_python"]
