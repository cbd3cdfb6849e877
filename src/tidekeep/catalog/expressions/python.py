"""Compile an expression to a plain Python predicate over one record mapping.

The record has catalog_records column names; `attributes` may be the JSON object text the table
stores, a dict, or None. Same meaning as sql.py and spark.py: a term on a missing value is false
(IS_NULL true), NOT is plain negation, matching is case-sensitive. Regexes and `*` wildcards run
on RE2 (google-re2), in time linear in the value.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Mapping
from typing import Any

from ..fields import Field
from .ast import Expr, Op
from .bind import Bound, BoundConst, BoundOp, BoundTerm, CompileContext, bind
from .regex import compile_re2, glob_re2, re2_search

Record = Mapping[str, Any]
Predicate = Callable[[Record], bool]

_COMPARE = {"eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "ge": operator.ge, "lt": operator.lt,
            "le": operator.le}


def to_python(expr: Expr, ctx: CompileContext) -> Predicate:
    return _compile(bind(expr, ctx))


def _getter(fld: Field) -> Callable[[Record], Any]:
    if fld.attribute is None:
        column = fld.column
        return lambda record: record.get(column)
    name = fld.attribute

    def attribute(record: Record) -> Any:
        raw = record.get("attributes")
        if raw is None:
            return None
        values = json.loads(raw) if isinstance(raw, str) else raw
        value = values.get(name) if isinstance(values, dict) else None
        return value if isinstance(value, str) else None

    return attribute


def _test(term: BoundTerm) -> Callable[[Any], bool]:
    kind = term.kind
    if kind in _COMPARE:
        compare, target = _COMPARE[kind], term.value
        return lambda value: compare(value, target)
    if kind in ("glob", "not_glob"):
        pattern = compile_re2(glob_re2(term.parts))
        wanted = kind == "glob"
        return lambda value: re2_search(pattern, value) == wanted
    if kind == "in":
        members = frozenset(term.values)
        return lambda value: value in members
    if kind == "between":
        low, high = term.values
        return lambda value: low <= value <= high  # type: ignore[operator]
    if kind == "contains":
        return lambda value: term.value in value
    if kind == "starts":
        return lambda value: value.startswith(term.value)
    if kind == "ends":
        return lambda value: value.endswith(term.value)
    if kind == "regex":
        assert term.regex is not None
        compiled = term.regex.compiled()
        return lambda value: re2_search(compiled, value)
    if kind == "not_null":
        return lambda value: True
    raise AssertionError(kind)  # pragma: no cover


def _compile(bound: Bound) -> Predicate:
    if isinstance(bound, BoundConst):
        constant = bound.value
        return lambda record: constant
    if isinstance(bound, BoundOp):
        children = [_compile(child) for child in bound.children]
        if bound.op is Op.AND:
            return lambda record: all(child(record) for child in children)
        if bound.op is Op.OR:
            return lambda record: any(child(record) for child in children)
        only = children[0]
        return lambda record: not only(record)
    get = _getter(bound.field)
    if bound.kind == "null":
        return lambda record: get(record) is None
    test = _test(bound)

    def term(record: Record) -> bool:
        value = get(record)
        return value is not None and bool(test(value))  # two-valued: a missing value is false

    return term


__all__ = ["to_python"]
