"""`tidekeep`'s public names load on first use (tidekeep/__init__.py): each name of `__all__` resolves
to the object its module defines, the lazy table and the type checkers' imports list the same names,
and `import tidekeep` alone loads none of the heavy libraries."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import tidekeep as tk

INIT = Path(tk.__file__)


def type_checking_imports() -> dict[str, str]:
    """name -> module of the imports under `if TYPE_CHECKING:` in tidekeep/__init__.py."""
    names: dict[str, str] = {}
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom)
                for alias in statement.names:
                    names[alias.asname or alias.name] = "." * statement.level + (statement.module or "")
    return names


def lazy_table() -> dict[str, str]:
    """The name -> module table the module __getattr__ loads from, read from the source."""
    for node in ast.parse(INIT.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                and node.target.id.endswith("LAZY_EXPORTS"):
            table = ast.literal_eval(node.value)
            assert isinstance(table, dict)
            return table
    raise AssertionError("no lazy export table in tidekeep/__init__.py")


def test_every_exported_name_resolves_to_its_modules_object() -> None:
    lazy = lazy_table()
    assert len(lazy) > 30
    for name in tk.__all__:
        value = getattr(tk, name)
        module = lazy.get(name)
        if module is not None:
            assert value is getattr(importlib.import_module(module, "tidekeep"), name), name


def test_lazy_table_type_checking_imports_and_all_agree() -> None:
    lazy = lazy_table()
    assert type_checking_imports() == lazy
    eager = {name for name in tk.__all__ if name not in lazy}
    assert all(name in vars(tk) for name in eager)  # the rest is imported at the top
    assert set(lazy) <= set(tk.__all__)


def test_unknown_name_is_an_attribute_error() -> None:
    try:
        tk.NoSuchName  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "NoSuchName" in str(exc)
    else:
        raise AssertionError("tidekeep.NoSuchName resolved")


def test_import_tidekeep_loads_no_heavy_library() -> None:
    probe = "import json, sys, tidekeep; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    modules = set(json.loads(done.stdout))
    assert {"sqlalchemy", "pyarrow", "numpy", "pyspark", "yaml", "tidekeep.client"} & modules == set()
