"""Wide expressions (hundreds of OR / AND terms, long IN lists, big dictionaries, many holds) evaluate
in every engine — balanced trees and set membership (expressions/shape.py) — with the meaning of a
term-by-term evaluation of the tree; and what is above the documented size limits is refused when
it is saved, not when it runs."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_catalog_expressions_engines import Backend, pg_backend, sqlite_backend  # noqa: F401 - fixtures
from test_catalog_expressions_strategies import DICTIONARIES, NOW_MS, records, terms

import tidekeep as tk
from helpers.cli import ok_json, run_cli
from helpers.cli_runner import InProcess
from tidekeep.catalog.expressions import CompileContext, Expr, Op, Operator, Term, normalize, parse, to_python
from tidekeep.catalog.expressions.shape import (
    MAX_HELD_TERMS,
    MAX_RULE_SET_TERMS,
    MAX_RULES,
    MAX_TERMS,
    balanced,
    check_size,
)
from tidekeep.catalog.holds import held_predicate
from tidekeep.errors import InvalidInput
from tidekeep.holds import Hold
from tidekeep.store.schema_catalog import catalog_records

CTX = CompileContext(NOW_MS, DICTIONARIES)
DAY = 86_400_000


@functools.cache
def term_predicate(term: Term) -> Callable[[dict], bool]:
    return to_python(term, CTX)


def brute_force(expr: Expr, record: dict) -> bool:
    """The tree's meaning evaluated as written: each term on its own, AND / OR / NOT over the children
    (after Stroom's structural rules), no flattening, merging or balancing."""
    normal = normalize(expr)
    stack: list[tuple[Expr, bool]] = [(normal, False)]
    results: list[bool] = []
    while stack:  # iterative post-order, so a deep tree does not need a deep Python stack
        node, expanded = stack.pop()
        if isinstance(node, Term):
            results.append(term_predicate(node)(record))
        elif not node.children:
            results.append(True)
        elif not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in reversed(node.children))
        else:
            values = [results.pop() for _ in node.children][::-1]
            results.append(all(values) if node.op is Op.AND else any(values) if node.op is Op.OR else not values[0])
    return results[0]


def depth(tree: object) -> int:
    return 1 + max(depth(child) for child in tree) if isinstance(tree, tuple) else 0


# ---- the pure part ----------------------------------------------------------------------------------

@given(st.lists(st.integers(), min_size=1, max_size=3000))
def test_balanced_keeps_the_leaves_in_order_at_logarithmic_depth(items: list[int]) -> None:
    tree = balanced(items, lambda left, right: (left, right))

    def leaves(node: object) -> list[int]:
        return [leaf for child in node for leaf in leaves(child)] if isinstance(node, tuple) else [node]  # type: ignore[union-attr]

    assert leaves(tree) == items
    assert depth(tree) == (len(items) - 1).bit_length()  # ceil(log2(n))


