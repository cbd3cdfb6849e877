"""`tidekeep db upgrade`: the metadata database (this module's `app`)."""

from __future__ import annotations

import typer

from .context import configure_logging, load, options, output, require_workspace
from .options import JsonDocumentFlag

app = typer.Typer(help="The metadata database.", no_args_is_help=True)


def shown_url(url: str) -> str:
    """A metadata URL fit to print: the password hidden."""
    from ..store.database import Database

    return Database.shown_url(url)


def upgrade_text(before: str | None, after: str | None) -> str:
    if before == after:
        return f"metadata schema is at revision {after}; already up to date"
    return f"metadata schema upgraded from {before or 'empty'} to revision {after}"


@app.command("upgrade")
def upgrade(ctx: typer.Context, json_output: JsonDocumentFlag = False) -> None:
    """Apply metadata-schema migrations up to this version of tidekeep; print the revision."""
    from ..store.database import Database

    settings = load(ctx)
    require_workspace(settings)
    configure_logging(settings, options(ctx).verbose)
    database = Database(settings.metadata_url, settings["metadata.busy_timeout"],
                        durable_commits=settings["storage.fsync"])
    try:
        before = database.current_revision()
        database.ensure_schema()  # migrates to head; refuses a schema from a newer tidekeep
        after = database.current_revision()
    finally:
        database.dispose()
    output(ctx, json_output).show(
        {"metadata_url": shown_url(settings.metadata_url), "from_revision": before, "revision": after},
        upgrade_text(before, after))
