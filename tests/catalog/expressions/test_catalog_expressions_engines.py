"""The three compilers (Python, SQLAlchemy on SQLite and PostgreSQL, Spark) agree: Stroom's
expression scenarios (testLogicalDelete among them; the semantics are in docs/catalog-expressions.md)
on fixed records, and random expressions over random records (hypothesis; Spark batched, one job per
example)."""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from collections.abc import Iterator, Sequence

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy.dialects import postgresql, sqlite
from test_catalog_expressions_strategies import DICTIONARIES, NOW_MS, expressions, records, regexes, terms

from conftest import pg_base_url
from tidekeep.catalog.expressions import (
    MATCH_ALL,
    CompileContext,
    Condition,
    Expr,
    Op,
    Operator,
    Term,
    parse,
    register_sqlite_functions,
    to_python,
    to_spark,
    to_sqlalchemy,
    to_text,
)
from tidekeep.catalog.expressions.regex import parse_regex, stdlib_pattern
from tidekeep.errors import InvalidInput, NotFound
from tidekeep.store.database import Database
from tidekeep.store.schema_catalog import catalog_records

C = Condition
COLUMNS = [c.name for c in catalog_records.columns]


class Backend:
    """A real metadata database with the catalog schema, holding one record set at a time."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.ensure_schema()

    def load(self, rows: Sequence[dict]) -> None:
        with self.db.write() as conn:
            conn.execute(catalog_records.delete())
            if rows:
                conn.execute(catalog_records.insert(), [dict(row) for row in rows])

    def matching(self, expr: Expr, ctx: CompileContext) -> set[int]:
        clause = to_sqlalchemy(expr, ctx)
        with self.db.read() as conn:
            return set(conn.execute(sa.select(catalog_records.c.id).where(clause)).scalars())


@pytest.fixture(scope="module")
def sqlite_backend(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    db = Database(f"sqlite:///{tmp_path_factory.mktemp('expr') / 'metadata.db'}", create=True)
    yield Backend(db)
    db.dispose()


@pytest.fixture(scope="module")
def pg_backend() -> Iterator[Backend]:
    base = pg_base_url()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(base)
    with admin.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    url = sa.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    db = Database(url.render_as_string(hide_password=False), create=True)
    try:
        yield Backend(db)
    finally:
        db.dispose()
        with admin.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> Backend:
    return request.getfixturevalue("sqlite_backend" if request.param == "sqlite" else "pg_backend")


def spark_matching(spark, rows: Sequence[dict], exprs: Sequence[Expr], ctx: CompileContext) -> list[set[int]]:
    """Evaluate many expressions over one DataFrame in a single Spark job."""
    schema = (
        "id long, feed string, type string, create_time long, effective_time long, status string, "
        "status_time long, parent_id long, pipeline string, file_size long, raw_size long, location string, "
        "attributes string"
    )
    frame = spark.createDataFrame([tuple(row[c] for c in COLUMNS) for row in rows], schema)
    columns = [to_spark(expr, ctx).alias(f"e{i}") for i, expr in enumerate(exprs)]
    result: list[set[int]] = [set() for _ in exprs]
    for row in frame.select("id", *columns).collect():
        for i in range(len(exprs)):
            value = row[f"e{i}"]
            assert value is not None, f"expression {i} evaluated to NULL: {to_text(exprs[i])}"
            if value:
                result[i].add(row["id"])
    return result


def python_matching(rows: Sequence[dict], expr: Expr, ctx: CompileContext) -> set[int]:
    predicate = to_python(expr, ctx)
    return {row["id"] for row in rows if predicate(row)}


# ---- scenarios ---------------------------------------------------------------------------------

DAY = 86_400_000
NOW = 30 * DAY


def _record(record_id: int, feed: str, type_: str, **extra) -> dict:
    row = dict.fromkeys(COLUMNS)
    row.update(id=record_id, feed=feed, type=type_, create_time=NOW - record_id * DAY, status="UNLOCKED",
               status_time=NOW - record_id * DAY)
    attributes = extra.pop("attributes", None)
    row["attributes"] = None if attributes is None else json.dumps(attributes, sort_keys=True, separators=(",", ":"))
    row.update(extra)
    return row


SCENARIO_RECORDS = [
    _record(1, "INTERNAL_LOGS", "Events", file_size=100),
    _record(2, "INTERNAL_AUDIT", "Raw Events", file_size=2_000_000, attributes={"System": "alpha"}),
    _record(3, "SPECIAL_DATA", "Raw Events", status="LOCKED", attributes={"System": "Alpha", "Env-Name": "prod"}),
    _record(4, "internal_logs", "events", effective_time=5 * DAY),
    _record(5, "TEST_FEED", "Raw Events Extra", pipeline="p1", parent_id=3, raw_size=10),
    _record(6, "a%b_c", "x*y", status="DELETED"),
    _record(7, "q?[x]", "it's \"quoted\"\n2nd line", pipeline="p2"),
]
ALL = {row["id"] for row in SCENARIO_RECORDS}


def term(field: str, condition: Condition, value: str | None = None, enabled: bool = True) -> Term:
    return Term(field, condition, value, enabled)


SCENARIOS: list[tuple[str, Expr, set[int]]] = [
    ("empty AND matches all", MATCH_ALL, ALL),
    ("empty OR at the top matches all", Operator(Op.OR, ()), ALL),
    ("childless operators inside a parent are dropped",
     Operator(Op.AND, (term("Feed", C.EQUALS, "SPECIAL_DATA"), Operator(Op.OR, ()))), {3}),
    ("NOT over several children is NOT(AND)",
     Operator(Op.NOT, (term("Feed", C.EQUALS, "INTERNAL_LOGS"), term("Type", C.EQUALS, "Events"))), ALL - {1}),
    ("disabled term ignored",
     Operator(Op.AND, (term("Feed", C.EQUALS, "SPECIAL_DATA"), term("Type", C.EQUALS, "Events", enabled=False))), {3}),
    ("an expression of only disabled terms matches all", Operator(Op.AND, (term("Feed", C.EQUALS, "X", False),)), ALL),
    ("feed wildcard, case-sensitive", parse('feed = "INTERNAL_*"'), {1, 2}),
    ("type wildcard at the start", parse('type = "*Events"'), {1, 2, 3}),
    ("type wildcard at the end", parse('type = "Raw*"'), {2, 3, 5}),
    ("a lone * matches every value", parse('feed = "*"'), ALL),
    ("wildcards match the whole value", parse('feed = "NAL_*"'), set()),
    ("wildcards in the middle", parse('feed = "IN*_*S"'), {1}),
    ("NOT_EQUALS with a wildcard", parse('feed != "*_*"'), {7}),
    ("wildcard text with GLOB metacharacters", parse('feed = "q?[x]*"'), {7}),
    ("wildcard text with LIKE metacharacters", parse('feed = "a%b_*"'), {6}),
    ("LIKE metacharacters are literal without *", parse('feed = "a_b%c"'), set()),
    ("equals is exact and case-sensitive", parse('feed = "internal_logs"'), {4}),
    ("IN: comma list, trimmed, empty items dropped", term("Type", C.IN, " Events , Raw Events,,"), {1, 2, 3}),
    ("IN: an empty list is false", term("Type", C.IN, ""), set()),
    ("IN: a list of blanks is empty, false", term("Type", C.IN, " , "), set()),
    ("NOT of an empty IN is true everywhere", Operator(Op.NOT, (term("Type", C.IN, ""),)), ALL),
    ("IN on numbers", parse("id in (1, 3, 99)"), {1, 3}),
    ("BETWEEN is inclusive", parse(f"create_time between {NOW - 4 * DAY} and {NOW - 2 * DAY}"), {2, 3, 4}),
    ("BETWEEN with low > high matches nothing", parse("id between 5 and 1"), set()),
    ("OR with a nonexistent feed deletes only the existing one",
     parse('feed = "SPECIAL_DATA" or feed = "NO_SUCH_FEED"'), {3}),
    ("NOT of a nonexistent feed matches all", parse('not feed = "NO_SUCH_FEED"'), ALL),
    ("a pipeline term matches only processed records", parse('pipeline = "p1"'), {5}),
    ("NOT_EQUALS on a missing value is false", parse('pipeline != "p1"'), {7}),
    ("NOT(EQUALS) on a missing value is true", parse('not pipeline = "p1"'), ALL - {5}),
    ("IS NULL", parse("pipeline is null"), {1, 2, 3, 4, 6}),
    ("IS NOT NULL", parse("parent_id is not null"), {5}),
    ("contains with LIKE metacharacters", parse('feed contains "%b_"'), {6}),
    ("contains is case-sensitive", parse('feed contains "LOGS"'), {1}),
    ("starts with", parse('feed starts with "INTERNAL"'), {1, 2}),
    ("ends with", parse('type ends with " Events"'), {2, 3}),
    ("ends with longer than the value", parse('feed ends with "xxINTERNAL_LOGS"'), set()),
    ("quotes and newlines in values", term("Type", C.CONTAINS, "'s \"quoted\"\n2nd"), {7}),
    ("regex, search semantics", parse('feed matches "NAL_(LOGS|AUDIT)"'), {1, 2}),
    ("regex anchored", parse('feed matches "^INTERNAL_(LOGS|AUDIT)$"'), {1, 2}),
    ("regex $ is the very end, not before a newline", parse('type matches "line$"'), {7}),
    ("regex . does not match a newline", parse('type matches "quoted.2nd"'), set()),
    ("regex \\s matches a newline", parse('type matches "quoted\\"\\s2nd"'), {7}),
    ("regex is case-sensitive", parse('feed matches "^internal"'), {4}),
    ("attribute equals", parse('attr.System = "alpha"'), {2}),
    ("attribute with a dash", parse('attr.Env-Name starts with "pr"'), {3}),
    ("attribute missing: false, NOT true", parse('not attr.System contains "lp"'), ALL - {2, 3}),
    ("attribute is null", parse("attr.System is null"), ALL - {2, 3}),
    ("status", parse("status in (locked, deleted)"), {3, 6}),
    ("status not equals", parse("status != unlocked"), {3, 6}),
    ("dictionary", parse("feed in dictionary feeds"), {1, 3}),
    ("empty dictionary is false", parse("feed in dictionary empty"), set()),
    ("sizes", parse("file_size >= 1MB"), {2}),
    ("sizes, binary units", parse("file_size < 1KiB"), {1}),
    ("relative dates", parse("create_time < now()-5d"), {6, 7}),
    ("relative dates at the boundary", parse("create_time <= now() - 5d"), {5, 6, 7}),
    ("absolute dates", parse('create_time >= "1970-01-27T00:00:00Z"'), {1, 2, 3, 4}),
    ("dates on a nullable column", parse("effective_time < day()"), {4}),
    ("epoch ms", parse(f"status_time = {NOW - 2 * DAY}"), {2}),
    ("nested", parse('(feed = "INTERNAL_*" or type = "x*") and not (file_size > 1000 or status = deleted)'), {1}),
]
SCENARIO_CONTEXT = CompileContext(NOW, {"feeds": ["INTERNAL_LOGS", "SPECIAL_DATA", ""], "empty": []})


@pytest.mark.parametrize(("name", "expr", "expected"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_scenarios_python(name: str, expr: Expr, expected: set[int]) -> None:
    assert python_matching(SCENARIO_RECORDS, expr, SCENARIO_CONTEXT) == expected


def test_scenarios_sql(backend: Backend) -> None:
    backend.load(SCENARIO_RECORDS)
    results = {name: backend.matching(expr, SCENARIO_CONTEXT) for name, expr, _ in SCENARIOS}
    assert results == {name: expected for name, _, expected in SCENARIOS}


@pytest.mark.spark
def test_scenarios_spark(spark) -> None:
    found = spark_matching(spark, SCENARIO_RECORDS, [expr for _, expr, _ in SCENARIOS], SCENARIO_CONTEXT)
    assert dict(zip([s[0] for s in SCENARIOS], found, strict=True)) == {name: exp for name, _, exp in SCENARIOS}


def test_unknown_dictionary_is_not_found() -> None:
    with pytest.raises(NotFound, match=r"^dictionary 'nope' not found \(used by an IN_DICTIONARY term on Feed\)$"):
        to_python(parse("feed in dictionary nope"), SCENARIO_CONTEXT)
    with pytest.raises(NotFound, match="dictionary 'nope' not found"):
        to_sqlalchemy(parse("feed in dictionary nope"), SCENARIO_CONTEXT)


# ---- values are never spliced into SQL ----------------------------------------------------------

NASTY = "x'; DROP TABLE catalog_records; -- 100% _"


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.psycopg.dialect()], ids=["sqlite", "postgresql"])
def test_values_are_bound_parameters(dialect) -> None:
    expr = Operator(Op.OR, (
        term("Feed", C.EQUALS, NASTY), term("Feed", C.EQUALS, NASTY + "*"), term("Type", C.CONTAINS, NASTY),
        term("Type", C.STARTS_WITH, NASTY), term("Pipeline", C.ENDS_WITH, NASTY), term("Feed", C.IN, NASTY),
        term("Feed", C.MATCHES_REGEX, "x'; DROP"), term("attr.Secret_Key", C.EQUALS, NASTY),
        term("Id", C.IN, "12345,67890"),
        term("Feed", C.IN_DICTIONARY, "d"),
    ))
    compiled = sa.select(catalog_records.c.id).where(
        to_sqlalchemy(expr, CompileContext(0, {"d": [NASTY + "!"]}))
    ).compile(dialect=dialect)
    sql = str(compiled)
    for fragment in ("DROP", "100%", "12345", "'x", "Secret_Key", "$."):
        assert fragment not in sql
    values = [v for v in compiled.params.values()]
    flat = [x for v in values for x in (v if isinstance(v, list) else [v])]
    assert NASTY in flat and NASTY + "!" in flat and "x'; DROP" in flat and 12345 in flat


def test_nasty_values_match_literally(backend: Backend) -> None:
    rows = [_record(1, NASTY, "t"), _record(2, "x", NASTY + "tail"), _record(3, "x'", "t")]
    backend.load(rows)
    ctx = CompileContext(NOW)
    assert backend.matching(term("Feed", C.EQUALS, NASTY), ctx) == {1}
    assert backend.matching(term("Type", C.STARTS_WITH, NASTY), ctx) == {2}
    assert backend.matching(term("Feed", C.EQUALS, "x'*"), ctx) == {1, 3}


# ---- random expressions, random records --------------------------------------------------------

RANDOM_CONTEXT = CompileContext(NOW_MS, DICTIONARIES)
record_sets = st.integers(5, 25).flatmap(
    lambda n: st.tuples(*[records(record_id=i) for i in range(n)]).map(list)
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(record_sets, st.lists(terms(), min_size=20, max_size=40))
def test_python_and_sql_agree_on_terms(sqlite_backend: Backend, pg_backend: Backend, rows, exprs) -> None:
    """Terms are where the engines differ (escaping, NULLs, types); many per example."""
    assert_sql_agrees_with_python(sqlite_backend, pg_backend, rows, exprs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(record_sets, st.lists(expressions(), min_size=5, max_size=15))
def test_python_and_sql_agree(sqlite_backend: Backend, pg_backend: Backend, rows, exprs) -> None:
    assert_sql_agrees_with_python(sqlite_backend, pg_backend, rows, exprs)


def assert_sql_agrees_with_python(sqlite_backend: Backend, pg_backend: Backend, rows, exprs) -> None:
    sqlite_backend.load(rows)
    pg_backend.load(rows)
    for expr in exprs:
        expected = python_matching(rows, expr, RANDOM_CONTEXT)
        assert sqlite_backend.matching(expr, RANDOM_CONTEXT) == expected, to_text(expr)
        assert pg_backend.matching(expr, RANDOM_CONTEXT) == expected, to_text(expr)


@pytest.mark.spark
# no shrinking: every Spark job takes seconds; the failing expression's text is in the message anyway
@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(
    st.lists(records(), min_size=30, max_size=30),
    st.lists(expressions(), min_size=40, max_size=40),
    st.lists(terms(), min_size=120, max_size=120),
)
def test_python_and_spark_agree(spark, rows, exprs, single_terms) -> None:
    exprs = exprs + single_terms
    rows = [dict(row, id=i) for i, row in enumerate(rows)]
    found = spark_matching(spark, rows, exprs, RANDOM_CONTEXT)
    for expr, spark_ids in zip(exprs, found, strict=True):
        assert spark_ids == python_matching(rows, expr, RANDOM_CONTEXT), to_text(expr)


def test_raw_sqlite3_connections_get_regexp(tmp_path) -> None:
    """Spark executors may open plain sqlite3 connections: register_sqlite_functions makes the
    compiled SQL (regexp included) work there too."""
    import sqlite3

    from tidekeep.catalog.expressions import register_sqlite_functions
    from tidekeep.catalog.expressions.sql import sqlite_statement

    path = tmp_path / "metadata.db"
    Backend(Database(f"sqlite:///{path}", create=True)).load(SCENARIO_RECORDS)
    clause = to_sqlalchemy(parse('feed matches "^INTERNAL_(LOGS|AUDIT)$" and id in (1, 2, 3)'), SCENARIO_CONTEXT)
    sql, values = sqlite_statement(sa.select(catalog_records.c.id).where(clause))
    assert "INTERNAL" not in sql and r"^INTERNAL\_(?:LOGS|AUDIT)\z" in values  # translated for RE2
    connection = sqlite3.connect(path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="no such function: regexp"):
            connection.execute(sql, values).fetchall()
        register_sqlite_functions(connection)
        assert {row[0] for row in connection.execute(sql, values)} == {1, 2}
    finally:
        connection.close()


def test_importing_the_package_does_not_import_pyspark() -> None:
    import subprocess
    import sys

    code = "import sys, tidekeep.catalog.expressions as e; e.parse('all'); assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- the regex subset: every engine agrees with an independent oracle on every accepted pattern ----
# The oracle is Python's backtracking `re` on its own translation (regex.stdlib_pattern); the engines
# are the ones that evaluate user data: google-re2 (Python), SQLite's registered regexp (RE2),
# PostgreSQL's `~` (ARE), and Spark's compiled term (an Arrow UDF on Arrow's RE2 kernel).

_REGEX_ALPHABET = "ab.^$*+?{}[]()|\\-,12dwsDWSntr_é\n "
_SUBJECTS = ["", "a", "b", "ab", "ba\n", "a\nb", "aab", "a-b", "1a", "a_1", "é", " a", "\\", "a{1}", "[a]", "ab\r",
             "a\n", "\na", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"]


def _accepted(patterns: list[str]) -> list[str]:
    accepted = []
    for pattern in patterns:
        try:
            parse_regex(pattern)
        except InvalidInput:
            continue
        accepted.append(pattern)
    return accepted


@st.composite
def accepted_patterns(draw: st.DrawFn) -> list[str]:
    patterns = draw(st.lists(st.text(alphabet=_REGEX_ALPHABET, min_size=1, max_size=10), min_size=150, max_size=150))
    return _accepted(patterns) + draw(st.lists(regexes(), min_size=40, max_size=40))  # structured ones too


def _oracle(pattern: str, subjects: Sequence[str]) -> list[bool]:
    compiled = re.compile(stdlib_pattern(pattern))
    return [compiled.search(s) is not None for s in subjects]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(alphabet=_REGEX_ALPHABET, min_size=1, max_size=12), regexes()), min_size=1,
                max_size=5),
       st.lists(st.text(alphabet="ab1_- \n\ré\\{}[]", max_size=12), min_size=1, max_size=8))
def test_re2_and_sqlite_agree_with_pythons_re(patterns: list[str], subjects: list[str]) -> None:
    """Many small examples without the servers: RE2 in Python and SQLite's regexp agree with `re`."""
    connection = sqlite3.connect(":memory:")
    register_sqlite_functions(connection)
    try:
        for pattern in _accepted(patterns):
            regex = parse_regex(pattern)
            want = _oracle(pattern, subjects)
            assert [regex.search(s) for s in subjects] == want, pattern
            got = [connection.execute("SELECT regexp(?, ?)", (regex.re2, s)).fetchone()[0] == 1 for s in subjects]
            assert got == want, pattern
    finally:
        connection.close()


