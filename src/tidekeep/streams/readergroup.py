"""Reader groups: configuration, the group handle, readers and checkpoints (the user-facing shell).

Readers in any process share a group's segments through the group's row in the metadata store
(rg_store.py); every decision is a pure transition in rg_state.py. A reader reads its segments
from chunk files, fetching a few chunks at a time ahead of need (streams/rg_fetch.py).
"""

from __future__ import annotations

import functools
import logging
import operator
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from itertools import repeat
from typing import Any, NamedTuple

import sqlalchemy as sa

from ..errors import ConflictError, InvalidInput, InvalidStreamCut, NotFound, TidekeepError, TruncatedData
from ..names import check_name, split_stream_name
from ..store import schema as t
from ..store.audit import AuditEntry, AuditLog
from ..units import parse_duration_ms
from . import rg_state as core
from .config import RetentionType
from .controller import ReadTask, StreamController
from .cuts import CutOrder, StreamCut
from .model import Segment, SegmentId, segment_name
from .reader_window import StreamWindow
from .repository import chunk_ref
from .rg_fetch import Fetch, Fetched, MissingRead, fetched_events, start_fetch
from .rg_store import GroupRow, ReaderGroupStore
from .subscriber_store import SubscriberStore
from .watermark_store import WatermarkStore
from .watermarks import TimeWindow

log = logging.getLogger("tidekeep.readergroups")

FILL_BYTES = 2 * 1024 * 1024  # one trip to storage for a segment reads its next chunks up to this many bytes
FILL_CHUNKS = 64  # and at most this many chunks
FETCHES_AHEAD = 2  # fetches of a segment read ahead of the reader (streams/rg_fetch.py)
# Events are handed out a slice at a time; between two slices the reader looks at the clock (sync
# and watch times). A slice is sized so the caller takes about SLICE_TARGET_NS over it, at most
# SLICE_MAX events: large for a tight loop, down to one event for a caller that works on each.
SLICE_MAX = 1024
SLICE_TARGET_NS = 1_000_000
WATCH_INTERVAL_MS = 20  # how often a reader reading without pause checks the group row's version
SEEN_REFRESH_MS = 1000  # a sync that would store nothing but the reader's last-seen time writes this seldom


# the chunks of one segment from an offset on, in order (built once: a statement costs more to build than to run)
_NEXT_CHUNKS = sa.select(t.chunks).where(
    t.chunks.c.stream_id == sa.bindparam("stream_id"), t.chunks.c.segment_id == sa.bindparam("segment_id"),
    t.chunks.c.base_offset < sa.bindparam("limit"), t.chunks.c.base_offset + t.chunks.c.length > sa.bindparam("start"),
).order_by(t.chunks.c.base_offset).limit(FILL_CHUNKS)


class CheckpointTimeout(TidekeepError):
    """A checkpoint did not complete within the time waited for it (it may still complete)."""


class ReadersOnline(ConflictError):
    """A reset was refused because readers are still members of the group (docs/reader-groups.md)."""


CutLike = StreamCut | str | None


@dataclass(frozen=True)
class ReaderGroupConfig:
    streams: Sequence[str] | Mapping[str, tuple[CutLike, CutLike]]
    retention_type: RetentionType = RetentionType.NONE
    automatic_checkpoint_interval: int | str | timedelta | None = None
    max_outstanding_checkpoints: int = 3
    skip_truncated: bool = False

    def bounds(self) -> dict[str, tuple[CutLike, CutLike]]:
        """stream -> (start, end), validated for shape only (the store validates the cuts)."""
        if isinstance(self.streams, str) or not isinstance(self.streams, (Sequence, Mapping)):
            raise InvalidInput("reader group config: streams must be a list of names or a {stream: (start, end)} map")
        if isinstance(self.streams, Mapping):
            result = {}
            for name, pair in self.streams.items():
                if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                    raise InvalidInput(f"reader group config: stream {name!r} needs a (start_cut, end_cut) pair")
                result[name] = (pair[0], pair[1])
        else:
            result = {name: (None, None) for name in self.streams}
        if not result:
            raise InvalidInput("reader group config: no streams given")
        if len(result) != len(self.streams):
            raise InvalidInput("reader group config: a stream is listed twice")
        for name in result:
            split_stream_name(name)
        return result

    def checked_options(self) -> dict[str, Any]:
        if not isinstance(self.retention_type, RetentionType):
            raise InvalidInput(f"reader group config: invalid retention_type {self.retention_type!r}; "
                               f"use one of {', '.join(r.name for r in RetentionType)}")
        interval = None
        if self.automatic_checkpoint_interval is not None:
            interval = parse_duration_ms(self.automatic_checkpoint_interval)
            if interval <= 0:
                raise InvalidInput("reader group config: automatic_checkpoint_interval must be above zero")
        m = self.max_outstanding_checkpoints
        if not isinstance(m, int) or isinstance(m, bool) or m < 1:
            raise InvalidInput(f"reader group config: max_outstanding_checkpoints {m!r} must be an integer >= 1")
        if not isinstance(self.skip_truncated, bool):
            raise InvalidInput(f"reader group config: skip_truncated {self.skip_truncated!r} must be true or false")
        return {"retention_type": self.retention_type.value, "automatic_checkpoint_interval_ms": interval,
                "max_outstanding_checkpoints": m, "skip_truncated": self.skip_truncated}