def wide(children: list[Expr], shape: str) -> Expr:
    """One operator over all children ("flat"), a left chain of operators ("chain", what a JSON tree
    or nested parentheses can say), or ORs of ANDs of NOTs ("mixed")."""
    if shape == "flat":
        return Operator(Op.OR, tuple(children))
    if shape == "chain":  # at most 60 levels: depth is bounded by the parser, breadth is what is tested
        step = -(-len(children) // 60)
        chunks = [children[i:i + step] for i in range(0, len(children), step)]
        tree = Operator(Op.OR, tuple(chunks[0]))
        for chunk in chunks[1:]:
            tree = Operator(Op.OR, (tree, *chunk))
        return tree
    groups = [Operator(Op.AND, tuple(children[i:i + 3])) for i in range(0, len(children), 3)]
    return Operator(Op.OR, tuple(Operator(Op.NOT, (g,)) if i % 4 == 3 else g for i, g in enumerate(groups)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(terms(), min_size=2, max_size=120), st.sampled_from(["flat", "chain", "mixed"]),
       st.lists(records(), min_size=1, max_size=8))
def test_the_python_compile_of_a_wide_expression_is_its_term_by_term_meaning(
        children: list[Term], shape: str, rows: list[dict]) -> None:
    expr = wide(list(children), shape)
    compiled = to_python(expr, CTX)
    assert [compiled(row) for row in rows] == [brute_force(expr, row) for row in rows]


def test_equalities_on_one_field_are_one_set_and_keep_their_meaning() -> None:
    expr = parse(" or ".join([f'feed = "F{i}"' for i in range(500)] + ['type = "T"', "id in (1, 2)", "id = 3"]))
    compiled = to_python(expr, CTX)
    for row in ({"feed": "F499"}, {"feed": "F500"}, {"type": "T"}, {"id": 3}, {"id": 2}, {"id": 4}, {}):
        assert compiled(row) == brute_force(expr, row), row


# ---- SQLite and PostgreSQL ----------------------------------------------------------------------------

def wide_rows(count: int) -> list[dict]:
    rng = random.Random(16)
    return [{"id": i + 1, "feed": f"F{rng.randrange(2 * count)}", "type": "T", "pipeline": rng.choice(["P", None]),
             "status": "UNLOCKED", "status_time": 0, "create_time": i, "file_size": rng.randrange(3000)}
            for i in range(300)]


WIDE_TEXTS: dict[str, Callable[[int], str]] = {
    # starts-with terms cannot be merged into a set: these stay MAX_TERMS terms wide
    "or": lambda n: " or ".join(f'feed starts with "F{i}x"' if i % 2 else f"file_size = {i}" for i in range(n)),
    "and": lambda n: " and ".join(f"not feed starts with \"F{i}\"" if i % 2 else f"file_size != {i}"
                                  for i in range(n)),
    "in": lambda n: "feed in (" + ", ".join(f'"F{i}"' for i in range(n)) + ")",
}


@pytest.mark.parametrize("backend_name", ["sqlite_backend", "pg_backend"])
@pytest.mark.parametrize("kind", sorted(WIDE_TEXTS))
def test_expressions_of_the_largest_accepted_size_run_in_sql(request: pytest.FixtureRequest, backend_name: str,
                                                             kind: str) -> None:
    backend: Backend = request.getfixturevalue(backend_name)
    rows = wide_rows(MAX_TERMS)
    backend.load(rows)
    size = MAX_TERMS if kind != "in" else 1_500  # an IN list is one term; its text is at most 10,000 characters
    expr = parse(WIDE_TEXTS[kind](size))
    check_size(expr)  # accepted
    expected = {row["id"] for row in rows if brute_force(expr, row)}
    assert 0 < len(expected) < len(rows)
    assert backend.matching(expr, CTX) == expected


@pytest.mark.parametrize("backend_name", ["sqlite_backend", "pg_backend"])
def test_a_dictionary_larger_than_any_parameter_limit_is_one_set(request: pytest.FixtureRequest,
                                                                  backend_name: str) -> None:
    backend: Backend = request.getfixturevalue(backend_name)
    rows = wide_rows(100)
    backend.load(rows)
    words = [f"F{i}" for i in range(0, 200, 3)] + [f"W{i}" for i in range(70_000)]
    ctx = CompileContext(NOW_MS, {"big": words})
    expr = parse("feed in dictionary big or id in (1, 2)")
    assert backend.matching(expr, ctx) == {row["id"] for row in rows if row["feed"] in set(words) or row["id"] <= 2}


@pytest.mark.parametrize("backend_name", ["sqlite_backend", "pg_backend"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_wide_expressions_match_the_term_by_term_meaning_in_sql(request: pytest.FixtureRequest,
                                                                       backend_name: str, data: st.DataObject) -> None:
    backend: Backend = request.getfixturevalue(backend_name)
    rows = data.draw(st.lists(records(), min_size=5, max_size=25))
    rows = [row | {"id": i + 1} for i, row in enumerate(rows)]
    pool = data.draw(st.lists(terms(), min_size=3, max_size=30))  # hundreds of draws are too much data
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    children = [rng.choice(pool) for _ in range(data.draw(st.integers(300, 600)))]
    expr = wide(children, data.draw(st.sampled_from(["flat", "chain", "mixed"])))
    backend.load(rows)
    assert backend.matching(expr, CTX) == {row["id"] for row in rows if brute_force(expr, row)}


# ---- the limit -------------------------------------------------------------------------------------------

def test_above_the_term_limit_is_refused_with_one_line() -> None:
    check_size(parse(WIDE_TEXTS["or"](MAX_TERMS)))
    with pytest.raises(InvalidInput, match=f"expression has {MAX_TERMS + 1} terms, at most {MAX_TERMS}"):
        check_size(parse(WIDE_TEXTS["or"](MAX_TERMS + 1)))


@pytest.mark.parametrize("backend_name", ["sqlite_backend", "pg_backend"])
def test_the_or_of_over_a_thousand_holds_runs_in_sql(request: pytest.FixtureRequest, backend_name: str) -> None:
    backend: Backend = request.getfixturevalue(backend_name)
    rows = wide_rows(100)
    backend.load(rows)
    holds = [(Hold(i + 1, "records", f"file_size = {i * 3}", "r", 0, "t"), parse(f'file_size = {i * 3}'))
             for i in range(1_100)]
    condition = held_predicate(holds, CTX, catalog_records)
    with backend.db.read() as conn:
        held = set(conn.execute(sa.select(catalog_records.c.id).where(condition)).scalars())
    assert held == {row["id"] for row in rows if row["file_size"] % 3 == 0 and row["file_size"] < 3_300}


# ---- the purge and explain, on SQLite and PostgreSQL ---------------------------------------------------

def test_the_purge_and_explain_honour_a_hold_on_a_dictionary_of_70000_words(tmp_path: Path,
                                                                              metadata_url: str) -> None:
    now = 1_750_000_000_000
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=tk.ManualClock(now), create=True)
    try:
        with client.workspace.db.write() as conn:
            ids = [int(conn.execute(sa.insert(catalog_records).values(
                feed=feed, type="T", create_time=now - 400 * DAY, status="DELETED", status_time=now - 30 * DAY,
                file_size=1)).inserted_primary_key[0]) for feed in ("W5", "W69999", "OTHER", "X")]
        client.catalog.set_dictionary("big", [f"W{i}" for i in range(70_000)])
        hold = client.holds.add("records", 'feed in dictionary big or feed = "X"', "litigation")
        report = client.catalog.purge()
        assert report.purged == 1 and report.held == 3
        with client.workspace.db.read() as conn:
            assert set(conn.execute(sa.select(catalog_records.c.id)).scalars()) == {ids[0], ids[1], ids[3]}
        assert [h["id"] for h in client.catalog.explain(ids[1]).holds] == [hold]
    finally:
        client.close()


# ---- the job on Spark --------------------------------------------------------------------------------------

@pytest.mark.spark
def test_the_job_runs_rules_of_hundreds_of_terms_long_lists_and_many_holds(client: tk.Client, spark) -> None:
    from helpers.catalog_job import NOW, oracle, statuses
    from tidekeep.catalog.ages import Age
    from tidekeep.catalog.rules import RetentionRule

    rng = random.Random(3)
    wide_or = " or ".join(f'feed starts with "G{i}x"' if i % 2 else f"file_size = {i}" for i in range(400))
    long_in = "feed in (" + ", ".join(f'"L{i}"' for i in range(1_500)) + ")"
    client.catalog.set_dictionary("big", [f"W{i}" for i in range(20_000)])
    rules = [RetentionRule(1, "wide or", True, parse(wide_or), Age(1, "DAYS")),
             RetentionRule(2, "long in", True, parse(long_in), Age(1, "DAYS")),
             RetentionRule(3, "dictionary", True, parse("feed in dictionary big"), Age(1, "DAYS"))]
    client.catalog.set_rules(rules)
    feeds = [f"G{rng.randrange(800)}x" for _ in range(60)] + [f"L{rng.randrange(3_000)}" for _ in range(60)] \
        + [f"W{rng.randrange(40_000)}" for _ in range(60)] + ["OTHER"] * 20
    client.catalog.add([{"feed": feed, "type": "T", "create_time": NOW - 10 * DAY - i, "file_size": i % 700}
                        for i, feed in enumerate(feeds)])
    for size in range(0, 600, 2):  # 300 holds, each its own term in the job's OR of holds
        client.holds.add("records", f"file_size = {size}", "r")
    held = {record.id for record in client.catalog.records(limit=1_000) if record.file_size % 2 == 0}
    expected = oracle(client, rules, NOW) - held
    assert len(expected) > 20
    client.catalog.run(now_ms=NOW)
    assert {i for i, (status, _) in statuses(client).items() if status == "DELETED"} == expected


# ---- the limits, where rules and holds are saved ----------------------------------------------------------

def rule_file(tmp_path: Path, expressions: list[str]) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"rules": [{"number": i + 1, "name": f"r{i}", "expression": text, "age": "1 day"}
                                              for i, text in enumerate(expressions)]}, width=1_000_000))
    return path


