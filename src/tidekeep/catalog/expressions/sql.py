"""Compile an expression to a SQLAlchemy boolean clause over catalog_records, for SQLite and
PostgreSQL, with the same meaning as python.py and spark.py.

Every value is a bound parameter, never text spliced into SQL. The constructs that differ by
dialect are small custom elements whose parameters are ordinary child binds (so SQLAlchemy's
statement cache keys on them):

- CONTAINS: instr (SQLite) / strpos (PostgreSQL); STARTS/ENDS WITH: substr with the length bound;
- `*` wildcards: GLOB on SQLite (LIKE there is case-insensitive) and LIKE ... ESCAPE '\\' on
  PostgreSQL, the user's text escaped by a bind type at execution time;
- MATCHES_REGEX: the `regexp` function on SQLite (registered by `register_sqlite_functions`: RE2
  through google-re2, linear-time) and `~` on PostgreSQL, the pattern translated for the engine
  (regex.py, which refuses what would not run in linear time there);
- attr.NAME: json_extract(attributes, '$."NAME"') / (attributes::json ->> 'NAME').

Each term is `value IS NOT NULL AND <test>`, so a missing value makes it false, never NULL, and
NOT is plain negation (two-valued logic). AND / OR over many children are balanced trees of
parenthesised pairs (`all_of` / `any_of`) and IN is one list parameter, `= ANY(array)` on
PostgreSQL and `IN (SELECT value FROM json_each(?))` on SQLite, so no expression of accepted size
(shape.py) exceeds an engine's depth or parameter limit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.expression import ClauseElement, ColumnElement, FunctionElement

from ...store.schema_catalog import catalog_records
from ...store.sqlite_regexp import register_sqlite_functions
from ..fields import Field, FieldKind
from .ast import Expr
from .bind import BoundTerm, CompileContext, bind
from .regex import parse_regex
from .shape import balanced
from .visitor import BoundCompiler

# ---- dialect-specific pieces ---------------------------------------------------------------------


class _WildcardPattern(sa.types.TypeDecorator[str]):
    """A Stroom `*` pattern, written as the dialect's pattern when bound: GLOB on SQLite (escape
    `*`, `?`, `[` as one-character classes) and LIKE elsewhere (escape `\\`, `%`, `_`)."""

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: sa.Dialect) -> str | None:
        if value is None:
            return None
        parts = value.split("*")
        if dialect.name == "sqlite":
            return "*".join(re.sub(r"([*?\[])", r"[\1]", part) for part in parts)
        return "%".join(re.sub(r"([\\%_])", r"\\\1", part) for part in parts)


class _RegexPattern(sa.types.TypeDecorator[str]):
    """A MATCHES_REGEX value, translated for the dialect's regex engine when bound."""

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: sa.Dialect) -> str | None:
        if value is None:
            return None
        regex = parse_regex(value)
        return regex.postgres if dialect.name == "postgresql" else regex.re2


class _ValueList(sa.types.TypeDecorator[Any]):
    """The items of an IN list as one parameter: a PostgreSQL array, a JSON array for SQLite's
    json_each."""

    impl = sa.String
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        if dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import ARRAY

            return dialect.type_descriptor(ARRAY(sa.String()))
        return dialect.type_descriptor(sa.String())

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> Any:
        if value is None:
            return None
        if dialect.name == "postgresql":
            return [str(item) for item in value]  # text; the SQL casts it to the column's type
        return json.dumps(list(value), ensure_ascii=False)


class _AttributeKey(sa.types.TypeDecorator[str]):
    """An attribute name: a JSON path on SQLite, the key itself for PostgreSQL's ->>."""

    impl = sa.String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: sa.Dialect) -> str | None:
        if value is None:
            return None
        return f'$."{value}"' if dialect.name == "sqlite" else value


