"""The package's layering, read from the source with ast (docs/workspace.md, "The house"): no import
circle but the schema registration, and `.importlinter` lets only the justified imports point up.
`make lint` checks the layers themselves (lint-imports); these tests keep the circles and the
exceptions from growing back."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Set
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.imports import SRC, imported_modules

IMPORTLINTER = SRC.parents[1] / ".importlinter"
# the schema package's modules register their tables with one another (store/schema.py)
ALLOWED_CIRCLE_PREFIX = "tidekeep.store.schema"
# the only imports that point up: the Spark session registers the two data sources every session
# reads and writes (docs/workspace.md, "Imports that point up")
ALLOWED_UPWARD_IMPORTS = {("tidekeep.spark.session", "tidekeep.spark.datasource"),
                          ("tidekeep.spark.session", "tidekeep.catalog.source")}


def module_name(path: Path) -> str:
    name = ".".join(path.relative_to(SRC.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def import_graph() -> dict[str, set[str]]:
    """Every module of the package → the package's modules it imports (a name that is not a module,
    `from x import name`, counts as its module x), type-only imports included."""
    modules = {module_name(path): path for path in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for imported in imported_modules(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def strongly_connected(graph: Mapping[str, Set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of `graph` (iterative: the package is deep enough
    for recursion to matter); edges to names that are not nodes are ignored."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    work: list[tuple[str, Iterator[str]]] = []  # the depth-first path: a node and its successors left

    def enter(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        work.append((node, iter(sorted(graph[node] & graph.keys()))))

    for root in graph:
        if root in index:
            continue
        enter(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    enter(successor)
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: set[str] = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    found.append(component)
    return found


def circles(graph: Mapping[str, Set[str]]) -> list[set[str]]:
    """The import circles: components of more than one module, or a module importing itself."""
    return [c for c in strongly_connected(graph) if len(c) > 1 or any(m in graph[m] for m in c)]


# ---- the circle finder against a brute-force oracle ---------------------------------------------
def reachable(graph: Mapping[str, Set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in graph[todo.pop()] & graph.keys():
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


graphs = st.integers(1, 7).flatmap(lambda n: st.lists(
    st.sets(st.integers(0, n - 1), max_size=n), min_size=n, max_size=n)).map(
    lambda edges: {f"m{i}": {f"m{j}" for j in targets} for i, targets in enumerate(edges)})


@given(graphs)
def test_the_circles_are_the_mutually_reachable_modules(graph: dict[str, set[str]]) -> None:
    reach = {node: reachable(graph, node) for node in graph}
    expected = {frozenset(m for m in graph if m == node or (m in reach[node] and node in reach[m]))
                for node in graph if node in reach[node]}
    assert {frozenset(c) for c in circles(graph)} == expected


def test_a_circle_of_three_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert circles(graph) == [{"a", "b", "c"}]


# ---- the package -------------------------------------------------------------------------------
def test_no_import_circle_but_the_schema_registration() -> None:
    found = [sorted(c) for c in circles(import_graph())
             if not all(m.startswith(ALLOWED_CIRCLE_PREFIX) for m in c)]
    assert found == []


def ignored_imports(text: str) -> list[tuple[str, str]]:
    """The (importer, imported) pairs of an .importlinter file's ignore lists; comments skipped."""
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith((";", "#")) or "->" not in line:
            continue
        importer, _, imported = line.partition("->")
        pairs.append((importer.strip(), imported.strip()))
    return pairs


def test_the_ignore_reader_skips_comments() -> None:
    text = "ignore_imports =\n    ; a -> b is a comment\n    tidekeep.x -> tidekeep.y\n"
    assert ignored_imports(text) == [("tidekeep.x", "tidekeep.y")]


def test_only_the_justified_imports_point_up() -> None:
    pairs = ignored_imports(IMPORTLINTER.read_text())
    assert pairs, "the reader found no ignored import: has .importlinter's format changed?"
    assert [f"{a} -> {b}" for a, b in pairs if (a, b) not in ALLOWED_UPWARD_IMPORTS] == []
    assert len(pairs) <= 2


@pytest.mark.parametrize(("module", "allowed"), [
    ("tidekeep.cron", {"tidekeep.errors"}),  # the settings validate cron keys with it
    ("tidekeep.places", set()),  # the settings read data roots with it
    ("tidekeep.workspace_areas", {"tidekeep.errors", "tidekeep.places"}),  # the settings check data roots with it
    ("tidekeep.store.segment_ids", set()),  # the chunk format's names
])
def test_what_the_settings_and_the_chunk_format_use_stands_below_them(module: str, allowed: set[str]) -> None:
    assert import_graph()[module] <= allowed


# `x._name` on something other than self or cls, allowed only where the name is public by its
# owner's documentation or the object is the module's own
PUBLIC_UNDERSCORE_NAMES = {"_mapping", "_asdict", "_replace", "_fields", "_exit"}  # SQLAlchemy rows, named tuples, os
OWN_OR_EXPLAINED = {
    ("store/fileio.py", "_init"),  # a FileIO the class itself builds around a given filesystem
    ("store/fileio.py", "_foreign"),
    ("catalog/expressions/sql.py", "_bind_processors"),  # SQLAlchemy's, to render literal parameters
    ("spark/session.py", "_tidekeep_sources_registered"),  # tidekeep's own marker on a session
}


def private_accesses(path: Path) -> Iterator[tuple[int, str]]:
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
                continue
            yield node.lineno, node.attr


def test_no_module_reaches_into_another_objects_private_names() -> None:
    found = [f"{path.relative_to(SRC)}:{line}: .{name}"
             for path in sorted(SRC.rglob("*.py"))
             for line, name in private_accesses(path)
             if name not in PUBLIC_UNDERSCORE_NAMES
             and (path.relative_to(SRC).as_posix(), name) not in OWN_OR_EXPLAINED]
    assert found == []