def resolve_config(controller: StreamController, config: ReaderGroupConfig) -> dict[str, Any]:
    """The stored form of a config: every cut checked against its stream and turned into positions.
    Raises a typed error (and changes nothing) for unknown streams, foreign or invalid cuts, and a
    start cut that is not at or before its end cut."""
    if not isinstance(config, ReaderGroupConfig):
        raise InvalidInput(f"invalid reader group config {config!r}: use tidekeep.ReaderGroupConfig")
    options = config.checked_options()
    streams: dict[str, Any] = {}
    for name, (start, end) in config.bounds().items():
        state = controller.state(name)
        start_pos = dict(state.head) if start is None else controller.to_positions(state, start)
        end_pos = None if end is None else controller.to_positions(state, end)
        if end_pos is not None and state.topology().compare(start_pos, end_pos) in (
                CutOrder.AFTER, CutOrder.OVERLAPS):
            raise InvalidStreamCut(f"reader group config: start cut {state.shown(start_pos)} is not at or before "
                                   f"end cut {state.shown(end_pos)}")
        streams[name] = {"start": core.keys_out(start_pos),
                         "end": None if end_pos is None else core.keys_out(end_pos)}
    return {"streams": streams, **options}


def _starts_and_ends(config: Mapping[str, Any]) -> tuple[dict[str, dict[int, int]], dict[str, dict[int, int] | None]]:
    starts = {n: core.keys_in(s["start"]) for n, s in config["streams"].items()}
    ends = {n: None if s["end"] is None else core.keys_in(s["end"]) for n, s in config["streams"].items()}
    return starts, ends


class Position(NamedTuple):
    """A place in one segment of a stream. (Named tuples: one is built per event read, see _Cursor.take.)"""

    stream: str
    segment: SegmentId  # prints as epoch.number, int() is the id
    offset: int

    def __str__(self) -> str:
        return f"{self.stream}:{segment_name(self.segment)}@{self.offset}"


class EventRead(NamedTuple):
    """One event, or a checkpoint marker (checkpoint_name set, no payload), or nothing (timeout)."""

    payload: bytes | None = None
    routing_key: str | None = None
    position: Position | None = None
    next_offset: int | None = None  # where the segment's next event starts
    checkpoint_name: str | None = None

    @property
    def is_event(self) -> bool:
        return self.payload is not None

    @property
    def is_checkpoint(self) -> bool:
        return self.checkpoint_name is not None

    @property
    def is_empty(self) -> bool:
        return self.payload is None and self.checkpoint_name is None


@dataclass(frozen=True)
class Checkpoint:
    name: str
    created_ms: int
    completed_ms: int
    cuts: dict[str, StreamCut]


# tuple.__new__(cls, values) builds a named tuple in C; calling Position(...) or EventRead(...)
# runs a Python-level __new__ per event, about as dear as everything else a read costs
_new_tuple = tuple.__new__


@dataclass
class _Cursor:
    """One segment a reader holds. The events fetched and not handed out yet stay the columns
    pyarrow gave (plain lists, which the garbage collector does not scan) from `index` on, until a
    slice of them is turned into EventReads."""

    stream: str
    segment: SegmentId
    fetched: int  # where the next fetch starts: the offset after the last event fetched
    end: int | None
    payloads: list[bytes] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    nexts: list[int] = field(default_factory=list)
    index: int = 0
    # fetches started ahead of need, in offset order, each starting where the one before ends
    ahead: deque[Fetch] = field(default_factory=deque)

    def next_fetch(self) -> Fetch | None:
        """The first fetch read ahead if it starts where this cursor fetches next (else the fetches
        ahead were made before the cursor moved, and are dropped)."""
        if self.ahead and self.ahead[0].start == self.fetched:
            return self.ahead.popleft()
        self.forget()
        return None

    def forget(self) -> None:
        """Drop the fetches read ahead."""
        for fetch in self.ahead:
            fetch.cancel()
        self.ahead.clear()

    def has_events(self) -> bool:
        return self.index < len(self.offsets)

    def next_offset(self) -> int:
        """The offset of the next event not handed out yet."""
        return self.offsets[self.index] if self.index < len(self.offsets) else self.fetched

    def add(self, events: Fetched) -> None:
        """Append the events of one fetch (this segment's, in offset order, from `fetched` on)."""
        if not len(events.offsets):
            return
        self.payloads += events.payloads.to_pylist()
        self.keys += events.keys.to_pylist()
        self.offsets += events.offsets.tolist()
        self.nexts += events.nexts.tolist()
        self.fetched = self.nexts[-1]

    def take(self, count: int) -> _Slice:
        """The next `count` events (fewer at the end of what was fetched)."""
        i, j = self.index, self.index + count
        offsets = self.offsets[i:j]
        left = iter(offsets)
        positions = map(_new_tuple, repeat(Position), zip(repeat(self.stream), repeat(self.segment), left))
        # lazily: each EventRead is built when it is asked for, so none outlives the caller's use
        # of it (thousands alive at once would cost more in garbage collection than to build)
        events: Iterator[EventRead] = map(_new_tuple, repeat(EventRead), zip(  # every field, in order
            self.payloads[i:j], self.keys[i:j], positions, self.nexts[i:j], repeat(None)))
        if j < len(self.offsets):
            self.index = j
        else:
            self.drop(self.fetched)
        return _Slice(self, events.__next__, offsets, left)

    def drop(self, at: int) -> None:
        """Forget what was fetched and not handed out; fetch from `at` next."""
        self.payloads, self.keys, self.offsets, self.nexts, self.index = [], [], [], [], 0
        self.fetched = at


