"""Compile an expression to a Spark Column over a DataFrame with catalog_records columns (times as
LongType ms, `attributes` as the JSON object text), with the same meaning as python.py and sql.py.

Each term is `value IS NOT NULL AND <test>` (two-valued logic); attr.NAME reads
from_json(attributes, map<string,string>)[NAME]. AND / OR over many children is a balanced tree and
IN is `isin` (set membership), so a wide expression stays shallow (shape.py). The only module of the
package that imports pyspark.

Regexes never reach Spark's rlike: Java's regex engine backtracks, so one pattern such as `(a+)+$`
takes time exponential in a value's length. MATCHES_REGEX runs the RE2 translation (regex.py) in an
Arrow UDF instead, on pyarrow.compute.match_substring_regex (Arrow's kernel is RE2: linear-time),
one Arrow batch at a time (docs/benchmarks.md, "Regexes in Spark", measures the cost). Spark's LIKE
is a Java regex too, which backtracks polynomially (to the power of the number of `%`s): a wildcard
with at most one `*` stays a LIKE, which Spark's optimizer turns into startsWith/endsWith/contains
(linear), and one with more `*`s runs on RE2 the same way.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, MapType, StringType

from ..fields import Field
from .ast import Expr, Op
from .bind import Bound, BoundConst, BoundOp, BoundTerm, CompileContext, bind
from .regex import glob_re2
from .shape import balanced

_ATTRIBUTES = MapType(StringType(), StringType())


def _like_pattern(parts: tuple[str, ...]) -> str:
    return "%".join(re.sub(r"([\\%_])", r"\\\1", part) for part in parts)


def _re2_search(pattern: str, value: Column) -> Column:
    """`pattern` (RE2 syntax) searched for in each value, on Arrow's RE2 kernel; false for NULL."""

    def search(values: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        return pc.fill_null(pc.match_substring_regex(values, pattern), False)

    return F.arrow_udf(search, BooleanType())(value)


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
        if len(term.parts) <= 2:  # at most one `*`: Spark rewrites the LIKE to linear string tests
            match = value.like(_like_pattern(term.parts))
        else:
            match = _re2_search(glob_re2(term.parts), value)
        return match if kind == "glob" else ~match
    if kind == "contains":
        return value.contains(_lit(term.value))
    if kind == "starts":
        return value.startswith(_lit(term.value))
    if kind == "ends":
        return value.endswith(_lit(term.value))
    if kind == "regex":
        assert term.regex is not None
        return _re2_search(term.regex.re2, value)
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
