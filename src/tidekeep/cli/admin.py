"""Workspace commands: `init`, `sweep`, `db upgrade`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import sqlalchemy as sa
import typer

from ..client import init_workspace
from ..config import CONFIG_FILE_NAME
from ..redaction import redact
from ..store.database import Database
from ..store.deletion import files_left_json
from ..store.workspace import read_database_id
from ..units import format_duration, human_size, parse_duration_ms
from .context import configure_logging, load, open_client, options, require_workspace
from .output import emit, emit_json, fields, warn_files_left

JsonFlag = Annotated[bool, typer.Option("--json", help="Print a JSON document instead of text")]


def shown_url(url: str) -> str:
    """A metadata URL fit to print: the password hidden."""
    return Database.shown_url(url)


def _sqlite_file(url: str) -> Path | None:
    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):  # not a URL: the metadata store says so when it opens
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def register(app: typer.Typer, db_app: typer.Typer) -> None:
    @app.command("init")
    def init(ctx: typer.Context, json_output: JsonFlag = False) -> None:
        """Create the workspace (tidekeep.yaml, metadata schema, data directory) and stamp its id into
        the metadata store and the storage root. Safe to run again; refuses to join a store and a
        storage root of different workspaces."""
        settings = load(ctx)
        configure_logging(settings, options(ctx).verbose)
        database_file = _sqlite_file(settings.metadata_url)
        storage_dir = None if "://" in settings.storage_uri else Path(settings.storage_uri)
        existed = {
            "home": settings.home.is_dir(),
            "database": database_file is None or database_file.exists(),
            "storage": storage_dir is None or storage_dir.is_dir(),
        }
        settings, config_created = init_workspace(settings.home, options(ctx).overrides())
        database = Database(settings.metadata_url, settings["metadata.busy_timeout"],
                            durable_commits=settings["storage.fsync"])
        try:
            revision = database.current_revision()
            workspace_id = read_database_id(database)
        finally:
            database.dispose()
        created = [name for name, was in (("home", existed["home"]), ("config", not config_created),
                                          ("database", existed["database"]), ("storage", existed["storage"]))
                   if not was]
        report: dict[str, Any] = {
            "home": str(settings.home.resolve()),
            "config_file": str((settings.home / CONFIG_FILE_NAME).resolve()),
            "metadata_url": shown_url(settings.metadata_url),
            "storage": redact(settings.storage_uri),
            "schema_revision": revision,
            "workspace_id": workspace_id,
            "created": created,
        }
        if json_output:
            emit_json(report)
            return
        if created:
            emit(f"initialised tidekeep workspace {report['home']}")
        else:
            emit(f"tidekeep workspace {report['home']} is already initialised; nothing changed")
        mark = {True: "created", False: "exists "}
        fields([
            ("config", f"{mark['config' in created]}  {report['config_file']}"),
            ("metadata", f"{mark['database' in created]}  {report['metadata_url']} (schema {revision})"),
            ("storage", f"{mark['storage' in created]}  {report['storage']}"),
            ("workspace", f"id {workspace_id} (in the metadata store and the storage root)"),
        ])

    @app.command("sweep")
    def sweep(
        ctx: typer.Context,
        grace: Annotated[str | None, typer.Option(
            "--grace", metavar="DURATION",
            help="Only delete orphan files older than this, e.g. 1h [default: setting sweep.grace]")] = None,
        json_output: JsonFlag = False,
    ) -> None:
        """Delete chunk files no committed chunk refers to (left by crashed writers or truncations)."""
        with open_client(ctx) as client:
            grace_ms = client.settings["sweep.grace"] if grace is None else parse_duration_ms(grace)
            result = client.sweep(grace_ms)
        if json_output:
            emit_json({"files_seen": result.files_seen, "files_deleted": result.files_deleted,
                       "bytes_deleted": result.bytes_deleted, "grace_ms": grace_ms,
                       "files_left": files_left_json(result.files_left)})
        else:
            emit(f"swept {result.files_seen} chunk files: deleted {result.files_deleted} orphan(s) "
                 f"({human_size(result.bytes_deleted)}) older than {format_duration(grace_ms)}")
        warn_files_left(result.files_left, left_for="the next sweep")

    @db_app.command("upgrade")
    def upgrade(ctx: typer.Context, json_output: JsonFlag = False) -> None:
        """Apply metadata-schema migrations up to this version of tidekeep; print the revision."""
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
        if json_output:
            emit_json({"metadata_url": shown_url(settings.metadata_url), "from_revision": before,
                       "revision": after})
        elif before == after:
            emit(f"metadata schema is at revision {after}; already up to date")
        else:
            emit(f"metadata schema upgraded from {before or 'empty'} to revision {after}")
