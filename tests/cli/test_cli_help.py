"""`--help` of every command in the app tree: no Python type placeholders (`<bool>`, `<str>`,
`<int>`, `<int range>`, ...) and every option with a default shows it. Rendered in-process through
Typer's test runner, wide enough that no help line wraps."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tidekeep.cli.main import app

PLACEHOLDER = re.compile(r"<(bool|str|int|float|text|path|int range|float range|list\[[^\]]*\])>", re.I)
BOX = str.maketrans({c: " " for c in "│╭╮╰╯─"})


def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from commands(sub, (*path, name))


TREE = list(commands(typer.main.get_command(app)))


def flat_help(path: tuple[str, ...]) -> str:
    done = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400", "TERM": "dumb"})
    assert done.exit_code == 0, done.output
    return " ".join(done.output.translate(BOX).split())  # box and wrapping gone: one line of words


def shown_default(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


def test_the_tree_is_the_whole_app() -> None:
    names = {" ".join(p) for p, _ in TREE}
    assert {"stream read", "rg read", "catalog runs", "archives search", "watermark note", "serve"} <= names
    assert len(TREE) > 60


@pytest.mark.parametrize("path", [p for p, _ in TREE], ids=lambda p: " ".join(p) or "tidekeep")
def test_help_has_no_type_placeholders_and_shows_defaults(path: tuple[str, ...]) -> None:
    text = flat_help(path)
    assert "Usage: tidekeep" in text
    assert not PLACEHOLDER.search(text), PLACEHOLDER.findall(text)
    command = dict(TREE)[path]
    for param in command.params:
        if param.param_type_name != "option" or param.default is None or getattr(param, "is_flag", False):
            continue
        if param.default == [] or param.default == ():
            continue
        expected = f"[default: {shown_default(param.default)}]"
        assert expected in text, (param.opts, expected, text)
