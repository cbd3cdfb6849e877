"""The client: one object that opens the workspace and exposes every operation."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .archives.api import Archives
from .catalog.api import Catalog
from .clock import SYSTEM_CLOCK, Clock
from .config import CONFIG_FILE_NAME, Settings, config_file_text, load_settings
from .errors import InvalidInput, NotFound, WorkspaceMismatch
from .holds import HoldStore
from .store.chunks import ChunkStorage
from .store.database import Database
from .store.fencing import LeaseFence
from .store.house import open_workspace, verify_identity
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
from .streams.config import StreamConfig
from .streams.controller import (
    DeleteResult,
    StreamController,
    StreamInfo,
    StreamState,
    SweepResult,
    TruncateResult,
)
from .streams.cuts import StreamCut, size_between
from .streams.model import Segment, SegmentId
from .streams.retention_store import RetentionManager
from .streams.subscriber_store import Subscriber
from .streams.txn_store import TransactionInfo, TransactionStore, TxnAbortResult
from .streams.watermark_store import WatermarkStore
from .units import parse_duration_ms, parse_size_bytes

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from .streams.reader import Event
    from .streams.readergroup import ReaderGroup, ReaderGroupConfig
    from .streams.txn import TransactionalWriter
    from .streams.writer import Writer, WriterConfig

log = logging.getLogger("tidekeep")

SegmentRef = int | str


def parse_segment(ref: SegmentRef) -> int:
    """A segment id from an int or the "epoch.number" display form."""
    return SegmentId(ref)


class Client:
    """An open workspace. Opening it checks that the metadata store and the storage root exist and
    are one workspace (store/workspace.py): NotFound or WorkspaceMismatch otherwise, and nothing is
    created. `tidekeep.connect(create=True)` / `init_workspace` create and stamp a workspace first."""

    def __init__(self, settings: Settings, clock: Clock = SYSTEM_CLOCK) -> None:
        self.settings = settings
        self.clock = clock
        # the lower-level workspace every family receives (store/house.py); the client is a facade on it
        self.workspace = open_workspace(settings, clock)
        self.db = self.workspace.db
        self.storage = self.workspace.storage
        self.workspace_id = self.workspace.workspace_id
        self.streams = StreamController(self.db, self.storage, clock, self.workspace.audit.actor)
        self.transactions = TransactionStore(self.streams)
        self.holds = HoldStore(self.streams.db, self.streams.clock, self.streams.actor)  # add/list/remove/active_for
        # size/time retention cycles: preview/run/history (streams/retention_store.py)
        self.retention = RetentionManager(self.streams, settings["retention.frequency"])
        # writer marks and watermarks: note/list/tail/writers/compute (streams/watermark_store.py)
        self.watermarks = WatermarkStore(self.streams)
        self.catalog = Catalog(self.workspace, self.holds)  # meta records, rules, the job, purge (catalog/)
        self.archives = Archives(self.workspace)  # log archives, searches, the garbage collectors (archives/)

    def verify_workspace(self) -> str | None:
        """Compare the metadata store's workspace id with the storage root's (again: `tidekeep serve`
        does before every pass). Returns the id — deletions are allowed only under it — or None for a
        workspace from before the ids, which deletes nothing until `tidekeep init` stamps it. Raises
        WorkspaceMismatch when the two are not one workspace; then deleting is refused too."""
        self.workspace_id = verify_identity(self.db, self.storage)
        return self.workspace_id

    # ---- scopes and streams --------------------------------------------------------------------
    def create_scope(self, scope: str) -> bool:
        return self.streams.create_scope(scope)

    def list_scopes(self) -> list[str]:
        return self.streams.list_scopes()

    def delete_scope(self, scope: str) -> None:
        self.streams.delete_scope(scope)

    def create_stream(self, name: str, config: StreamConfig | None = None) -> StreamInfo:
        return self.streams.create_stream(name, config or StreamConfig())

    def update_stream(self, name: str, config: StreamConfig) -> StreamInfo:
        return self.streams.update_config(name, config)

    def list_streams(self, scope: str | None = None) -> list[StreamInfo]:
        return self.streams.list_streams(scope)

    def describe_stream(self, name: str) -> dict[str, Any]:
        from .streams.describe import describe

        return describe(self.streams.state(name))

    def stream_state(self, name: str) -> StreamState:
        return self.streams.state(name)

    def seal_stream(self, name: str) -> bool:
        return self.streams.seal(name)

    def delete_stream(self, name: str, force: bool = False) -> DeleteResult:
        """Delete a sealed stream (with `force`, seal an active one in the same step): the bytes freed,
        and `files_left`, the files that could not be deleted after the commit (left for the sweep).
        A stream under a legal hold is refused (HoldActive) and nothing changes."""
        return self.streams.delete(name, force=force)

    # ---- scaling -------------------------------------------------------------------------------
    def scale(
        self, stream: str, seal: Sequence[SegmentRef], new_ranges: Sequence[tuple[float, float]]
    ) -> list[Segment]:
        if not isinstance(seal, (list, tuple)) or not isinstance(new_ranges, (list, tuple)):
            raise InvalidInput("scale: seal and new_ranges must be lists (of segments and of (low, high) pairs)")
        return self.streams.scale(stream, [parse_segment(s) for s in seal], list(new_ranges))

    def split(self, stream: str, segment: SegmentRef, parts: int = 2) -> list[Segment]:
        return self.streams.split(stream, parse_segment(segment), parts)

    def merge(self, stream: str, segments: Sequence[SegmentRef]) -> list[Segment]:
        return self.streams.merge(stream, [parse_segment(s) for s in segments])

    # ---- cuts ----------------------------------------------------------------------------------
    def head_cut(self, stream: str) -> StreamCut:
        state = self.streams.state(stream)
        return state.cut(state.head)

    def tail_cut(self, stream: str) -> StreamCut:
        state = self.streams.state(stream)
        return state.cut(state.tail())

    def resolve_cut(self, stream: str, cut: StreamCut | str) -> StreamCut:
        """Validate a cut (any form) against the stream and return it with key ranges attached."""
        return self.streams.resolve_cut(stream, cut)

    def size_between(self, a: StreamCut | str, b: StreamCut | str) -> int:
        """Logical bytes between two cuts of one stream (a at or before b)."""
        first = StreamCut.parse(a) if isinstance(a, str) else a
        second = StreamCut.parse(b) if isinstance(b, str) else b
        if first.stream != second.stream:
            from .errors import InvalidStreamCut

            raise InvalidStreamCut(f"cuts belong to different streams {first.stream!r} and {second.stream!r}")
        state = self.streams.state(first.stream)
        start = self.streams.to_positions(state, first)
        end = self.streams.to_positions(state, second)
        if not state.cut(start) <= state.cut(end):
            from .errors import InvalidStreamCut

            raise InvalidStreamCut(f"size_between: {first} is not at or before {second}")
        return size_between(start, end, state.segments)

    def truncate(self, stream: str, cut: StreamCut | str, reason: str = "manual truncation") -> TruncateResult:
        return self.streams.truncate(stream, cut, reason)

    # ---- data ----------------------------------------------------------------------------------
    def writer(self, stream: str, writer_id: str, batch_size: int | str | None = None,
               linger: int | str | None = None, config: WriterConfig | None = None) -> Writer:
        size = self.settings["writer.batch_size"] if batch_size is None else parse_size_bytes(batch_size)
        if size <= 0:
            raise InvalidInput(f"invalid batch size {batch_size!r}: must be greater than zero")
        linger_ms = self.settings["writer.linger"] if linger is None else parse_duration_ms(linger)
        from .streams.writer import Writer  # the writing path loads on first use (docs/cli.md)

        return Writer(self.streams, stream, writer_id, size, linger_ms, self.clock, config)

    def read(self, stream: str, start: StreamCut | str | None = None,
             end: StreamCut | str | None = None) -> Iterator[Event]:
        """Events from `start` (default: head) to `end` (default: the tail now), per-key ordered."""
        plan = self.streams.plan_read(stream, start, end)
        from .streams.reader import iter_events

        return iter_events(self.streams, plan)

    def read_batches(self, stream: str, start: StreamCut | str | None = None,
                     end: StreamCut | str | None = None) -> Iterator[pa.RecordBatch]:
        """The same events as Arrow record batches (columnar, much faster for bulk reads)."""
        plan = self.streams.plan_read(stream, start, end)
        from .streams.reader import iter_batches

        return iter_batches(self.streams, plan)

    # ---- transactions --------------------------------------------------------------------------
    def transactional_writer(self, stream: str, writer_id: str, lease: int | str = "120s",
                             batch_size: int | str | None = None) -> TransactionalWriter:
        """Begins transactions on `stream`; an open transaction not pinged within `lease` expires."""
        size = self.settings["writer.batch_size"] if batch_size is None else parse_size_bytes(batch_size)
        if size <= 0:
            raise InvalidInput(f"invalid batch size {batch_size!r}: must be greater than zero")
        from .streams.txn import TransactionalWriter

        return TransactionalWriter(self.transactions, stream, writer_id, parse_duration_ms(lease), size)

    def list_transactions(self, stream: str | None = None) -> list[TransactionInfo]:
        return self.transactions.list(stream)

    def abort_transaction(self, txn_id: str) -> TxnAbortResult:
        """Abort an open transaction by id: truthy if it aborted now (falsy if already aborted), with
        `files_left`, the staged files it could not delete (left for the sweep)."""
        return self.transactions.abort(txn_id)

    def expire_transactions(self, fence: LeaseFence | None = None) -> list[str]:
        """Abort open transactions whose lease ran out (by this client's clock); returns their ids.
        `fence`: the service's lease this runs under (store/fencing.py); None for a manual call."""
        return self.transactions.expire(fence)

    # ---- reader groups -------------------------------------------------------------------------
    def create_reader_group(self, name: str, config: ReaderGroupConfig) -> ReaderGroup:
        """A new reader group positioned at its config's start cuts (default: the streams' heads)."""
        from .streams.readergroup import ReaderGroup

        return ReaderGroup.create(self.streams, name, config)

    def reader_group(self, name: str) -> ReaderGroup:
        from .streams.readergroup import ReaderGroup

        return ReaderGroup(self.streams, name)

    def list_reader_groups(self) -> list[str]:
        from .streams.rg_store import ReaderGroupStore

        return ReaderGroupStore(self.streams).names()

    def delete_reader_group(self, name: str) -> None:
        from .streams.rg_store import ReaderGroupStore

        ReaderGroupStore(self.streams).delete(name)

    def subscribers(self, stream: str) -> list[Subscriber]:
        """The stream's subscriber reader groups with their acknowledged cuts (consumption-based retention)."""
        from .streams.subscriber_store import SubscriberStore

        return SubscriberStore(self.streams).list(stream)

    # ---- maintenance ---------------------------------------------------------------------------
    def sweep(self, grace: int | str | None = None, fence: LeaseFence | None = None) -> SweepResult:
        """Delete orphan chunk files older than `grace` (default sweep.grace). `fence`: the service's
        lease this runs under (store/fencing.py); None for a manual call."""
        grace_ms = self.settings["sweep.grace"] if grace is None else parse_duration_ms(grace)
        return self.streams.sweep(grace_ms, fence)

    def audit(self, target: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return self.streams.audit_entries(target, limit)

    # ---- spark ---------------------------------------------------------------------------------
    def spark(self) -> SparkSession:
        from .spark.session import get_spark

        return get_spark(self.settings)

    def spark_options(self) -> dict[str, str]:
        """Options that point spark.read.format("tidekeep") (and the sink) at this workspace (absolute
        paths), with its spark.shared_filesystem declaration and its storage.fsync setting."""
        return {"metadata_url": self.settings.metadata_url, "storage": self.settings.storage_uri,
                "shared_filesystem": str(self.settings["spark.shared_filesystem"]).lower(),
                "fsync": "true" if self.settings["storage.fsync"] else "false"}

    def close(self) -> None:
        self.db.dispose()

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
            settings: Mapping[str, Any] | None = None, create: bool = False) -> Client:
    """Open a workspace. Settings: defaults < tidekeep.yaml < TIDEKEEP_* env < these arguments.
    The workspace must exist (NotFound otherwise, nothing is created) unless `create`, which first
    does what `tidekeep init` does (init_workspace)."""
    overrides = dict(settings or {})
    if metadata_url is not None:
        overrides["metadata.url"] = metadata_url
    if storage is not None:
        overrides["storage.uri"] = storage
    if create:
        init_workspace(home, overrides, clock or SYSTEM_CLOCK)
    return Client(load_settings(home, overrides), clock or SYSTEM_CLOCK)