class _Slice(NamedTuple):
    """Events of one cursor being handed out: `next_event` returns them one by one (StopIteration after
    the last); `left` iterates `offsets` in step with it, so its length hint tells where it is."""

    cursor: _Cursor | None
    next_event: Callable[[], EventRead]
    offsets: list[int]
    left: Iterator[int]

    def next_offset(self) -> int | None:
        """The offset of the next event this slice returns; None when it has returned them all."""
        left = operator.length_hint(self.left)
        return self.offsets[-left] if left else None


_NO_SLICE = _Slice(None, iter(()).__next__, [], iter(()))


class ReaderGroup:
    def __init__(self, controller: StreamController, name: str) -> None:
        self.controller = controller
        self.store = ReaderGroupStore(controller)
        self.name = name
        self.subscribers = SubscriberStore(controller)
        # what this handle knows of the group: an update from an older generation (someone reset the
        # group since) or of an earlier incarnation (deleted and re-created) is refused as stale
        self.known_generation, self._subscriber_uid = self.subscribers.identity(name)  # NotFound if unknown

    # ---- lifecycle -----------------------------------------------------------------------------
    @staticmethod
    def create(controller: StreamController, name: str, config: ReaderGroupConfig) -> ReaderGroup:
        check_name(name, "reader group name")
        resolved = resolve_config(controller, config)
        store = ReaderGroupStore(controller)
        starts, ends = _starts_and_ends(resolved)
        state = core.initial_state(starts, ends, store.topologies(starts), controller.clock.now_ms())
        store.create(name, resolved, state)
        log.info("created reader group %s on %s", name, ", ".join(starts))
        return ReaderGroup(controller, name)

    def row(self) -> GroupRow:
        return self.store.load(self.name)

    @property
    def generation(self) -> int:
        return self.row().generation

    @property
    def config(self) -> dict[str, Any]:
        return self.row().config

    def reset(self, config: ReaderGroupConfig, allow_online_readers: bool = True) -> int:
        """Start over with a new config (e.g. from a checkpoint's cuts); online readers stay members
        and pick up the new assignment at their next sync. Returns the new generation. With
        `allow_online_readers=False` the reset is refused (ReadersOnline) if any reader is a member
        when it would be applied (checked in the same optimistic update, so no reader slips in)."""
        resolved = resolve_config(self.controller, config)
        starts, ends = _starts_and_ends(resolved)
        now = self.controller.clock.now_ms()

        def transition(r: GroupRow, topo: Mapping[str, Mapping[int, Segment]]) -> core.GroupState:
            if r.state.readers and not allow_online_readers:
                online = ", ".join(sorted(r.state.readers))
                raise ReadersOnline(f"reader group {self.name!r} has online readers ({online}): stop them first, "
                                    "or reset anyway (CLI: --force)")
            return core.initial_state(starts, ends, topo, now, r.state.readers)

        row = self.store.update(self.name, transition, new_config=resolved, bump_generation=True)
        self.known_generation, self._subscriber_uid = row.generation, row.subscriber_uid
        log.info("reset reader group %s to generation %d", self.name, row.generation)
        return row.generation

    # ---- consumption-based retention -----------------------------------------------------------
    def update_retention_stream_cut(self, cuts: Mapping[str, StreamCut | str]) -> dict[str, StreamCut]:
        """Acknowledge consumption (MANUAL_RELEASE_AT_USER_STREAMCUT groups only): for each stream,
        data before its cut is no longer needed by this group. All streams or none are updated; a
        cut must be valid, complete, of that stream and at or after the previous acknowledgement,
        and the group must not have been reset since this handle loaded it (StaleGeneration)."""
        return self.subscribers.publish(self.name, self._subscriber_uid, self.known_generation, cuts)

    # ---- readers -------------------------------------------------------------------------------
    def reader(self, reader_id: str, sync_every_events: int | None = None, sync_interval_ms: int = 100,
               config: ReaderConfig | None = None) -> Reader:
        """Join the group as `reader_id`. The reader syncs every `sync_interval_ms`, and also every
        `sync_every_events` events when that is given (docs/reader-groups.md, Readers)."""
        check_name(reader_id, "reader id")
        if config is not None and not isinstance(config, ReaderConfig):
            raise InvalidInput(f"invalid reader config {config!r}: use ReaderConfig(...)")
        if sync_every_events is not None and (not isinstance(sync_every_events, int)
                                              or isinstance(sync_every_events, bool) or sync_every_events < 1):
            raise InvalidInput(f"invalid sync_every_events {sync_every_events!r}: an integer >= 1, or None")
        if not isinstance(sync_interval_ms, int) or isinstance(sync_interval_ms, bool) or sync_interval_ms < 0:
            raise InvalidInput(f"invalid sync_interval_ms {sync_interval_ms!r}: an integer >= 0")
        now = self.controller.clock.now_ms()
        row = self.store.update(self.name, lambda r, _topo: core.join(r.state, reader_id, now))
        return Reader(self, reader_id, row, sync_every_events, sync_interval_ms, config or ReaderConfig())

    def reader_offline(
        self, reader_id: str, last_position: Mapping[str, Mapping[int | str, int]] | Sequence[EventRead] | None = None,
    ) -> None:
        """Hand a crashed reader's segments on from `last_position` — stream -> segment -> offset,
        or the last EventRead the application processed in each segment (reading resumes after
        it) — or from the last positions it stored: at-least-once, events after that are read again."""
        check_name(reader_id, "reader id")
        positions = _check_positions(last_position)
        now = self.controller.clock.now_ms()
        self.store.update(self.name, lambda r, topo: core.release_reader(r.state, topo, reader_id, positions, now))
        log.info("reader %s of group %s is offline; its segments are handed on", reader_id, self.name)

    def online_readers(self) -> list[str]:
        return sorted(self.row().state.readers)

    # ---- checkpoints ---------------------------------------------------------------------------
    def initiate_checkpoint(self, name: str) -> CheckpointHandle:
        check_name(name, "checkpoint name")
        now = self.controller.clock.now_ms()
        self.store.update(self.name, lambda r, topo: core.initiate_checkpoint(
            r.state, topo, name, now, r.config["max_outstanding_checkpoints"]))
        return CheckpointHandle(self, name)

    def checkpoint(self, name: str) -> Checkpoint | None:
        """The completed checkpoint `name`, or None while it is pending."""
        row = self.row()
        done = next((c for c in row.state.completed if c.name == name), None)
        if done is None:
            if all(c.name != name for c in row.state.pending):
                raise NotFound(f"checkpoint {name!r} does not exist in reader group {self.name!r}")
            return None
        return self._as_checkpoint(done)

    def last_checkpoint(self) -> Checkpoint | None:
        row = self.row()
        return self._as_checkpoint(row.state.completed[-1]) if row.state.completed else None

    def checkpoints(self) -> list[Checkpoint]:
        """The completed checkpoints the group keeps, oldest first (a reset drops them)."""
        return [self._as_checkpoint(done) for done in self.row().state.completed]

    def pending_checkpoints(self) -> list[str]:
        """The names of the checkpoints some online reader has not passed yet."""
        return [c.name for c in self.row().state.pending]

    # ---- watermarks ----------------------------------------------------------------------------
    def time_windows(self) -> dict[str, TimeWindow]:
        """stream -> the range of writer time at the group's shared position (docs/watermarks.md):
        what a reader that joins now sees before it reads; a member's own window (Reader.time_window)
        may be ahead of it by what that reader has read since its last sync."""
        row = self.row()
        windows = {}
        for stream, slot in sorted(row.state.streams.items()):
            topology = self.controller.state(stream).segments
            position = {seg: entry[0] for seg, entry in core.frontier(slot, topology).items()}
            windows[stream] = StreamWindow(WatermarkStore(self.controller), stream).window(
                row.generation, position, topology, functools.partial(self._segments_of, stream))
        return windows

    def _segments_of(self, stream: str) -> dict[int, Segment]:
        return dict(self.controller.state(stream).segments)

    def _as_checkpoint(self, done: core.CompletedCheckpoint) -> Checkpoint:
        cuts = {}
        for stream, positions in done.cuts.items():
            state = self.controller.state(stream)
            cuts[stream] = state.cut(positions)
        return Checkpoint(done.name, done.created_ms, done.completed_ms, cuts)

    # ---- describe ------------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        row = self.row()
        state = row.state
        subscriptions = self.subscribers.for_group(self.name)
        streams = {}
        for name, slot in state.streams.items():
            sstate = self.controller.state(name)
            front = {seg: entry[0] for seg, entry in core.frontier(slot, sstate.segments).items()}
            end = slot.end if slot.end is not None else sstate.tail()
            try:
                unread = sstate.topology().size_between(front, end)
            except TidekeepError:
                unread = None
            streams[name] = {"position": str(sstate.cut(front)), "unread_bytes": unread,
                             "subscriber": _subscription(subscriptions.get(name))}
        segments = [{"stream": name, "segment": segment_name(seg), "offset": g.offset, "end": g.end,
                     "owner": g.owner, "status": g.status}
                    for name, slot in sorted(state.streams.items()) for seg, g in sorted(slot.segments.items())]
        return {
            "name": row.name, "generation": row.generation, "config": _shown_config(row.config),
            "readers": [{"reader": r, "last_seen_ms": seen,
                         "segments": [f"{s}:{segment_name(g)}" for s, g in core.owned(state, r)]}
                        for r, seen in sorted(state.readers.items())],
            "segments": segments, "streams": streams,
            "pending_checkpoints": [c.name for c in state.pending],
            "last_checkpoint": state.completed[-1].name if state.completed else None,
        }


