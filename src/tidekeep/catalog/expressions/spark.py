"""Compile an expression to a Spark Column over a DataFrame with catalog_records columns (times as
LongType ms, `attributes` as the JSON object text), with the same meaning as python.py and sql.py.

Each term is `value IS NOT NULL AND <test>` (two-valued logic); `*` wildcards use LIKE with the
user's `\\`, `%` and `_` escaped; MATCHES_REGEX uses rlike (Java regex, find semantics) on the
pattern translated by regex.py; attr.NAME reads from_json(attributes, map<string,string>)[NAME].
AND / OR over many children is a balanced tree and IN is `isin` (set membership), so a wide
expression stays shallow (shape.py).
The only module of the package that imports pyspark.
"""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import MapType, StringType

from ..fields import Field
from .ast import Expr, Op
from .bind import Bound, BoundConst, BoundOp, BoundTerm, CompileContext, bind
from .shape import balanced

_ATTRIBUTES = MapType(StringType(), StringType())


def _like_pattern(parts: tuple[str, ...]) -> str:
    return "%".join(re.sub(r"([\\%_])", r"\\\1", part) for part in parts)


def _column(fld: Field) -> Column:
    if fld.attribute is None:
        return F.col(fld.column)
    return F.from_json(F.col("attributes"), _ATTRIBUTES).getItem(fld.attribute)


def _lit(value: Any) -> Column:
    return F.lit(value)


def _test(term: BoundTerm, value: Column) -> Column:
    kind = term.kind
    if kind == "eq":
        return value == _lit(term.value)
    if kind == "ne":
        return value != _lit(term.value)
    if kind == "gt":
        return value > _lit(term.value)
    if kind == "ge":
        return value >= _lit(term.value)
    if kind == "lt":
        return value < _lit(term.value)
    if kind == "le":
        return value <= _lit(term.value)
    if kind == "between":
        low, high = term.values
        return (value >= _lit(low)) & (value <= _lit(high))
    if kind == "in":
        return value.isin(list(term.values))
    if kind in ("glob", "not_glob"):
        match = value.like(_like_pattern(term.parts))
        return match if kind == "glob" else ~match
    if kind == "contains":
        return value.contains(_lit(term.value))
    if kind == "starts":
        return value.startswith(_lit(term.value))
    if kind == "ends":
        return value.endswith(_lit(term.value))
    if kind == "regex":
        assert term.regex is not None
        return value.rlike(term.regex.java)
    raise AssertionError(kind)  # pragma: no cover


def _compile(bound: Bound) -> Column:
    if isinstance(bound, BoundConst):
        return F.lit(bound.value)
    if isinstance(bound, BoundOp):
        children = [_compile(child) for child in bound.children]
        if bound.op is Op.NOT:
            return ~children[0]
        # pairwise, not a chain: Spark's analyzer recurses once per level (shape.py)
        if bound.op is Op.AND:
            return balanced(children, lambda left, right: left & right)
        return balanced(children, lambda left, right: left | right)
    value = _column(bound.field)
    if bound.kind == "null":
        return value.isNull()
    if bound.kind == "not_null":
        return value.isNotNull()
    return value.isNotNull() & _test(bound, value)


def to_spark(expr: Expr, ctx: CompileContext) -> Column:
    """A boolean Column (never NULL) for DataFrame.filter or a CASE WHEN."""
    return _compile(bind(expr, ctx))


__all__ = ["to_spark"]
