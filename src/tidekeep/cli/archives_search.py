"""`tidekeep archives` commands (placeholder: filled in by the archives search work)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    del app
