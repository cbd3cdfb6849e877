"""`tidekeep catalog ...` commands: placeholder, filled by the module's owner."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `catalog` group."""
