"""The shape of the CLI package (docs/cli.md, "How the CLI is built"): one Typer app per noun at module
level, commands that are plain functions of no more than ~60 lines, and the few values the help
text writes out (so that `--help` need not import the modules that own them) equal to those values."""

from __future__ import annotations

import ast
from pathlib import Path

import typer

import tidekeep.cli
from tidekeep.cli import archives_search, holds, main, tokens

CLI_DIR = Path(tidekeep.cli.__file__).parent
MAX_FUNCTION_LINES = 60


def functions() -> list[tuple[str, str, int]]:
    found = []
    for path in sorted(CLI_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                assert node.end_lineno is not None
                found.append((path.name, node.name, node.end_lineno - first + 1))
    return found


def test_no_cli_function_is_longer_than_sixty_lines() -> None:
    found = functions()
    assert len(found) > 100  # the walk did see the commands
    assert [f for f in found if f[2] > MAX_FUNCTION_LINES] == []


def test_every_command_is_a_plain_module_level_function() -> None:
    """No command is defined inside another function (the old `register(app)` closures)."""
    for path in sorted(CLI_DIR.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for outer in ast.walk(tree):
            if isinstance(outer, ast.FunctionDef):
                nested = [n.name for n in ast.walk(outer) if isinstance(n, ast.FunctionDef) and n is not outer
                          and n.decorator_list]
                assert nested == [], (path.name, outer.name, nested)


def test_every_noun_is_one_module_level_app() -> None:
    root = typer.main.get_command(main.app)
    nouns = {name for name, command in root.commands.items() if isinstance(command, typer.core.TyperGroup)}
    assert nouns == {"stream", "audit", "db", "txn", "rg", "retention", "hold", "catalog", "archives", "watermark",
                     "config", "token"}
    registered = {info.name: info.typer_instance for info in main.app.registered_groups}
    for noun in nouns:
        owner = [module for module in vars(tidekeep.cli).values()
                 if getattr(module, "app", None) is registered[noun]]
        assert len(owner) == 1, noun  # exactly one module holds the noun's app as its `app`


def test_values_written_out_for_help_equal_their_owners() -> None:
    from tidekeep.archives.model import JobState
    from tidekeep.archives.results import MAX_PAGE_SIZE
    from tidekeep.holds import HOLD_KINDS
    from tidekeep.store.tokens import Role

    assert tuple(HOLD_KINDS) == holds.HOLD_KIND_NAMES
    assert tuple(role.value for role in Role) == tokens.ROLE_NAMES
    assert archives_search.MAX_PAGE_SIZE_SHOWN == MAX_PAGE_SIZE
    assert tuple(state.value for state in JobState) == archives_search.JOB_STATE_NAMES
