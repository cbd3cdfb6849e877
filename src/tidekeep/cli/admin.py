"""Workspace commands of the root app: `init` and `sweep` (plain functions, registered by main.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..redaction import redact
from ..store.deletion import files_left_json
from ..units import format_duration, human_size, parse_duration_ms
from .context import configure_logging, load, open_client, options, output
from .db import shown_url
from .options import JsonDocumentFlag
from .output import emit, fields, warn_files_left

if TYPE_CHECKING:
    from ..config import Settings


def _sqlite_file(url: str) -> Path | None:
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except (sa.exc.ArgumentError, ValueError):  # not a URL: the metadata store says so when it opens
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database or parsed.database == ":memory:":
        return None
    return Path(parsed.database)


def existing_parts(settings: Settings) -> dict[str, bool]:
    """Which of the workspace's parts exist before `init` (a URL storage counts as existing)."""
    database_file = _sqlite_file(settings.metadata_url)
    storage_dir = None if "://" in settings.storage_uri else Path(settings.storage_uri)
    return {
        "home": settings.home.is_dir(),
        "database": database_file is None or database_file.exists(),
        "storage": storage_dir is None or storage_dir.is_dir(),
    }


def stamped_revision(settings: Settings) -> tuple[str | None, str | None]:
    """The schema revision and the workspace id the metadata store holds."""
    from ..store.database import Database
    from ..store.workspace import read_database_id

    database = Database(settings.metadata_url, settings["metadata.busy_timeout"],
                        durable_commits=settings["storage.fsync"])
    try:
        return database.current_revision(), read_database_id(database)
    finally:
        database.dispose()


def emit_init(report: dict[str, Any]) -> None:
    created = report["created"]
    if created:
        emit(f"initialised tidekeep workspace {report['home']}")
    else:
        emit(f"tidekeep workspace {report['home']} is already initialised; nothing changed")
    mark = {True: "created", False: "exists "}
    fields([
        ("config", f"{mark['config' in created]}  {report['config_file']}"),
        ("metadata", f"{mark['database' in created]}  {report['metadata_url']} (schema {report['schema_revision']})"),
        ("storage", f"{mark['storage' in created]}  {report['storage']}"),
        ("workspace", f"id {report['workspace_id']} (in the metadata store and the storage root)"),
    ])


def init(ctx: typer.Context, json_output: JsonDocumentFlag = False) -> None:
    """Create the workspace (tidekeep.yaml, metadata schema, data directory) and stamp its id into
    the metadata store and the storage root. Safe to run again; refuses to join a store and a
    storage root of different workspaces."""
    from ..client import init_workspace
    from ..config import CONFIG_FILE_NAME

    settings = load(ctx)
    configure_logging(settings, options(ctx).verbose)
    existed = existing_parts(settings)
    settings, config_created = init_workspace(settings.home, options(ctx).overrides())
    revision, workspace_id = stamped_revision(settings)
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
    output(ctx, json_output).show(report, lambda: emit_init(report))


def sweep(
    ctx: typer.Context,
    grace: Annotated[str | None, typer.Option(
        "--grace", metavar="DURATION",
        help="Only delete orphan files older than this, e.g. 1h [default: setting sweep.grace]")] = None,
    json_output: JsonDocumentFlag = False,
) -> None:
    """Delete chunk files no committed chunk refers to (left by crashed writers or truncations)."""
    with open_client(ctx) as client:
        grace_ms = client.settings["sweep.grace"] if grace is None else parse_duration_ms(grace)
        result = client.sweep(grace_ms)
    output(ctx, json_output).show(
        {"files_seen": result.files_seen, "files_deleted": result.files_deleted,
         "bytes_deleted": result.bytes_deleted, "grace_ms": grace_ms,
         "files_left": files_left_json(result.files_left), "files_unknown_age": result.files_unknown_age},
        f"swept {result.files_seen} chunk files: deleted {result.files_deleted} orphan(s) "
        f"({human_size(result.bytes_deleted)}) older than {format_duration(grace_ms)}"
        + (f"; kept {result.files_unknown_age} orphan(s) whose age the store does not give"
           if result.files_unknown_age else ""))
    warn_files_left(result.files_left, left_for="the next sweep")
