"""`tidekeep catalog dict set|list|show|delete`: dictionaries, the named word lists IN_DICTIONARY
terms test (this module's `app`, a group of the catalog app)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import InvalidInput
from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_table

app = typer.Typer(help="Dictionaries: named word lists for IN_DICTIONARY terms.", no_args_is_help=True)


def read_words(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"cannot read {str(path)!r}: not UTF-8 text") from None


def emit_lines(lines: list[str]) -> None:
    for line in lines:
        emit(line)


def emit_dictionaries(everything: dict[str, list[str]]) -> None:
    if not everything:
        emit("no dictionaries")
        return
    emit_table(["NAME", "WORDS"], [[name, len(words)] for name, words in everything.items()])


@app.command("set")
def dict_set(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Dictionary name ([A-Za-z0-9_-]{1,255})")],
    words: Annotated[list[str] | None, typer.Argument(metavar="WORD...", help="The words")] = None,
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", metavar="FILE", help="Read the words from FILE, one per line")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Create or replace a dictionary (words trimmed; blank and repeated words dropped)."""
    if file is not None and words:
        raise InvalidInput("give the words either as arguments or with --file, not both")
    given = read_words(file) if file is not None else list(words or [])
    with open_client(ctx) as client:
        client.catalog.set_dictionary(name, given)
        stored = client.catalog.dictionary(name)
    output(ctx, json_output).show({"name": name, "words": stored}, f"dictionary {name}: {len(stored)} word(s)")


@app.command("list")
def dict_list(ctx: typer.Context, json_output: JsonFlag = False) -> None:
    """Every dictionary with its word count."""
    with open_client(ctx) as client:
        everything = client.catalog.dictionaries()
    output(ctx, json_output).show(everything, lambda: emit_dictionaries(everything))


@app.command("show")
def dict_show(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Dictionary name")],
    json_output: JsonFlag = False,
) -> None:
    """A dictionary's words, one per line."""
    with open_client(ctx) as client:
        words = client.catalog.dictionary(name)
    output(ctx, json_output).show({"name": name, "words": words}, lambda: emit_lines(words))


@app.command("delete")
def dict_delete(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="Dictionary name")],
    json_output: JsonFlag = False,
) -> None:
    """Delete a dictionary (refused while the saved retention rules use it)."""
    with open_client(ctx) as client:
        client.catalog.delete_dictionary(name)
    output(ctx, json_output).show({"name": name, "deleted": True}, f"dictionary {name} deleted")
