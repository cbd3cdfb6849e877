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
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, MapType, StringType

from ..fields import Field
from .ast import Expr
from .bind import BoundTerm, CompileContext, bind
from .regex import glob_re2
from .shape import balanced
from .visitor import BoundCompiler

_ATTRIBUTES = MapType(StringType(), StringType())


def _like_pattern(parts: tuple[str, ...]) -> str:
    return "%".join(re.sub(r"([\\%_])", r"\\\1", part) for part in parts)


def _re2_search(pattern: str, value: Column) -> Column:
    """`pattern` (RE2 syntax) searched for in each value, on Arrow's RE2 kernel; false for NULL."""

    def search(values: pa.Array) -> pa.Array:
        import pyarrow.compute as pc

        return pc.fill_null(pc.match_substring_regex(values, pattern), False)

    # pyspark's stubs want an explicit functionType; at run time it is read from `search`'s hints
    udf = F.arrow_udf(search, BooleanType())  # type: ignore[call-overload]
    found: Column = udf(value)
    return found


class SparkCompiler(BoundCompiler[Column, Column, Column]):
    """A boolean Column over catalog_records columns."""

    def constant(self, value: bool) -> Column:
        return F.lit(value)

    # pairwise, not a chain: Spark's analyzer recurses once per level (shape.py)
    def all_of(self, children: Sequence[Column]) -> Column:
        return balanced(children, lambda left, right: left & right)

    def any_of(self, children: Sequence[Column]) -> Column:
        return balanced(children, lambda left, right: left | right)

    def negate(self, child: Column) -> Column:
        return ~child

    def value_of(self, field: Field) -> Column:
        if field.attribute is None:
            return F.col(field.column)
        return F.from_json(F.col("attributes"), _ATTRIBUTES).getItem(field.attribute)

    def is_null(self, value: Column) -> Column:
        return value.isNull()

    def is_not_null(self, value: Column) -> Column:
        return value.isNotNull()

    def present_and(self, value: Column, test: Column) -> Column:
        return value.isNotNull() & test

    def eq(self, term: BoundTerm, value: Column) -> Column:
        return value == _lit(term.value)

    def ne(self, term: BoundTerm, value: Column) -> Column:
        return value != _lit(term.value)

    def gt(self, term: BoundTerm, value: Column) -> Column:
        return value > _lit(term.value)

    def ge(self, term: BoundTerm, value: Column) -> Column:
        return value >= _lit(term.value)

    def lt(self, term: BoundTerm, value: Column) -> Column:
        return value < _lit(term.value)

    def le(self, term: BoundTerm, value: Column) -> Column:
        return value <= _lit(term.value)

    def between(self, term: BoundTerm, value: Column) -> Column:
        low, high = term.values
        return (value >= _lit(low)) & (value <= _lit(high))

    def in_(self, term: BoundTerm, value: Column) -> Column:
        return value.isin(list(term.values))

    def glob(self, term: BoundTerm, value: Column) -> Column:
        if len(term.parts) <= 2:  # at most one `*`: Spark rewrites the LIKE to linear string tests
            return value.like(_like_pattern(term.parts))
        return _re2_search(glob_re2(term.parts), value)

    def not_glob(self, term: BoundTerm, value: Column) -> Column:
        return ~self.glob(term, value)

    def contains(self, term: BoundTerm, value: Column) -> Column:
        return value.contains(_lit(term.value))

    def starts(self, term: BoundTerm, value: Column) -> Column:
        return value.startswith(_lit(term.value))

    def ends(self, term: BoundTerm, value: Column) -> Column:
        return value.endswith(_lit(term.value))

    def regex(self, term: BoundTerm, value: Column) -> Column:
        assert term.regex is not None
        return _re2_search(term.regex.re2, value)


def _lit(value: Any) -> Column:
    return F.lit(value)


_COMPILER = SparkCompiler()  # at import: a compiler missing a method fails here (visitor.py)


def to_spark(expr: Expr, ctx: CompileContext) -> Column:
    """A boolean Column (never NULL) for DataFrame.filter or a CASE WHEN."""
    return _COMPILER.compile(bind(expr, ctx))


__all__ = ["SparkCompiler", "to_spark"]