@pytest.mark.parametrize("command", ["set", "validate"])
def test_rules_set_and_validate_refuse_what_is_above_the_limits(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                 command: str) -> None:
    run = InProcess(monkeypatch, tmp_path / "ws")
    assert run("init").code == 0
    cases = [
        ([WIDE_TEXTS["or"](MAX_TERMS + 1)], f"rule 1: expression has {MAX_TERMS + 1} terms, at most {MAX_TERMS}"),
        (["all"] * (MAX_RULES + 1), f"the rule set has {MAX_RULES + 1} rules, at most {MAX_RULES}"),
        ([WIDE_TEXTS["or"](MAX_TERMS)] * (MAX_RULE_SET_TERMS // MAX_TERMS + 1),
         f"have {(MAX_RULE_SET_TERMS // MAX_TERMS + 1) * MAX_TERMS} terms together, at most {MAX_RULE_SET_TERMS}"),
    ]
    for expressions, message in cases:
        done = run("catalog", "rules", command, str(rule_file(tmp_path, expressions)))
        assert done.code == 2, done.stderr
        assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1, done.stderr
        assert message in done.stderr and done.stdout == ""
    assert '"rules": []' in run("catalog", "rules", "show", "--json").stdout  # nothing was saved
    accepted = run("catalog", "rules", command, str(rule_file(tmp_path, [WIDE_TEXTS["or"](MAX_TERMS)])))
    assert accepted.code == 0, accepted.stderr


def test_a_hold_that_takes_the_holds_past_the_limit_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    assert run_cli(home, "init").returncode == 0
    client = tk.connect(home=home)
    try:
        per_hold = 40
        for start in range(0, MAX_HELD_TERMS - per_hold + 1, per_hold):
            client.holds.add("records", " or ".join(f"id = {start + i}" for i in range(per_hold)), "r")
        assert len(client.holds.list("records")) == MAX_HELD_TERMS // per_hold
    finally:
        client.close()
    done = run_cli(home, "hold", "add", "records", "id = -1", "--reason", "one more")
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: the holds on records (with the new one) have "
                                  f"{MAX_HELD_TERMS + 1} terms together, at most {MAX_HELD_TERMS}"), done.stderr
    assert len(ok_json(home, "hold", "list")) == MAX_HELD_TERMS // per_hold
