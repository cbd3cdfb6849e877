"""The options and arguments several commands share, declared once.

Only Typer and leaf modules are imported here: every command module imports this one, and the
whole command tree is built for `tidekeep --help` (docs/cli.md, "Start-up time").
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..integers import INT64_MAX, INT64_MIN

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]
JsonDocumentFlag = Annotated[bool, typer.Option("--json", help="Print a JSON document instead of text")]

StreamName = Annotated[str, typer.Argument(metavar="NAME", help="scope/stream")]
StreamArgument = Annotated[str, typer.Argument(metavar="STREAM", help="scope/stream")]
ScopedStream = Annotated[str, typer.Argument(metavar="SCOPE/STREAM", help="The stream")]


def int_option(*names: str, help: str, metavar: str = "N", low: int = INT64_MIN) -> Any:
    """An integer option bounded to what the metadata store holds (a 64-bit integer), so a huge
    number is a usage error, not an overflow deep inside (docs/cli.md)."""
    return typer.Option(*names, metavar=metavar, min=low, max=INT64_MAX, help=help)


def int_argument(metavar: str, help: str) -> Any:
    return typer.Argument(metavar=metavar, min=INT64_MIN, max=INT64_MAX, help=help)


def limit_option(help: str, low: int = INT64_MIN) -> Any:
    return int_option("--limit", help=help, low=low)