def _shown_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The stored config with its start and end positions keyed by "epoch.number", as segments are
    shown everywhere (the store keeps the ids)."""
    def shown(positions: Mapping[str, int] | None) -> dict[str, int] | None:
        if positions is None:
            return None
        return {segment_name(int(seg)): off for seg, off in sorted(positions.items(), key=lambda kv: int(kv[0]))}

    streams = {name: {**slot, "start": shown(slot["start"]), "end": shown(slot["end"])}
               for name, slot in config["streams"].items()}
    return {**config, "streams": streams}


def _subscription(sub: Any) -> dict[str, Any] | None:
    """What describe shows of the group's hold on one stream (None: not a subscriber)."""
    if sub is None:
        return None
    d = sub.to_dict()
    return {k: d[k] for k in ("acknowledged", "acknowledged_ms", "effective", "unconsumed_bytes")}


def _check_positions(
    positions: Mapping[str, Mapping[int | str, int]] | Sequence[EventRead] | None,
) -> dict[str, dict[int, int]] | None:
    if positions is None:
        return None
    if isinstance(positions, (list, tuple)) and all(isinstance(e, EventRead) and e.is_event for e in positions):
        resume: dict[str, dict[int | str, int]] = {}
        for event in positions:  # the last processed event of each segment: resume after it
            assert event.position is not None and event.next_offset is not None
            ends = resume.setdefault(event.position.stream, {})
            ends[event.position.segment] = max(ends.get(event.position.segment, 0), event.next_offset)
        positions = resume
    if not isinstance(positions, Mapping):
        raise InvalidInput("last_position must map stream -> {segment: offset}")
    result: dict[str, dict[int, int]] = {}
    for stream, segs in positions.items():
        if not isinstance(segs, Mapping):
            raise InvalidInput(f"last_position of {stream!r} must map segment -> offset")
        checked: dict[int, int] = {}
        for seg, off in segs.items():
            # a segment as handed out (Event.segment, Position.segment), its id, or "epoch.number"
            valid = isinstance(seg, (int, str)) and not isinstance(seg, bool) and _is_segment(seg)
            if not valid or not isinstance(off, int) or isinstance(off, bool) or off < 0:
                raise InvalidInput(f"last_position {stream}:{seg!r}={off!r}: expected a segment ('epoch.number' or "
                                   "its id) and an integer offset >= 0")
            checked[int(SegmentId(seg))] = off
        result[stream] = checked
    return result


