"""`client.stream(name)`: one stream's operations on one handle, with its retention and watermarks
as typed sub-namespaces (`handle.retention.preview()`, `handle.watermarks.latest()`).

A handle is cheap and holds no state of the stream: every call reads the metadata store afresh, so
a handle of a stream that does not exist (yet) is fine and its calls raise NotFound."""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import InvalidInput, InvalidStreamCut
from .streams.config import StreamConfig
from .streams.controller import DeleteResult, StreamController, StreamInfo, StreamState, TruncateResult
from .streams.cuts import StreamCut
from .streams.model import Segment, SegmentId
from .streams.retention_reasons import check_manual_reason
from .units import parse_duration_ms, parse_size_bytes

if TYPE_CHECKING:
    import pyarrow as pa

    from .config import Settings
    from .store.house import Workspace
    from .streams.compaction_store import CompactionResult
    from .streams.config import RetentionPolicy
    from .streams.reader import Event
    from .streams.retention import RetentionDecision, RetentionRecord
    from .streams.retention_simulation import StreamSimulation
    from .streams.retention_store import RetentionManager
    from .streams.subscriber_store import Subscriber
    from .streams.txn import TransactionalWriter
    from .streams.txn_store import TransactionStore
    from .streams.watermark_store import WatermarkStore, WriterStatus
    from .streams.watermarks import Watermark, WriterMark
    from .streams.writer import Writer, WriterConfig

SegmentRef = int | str  # a segment id, or its "epoch.number" display form
CutLike = StreamCut | str


def parse_segment(ref: SegmentRef) -> int:
    """A segment id from an int or the "epoch.number" display form."""
    return SegmentId(ref)


class StreamRetention:
    """`handle.retention`: the stream's size/time retention (streams/retention_store.py)."""

    def __init__(self, name: str, stores: StreamStores) -> None:
        self._name = name
        self._stores = stores

    @property
    def _manager(self) -> RetentionManager:
        return self._stores.retention

    def preview(self, now: int | None = None) -> RetentionDecision:
        """What a retention cycle would do at `now` (default: the clock), changing nothing."""
        return self._manager.preview(self._name, now)

    def run(self, now: int | None = None) -> RetentionDecision:
        """One retention cycle at `now` (default: the clock): records the tail, truncates if due."""
        return self._manager.run(self._name, now)

    def simulate(self, policy: RetentionPolicy | None = None, now: int | None = None,
                 days: int = 7) -> StreamSimulation:
        """What-if retention: the cycles of the next `days` days under `policy` (default: the
        stream's own) from `now` (default: the clock), changing nothing; `.forecast()` is its
        document (docs/retention.md#what-if-retention)."""
        from .streams.retention_forecast import simulate_stream

        return simulate_stream(self._manager, self._name, policy, now, days)

    def records(self) -> builtins.list[RetentionRecord]:
        """The stream's retention set, oldest first."""
        return self._manager.records(self._name)

    def history(self, limit: int = 50, before_id: int | None = None) -> builtins.list[dict[str, Any]]:
        """Past truncations (retention and manual), newest first, from the audit table; with
        `before_id` (an entry's "id"), those older than that entry."""
        return self._manager.history(self._name, limit, before_id)


class StreamWatermarks:
    """`handle.watermarks`: writer marks and the stream's watermarks (streams/watermark_store.py)."""

    def __init__(self, name: str, stores: StreamStores) -> None:
        self._name = name
        self._stores = stores

    @property
    def _store(self) -> WatermarkStore:
        return self._stores.watermarks

    def note(self, writer_id: str, time_ms: int, position: StreamCut | str | Mapping[int, int] | None = None,
             epoch: int | None = None) -> WriterMark:
        """Record that `writer_id` has reached `time_ms` at `position` (default: after its last event)."""
        return self._store.note(self._name, writer_id, time_ms, position, epoch=epoch)

    def close_writer(self, writer_id: str, epoch: int | None = None) -> bool:
        return self._store.close_writer(self._name, writer_id, epoch)

    def marks(self) -> builtins.list[WriterMark]:
        return self._store.marks(self._name)

    def writers(self) -> builtins.list[WriterStatus]:
        return self._store.writers(self._name)

    def latest(self) -> Watermark | None:
        return self._store.latest(self._name)

    def list(self, after_revision: int | None = None, limit: int | None = None) -> builtins.list[Watermark]:
        return self._store.list(self._name, after_revision, limit)

    def get(self, revision: int) -> Watermark | None:
        return self._store.get(self._name, revision)

    def tail(self, limit: int) -> builtins.list[Watermark]:
        """The newest `limit` watermarks, oldest first."""
        return self._store.tail(self._name, limit)

    def compute(self, owner: str | None = None) -> Watermark | None:
        """Compute and append the next watermark; None when there is none to emit. `owner` names who
        computed it (the service its owner id, the CLI "cli")."""
        return self._store.compute(self._name, owner)

    def prune(self) -> int:
        """Delete the watermarks no reader can need; returns how many."""
        return self._store.prune(self._name)


