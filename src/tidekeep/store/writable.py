"""Whether the local parts of a workspace can be written, checked before a job starts, so that a
read-only home or storage root fails at once with a typed error naming the path instead of midway
through the job.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ReadOnlyWorkspace

if TYPE_CHECKING:
    from ..config import Settings


def require_writable(path: Path, what: str) -> None:
    """ReadOnlyWorkspace naming `path` when it exists and cannot be written (for a directory: files
    cannot be created in it) because of its permissions, an immutable flag or a read-only
    filesystem; `os.access` sees all three, for root too."""
    mode = os.W_OK | os.X_OK if path.is_dir() else os.W_OK
    if path.exists() and not os.access(path, mode):
        raise ReadOnlyWorkspace(f"read-only: {what} {path} is not writable", str(path))


def require_writable_workspace(settings: Settings, *, metadata: bool, storage: bool) -> None:
    """The local parts of the workspace a job writes to are writable: the SQLite database file and
    its directory (SQLite creates its journal beside it) with `metadata`, a local storage root with
    `storage`. Remote stores answer for themselves when written."""
    # on use: the CLI's root imports the Spark session module, and with it this one, for every
    # command, `--help` included, which must not pay for SQLAlchemy (docs/cli.md, "Start-up time")
    from .database import Database

    database = Database.sqlite_file(settings.metadata_url) if metadata else None
    if database is not None:
        require_writable(database, "the metadata database")
        require_writable(database.parent, "the directory of the metadata database")
    uri = settings.storage_uri
    if storage and ("://" not in uri or uri.lower().startswith("file://")):
        require_writable(Path(uri.removeprefix("file://")), "the storage root")


__all__ = ["require_writable", "require_writable_workspace"]