def _by_id(positions: Mapping[str, Mapping[SegmentId, int]]) -> dict[str, dict[int, int]]:
    """Positions as the group state takes them (a SegmentId is its int id)."""
    return {stream: {seg: offset for seg, offset in segs.items()} for stream, segs in positions.items()}


def _is_segment(ref: int | str) -> bool:
    try:
        SegmentId(ref)
    except InvalidInput:
        return False
    return True


class CheckpointHandle:
    def __init__(self, group: ReaderGroup, name: str) -> None:
        self.group = group
        self.name = name

    def done(self) -> bool:
        return self.group.checkpoint(self.name) is not None

    def wait(self, timeout: float = 30.0) -> Checkpoint:
        """Block until every online reader has passed the checkpoint (seconds)."""
        deadline = time.monotonic() + timeout
        while True:
            result = self.group.checkpoint(self.name)
            if result is not None:
                return result
            if time.monotonic() >= deadline:
                raise CheckpointTimeout(f"checkpoint {self.name!r} of reader group {self.group.name!r} did not "
                                        f"complete within {timeout}s")
            time.sleep(0.01)


@dataclass(frozen=True)
class ReaderConfig:
    """`disable_time_windows`: time_window() returns TimeWindow(None, None) without reading watermarks."""

    disable_time_windows: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.disable_time_windows, bool):
            raise InvalidInput(f"invalid disable_time_windows {self.disable_time_windows!r}: must be a bool")


