"""How `--help` shows each parameter's value: our metavars, never Python type names.

Typer's rich help prints a parameter's Python type next to it (`<bool>` for a flag, `<str>` after an
argument already shown by name, `<int range>` for an option without a metavar). Those say nothing to
a user, so the whole app renders instead: nothing for flags and arguments (the argument's name is
already in the row), the metavar for an option that has one, and the option's name in capitals
otherwise (`--limit LIMIT`). Defaults are shown by Typer itself ("[default: …]", docs/cli.md).
Applied once, when cli/main.py builds the app; tests/cli/test_cli_help.py renders every command's help.
"""

from __future__ import annotations

from typing import Any

from typer import core


def _argument_value(self: core.TyperArgument, ctx: Any) -> str | None:
    return None


def _option_value(self: core.TyperOption, ctx: Any) -> str | None:
    if self.is_flag or self.count:
        return None
    if self.metavar is not None:
        return self.metavar
    return (self.name or "value").upper()


def use_metavars_in_help() -> None:
    core.TyperArgument.display_type_rich = _argument_value  # type: ignore[method-assign, assignment]
    core.TyperOption.display_type_rich = _option_value  # type: ignore[method-assign, assignment]