@pytest.mark.spark
@settings(max_examples=5, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
@given(accepted_patterns())
def test_regex_translations_agree_across_engines(spark, pg_backend: Backend, patterns: list[str]) -> None:
    regexes = [parse_regex(p) for p in patterns]
    expected = [_oracle(p, _SUBJECTS) for p in patterns]
    for regex, want in zip(regexes, expected, strict=True):
        assert [regex.search(s) for s in _SUBJECTS] == want, regex.source
    with pg_backend.db.read() as conn:
        for regex, want in zip(regexes, expected, strict=True):
            got = conn.execute(
                sa.text("SELECT s ~ CAST(:p AS TEXT) FROM unnest(CAST(:subjects AS TEXT[])) WITH ORDINALITY AS t(s, n) "
                        "ORDER BY n"),
                {"p": regex.postgres, "subjects": _SUBJECTS},
            ).scalars().all()
            assert got == want, regex.source
    rows = []
    for n, subject in enumerate(_SUBJECTS):
        row = dict.fromkeys(COLUMNS)
        row.update(id=n, feed="f", type="t", attributes=json.dumps({"v": subject}))
        rows.append(row)
    exprs = [Term("attr.v", C.MATCHES_REGEX, p) for p in patterns]
    found = spark_matching(spark, rows, exprs, RANDOM_CONTEXT)
    for regex, ids, want in zip(regexes, found, expected, strict=True):
        assert [n in ids for n in range(len(_SUBJECTS))] == want, regex.source