class Reader:
    """One member of a reader group. Not thread-safe: one thread reads through it."""

    def __init__(self, group: ReaderGroup, reader_id: str, row: GroupRow, sync_every_events: int | None,
                 sync_interval_ms: int, config: ReaderConfig | None = None) -> None:
        self.group = group
        self.config = config or ReaderConfig()
        self._group_state = row.state  # the group's state as of this reader's last sync
        self._windows: dict[str, StreamWindow] = {}
        self.reader_id = reader_id
        self.controller = group.controller
        self.clock = self.controller.clock
        self.sync_every_events = sync_every_events
        self.sync_interval_ms = sync_interval_ms
        self._cursors: dict[tuple[str, SegmentId], _Cursor] = {}
        self._topologies: dict[str, dict[int, Segment]] = {}
        self._stream_ids: dict[str, int] = {}
        self._generation = row.generation
        self._version = row.version  # of the group row as this reader last saw it
        self._checkpoint_due: str | None = None
        # events handed out one by one (the fast path), a slice of one cursor's at a time
        self._ready = _NO_SLICE
        self._slice = 64  # the size of the next slice
        self._handed, self._handed_ns = 0, 0  # the last slice: its size, and when it was handed out
        self._events_since_sync = 0  # counted a slice at a time: every slice is handed out before a sync
        self._last_sync_ms = -(2**62)
        self._last_watch_ms = -(2**62)
        self._truncation_reported: set[tuple[str, int, int]] = set()
        self._closed = False

    # ---- positions -----------------------------------------------------------------------------
    def positions(self) -> dict[str, dict[SegmentId, int]]:
        """stream -> segment -> the next offset to read, for the segments this reader holds."""
        result: dict[str, dict[SegmentId, int]] = {}
        for (stream, seg), cursor in sorted(self._cursors.items()):
            result.setdefault(stream, {})[seg] = self._offset(cursor)
        return result

    def _offset(self, cursor: _Cursor) -> int:
        """The next offset this reader returns in the cursor's segment."""
        if cursor is self._ready.cursor:
            offset = self._ready.next_offset()
            if offset is not None:
                return offset
        return cursor.next_offset()

    def segments(self) -> list[tuple[str, SegmentId]]:
        return sorted(self._cursors)

    # ---- watermarks ----------------------------------------------------------------------------
    def time_window(self, stream: str) -> TimeWindow:
        """The range of writer time this reader is reading in `stream` (docs/watermarks.md): lower from the
        last watermark the group's position has passed, upper from the next one ahead; either is None
        near the head or the tail. Only moves forward as the group reads."""
        if self._closed:
            raise InvalidInput(f"reader {self.reader_id!r} is closed")
        slot = self._group_state.streams.get(stream)
        if slot is None:
            raise InvalidInput(f"reader group {self.group.name!r} does not read stream {stream!r}")
        if self.config.disable_time_windows:
            return TimeWindow(None, None)
        topology = self.controller.state(stream).segments
        position = {seg: entry[0] for seg, entry in core.frontier(slot, topology).items()}
        for (name, seg), cursor in self._cursors.items():
            if name == stream:
                position[seg] = max(self._offset(cursor), position.get(seg, 0))
        window = self._windows.get(stream)
        if window is None:
            window = self._windows[stream] = StreamWindow(WatermarkStore(self.controller), stream)
        return window.window(self._generation, position, topology,
                             lambda: self.controller.state(stream).segments)

    # ---- the shared state ----------------------------------------------------------------------
    def _transition(self, step: Any) -> None:
        row = self.group.store.update(self.group.name, step)
        self._apply(row)

    def _apply(self, row: GroupRow) -> None:
        state = row.state
        self._group_state = state
        self._version = row.version
        self._ready = _NO_SLICE  # syncs happen between slices: nothing is left of the last one
        if row.generation != self._generation:  # the group was reset: forget local positions
            self._forget_cursors()
            self._generation = row.generation
        mine = set(core.owned(state, self.reader_id))
        for key in list(self._cursors):
            if key not in mine:
                self._cursors.pop(key).forget()  # released or completed; its position is already stored
        for stream, seg in mine:
            if (stream, seg) not in self._cursors:
                g = state.streams[stream].segments[seg]
                segment = SegmentId(seg)
                self._cursors[(stream, segment)] = _Cursor(stream, segment, g.offset, g.end)
        self._checkpoint_due = core.next_checkpoint_for(state, self.reader_id)
        self._events_since_sync = 0
        self._last_sync_ms = self._last_watch_ms = self.clock.now_ms()

    def _sync(self) -> None:
        positions = _by_id(self.positions())
        now = self.clock.now_ms()

        def step(row: GroupRow, topo: dict[str, dict[int, Segment]]) -> core.GroupState:
            self._topologies = topo
            state = core.sync_reader(row.state, topo, self.reader_id, positions, now,
                                     row.config["automatic_checkpoint_interval_ms"],
                                     row.config["max_outstanding_checkpoints"])
            if core.only_seen_differs(row.state, state, self.reader_id) \
                    and now - row.state.readers[self.reader_id] < SEEN_REFRESH_MS:
                return row.state  # nothing new to store (an idle reader's sync): no write
            return state

        self._transition(step)

    def _sync_due(self) -> bool:
        """Sync now: its time has come (sync_interval_ms, sync_every_events), or the group needs it
        sooner (watched every WATCH_INTERVAL_MS: one small read while nothing changed)."""
        now = self.clock.now_ms()
        if now - self._last_sync_ms >= self.sync_interval_ms or (
                self.sync_every_events is not None and self._events_since_sync >= self.sync_every_events):
            return True
        if now - self._last_watch_ms < WATCH_INTERVAL_MS:
            return False
        self._last_watch_ms = now
        if self.group.store.version(self.group.name) == self._version:
            return False
        row = self.group.store.load(self.group.name)
        self._version = row.version  # not loaded again until it moves again
        # a reset, a checkpoint waiting for this reader, or a reader that joined or left
        return row.generation != self._generation or core.wants_sync(row.state, self.reader_id)

    def _pass_checkpoint(self, name: str) -> None:
        positions = _by_id(self.positions())
        now = self.clock.now_ms()

        def step(row: GroupRow, topo: dict[str, dict[int, Segment]]) -> core.GroupState:
            self._topologies = topo
            synced = core.sync_reader(row.state, topo, self.reader_id, positions, now, None,
                                      row.config["max_outstanding_checkpoints"])
            return core.pass_checkpoint(synced, self.reader_id, name, positions, now)

        self._transition(step)

    # ---- reading -------------------------------------------------------------------------------
    def read_next_event(self, timeout_ms: int = 1000) -> EventRead:
        """The next event of this reader's segments, a checkpoint marker, or an empty EventRead
        when nothing arrived within timeout_ms."""
        # the fast path, once per event: the next event of the slice being handed out. Syncs,
        # watching the group, checkpoints and fetching happen between slices (about a millisecond
        # of the caller's time each, see SLICE_TARGET_NS)
        try:
            return self._ready.next_event()
        except StopIteration:
            return self._read_between_slices(timeout_ms)

    def _read_between_slices(self, timeout_ms: int) -> EventRead:
        if self._closed:
            raise InvalidInput(f"reader {self.reader_id!r} is closed")
        if self._handed_ns:  # the caller just finished a slice: size the next one by how long it took
            took = max(time.monotonic_ns() - self._handed_ns, 1)
            self._slice = max(1, min(SLICE_MAX, SLICE_TARGET_NS * self._handed // took))
            self._handed_ns = 0
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        synced_this_call = False
        while True:
            if self._sync_due():
                self._sync()
                synced_this_call = True
            if self._checkpoint_due is not None:
                name = self._checkpoint_due
                self._pass_checkpoint(name)
                return EventRead(checkpoint_name=name)
            if self._take_slice():
                return self._ready.next_event()
            if self._fill_any():
                continue
            # nothing local to read: ask the group for completions, new segments and new data
            if synced_this_call:
                if time.monotonic() >= deadline:
                    return EventRead()
                time.sleep(0.01)
            self._sync()
            synced_this_call = True

    def _take_slice(self) -> bool:
        """Turn the next events fetched into the slice handed out by the fast path: from the cursor
        of the last slice while it has any, else from the first that has. False if none has."""
        cursor = self._ready.cursor
        if cursor is None or not cursor.has_events():
            cursor = next((c for c in self._cursors.values() if c.has_events()), None)
            if cursor is None:
                return False
        count = self._slice
        if self.sync_every_events is not None:  # >= 1 here: a sync just ran if it was due
            count = min(count, self.sync_every_events - self._events_since_sync)
        self._ready = cursor.take(count)
        self._handed = len(self._ready.offsets)
        self._events_since_sync += self._handed
        self._handed_ns = time.monotonic_ns()
        return True

    def _fill_any(self) -> bool:
        """Fetch for the first segment with something new (called when no cursor has events left)."""
        return any(self._fill(cursor) for cursor in list(self._cursors.values()))

    def _fill(self, cursor: _Cursor) -> bool:
        """Fetch the next chunks of one segment (up to FILL_BYTES); False when there is nothing new.
        The chunks come from the fetch read ahead when it starts where the cursor is; then the
        fetches ahead are topped up to FETCHES_AHEAD, read while the caller works through these."""
        topology = self._topologies.get(cursor.stream)
        if topology is None or cursor.segment not in topology:
            return False
        segment = topology[cursor.segment]
        limit = cursor.end if cursor.end is not None else segment.tail
        if cursor.fetched < segment.head:
            self._on_truncated(cursor, segment)
        if cursor.fetched >= limit:
            cursor.forget()
            return False
        storage = self.controller.storage
        events = None
        fetch = cursor.next_fetch()
        if fetch is not None:
            try:
                events = fetched_events(storage, cursor.stream, fetch)
            except MissingRead:
                # read ahead before a truncation and a sweep took its files: fetch afresh, which
                # tells a truncation (the head moved past the cursor) from a file that is lost
                cursor.forget()
        if events is None:
            fetch = self._start_fetch(cursor, cursor.fetched, limit)
            if fetch is None:
                # the chunk holding our offset is gone: a truncation moved the head past it meanwhile
                self._topologies[cursor.stream] = self.controller.state(cursor.stream).segments
                fresh = self._topologies[cursor.stream][cursor.segment]
                if cursor.fetched < fresh.head:
                    self._on_truncated(cursor, fresh)
                return False
            try:
                events = fetched_events(storage, cursor.stream, fetch)
            except MissingRead as missing:
                raise self.controller.explain_missing_chunk(cursor.stream, missing.error, missing.task) from None
        cursor.add(events)
        while len(cursor.ahead) < FETCHES_AHEAD:
            start = cursor.ahead[-1].end if cursor.ahead else cursor.fetched
            ahead = self._start_fetch(cursor, start, limit) if start < limit else None
            if ahead is None:
                break
            cursor.ahead.append(ahead)
        if len(cursor.ahead) < FETCHES_AHEAD:  # this segment's end is near: start on the next one's
            self._read_ahead_after(cursor)
        return cursor.has_events()

    def _read_ahead_after(self, cursor: _Cursor) -> None:
        """Start the first fetch of the segment this reader reads after `cursor`'s (the next in
        order with nothing fetched or read ahead), so its first events are not waited for."""
        cursors = list(self._cursors.values())
        for following in cursors[cursors.index(cursor) + 1:] if cursor in cursors else ():
            if following.has_events() or following.ahead:
                continue
            topology = self._topologies.get(following.stream)
            if topology is None or following.segment not in topology:
                continue
            segment = topology[following.segment]
            limit = following.end if following.end is not None else segment.tail
            if segment.head <= following.fetched < limit:
                fetch = self._start_fetch(following, following.fetched, limit)
                if fetch is not None:
                    following.ahead.append(fetch)
                return

    def _start_fetch(self, cursor: _Cursor, start: int, limit: int) -> Fetch | None:
        """Start reading the segment's chunks from `start` (below `limit`, up to FILL_BYTES and
        FILL_CHUNKS). None if no chunk holds `start` (a truncation took it)."""
        with self.controller.db.read() as conn:
            rows = conn.execute(_NEXT_CHUNKS, {"stream_id": self._stream_id(cursor.stream),
                                               "segment_id": cursor.segment, "limit": limit,
                                               "start": start}).all()
        if not rows or rows[0].base_offset > start:
            return None
        tasks = []
        budget = FILL_BYTES
        for row in rows:
            if budget <= 0:
                break
            budget -= row.length
            end = min(limit, row.base_offset + row.length)
            tasks.append(ReadTask(chunk_ref(row), max(start, row.base_offset), end))
        return start_fetch(self.controller.storage, tasks)

    def _forget_cursors(self) -> None:
        for cursor in self._cursors.values():
            cursor.forget()
        self._cursors.clear()

    def _stream_id(self, stream: str) -> int:
        if stream not in self._stream_ids:
            self._stream_ids[stream] = self.controller.state(stream).stream_id
        return self._stream_ids[stream]

    def _on_truncated(self, cursor: _Cursor, segment: Segment) -> None:
        """The reader's position lies before the head. Without skip_truncated the caller hears it
        once as TruncatedData (it may reset the group); either way reading goes on from the head."""
        config = self.group.config
        old = cursor.next_offset()
        where = f"{cursor.stream} segment {segment_name(cursor.segment)} offset {old}"
        cursor.drop(segment.head)
        if config["skip_truncated"]:
            log.warning("reader group %s, reader %s: skipped truncated data at %s (head is %d)", self.group.name,
                        self.reader_id, where, segment.head)
            with self.controller.db.write() as conn:
                AuditLog(self.clock, self.controller.actor).append(conn, AuditEntry(
                    "rg_skip_truncated", cursor.stream,
                    f"reader group {self.group.name}: reader {self.reader_id} skipped truncated data",
                    segment.head - old, {"segment": segment_name(cursor.segment), "from": old,
                                         "to": segment.head, "group": self.group.name}))
            return
        raise TruncatedData(f"reader {self.reader_id} of group {self.group.name}: data at {where} has been "
                            f"truncated (head is {segment.head}); reading goes on from the head")

    def close(self) -> None:
        """Leave the group: the segments go back to the pool at this reader's positions."""
        if self._closed:
            return
        positions = _by_id(self.positions())
        now = self.clock.now_ms()
        self.group.store.update(self.group.name, lambda r, topo: core.release_reader(
            r.state, topo, self.reader_id, positions, now))
        self._forget_cursors()
        self._ready = _NO_SLICE
        self._closed = True

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