class StreamStores:
    """The stores behind the stream handles of one client, each built on first use: a command that
    only describes a stream loads no retention, watermark or transaction code (docs/cli.md,
    "Start-up time")."""

    def __init__(self, workspace: Workspace, controller: StreamController) -> None:
        self._workspace = workspace
        self._controller = controller

    @functools.cached_property
    def transactions(self) -> TransactionStore:
        from .streams.txn_store import TransactionStore

        return TransactionStore(self._controller)

    @functools.cached_property
    def retention(self) -> RetentionManager:
        from .streams.of_workspace import retention_manager

        return retention_manager(self._workspace, self._controller)

    @functools.cached_property
    def watermarks(self) -> WatermarkStore:
        from .streams.of_workspace import watermark_store

        return watermark_store(self._workspace, self._controller)


class Stream:
    """One stream of the workspace: `client.stream("scope/name")`."""

    def __init__(self, name: str, *, controller: StreamController, settings: Settings, stores: StreamStores) -> None:
        self._name = name
        self._controller = controller
        self._settings = settings
        self._stores = stores
        self.retention = StreamRetention(name, stores)
        self.watermarks = StreamWatermarks(name, stores)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"Stream({self._name!r})"

    # ---- the stream ----------------------------------------------------------------------------
    def state(self) -> StreamState:
        """The stream's state now: info, segments, epochs, head."""
        return self._controller.state(self._name)

    def describe(self) -> dict[str, Any]:
        """The state as plain data (what `tidekeep stream describe --json` prints)."""
        from .streams.describe import chunks_document, describe

        target = self._settings["chunks.target_size"]
        state, stats = self._controller.chunk_stats(self._name, target)
        return describe(state, chunks_document(stats, target))

    def compact(self, target_size: int | str | None = None,
                progress: Callable[[int, int], None] | None = None) -> CompactionResult:
        """Merge adjacent chunks smaller than `target_size` (default chunks.target_size) into chunks of
        at most that size (docs/streams.md "Compaction"). Offsets and every event stay as they are;
        the replaced files are removed by the sweep once sweep.grace has passed. `progress` is called
        with (groups done, groups planned)."""
        from .streams.compaction_store import Compactor

        return Compactor(self._controller).compact(self._name, self.compaction_target(target_size),
                                                   progress=progress)

    def compaction_target(self, target_size: int | str | None = None) -> int:
        """`target_size` in bytes (InvalidInput unless from 1 byte to 1 GiB), or chunks.target_size
        for None."""
        if target_size is None:
            return int(self._settings["chunks.target_size"])
        from .config import chunk_target_size  # the settings' parser; config is not imported just for a handle

        return chunk_target_size(target_size)

    def update(self, config: StreamConfig, expected_version: int | None = None) -> StreamInfo:
        """Replace the stream's config (its retention policy, its watermark timeout). With
        `expected_version` (the `config_version` read before), StaleVersion if it changed since."""
        return self._controller.update_config(self._name, config, expected_version)

    def seal(self) -> bool:
        return self._controller.seal(self._name)

    def delete(self, force: bool = False) -> DeleteResult:
        """Delete a sealed stream (with `force`, seal an active one in the same step): the bytes freed,
        and `files_left`, the files that could not be deleted after the commit (left for the sweep).
        A stream under a legal hold is refused (HoldActive) and nothing changes."""
        return self._controller.delete(self._name, force=force)

    # ---- scaling -------------------------------------------------------------------------------
    def scale(self, seal: Sequence[SegmentRef], new_ranges: Sequence[tuple[float, float]]) -> builtins.list[Segment]:
        if not isinstance(seal, (list, tuple)) or not isinstance(new_ranges, (list, tuple)):
            raise InvalidInput("scale: seal and new_ranges must be lists (of segments and of (low, high) pairs)")
        return self._controller.scale(self._name, [parse_segment(s) for s in seal], list(new_ranges))

    def split(self, segment: SegmentRef, parts: int = 2) -> builtins.list[Segment]:
        return self._controller.split(self._name, parse_segment(segment), parts)

    def merge(self, segments: Sequence[SegmentRef]) -> builtins.list[Segment]:
        return self._controller.merge(self._name, [parse_segment(s) for s in segments])

    # ---- cuts ----------------------------------------------------------------------------------
    def head_cut(self) -> StreamCut:
        state = self.state()
        return state.cut(state.head)

    def tail_cut(self) -> StreamCut:
        state = self.state()
        return state.cut(state.tail())

    def resolve_cut(self, cut: CutLike) -> StreamCut:
        """Validate a cut (any form) against the stream and return it with key ranges attached."""
        return self._controller.resolve_cut(self._name, cut)

    def size_between(self, start: CutLike, end: CutLike) -> int:
        """Logical bytes between two cuts of this stream (`start` at or before `end`)."""
        first = StreamCut.parse(start) if isinstance(start, str) else start
        second = StreamCut.parse(end) if isinstance(end, str) else end
        if first.stream != second.stream:
            raise InvalidStreamCut(f"cuts belong to different streams {first.stream!r} and {second.stream!r}")
        if first.stream != self._name:
            raise InvalidStreamCut(f"the cuts are for {first.stream!r}, not {self._name!r}")
        state = self.state()
        low = self._controller.to_positions(state, first)
        high = self._controller.to_positions(state, second)
        topology = state.topology()
        if not topology.at_or_before(low, high):
            raise InvalidStreamCut(f"size_between: {first} is not at or before {second}")
        return topology.size_between(low, high)

    def truncate(self, cut: CutLike, reason: str = "manual truncation") -> TruncateResult:
        check_manual_reason(reason)  # "retention RULE: ..." is a retention cycle's
        return self._controller.truncate(self._name, cut, reason)

    # ---- data ----------------------------------------------------------------------------------
    def writer(self, writer_id: str, batch_size: int | str | None = None, linger: int | str | None = None,
               config: WriterConfig | None = None) -> Writer:
        size = self._batch_size(batch_size)
        linger_ms = self._settings["writer.linger"] if linger is None else parse_duration_ms(linger)
        from .streams.writer import (
            Writer,  # the writing and reading paths load on first use (docs/cli.md, "Start-up time")
        )

        return Writer(self._controller, self._name, writer_id, size, linger_ms, self._controller.clock, config)

    def transactional_writer(self, writer_id: str, lease: int | str = "120s",
                             batch_size: int | str | None = None) -> TransactionalWriter:
        """Begins transactions on the stream; an open transaction not pinged within `lease` expires."""
        size = self._batch_size(batch_size)
        from .streams.txn import TransactionalWriter

        return TransactionalWriter(self._stores.transactions, self._name, writer_id, parse_duration_ms(lease), size)

    def read(self, start: CutLike | None = None, end: CutLike | None = None) -> Iterator[Event]:
        """Events from `start` (default: head) to `end` (default: the tail now), per-key ordered."""
        from .streams.reader import iter_events

        return iter_events(self._controller, self._controller.plan_read(self._name, start, end))

    def read_batches(self, start: CutLike | None = None, end: CutLike | None = None) -> Iterator[pa.RecordBatch]:
        """The same events as Arrow record batches, one per chunk (columns: streams.reader.EVENT_SCHEMA):
        the zero-copy read, no Python object per event. Much faster for bulk reads."""
        from .streams.reader import iter_batches

        return iter_batches(self._controller, self._controller.plan_read(self._name, start, end))

    def subscribers(self) -> builtins.list[Subscriber]:
        """The stream's subscriber reader groups with their acknowledged cuts (consumption-based retention)."""
        from .streams.subscriber_store import SubscriberStore

        return SubscriberStore(self._controller).list(self._name)

    def _batch_size(self, batch_size: int | str | None) -> int:
        size: int = self._settings["writer.batch_size"] if batch_size is None else parse_size_bytes(batch_size)
        if size <= 0:
            raise InvalidInput(f"invalid batch size {batch_size!r}: must be greater than zero")
        return size
