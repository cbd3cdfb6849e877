"""The compilers share one dispatch (catalog/expressions/visitor.py): a compiler that leaves a node
or a term kind out fails when it is instantiated, which each compiler module does at import, and
mypy rejects it before that."""

from __future__ import annotations

import inspect
import os
import textwrap
from pathlib import Path

import pytest

from tidekeep.catalog.expressions.bind import TermKind
from tidekeep.catalog.expressions.python import PythonCompiler
from tidekeep.catalog.expressions.sql import SqlCompiler
from tidekeep.catalog.expressions.visitor import BoundCompiler

NODE_METHODS = {"constant", "all_of", "any_of", "negate", "value_of", "is_null", "is_not_null", "present_and"}


def _method_of(kind: TermKind) -> str:
    return {TermKind.IN: "in_"}.get(kind, kind.value)


def test_every_node_and_term_kind_is_an_abstract_method() -> None:
    # NULL and NOT_NULL are node methods (they test the value itself, not a present value)
    kinds = {_method_of(k) for k in TermKind} - {"null", "not_null"}
    assert BoundCompiler.__abstractmethods__ == NODE_METHODS | kinds


@pytest.mark.parametrize("missing", sorted(BoundCompiler.__abstractmethods__))
def test_a_compiler_missing_a_case_cannot_be_instantiated(missing: str) -> None:
    # every method of a complete compiler but one
    methods = {name: member for name, member in vars(PythonCompiler).items()
               if name in BoundCompiler.__abstractmethods__ and name != missing}
    incomplete = type("Incomplete", (BoundCompiler,), methods)
    with pytest.raises(TypeError, match=rf"abstract method.*\b{missing}\b"):
        incomplete()


def test_the_complete_compilers_instantiate() -> None:
    # each module also builds its compiler when imported (so the imports above are a check too)
    from tidekeep.store.schema_catalog import catalog_records

    assert isinstance(PythonCompiler(), BoundCompiler)
    assert isinstance(SqlCompiler(catalog_records), BoundCompiler)
    assert not inspect.isabstract(PythonCompiler) and not inspect.isabstract(SqlCompiler)


def test_the_spark_compiler_is_complete() -> None:
    from tidekeep.catalog.expressions.spark import SparkCompiler  # pyspark is a dependency: no skip

    assert not inspect.isabstract(SparkCompiler)


def test_mypy_rejects_a_compiler_missing_a_case(tmp_path: Path) -> None:
    from mypy import api  # a dev dependency (make lint runs it): a missing mypy fails, never skips

    source = tmp_path / "incomplete_compiler.py"
    # a compiler written from the base class, one term kind short
    text = textwrap.dedent("""
        from typing import Any

        from tidekeep.catalog.expressions.bind import BoundTerm
        from tidekeep.catalog.expressions.python import PythonCompiler
        from tidekeep.catalog.expressions.visitor import BoundCompiler


        class NoRegex(BoundCompiler[bool, Any, bool]):
            def constant(self, value: bool) -> bool: return value
            def all_of(self, children: Any) -> bool: return all(children)
            def any_of(self, children: Any) -> bool: return any(children)
            def negate(self, child: bool) -> bool: return not child
            def value_of(self, field: Any) -> Any: return None
            def is_null(self, value: Any) -> bool: return True
            def is_not_null(self, value: Any) -> bool: return False
            def present_and(self, value: Any, test: bool) -> bool: return test
            def eq(self, term: BoundTerm, value: Any) -> bool: return True
            def ne(self, term: BoundTerm, value: Any) -> bool: return True
            def gt(self, term: BoundTerm, value: Any) -> bool: return True
            def ge(self, term: BoundTerm, value: Any) -> bool: return True
            def lt(self, term: BoundTerm, value: Any) -> bool: return True
            def le(self, term: BoundTerm, value: Any) -> bool: return True
            def between(self, term: BoundTerm, value: Any) -> bool: return True
            def in_(self, term: BoundTerm, value: Any) -> bool: return True
            def glob(self, term: BoundTerm, value: Any) -> bool: return True
            def not_glob(self, term: BoundTerm, value: Any) -> bool: return True
            def contains(self, term: BoundTerm, value: Any) -> bool: return True
            def starts(self, term: BoundTerm, value: Any) -> bool: return True
            def ends(self, term: BoundTerm, value: Any) -> bool: return True


        COMPILER = NoRegex()
        COMPLETE = PythonCompiler()
    """)
    source.write_text(text)
    line = text.splitlines().index("COMPILER = NoRegex()") + 1
    stdout, _stderr, status = api.run([str(source), "--follow-imports=silent", "--no-incremental",
                                       "--config-file", os.devnull, "--python-version", "3.11"])
    assert status == 1, stdout
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert errors == [f'{source}:{line}: error: Cannot instantiate abstract class "NoRegex" with abstract attribute '
                      f'"regex"  [abstract]'], stdout
