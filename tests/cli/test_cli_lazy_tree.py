"""`tidekeep <command> ...` runs on an app holding only that command (cli/main.py `app_for`), so a
command imports and builds only its own part of the tree: that app must answer exactly as the whole
app does — every help text, every usage error, every root option before the command."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from tidekeep.cli.main import COMMANDS, app, app_for, build_app, command_name

ENV = {"COLUMNS": "200", "TERM": "dumb"}


def paths(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from paths(sub, (*path, name))


EVERY_PATH = [p for p in paths(typer.main.get_command(app)) if p]


def answer(application: typer.Typer, args: list[str]) -> tuple[int, str]:
    done = CliRunner().invoke(application, args, env=ENV)
    return done.exit_code, done.output


def test_the_whole_app_holds_every_command_in_order() -> None:
    assert list(typer.main.get_command(app).commands) == list(COMMANDS)  # type: ignore[attr-defined]


@pytest.mark.parametrize("path", EVERY_PATH, ids=" ".join)
def test_a_commands_own_app_answers_its_help_as_the_whole_app(path: tuple[str, ...]) -> None:
    args = [*path, "--help"]
    narrowed = app_for(args)
    assert list(typer.main.get_command(narrowed).commands) == [path[0]]  # type: ignore[attr-defined]
    assert answer(narrowed, args) == answer(app, args)


@pytest.mark.parametrize("args", [
    ["stream", "bogus"], ["stream"], ["catalog", "rules", "nope"], ["stream", "describe"],
    ["stream", "describe", "a/b", "--no-such-flag"], ["--json", "hold", "add"], ["rg", "--bogus"],
    ["--home", "stream", "list", "--x"], ["--set", "a=b", "audit", "list", "--limit", "many"],
], ids=" ".join)
def test_usage_errors_read_the_same_on_a_commands_own_app(args: list[str]) -> None:
    code, output = answer(app_for(args), args)
    assert code == 2
    assert (code, output) == answer(app, args)


def test_unknown_names_root_help_and_no_command_get_the_whole_app() -> None:
    for args in (["strem", "list"], ["--help"], ["-h", "stream"], [], ["--json"], ["--home", "x"]):
        assert list(typer.main.get_command(app_for(args)).commands) == list(COMMANDS), args  # type: ignore[attr-defined]
    assert answer(app_for(["strem", "list"]), ["strem", "list"]) == answer(app, ["strem", "list"])


ROOT_FLAGS = st.sampled_from(["--json", "--verbose", "-v", "--debug", "--home=/x", "--set=a=b"])
ROOT_VALUES = st.tuples(st.sampled_from(["--home", "--metadata-url", "--storage", "--set"]),
                        st.text(min_size=0, max_size=8)).map(list)
ROOT_OPTIONS = st.lists(st.one_of(ROOT_FLAGS.map(lambda flag: [flag]), ROOT_VALUES), max_size=4)


@given(ROOT_OPTIONS, st.sampled_from([*COMMANDS, "strem"]), st.lists(st.text(max_size=6), max_size=3))
def test_the_command_is_the_first_argument_after_the_root_options(
        options: list[list[str]], command: str, rest: list[str]) -> None:
    # oracle: the root options are consumed as the parser does, a value option taking the next token
    # whatever it looks like, so the command is the token after them
    args = [token for option in options for token in option] + [command, *rest]
    assert command_name(args) == command


def test_root_help_before_a_command_is_the_roots() -> None:
    assert command_name(["--json", "--help", "stream"]) is None
    assert command_name(["--home", "--help", "stream"]) == "stream"  # "--help" is the home's value here
    assert build_app(["stream"]).registered_groups[0].name == "stream"