def _two_argument_sql(name: str, result: sa.types.TypeEngine[Any], postgres: str,
                      sqlite: str) -> type[FunctionElement[Any]]:
    """A SQL construct of two arguments, rendered per dialect from a template in which {0} and {1}
    are the compiled arguments — the few operations SQLite and PostgreSQL spell differently."""
    construct: type[FunctionElement[Any]] = type(name, (FunctionElement,),
                                                  {"type": result, "inherit_cache": True, "name": name})

    def renderer(template: str) -> Any:
        def render(element: Any, compiler: Any, **kw: Any) -> str:
            return template.format(*(compiler.process(argument, **kw) for argument in element.clauses))

        return render

    compiles(construct)(renderer(postgres))
    compiles(construct, "sqlite")(renderer(sqlite))
    return construct


_contains = _two_argument_sql("tk_contains", sa.Boolean(), "(strpos({0}, {1}) > 0)", "(instr({0}, {1}) > 0)")
_wildcard = _two_argument_sql("tk_wildcard", sa.Boolean(), "({0} LIKE {1} ESCAPE '\\')", "({0} GLOB {1})")
_regex_search = _two_argument_sql("tk_regex", sa.Boolean(), "({0} ~ {1})", "(regexp({1}, {0}) = 1)")
_attribute = _two_argument_sql("tk_attribute", sa.String(), "(CAST({0} AS JSON) ->> {1})", "json_extract({0}, {1})")


class _Parenthesised(FunctionElement[bool]):
    """`(clause)`, parentheses SQLAlchemy keeps: it flattens a nested AND / OR, even inside a
    Grouping, into its parent. Implicitly boolean, so SQLite gets no `= 1` after it."""

    type = sa.Boolean()
    inherit_cache = True
    name = "tk_group"
    _is_implicitly_boolean = True


@compiles(_Parenthesised)
def _render_parenthesised(element: _Parenthesised, compiler: Any, **kw: Any) -> str:
    return "(" + ", ".join(compiler.process(clause, **kw) for clause in element.clauses) + ")"


# IN is one parameter holding the whole list (an array / a JSON array), whatever its length: a
# parameter per item would run into SQLite's 32,766 and PostgreSQL's 65,535 parameters per statement
_in_texts = _two_argument_sql("tk_in_texts", sa.Boolean(), "({0} = ANY(CAST({1} AS TEXT[])))",
                              "({0} IN (SELECT value FROM json_each({1})))")
_in_integers = _two_argument_sql("tk_in_integers", sa.Boolean(), "({0} = ANY(CAST({1} AS BIGINT[])))",
                                 "({0} IN (SELECT value FROM json_each({1})))")


def sqlite_statement(statement: ClauseElement) -> tuple[str, list[Any]]:
    """SQL text and positional parameters for running `statement` on a plain sqlite3 connection
    (one given `register_sqlite_functions`), with the bind types' translations applied (wildcard
    patterns, regexes, attribute paths); values stay parameters."""
    from sqlalchemy.dialects import sqlite

    compiled = statement.compile(dialect=sqlite.dialect(), compile_kwargs={"render_postcompile": True})
    assert isinstance(compiled, SQLCompiler)  # a statement compiles to SQL
    params = compiled.construct_params()
    # what SQLAlchemy itself applies before execute: a function per parameter (a sequence only for
    # tuple parameters, which these statements never have)
    processors: Mapping[str, Any] = compiled._bind_processors
    assert compiled.positiontup is not None
    values = [processors[key](params[key]) if key in processors else params[key] for key in compiled.positiontup]
    return str(compiled), values


# ---- wide AND / OR ---------------------------------------------------------------------------------


def any_of(clauses: Sequence[ColumnElement[bool]]) -> ColumnElement[bool]:
    """The OR of `clauses` (false when there are none) as a balanced tree of parenthesised pairs.
    SQLAlchemy writes nested ORs as one flat `a OR b OR c ...`, which SQLite parses into a chain as
    deep as it is long and refuses past depth 1000; the parentheses keep it about log2(n) deep."""
    if not clauses:
        return sa.false()
    return balanced(list(clauses), lambda left, right: _Parenthesised(sa.or_(left, right)))


def all_of(clauses: Sequence[ColumnElement[bool]]) -> ColumnElement[bool]:
    """The AND of `clauses` (true when there are none), balanced as `any_of`."""
    if not clauses:
        return sa.true()
    return balanced(list(clauses), lambda left, right: _Parenthesised(sa.and_(left, right)))


