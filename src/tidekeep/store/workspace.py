"""A workspace knows itself: one workspace id, in the metadata store and in the storage root.

`tidekeep init` stamps a new id into the metadata store (table `workspace`) and into the storage
root (the file `tidekeep-workspace.json`). Opening a workspace compares the two: a metadata store
and a storage root of different workspaces are refused before anything runs, so a sweep, a
truncation or a collector can never take another workspace's files for its own orphans. Deleting
files needs the match proven; a workspace from before the stamps reads and writes as before, and
deletes nothing until `tidekeep init` has stamped it (docs/workspace.md).

The decisions (`plan_init`, `check_stamps`) are pure; the functions below them read and write the
stamps.
"""

from __future__ import annotations

import json
import posixpath
import uuid
from dataclasses import dataclass

import sqlalchemy as sa

from ..errors import TidekeepError, WorkspaceMismatch
from ..workspace_areas import MARKER_FILE
from .database import Database
from .fileio import PARTIAL_SUFFIX, FileIO
from .schema_workspace import workspace as workspace_table


# ---- the pure core -------------------------------------------------------------------------------
@dataclass(frozen=True)
class InitPlan:
    """What `tidekeep init` does: stamp the store and/or the storage root with `workspace_id` (None:
    a new id), or refuse (`refusal`, then nothing is created or changed)."""

    stamp_database: bool = False
    stamp_storage: bool = False
    workspace_id: str | None = None
    refusal: str | None = None


def plan_init(database_id: str | None, storage_id: str | None, database_is_new: bool,
              storage_has_data: bool, database: str, storage: str) -> InitPlan:
    """The id is born in the metadata store and travels to the storage root, never back: a storage
    root already stamped, or holding data, is never adopted by a metadata store that is new or
    another workspace's — that store would take every file there for an orphan."""
    if database_id is not None and storage_id is not None:
        if database_id != storage_id:
            return InitPlan(refusal=mismatch_message(database_id, storage_id, database, storage))
        return InitPlan(workspace_id=database_id)
    if database_id is not None:
        if storage_has_data:
            return InitPlan(refusal=f"storage root {storage} holds data but no workspace id; it is not known to "
                                    f"belong to workspace {database_id} ({database}): point storage.uri at this "
                                    "workspace's storage root, or at an empty one")
        return InitPlan(stamp_storage=True, workspace_id=database_id)
    if storage_id is not None:
        return InitPlan(refusal=f"storage root {storage} belongs to workspace {storage_id}, and the metadata store "
                                f"{database} is {'new' if database_is_new else 'not stamped'}: it is not that "
                                "workspace's store; point metadata.url at it")
    if database_is_new and storage_has_data:
        return InitPlan(refusal=f"storage root {storage} holds data, and the metadata store {database} is new: a new "
                                "workspace would take every file there for an orphan; point storage.uri at an empty "
                                "directory, or metadata.url at the store that wrote that data")
    return InitPlan(stamp_database=True, stamp_storage=True)


def check_stamps(database_id: str | None, storage_id: str | None, database: str, storage: str) -> str | None:
    """The workspace id both sides agree on; None for a workspace from before the stamps (neither
    side has one). A store and a storage root that do not belong together raise WorkspaceMismatch."""
    if database_id == storage_id:
        return database_id
    raise WorkspaceMismatch(mismatch_message(database_id, storage_id, database, storage))


def mismatch_message(database_id: str | None, storage_id: str | None, database: str, storage: str) -> str:
    def side(value: str | None) -> str:
        return f"workspace {value}" if value is not None else "no workspace id"

    return (f"the metadata store {database} ({side(database_id)}) and the storage root {storage} "
            f"({side(storage_id)}) are not one workspace; nothing was done — check metadata.url and storage.uri")


def new_workspace_id() -> str:
    return uuid.uuid4().hex


# ---- the metadata store's stamp ------------------------------------------------------------------
def read_database_id(db: Database) -> str | None:
    with db.read() as conn:
        return conn.execute(sa.select(workspace_table.c.workspace_id)).scalar()


def stamp_database(db: Database, workspace_id: str, now_ms: int) -> str:
    """Stamp the store unless it already is (a concurrent init may have won): returns the id it holds."""
    try:
        with db.write() as conn:
            current = conn.execute(sa.select(workspace_table.c.workspace_id)).scalar()
            if current is not None:
                return str(current)
            conn.execute(sa.insert(workspace_table).values(singleton=1, workspace_id=workspace_id,
                                                           created_ms=now_ms))
            return workspace_id
    except sa.exc.IntegrityError:
        stamped = read_database_id(db)
        assert stamped is not None
        return stamped


# ---- the storage root's stamp --------------------------------------------------------------------
def read_storage_id(storage: FileIO) -> str | None:
    try:
        raw = storage.read(MARKER_FILE)
    except FileNotFoundError:
        return None
    except Exception as exc:
        if not storage.is_read_failure(exc):
            raise
        if "not found" in str(exc).lower() or "no such file" in str(exc).lower():
            return None
        problem = str(exc).splitlines()[0]
        raise TidekeepError(f"cannot read the workspace id of storage root {storage.uri}: {problem}") from None
    try:
        value = json.loads(raw)["workspace_id"]
        if not isinstance(value, str) or not value:
            raise ValueError(value)
        return value
    except (ValueError, KeyError, TypeError):
        raise WorkspaceMismatch(f"storage root {storage.uri} has a damaged {MARKER_FILE}; restore it (it names the "
                                "workspace id of the metadata store that owns this data)") from None


def write_storage_id(storage: FileIO, workspace_id: str, now_ms: int) -> None:
    """Write the marker durably like every data file (storage.fsync), and atomically
    (FileIO.write_atomic): another process starting on the same root (a concurrent init) reads
    either no marker or the whole one, never a half-written file."""
    body = json.dumps({"workspace_id": workspace_id, "created_ms": now_ms}).encode() + b"\n"
    storage.write_atomic(MARKER_FILE, body)


def storage_has_data(storage: FileIO) -> bool:
    """Whether anything besides the marker (and a marker being written, or left by a crash while
    being written) lies under the root (looked at one level deep: tidekeep keeps everything in
    subdirectories, and any entry counts)."""
    return any(not _is_marker(posixpath.basename(e.path)) for e in storage.list("", recursive=False))


def _is_marker(name: str) -> bool:
    return name == MARKER_FILE or (name.startswith(MARKER_FILE + ".") and name.endswith(PARTIAL_SUFFIX))


__all__ = ["MARKER_FILE", "InitPlan", "check_stamps", "mismatch_message", "new_workspace_id", "plan_init",
           "read_database_id", "read_storage_id", "stamp_database", "storage_has_data", "write_storage_id"]
