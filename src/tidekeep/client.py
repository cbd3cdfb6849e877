"""The client: one object that opens the workspace and exposes every operation."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .archives.api import Archives
from .catalog.api import Catalog
from .clock import SYSTEM_CLOCK, Clock
from .config import CONFIG_FILE_NAME, Settings, config_file_text, load_settings
from .errors import NotFound, WorkspaceMismatch
from .holds import HoldStore
from .store.audit import AuditFilter, AuditLog, audit_page
from .store.audit_chain import ChainVerdict
from .store.audit_verify import chain_head, verify_trail
from .store.chunks import ChunkStorage
from .store.database import Database
from .store.fencing import LeaseFence
from .store.house import Workspace, open_workspace, verify_identity
from .store.local_dirs import check_can_be_directory, ensure_directory
from .store.private import write_private_text
from .store.workspace import (
    mismatch_message,
    new_workspace_id,
    plan_init,
    read_database_id,
    read_storage_id,
    stamp_database,
    storage_has_data,
    write_storage_id,
)
from .stream_handle import Stream, StreamStores
from .streams.config import StreamConfig
from .streams.controller import StreamInfo, SweepResult
from .streams.of_workspace import stream_controller
from .units import parse_duration_ms

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from .store.audit_report import DeletionReport
    from .streams.listing import StreamListing, StreamQuery
    from .streams.readergroup import ReaderGroup, ReaderGroupConfig
    from .streams.txn_store import TransactionStore

log = logging.getLogger("tidekeep")


class Client:
    """An open workspace. Opening it checks that the metadata store and the storage root exist and
    are one workspace (store/workspace.py): NotFound or WorkspaceMismatch otherwise, and nothing is
    created. `tidekeep.connect(create=True)` / `init_workspace` create and stamp a workspace first.

    One stream's operations live on its handle, `client.stream(name)` (its retention and watermarks
    too); workspace-wide ones here and in the namespaces `transactions`, `holds`, `catalog` and
    `archives`.
    `client.workspace` is the extension point below this API (database, storage, settings, clock)."""

    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK, *, workspace: Workspace | None = None) -> None:
        """`workspace`: an open workspace to share (`Client.over`), which `close` then leaves open."""
        self.settings = settings
        self.clock = clock
        # the lower-level workspace every family receives (store/house.py); the client is a facade on it
        self._owns_workspace = workspace is None
        self._workspace = open_workspace(settings, clock) if workspace is None else workspace
        self._db = self._workspace.db
        self._storage = self._workspace.storage
        self.workspace_id = self._workspace.workspace_id
        self._streams = stream_controller(self._workspace)
        # the stores behind every handle's `retention`, `watermarks` and transactions, built on first use
        self._stream_stores = StreamStores(self._workspace, self._streams)
        self.holds = HoldStore(self._db, clock, self._workspace.audit.actor)  # legal holds: add/list/remove/active_for
        self.catalog = Catalog(self._workspace)  # meta records, rules, the retention job, purge (catalog/)
        self.archives = Archives(self._workspace)  # log archives, searches, the garbage collectors (archives/)

    @classmethod
    def over(cls, workspace: Workspace, actor: str | None = None) -> Client:
        """A client on an open workspace (sharing its database connections), whose audit rows name
        `actor` (default: the workspace's). The HTTP API keeps one per token name, so every change
        is audited as made by that token. Closing it leaves the workspace open."""
        if actor is not None and actor != workspace.audit.actor:
            workspace = replace(workspace, audit=AuditLog(workspace.clock, actor))
        return cls(workspace.settings, workspace.clock, workspace=workspace)

    @property
    def transactions(self) -> TransactionStore:
        """The workspace's transactions: list, abort, expire (streams/txn_store.py)."""
        return self._stream_stores.transactions

    @property
    def workspace(self) -> Workspace:
        """The workspace below the public API: settings, database, storage, clock, audit log and
        workspace id, for code that extends tidekeep (the families, the service, tests). Not needed
        for everyday use."""
        return self._workspace

    def verify_workspace(self) -> str | None:
        """Compare the metadata store's workspace id with the storage root's (again: `tidekeep serve`
        does before every pass). Returns the id — deletions are allowed only under it — or None for a
        workspace from before the ids, which deletes nothing until `tidekeep init` stamps it. Raises
        WorkspaceMismatch when the two are not one workspace; then deleting is refused too."""
        self.workspace_id = verify_identity(self._db, self._storage)
        return self.workspace_id

    # ---- scopes and streams --------------------------------------------------------------------
    def create_scope(self, scope: str) -> bool:
        return self._streams.create_scope(scope)

    def list_scopes(self) -> list[str]:
        return self._streams.list_scopes()

    def delete_scope(self, scope: str) -> None:
        self._streams.delete_scope(scope)

    def create_stream(self, name: str, config: StreamConfig | None = None) -> StreamInfo:
        """Create the stream (AlreadyExists if it does); `client.stream(name)` is its handle."""
        return self._streams.create_stream(name, config or StreamConfig())

    def list_streams(self, scope: str | None = None, *, after: tuple[str, str] | None = None,
                     limit: int | None = None) -> list[StreamInfo]:
        """Streams in (scope, name) order, of `scope` or of all; `after` (scope, name) and `limit`
        give one keyset page (the API's lists)."""
        return self._streams.list_streams(scope, after=after, limit=limit)

    def stream_listing(self, query: StreamQuery | None = None) -> StreamListing:
        """One page of streams with their retained bytes and segment counts, filtered, sorted and
        paged in the metadata store: a few queries whatever the number of streams (streams/listing.py)."""
        from .streams.listing import StreamQuery, list_stream_rows

        with self._db.read() as conn:
            return list_stream_rows(conn, query or StreamQuery())

    def stream(self, name: str) -> Stream:
        """The handle of one stream: cuts, reads, writers, truncation, scaling, its retention and
        watermarks. Creating it reads nothing; its calls raise NotFound for an unknown stream."""
        return Stream(name, controller=self._streams, settings=self.settings, stores=self._stream_stores)

    # ---- reader groups -------------------------------------------------------------------------
    def create_reader_group(self, name: str, config: ReaderGroupConfig) -> ReaderGroup:
        """A new reader group positioned at its config's start cuts (default: the streams' heads)."""
        from .streams.readergroup import ReaderGroup

        return ReaderGroup.create(self._streams, name, config)

    def reader_group(self, name: str) -> ReaderGroup:
        from .streams.readergroup import ReaderGroup

        return ReaderGroup(self._streams, name)

    def list_reader_groups(self) -> list[str]:
        from .streams.rg_store import ReaderGroupStore

        return ReaderGroupStore(self._streams).names()

    def delete_reader_group(self, name: str) -> None:
        from .streams.rg_store import ReaderGroupStore

        ReaderGroupStore(self._streams).delete(name)

    # ---- maintenance ---------------------------------------------------------------------------
    def sweep(self, grace: int | str | None = None, fence: LeaseFence | None = None) -> SweepResult:
        """Delete orphan chunk files older than `grace` (default sweep.grace). `fence`: the service's
        lease this runs under (store/fencing.py); None for a manual call."""
        grace_ms = self.settings["sweep.grace"] if grace is None else parse_duration_ms(grace)
        return self._streams.sweep(grace_ms, fence)

    def audit(self, target: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return self._streams.audit_entries(target, limit)

    def audit_page(self, where: AuditFilter, limit: int = 100, before_id: int | None = None) -> list[dict[str, Any]]:
        """Audit rows matching `where`, newest first, older than row `before_id` when given (paging)."""
        return audit_page(self._db, where, limit, before_id)

    def audit_head(self) -> dict[str, Any]:
        """The audit chain's head, to keep elsewhere as an anchor: {"id", "hash", "time_ms"}."""
        return chain_head(self._db)

    def audit_verify(self, anchor: str | None = None, progress: Callable[[int], None] | None = None
                     ) -> ChainVerdict:
        """Re-compute the audit chain: the first row changed, deleted or inserted around tidekeep,
        if any, and whether `anchor` (a head kept elsewhere) is in the verified trail."""
        return verify_trail(self._db, anchor, progress)

    def audit_report(self, since_ms: int, until_ms: int, scope: str | None = None) -> DeletionReport:
        """Every deletion with `since_ms <= time <= until_ms` per family, why and how many bytes, the
        holds in force and the audit chain hash that signs it (docs/audit-reports.md), generated at
        the client's clock now; of `scope`'s streams only when given."""
        from .store.audit_report_reader import read_deletion_report

        return read_deletion_report(self._db, since_ms, until_ms, self.clock.now_ms(), scope)

    # ---- spark ---------------------------------------------------------------------------------
    def spark(self) -> SparkSession:
        from .spark.session import get_spark

        return get_spark(self.settings)

    def spark_options(self) -> dict[str, str]:
        """Options that point spark.read.format("tidekeep") (and the sink) at this workspace (absolute
        paths), with its spark.shared_filesystem declaration and its storage.fsync setting. The
        metadata password is passed by reference, as it works on the spark.master setting's
        executors (spark/credentials.py; ConfigError when no reference would)."""
        from .spark.credentials import metadata_reference

        metadata = metadata_reference(self.settings.metadata_url, self.settings["spark.master"])
        return {**metadata.options(), "storage": self.settings.storage_uri,
                "shared_filesystem": str(self.settings["spark.shared_filesystem"]).lower(),
                "fsync": "true" if self.settings["storage.fsync"] else "false"}

    def close(self) -> None:
        if self._owns_workspace:
            self._db.dispose()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_HOME_SETTING = "the workspace directory (--home, TIDEKEEP_HOME)"


def init_workspace(home: str | os.PathLike[str] | None = None,
                   overrides: Mapping[str, Any] | None = None, clock: Clock = SYSTEM_CLOCK) -> tuple[Settings, bool]:
    """Create the workspace (its directory and tidekeep.yaml, the metadata schema, the storage root)
    and stamp one workspace id into the store and the storage root. Idempotent; returns the settings
    and whether the config file was created. `overrides` are flag-level settings (e.g. metadata.url),
    so the schema lands in the store the caller will use; a new tidekeep.yaml names the metadata.url
    and storage.uri given there, so the home alone opens this workspace afterwards. Refuses
    (WorkspaceMismatch, nothing created or changed) to join a store and a storage root of different
    workspaces, or to give a new store a storage root that already holds data (store/workspace.py
    `plan_init`)."""
    settings = load_settings(home, overrides)
    for directory, setting in _local_directories(settings):
        check_can_be_directory(directory, setting)  # before anything is created: all or nothing
    database_id, database_is_new = _inspect_database(settings)
    probe = ChunkStorage(settings.storage_uri, create=False) if _storage_exists(settings.storage_uri) else None
    storage_id = None if probe is None else read_storage_id(probe)
    has_data = probe is not None and storage_has_data(probe)
    shown = Database.shown_url(settings.metadata_url)
    plan = plan_init(database_id, storage_id, database_is_new, has_data, shown, settings.storage_uri)
    if plan.refusal is not None:
        raise WorkspaceMismatch(plan.refusal)
    ensure_directory(settings.home, _HOME_SETTING)  # owner-only, as every file the workspace keeps (store/private.py)
    config_path = settings.home / CONFIG_FILE_NAME
    created = not config_path.exists()
    if created:
        given = overrides or {}
        # owner-only (it may hold the store's password); the values absolute, as this process resolved them
        write_private_text(config_path, config_file_text(
            settings["metadata.url"] if given.get("metadata.url") is not None else None,
            settings["storage.uri"] if given.get("storage.uri") is not None else None))
    db = Database(settings.metadata_url, settings["metadata.busy_timeout"], create=True,
                  durable_commits=settings["storage.fsync"])
    try:
        db.ensure_schema()
        workspace_id = plan.workspace_id
        if plan.stamp_database:
            workspace_id = stamp_database(db, new_workspace_id(), clock.now_ms())
    finally:
        db.dispose()
    storage = ChunkStorage(settings.storage_uri, create=True, fsync=settings["storage.fsync"])
    if plan.stamp_storage:
        assert workspace_id is not None
        current = read_storage_id(storage)
        if current is None:
            write_storage_id(storage, workspace_id, clock.now_ms())
        elif current != workspace_id:  # stamped by a concurrent init of another workspace meanwhile
            raise WorkspaceMismatch(mismatch_message(workspace_id, current, shown, settings.storage_uri))
    return settings, created


def _local_directories(settings: Settings) -> list[tuple[Path, str]]:
    """The local directories `init` creates, with the setting each comes from."""
    found = [(settings.home, _HOME_SETTING)]
    database = Database.sqlite_file(settings.metadata_url)
    if database is not None:
        found.append((database.parent, "'metadata.url'"))
    uri = settings.storage_uri
    if "://" not in uri or uri.lower().startswith("file://"):
        found.append((Path(uri.removeprefix("file://")), "'storage.uri'"))
    return found


def _inspect_database(settings: Settings) -> tuple[str | None, bool]:
    """The store's workspace id, and whether it is new (holds no tidekeep schema), creating nothing."""
    try:
        db = Database(settings.metadata_url, settings["metadata.busy_timeout"])
    except NotFound:
        return None, True
    try:
        if db.current_revision() is None:
            return None, True
        db.ensure_schema()  # an older schema is migrated: the stamp lives in a later revision
        return read_database_id(db), False
    finally:
        db.dispose()


def _storage_exists(uri: str) -> bool:
    try:
        ChunkStorage(uri, create=False)
    except NotFound:
        return False
    return True


def connect(home: str | os.PathLike[str] | None = None, *, metadata_url: str | None = None,
            storage: str | None = None, clock: Clock | None = None,
            settings: Mapping[str, Any] | None = None, create: bool = False,
            spark: SparkSession | None = None) -> Client:
    """Open a workspace. Settings: defaults < tidekeep.yaml < TIDEKEEP_* env < these arguments.
    The workspace must exist (NotFound otherwise, nothing is created) unless `create`, which first
    does what `tidekeep init` does (init_workspace). `spark`: an existing SparkSession, classic or
    Spark Connect, that every Spark job of this process then uses (`client.spark()` returns it), with
    the tidekeep data sources registered on it; `spark.master` and `spark.remote` are not used."""
    overrides = dict(settings or {})
    if metadata_url is not None:
        overrides["metadata.url"] = metadata_url
    if storage is not None:
        overrides["storage.uri"] = storage
    if create:
        init_workspace(home, overrides, clock or SYSTEM_CLOCK)
    client = Client(load_settings(home, overrides), clock or SYSTEM_CLOCK)
    if spark is not None:
        from .spark.session import use_session

        try:
            use_session(spark)
        except BaseException:
            client.close()
            raise
    return client