# ---- the compiler ---------------------------------------------------------------------------------


def _bind_value(fld: Field, value: Any) -> sa.BindParameter[Any]:
    if fld.kind in (FieldKind.INTEGER, FieldKind.DATE):
        return sa.bindparam(None, value, type_=sa.BigInteger())
    return sa.bindparam(None, value, type_=sa.String())


class SqlCompiler(BoundCompiler[ColumnElement[bool], ColumnElement[Any], ColumnElement[bool]]):
    """A boolean clause over `table` (catalog_records or a table with the same columns)."""

    def __init__(self, table: sa.Table) -> None:
        self.table = table

    def constant(self, value: bool) -> ColumnElement[bool]:
        return sa.true() if value else sa.false()

    def all_of(self, children: Sequence[ColumnElement[bool]]) -> ColumnElement[bool]:
        return all_of(children)

    def any_of(self, children: Sequence[ColumnElement[bool]]) -> ColumnElement[bool]:
        return any_of(children)

    def negate(self, child: ColumnElement[bool]) -> ColumnElement[bool]:
        return sa.not_(child)

    def value_of(self, field: Field) -> ColumnElement[Any]:
        if field.attribute is None:
            return self.table.c[field.column]
        return _attribute(self.table.c.attributes, sa.bindparam(None, field.attribute, type_=_AttributeKey()))

    def is_null(self, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value.is_(None)

    def is_not_null(self, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value.is_not(None)

    def present_and(self, value: ColumnElement[Any], test: ColumnElement[bool]) -> ColumnElement[bool]:
        return sa.and_(value.is_not(None), test)

    def eq(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value == _bind_value(term.field, term.value)

    def ne(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value != _bind_value(term.field, term.value)

    def gt(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value > _bind_value(term.field, term.value)

    def ge(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value >= _bind_value(term.field, term.value)

    def lt(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value < _bind_value(term.field, term.value)

    def le(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return value <= _bind_value(term.field, term.value)

    def between(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        low, high = term.values
        return sa.and_(value >= _bind_value(term.field, low), value <= _bind_value(term.field, high))

    def in_(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        items = sa.bindparam(None, list(term.values), type_=_ValueList())
        if term.field.kind in (FieldKind.INTEGER, FieldKind.DATE):
            return _in_integers(value, items)
        return _in_texts(value, items)

    def glob(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return _wildcard(value, sa.bindparam(None, "*".join(term.parts), type_=_WildcardPattern()))

    def not_glob(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return sa.not_(self.glob(term, value))

    def contains(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        return _contains(value, sa.bindparam(None, _text(term), type_=sa.String()))

    def starts(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        text = _text(term)
        length = sa.bindparam(None, len(text), type_=sa.Integer())
        return sa.func.substr(value, 1, length) == sa.bindparam(None, text, type_=sa.String())

    def ends(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        text = _text(term)
        length = sa.bindparam(None, len(text), type_=sa.Integer())
        start = sa.func.length(value) - length + 1
        return sa.and_(sa.func.length(value) >= length,
                       sa.func.substr(value, start) == sa.bindparam(None, text, sa.String()))

    def regex(self, term: BoundTerm, value: ColumnElement[Any]) -> ColumnElement[bool]:
        assert term.regex is not None
        return _regex_search(value, sa.bindparam(None, term.regex.source, type_=_RegexPattern()))


def _text(term: BoundTerm) -> str:
    assert isinstance(term.value, str)  # contains / starts / ends carry text
    return term.value


_CATALOG_RECORDS = SqlCompiler(catalog_records)  # at import: a compiler missing a method fails here (visitor.py)


def to_sqlalchemy(expr: Expr, ctx: CompileContext, table: sa.Table = catalog_records) -> ColumnElement[bool]:
    """A WHERE clause for `table` (catalog_records or a table with the same columns)."""
    compiler = _CATALOG_RECORDS if table is catalog_records else SqlCompiler(table)
    return compiler.compile(bind(expr, ctx))


__all__ = ["SqlCompiler", "all_of", "any_of", "register_sqlite_functions", "sqlite_statement", "to_sqlalchemy"]
