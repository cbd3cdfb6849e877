"""No pattern can hang a job: regexes and `*` wildcards run in time linear in the value in every
engine (docs/catalog-expressions.md, "Regular expressions"). Each test evaluates patterns that make
a backtracking engine take exponential (or high-polynomial) time over values of 40+ characters;
the pytest timeout is what fails a backtracking evaluation, the assertions check the answers."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from test_catalog_expressions_engines import (  # noqa: F401 - the backends are fixtures
    COLUMNS,
    Backend,
    pg_backend,
    python_matching,
    spark_matching,
    sqlite_backend,
)

from tidekeep.catalog.expressions import CompileContext, Expr, parse

CONTEXT = CompileContext(0, {})
A40 = "a" * 40


def _row(record_id: int, value: str) -> dict:
    """A record whose custom attribute `v` is `value` (attributes are text of any length)."""
    row = dict.fromkeys(COLUMNS)
    row.update(id=record_id, feed="f", type="t", create_time=0, status="UNLOCKED", status_time=0,
               attributes=json.dumps({"v": value}))
    return row


ROWS = [_row(1, A40 + "!"), _row(2, A40), _row(3, "b" + "a" * 3000), _row(4, "x" + A40 + "!")]

# (expression, the ids it matches): each is exponential or worse for a backtracking engine on some row
CASES: list[tuple[Expr, set[int]]] = [
    (parse('attr.v matches "(a+)+$"'), {2, 3}),  # the classic: 40 s for 28 characters in Python's re
    (parse('attr.v matches "^(a|aa)+$"'), {2}),
    (parse('attr.v matches "^(a|a?)+!"'), {1}),
    (parse('attr.v matches "^(\\w+\\s?)*$"'), {2, 3}),
    (parse('attr.v matches "^x(\\s?a+)*$"'), set()),
    (parse('attr.v matches "(.*a){20}!"'), {1, 4}),  # polynomial: n^20
    # wildcards too: a backtracking `.*a.*a…` takes time polynomial in the value, to the power of the `*`s
    (parse('attr.v = "*a*a*a*a*a*a*a*a*a*a*a*a*b"'), set()),
    (parse('attr.v = "b*a*a*a*a*a*a*a*a*a*a*a*a"'), {3}),
    (parse('attr.v != "*a*a*a*a*a*a*a*a*a*a*a*a*b"'), {1, 2, 3, 4}),
]


@pytest.mark.timeout(10)
def test_python_evaluates_backtracking_traps_quickly() -> None:
    for expr, expected in CASES:
        assert python_matching(ROWS, expr, CONTEXT) == expected, expr


@pytest.mark.timeout(10)
def test_sqlite_evaluates_backtracking_traps_quickly(sqlite_backend: Backend) -> None:  # noqa: F811 - fixtures
    sqlite_backend.load(ROWS)
    for expr, expected in CASES:
        assert sqlite_backend.matching(expr, CONTEXT) == expected, expr


@pytest.mark.postgres
@pytest.mark.timeout(10)
def test_postgres_evaluates_backtracking_traps_quickly(pg_backend: Backend) -> None:  # noqa: F811 - fixtures
    pg_backend.load(ROWS)
    for expr, expected in CASES:
        assert pg_backend.matching(expr, CONTEXT) == expected, expr


@pytest.mark.postgres
@pytest.mark.timeout(20)
def test_postgres_evaluates_traps_over_megabyte_values_quickly(pg_backend: Backend) -> None:  # noqa: F811 - fixtures
    """PostgreSQL runs its own engine (ARE) on the translation: without backreferences it stays in
    its DFA, so a megabyte value takes one pass. Four such values in one statement, well within the
    timeout; a backtracking engine would not finish the first."""
    big = [_row(10 + i, "a" * 1_000_000 + tail) for i, tail in enumerate(["!", "", "b", "a!"])]
    pg_backend.load(big)
    assert pg_backend.matching(parse('attr.v matches "(a+)+$"'), CONTEXT) == {11}
    assert pg_backend.matching(parse('attr.v matches "^(a|aa)+b"'), CONTEXT) == {12}
    with pg_backend.db.read() as conn:  # the pattern as PostgreSQL receives it: no capturing groups
        query = sa.text("SELECT repeat('a', 1000000) ~ CAST(:pattern AS TEXT)")
        assert conn.execute(query, {"pattern": "(?:(?:a|aa)+)+!"}).scalar() is False


@pytest.mark.spark
@pytest.mark.timeout(120, func_only=True)  # the call only: starting the shared session may take long
def test_spark_evaluates_backtracking_traps_quickly(spark) -> None:
    exprs = [expr for expr, _ in CASES]
    found = spark_matching(spark, ROWS, exprs, CONTEXT)
    assert found == [expected for _, expected in CASES]
