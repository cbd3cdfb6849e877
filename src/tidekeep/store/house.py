"""The workspace value: what every family (streams, catalog, archives) and the Spark jobs receive.

A `Workspace` bundles the pieces of one open workspace: its settings, the metadata database, the
storage root, the clock, the audit log and the workspace id. It sits in the foundation, below the
families, so they depend on it and never on the client facade above them (docs/workspace.md, "The house").
A family takes the whole Workspace or just the pieces it uses.

`open_workspace` opens one the way the client does: the metadata store and the storage root must
exist and carry one workspace id (store/workspace.py); otherwise NotFound or WorkspaceMismatch, and
nothing is created and no connection is left open.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..clock import SYSTEM_CLOCK, Clock
from ..config import Settings
from .audit import AuditLog, default_actor
from .chunks import ChunkStorage
from .database import Database
from .workspace import check_stamps, read_database_id, read_storage_id


@dataclass(frozen=True)
class Workspace:
    """One open workspace. `workspace_id` is the id matched when it was opened (None: a workspace
    from before the ids); deletions check the storage's own id, which `verify_identity` renews."""

    settings: Settings
    db: Database
    storage: ChunkStorage
    clock: Clock
    audit: AuditLog
    workspace_id: str | None

    def close(self) -> None:
        self.db.dispose()


def verify_identity(db: Database, storage: ChunkStorage) -> str | None:
    """Compare the metadata store's workspace id with the storage root's and give the storage the
    id (deletions are allowed only under it), or None for a workspace from before the ids. Raises
    WorkspaceMismatch when the two are not one workspace; deleting is refused then too."""
    storage.workspace_id = None
    identity = check_stamps(read_database_id(db), read_storage_id(storage),
                            db.shown, storage.uri)
    storage.workspace_id = identity
    return identity


def open_workspace(settings: Settings, clock: Clock = SYSTEM_CLOCK, actor: str | None = None) -> Workspace:
    """Open the workspace `settings` name; `actor` (default: this host and process) signs its audit rows."""
    db = Database(settings.metadata_url, settings["metadata.busy_timeout"], durable_commits=settings["storage.fsync"])
    try:
        storage = ChunkStorage(settings.storage_uri, fsync=settings["storage.fsync"])
        workspace_id = verify_identity(db, storage)
    except BaseException:
        db.dispose()
        raise
    return Workspace(settings, db, storage, clock, AuditLog(clock, actor or default_actor()), workspace_id)


__all__ = ["Workspace", "open_workspace", "verify_identity"]
