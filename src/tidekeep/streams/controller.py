"""Stream lifecycle and the data plane on the metadata store (the imperative shell).

Each operation loads state in one transaction, calls the pure core (model.py, cuts.py) and
applies the result in the same transaction. Storage work that may be slow (reading chunk files
to check event boundaries, deleting files) happens outside write transactions, ordered so a
crash at any point leaves at most unreferenced files, which the sweep removes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..clock import Clock
from ..errors import (
    AlreadyExists,
    ChunkMissing,
    ConflictError,
    HoldActive,
    InvalidInput,
    InvalidStreamCut,
    NotFound,
    StaleVersion,
    StoreUnavailable,
    StreamSealed,
    TruncatedData,
    WriterFenced,
)
from ..faults import fault_error, fault_point
from ..names import check_name, check_new_scope_name, split_new_stream_name
from ..store import schema as t
from ..store.audit import AuditEntry, AuditLog, audit_rows, default_actor
from ..store.chunks import ChunkRef, ChunkStorage, StoredFile
from ..store.database import Database, inserted_id
from ..store.deletion import FileLeft, warn_files_left
from ..store.fencing import LeaseFence, confirm_fence
from ..store.holds import holds_under, refuse_if_held
from ..store.positions import positions_to_json
from ..store.schema_transactions import transaction_chunks
from .config import StreamConfig
from .cuts import (
    CutOrder,
    SegmentRange,
    StreamCut,
    check_cut,
    check_incarnation,
    furthest,
)
from .model import Segment, SegmentId, equal_ranges, initial_segments, plan_scale, segment_name
from .repository import ChunkStats, StreamInfo, StreamRepository, StreamState, StreamStatus, chunk_ref, stream_info
from .sweep_plan import plan_sweep

log = logging.getLogger("tidekeep.streams")

MAX_SPLIT_PARTS = 10_000  # as many as a stream may be created with (streams/config.py)
SWEEP_PATHS_AUDITED = 100  # a sweep's audit row names this many files; the count and bytes are exact



def _offset(value: object) -> int:
    """An offset of a {segment: offset} cut."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return int(value)
    raise InvalidStreamCut(f"invalid offset {value!r} in a stream cut: expected an integer from 0 to 2^63 - 1")


@dataclass(frozen=True)
class TruncateResult:
    stream: str
    old_head: StreamCut
    new_head: StreamCut
    bytes_freed: int
    chunks_deleted: int  # chunks removed from the stream's metadata (their files: see files_left)
    # chunk files the truncation could not delete after its commit (read-only storage, permissions):
    # unreferenced now, so the sweep removes them once deletion works again
    files_left: tuple[FileLeft, ...] = ()


@dataclass(frozen=True)
class DeleteResult:
    stream: str
    uid: str
    bytes_freed: int
    sealed_first: bool  # the stream was active and `force` sealed it in the deleting transaction
    files_left: tuple[FileLeft, ...] = ()  # files the deletion could not remove after its commit (for the sweep)


@dataclass(frozen=True)
class PendingChunk:
    segment: int
    path: str
    length: int
    event_count: int


@dataclass(frozen=True)
class CommitResult:
    duplicate: bool
    base_offsets: dict[int, int]  # segment -> base offset assigned (empty for a duplicate)
    committed_ms: int
    landed_before: bool = False  # a duplicate whose own chunks had landed (an earlier attempt's ack was lost)


class SegmentsSealed(StreamSealed):
    """Internal: some segments a batch targets were sealed by a scale; the writer re-routes."""

    def __init__(self, segments: list[int]) -> None:
        super().__init__(f"segments {', '.join(segment_name(s) for s in segments)} are sealed")
        self.segments = segments


@dataclass(frozen=True)
class ReadTask:
    chunk: ChunkRef
    start: int  # absolute offsets to keep: [start, end)
    end: int


@dataclass(frozen=True)
class ReadPlan:
    stream: str
    start: StreamCut
    end: StreamCut
    tasks: list[ReadTask]
    ranges: list[SegmentRange]


@dataclass(frozen=True)
class SweepResult:
    files_seen: int
    files_deleted: int
    bytes_deleted: int = 0
    # orphans the sweep could not delete (read-only storage, permissions); the next sweep tries again
    files_left: tuple[FileLeft, ...] = field(default=(), repr=False)
    # orphans kept because the store gave no modification time: their age is unknown (sweep_plan.py)
    files_unknown_age: int = 0


SWEEP_BATCH = 1000  # orphan files deleted per confirmation of the sweep's lease


class StreamController:
    def __init__(self, db: Database, storage: ChunkStorage, clock: Clock, actor: str | None = None) -> None:
        self.db = db
        self.storage = storage
        self.clock = clock
        self.actor = actor or default_actor()
        self.repository = StreamRepository()  # persistence; this class orchestrates (docs/streams.md)

    # ---- loading -----------------------------------------------------------------------------
    def state(self, name: str) -> StreamState:
        with self.db.read() as conn:
            return self.repository.load(conn, name)

    # ---- scopes ------------------------------------------------------------------------------
    def create_scope(self, scope: str) -> bool:
        check_new_scope_name(scope)
        with self.db.write() as conn:
            return self._ensure_scope(conn, scope)

    def _ensure_scope(self, conn: Connection, scope: str) -> bool:
        if self.repository.scope_exists(conn, scope):
            return False
        conn.execute(sa.insert(t.scopes).values(name=scope, created_ms=self.clock.now_ms()))
        return True

    def list_scopes(self) -> list[str]:
        with self.db.read() as conn:
            return list(conn.execute(sa.select(t.scopes.c.name).order_by(t.scopes.c.name)).scalars())

    def delete_scope(self, scope: str) -> None:
        check_name(scope, "scope name")
        with self.db.write() as conn:
            self.repository.require_scope(conn, scope)
            # a held stream cannot be deleted, so its scope is never empty; a hold left on the name of a
            # stream deleted by an older version refuses the scope's deletion too (docs/holds.md)
            held = holds_under(conn, "stream", f"{scope}/")
            if held:
                raise HoldActive(f"scope {scope} cannot be deleted while stream {held[0].target} is under legal hold "
                                 f"{held[0].id} ({held[0].reason}); remove the hold first", held[0].id, held[0].reason)
            if conn.execute(sa.select(t.streams.c.id).where(t.streams.c.scope == scope)).first() is not None:
                raise InvalidInput(f"scope {scope!r} still has streams; delete them first")
            conn.execute(sa.delete(t.scopes).where(t.scopes.c.name == scope))

    # ---- streams -----------------------------------------------------------------------------
    def create_stream(self, name: str, config: StreamConfig) -> StreamInfo:
        scope, stream = split_new_stream_name(name)
        if not isinstance(config, StreamConfig):
            raise InvalidInput(f"invalid stream config {config!r}: use tidekeep.StreamConfig")
        segments = initial_segments(config.segments)
        now = self.clock.now_ms()
        uid = uuid.uuid4().hex
        try:
            with self.db.write() as conn:
                self._ensure_scope(conn, scope)
                exists = conn.execute(sa.select(t.streams.c.id).where(
                    t.streams.c.scope == scope, t.streams.c.name == stream)).first()
                if exists is not None:
                    raise AlreadyExists(f"stream {name!r} already exists")
                stream_id = inserted_id(conn.execute(sa.insert(t.streams).values(
                    scope=scope, name=stream, uid=uid, state=StreamStatus.ACTIVE.value, config=config.to_json(),
                    created_ms=now,
                    current_epoch=0, next_segment_number=len(segments),
                    head={s.id: 0 for s in segments}, truncated_bytes=0,
                )))
                conn.execute(sa.insert(t.epochs).values(stream_id=stream_id, epoch=0, created_ms=now))
                conn.execute(sa.insert(t.segments), [self._segment_row(stream_id, s, now) for s in segments])
        except sa.exc.IntegrityError:
            raise AlreadyExists(f"stream {name!r} already exists") from None
        log.info("created stream %s with %d segments", name, len(segments))
        return StreamInfo(name, uid, StreamStatus.ACTIVE, config, now, 0)

    @staticmethod
    def _segment_row(stream_id: int, s: Segment, now: int) -> dict[str, Any]:
        return dict(stream_id=stream_id, segment_id=s.id, key_low=s.key_low, key_high=s.key_high, head=0, tail=0,
                    sealed=False, sealed_epoch=None, created_ms=now, sealed_ms=None)

    def list_streams(self, scope: str | None = None, *, after: tuple[str, str] | None = None,
                     limit: int | None = None) -> list[StreamInfo]:
        """Streams in (scope, name) order: of one scope (NotFound when it does not exist), or of all;
        with `after` (scope, name) and `limit`, one keyset page of them, read from the unique index."""
        c = t.streams.c
        with self.db.read() as conn:
            query = sa.select(t.streams).order_by(c.scope, c.name)
            if scope is not None:
                check_name(scope, "scope name")
                self.repository.require_scope(conn, scope)
                query = query.where(c.scope == scope)
            if after is not None:
                query = query.where(sa.or_(c.scope > after[0], sa.and_(c.scope == after[0], c.name > after[1])))
            if limit is not None:
                query = query.limit(limit)
            return [stream_info(r) for r in conn.execute(query)]

    def update_config(self, name: str, config: StreamConfig, expected_version: int | None = None) -> StreamInfo:
        """Replace the stream's config. `expected_version`: the config version the caller read
        (`StreamInfo.config_version`); StaleVersion, nothing changed, when the config has been
        updated since. Checked under the stream's row lock, so two edits of one version cannot
        both land."""
        if not isinstance(config, StreamConfig):
            raise InvalidInput(f"invalid stream config {config!r}: use tidekeep.StreamConfig")
        with self.db.write() as conn:
            row = self.repository.row(conn, name, lock=True)
            if expected_version is not None and row.config_version != expected_version:
                raise StaleVersion(f"stream {name!r} config is at version {row.config_version}, not "
                                   f"{expected_version}: it was changed since it was read", str(row.config_version))
            version = row.config_version + 1
            conn.execute(sa.update(t.streams).where(t.streams.c.id == row.id).values(
                config=config.to_json(), config_version=version))
            return StreamInfo(name, row.uid, StreamStatus(row.state), config, row.created_ms, row.current_epoch,
                              version)

    def seal(self, name: str) -> bool:
        """Seal every active segment; the stream then takes no writes. False if already sealed."""
        with self.db.write() as conn:
            state = self.repository.load(conn, name, lock=True)
            if state.info.state is StreamStatus.SEALED:
                return False
            self.repository.lock_segments(conn, state.stream_id, [s.id for s in state.active_segments()])
            now = self.clock.now_ms()
            conn.execute(sa.update(t.segments).where(
                t.segments.c.stream_id == state.stream_id, t.segments.c.sealed.is_(False)
            ).values(sealed=True, sealed_ms=now))
            conn.execute(sa.update(t.streams).where(t.streams.c.id == state.stream_id).values(
                state=StreamStatus.SEALED.value))
        log.info("sealed stream %s", name)
        return True

    def delete(self, name: str, reason: str = "manual delete", force: bool = False) -> DeleteResult:
        """Delete a sealed stream and its data; with `force` an active stream is sealed and deleted
        in one transaction. A held stream is refused (HoldActive) before anything changes, checked
        under the stream row lock that HoldStore.add also takes. Rows go first in one transaction
        (audited), then the files; a crash in between, or files that cannot be deleted (returned as
        `files_left`), leave only unreferenced files for the sweep."""
        self.storage.require_deletable()
        with self.db.write() as conn:
            state = self.repository.load(conn, name, lock=True)
            refuse_if_held(conn, "stream", state.info.name, "deleted")
            sealed_first = state.info.state is not StreamStatus.SEALED
            if sealed_first:
                if not force:
                    raise InvalidInput(f"stream {name!r} is not sealed; seal it first, or delete it with force "
                                       "(CLI: --force), which seals and deletes it in one step")
                # as seal() does: a commit in flight either lands before this or finds its segments gone
                self.repository.lock_segments(conn, state.stream_id, [s.id for s in state.active_segments()])
                state = self.repository.load(conn, name, lock=True)  # the tails those commits moved
            freed = state.topology().size_between(state.head, state.tail())
            conn.execute(sa.delete(t.chunk_origins).where(t.chunk_origins.c.stream_id == state.stream_id))
            conn.execute(sa.delete(t.chunks).where(t.chunks.c.stream_id == state.stream_id))
            conn.execute(sa.delete(t.streams).where(t.streams.c.id == state.stream_id))
            details: dict[str, Any] = {"uid": state.info.uid}
            if sealed_first:
                details["sealed_first"] = True
            self._audit(conn, "delete_stream", name, positions_to_json(state.head), None, freed, reason, details)
        fault_point("delete.after_commit")
        left = self.storage.delete_dir(state.storage_dir()).failed
        log.info("deleted stream %s (%d bytes)", name, freed)
        warn_files_left(log, f"deleted stream {name}", left)
        return DeleteResult(state.info.name, state.info.uid, freed, sealed_first, left)

    # ---- scaling -----------------------------------------------------------------------------
    def scale(self, name: str, seal: Sequence[int], new_ranges: Sequence[tuple[float, float]]) -> list[Segment]:
        if not isinstance(seal, (list, tuple)) or not isinstance(new_ranges, (list, tuple)):
            raise InvalidInput("scale: seal and new_ranges must be lists (of segments and of (low, high) pairs)")
        with self.db.write() as conn:
            state = self.repository.load(conn, name, lock=True)
            if state.info.state is StreamStatus.SEALED:
                raise StreamSealed(f"stream {name!r} is sealed")
            plan = plan_scale(state.segments, state.info.current_epoch, state.next_segment_number,
                              list(seal), list(new_ranges))
            now = self.clock.now_ms()
            # lock the sealed segments so an in-flight commit either lands before the seal or sees it
            self.repository.lock_segments(conn, state.stream_id, plan.sealed)
            conn.execute(sa.update(t.segments).where(
                t.segments.c.stream_id == state.stream_id, t.segments.c.segment_id.in_(plan.sealed)
            ).values(sealed=True, sealed_epoch=plan.new_epoch, sealed_ms=now))
            conn.execute(sa.insert(t.segments), [self._segment_row(state.stream_id, s, now) for s in plan.new_segments])
            conn.execute(sa.insert(t.epochs).values(stream_id=state.stream_id, epoch=plan.new_epoch, created_ms=now))
            conn.execute(sa.update(t.streams).where(t.streams.c.id == state.stream_id).values(
                current_epoch=plan.new_epoch, next_segment_number=state.next_segment_number + len(plan.new_segments)))
        log.info("scaled stream %s: sealed %s, created %s", name, [segment_name(s) for s in plan.sealed],
                 [segment_name(s.id) for s in plan.new_segments])
        return plan.new_segments

    def split(self, name: str, segment: int, parts: int) -> list[Segment]:
        state = self.state(name)
        if segment not in state.segments:
            raise InvalidInput(f"scale: segment {segment_name(segment)} does not exist")
        if isinstance(parts, int) and not isinstance(parts, bool) and parts > MAX_SPLIT_PARTS:
            # checked before the ranges are built: a huge count would take the process's memory and time
            raise InvalidInput(f"split: invalid part count {parts}: at most {MAX_SPLIT_PARTS}")
        seg = state.segments[segment]
        return self.scale(name, [segment], equal_ranges(seg.key_low, seg.key_high, parts))

    def merge(self, name: str, segments: Sequence[int]) -> list[Segment]:
        state = self.state(name)
        for seg in segments:
            if seg not in state.segments:
                raise InvalidInput(f"scale: segment {segment_name(seg)} does not exist")
        if len(segments) < 2:
            raise InvalidInput("merge: give at least two adjacent segments")
        low = min(state.segments[s].key_low for s in segments)
        high = max(state.segments[s].key_high for s in segments)
        return self.scale(name, list(segments), [(low, high)])

    # ---- cuts --------------------------------------------------------------------------------
    def to_positions(self, state: StreamState, cut: StreamCut | str | Mapping[int, int]) -> dict[int, int]:
        """Validate a cut of this stream (any form) and return its positions."""
        if isinstance(cut, str):
            cut = StreamCut.parse(cut)
        if isinstance(cut, StreamCut):
            if cut.stream != state.name:
                raise InvalidStreamCut(f"stream cut is for {cut.stream!r}, not {state.name!r}")
            check_incarnation(cut, state.name, state.info.uid)
            if cut.ranges is not None:
                for seg, rng in cut.ranges.items():
                    known = state.segments.get(seg)
                    if known is not None and (known.key_low, known.key_high) != tuple(rng):
                        raise InvalidStreamCut(
                            f"stream cut does not match {state.name!r}: segment {segment_name(seg)} has another key "
                            "range (a cut of an earlier stream with this name?)")
            positions = dict(cut.positions)
        elif isinstance(cut, Mapping):  # {segment: offset}, a segment as its id or "epoch.number"
            positions = {int(SegmentId(k)): _offset(v) for k, v in cut.items()}
        else:
            raise InvalidStreamCut(f"invalid stream cut {cut!r}: expected a StreamCut or its string form")
        check_cut(positions, state.segments, state.name, lambda seg, off: self.is_event_boundary(state, seg, off))
        return positions

    def resolve_cut(self, name: str, cut: StreamCut | str) -> StreamCut:
        state = self.state(name)
        return state.cut(self.to_positions(state, cut))

    def is_event_boundary(self, state: StreamState, seg_id: int, offset: int) -> bool:
        segment = state.segments[seg_id]
        if offset in (0, segment.tail) or offset <= segment.head:
            return True  # heads and tails are boundaries; offsets before the head are judged as truncated
        with self.db.read() as conn:
            row = self.repository.chunk_at_or_before(conn, state.stream_id, seg_id, offset)
        if row is None or offset >= row.base_offset + row.length:
            return False
        if offset == row.base_offset:
            return True
        return (offset - row.base_offset) in self.storage.event_offsets(chunk_ref(row))

    # ---- truncation --------------------------------------------------------------------------
    def truncate(self, name: str, cut: StreamCut | str, reason: str = "manual truncation",
                 actor: str | None = None, details: dict[str, Any] | None = None,
                 guard: Callable[[Connection, StreamState], None] | None = None) -> TruncateResult:
        """Move the head to `cut` (valid, at or after the current head). The head and the chunk rows
        wholly below it change in one transaction; files are deleted after the commit. `details` are
        added to the audit entry's details (retention: the subscribers that allowed the truncation);
        `guard` runs under the stream lock before anything changes and may raise to refuse (retention:
        the subscribers changed since the decision)."""
        self.storage.require_deletable()  # before the head moves: its files are deleted after the commit
        checked = self.state(name)
        positions = self.to_positions(checked, cut)  # reads chunk files: outside the write transaction
        with self.db.write() as conn:
            state = self.repository.load(conn, name, lock=True)
            if state.info.uid != checked.info.uid:
                raise InvalidStreamCut(f"stream {name!r} was re-created while the cut was being checked")
            if state.info.state is StreamStatus.SEALED:
                raise StreamSealed(f"stream {name!r} is sealed; a sealed stream cannot be truncated")
            refuse_if_held(conn, "stream", state.info.name, "truncated")  # under the row lock HoldStore.add takes
            if guard is not None:
                guard(conn, state)
            topology = state.topology()
            order = topology.compare(state.head, positions)
            if order is CutOrder.AFTER:
                raise InvalidStreamCut(f"cannot truncate {name} at {state.shown(positions)}: it is behind the head "
                                       f"{state.shown(state.head)}")
            if order is CutOrder.OVERLAPS:
                raise InvalidStreamCut(f"cannot truncate {name} at {state.shown(positions)}: it is partly behind "
                                       f"the head {state.shown(state.head)}")
            old_head = state.cut(state.head)
            if order is CutOrder.EQUAL:
                return TruncateResult(name, old_head, old_head, 0, 0)
            freed_ranges = topology.ranges_between(state.head, positions)
            freed = sum(r.size for r in freed_ranges)
            doomed: list[str] = []
            for r in freed_ranges:
                new_seg_head = r.end
                conn.execute(sa.update(t.segments).where(
                    t.segments.c.stream_id == state.stream_id, t.segments.c.segment_id == r.segment
                ).values(head=new_seg_head))
                below = (t.chunks.c.stream_id == state.stream_id) & (t.chunks.c.segment_id == r.segment) & (
                    t.chunks.c.base_offset + t.chunks.c.length <= new_seg_head)
                doomed.extend(conn.execute(sa.select(t.chunks.c.path).where(below)).scalars())
                conn.execute(sa.delete(t.chunks).where(below))
                # files compaction replaced below the head: truncated data, no longer a landed commit
                conn.execute(sa.delete(t.chunk_origins).where(
                    t.chunk_origins.c.stream_id == state.stream_id, t.chunk_origins.c.segment_id == r.segment,
                    t.chunk_origins.c.base_offset + t.chunk_origins.c.length <= new_seg_head))
            conn.execute(sa.update(t.streams).where(t.streams.c.id == state.stream_id).values(
                head=positions, truncated_bytes=state.truncated_bytes + freed))
            self._audit(conn, "truncate", name, positions_to_json(state.head),
                        positions_to_json(positions), freed, reason,
                        {"chunks": len(doomed), **(details or {})}, actor)
        fault_point("truncate.after_commit")
        left = self.storage.delete(doomed).failed
        result = TruncateResult(name, old_head, state.cut(positions), freed, len(doomed), left)
        # DEBUG: whoever asked for the truncation reports it once (the CLI prints it, `serve` logs it with
        # its rule, docs/service.md); an INFO line here would say it a second time
        log.debug("truncated %s at %s: %d bytes freed (%s)", name, result.new_head, freed, reason)
        warn_files_left(log, f"truncated {name}", left)
        return result

    # ---- writes ------------------------------------------------------------------------------
    def last_sequence(self, name: str, writer_id: str) -> tuple[StreamState, int]:
        with self.db.read() as conn:
            state = self.repository.load(conn, name)
            seq = conn.execute(sa.select(t.writers.c.last_sequence).where(
                t.writers.c.stream_id == state.stream_id, t.writers.c.writer_id == writer_id)).scalar()
        return state, (0 if seq is None else seq)

    def open_writer(self, name: str, writer_id: str) -> tuple[StreamState, int, int]:
        """Take the next epoch of `writer_id` on this stream: from now on only this epoch may commit
        batches of that id (an older writer's commit fails with WriterFenced). Returns the stream's
        state, the new epoch and the id's last committed batch sequence, read in the same transaction."""
        for _ in range(2):
            try:
                with self.db.write() as conn:
                    state = self.repository.load(conn, name)
                    row = conn.execute(sa.select(t.writers.c.epoch, t.writers.c.last_sequence).where(
                        t.writers.c.stream_id == state.stream_id, t.writers.c.writer_id == writer_id)
                        .with_for_update()).first()
                    now = self.clock.now_ms()
                    if row is None:
                        conn.execute(sa.insert(t.writers).values(stream_id=state.stream_id, writer_id=writer_id,
                                                                 last_sequence=0, updated_ms=now, epoch=1))
                        return state, 1, 0
                    conn.execute(sa.update(t.writers).where(
                        t.writers.c.stream_id == state.stream_id, t.writers.c.writer_id == writer_id
                    ).values(epoch=row.epoch + 1, updated_ms=now))
                    return state, row.epoch + 1, row.last_sequence
            except sa.exc.IntegrityError:
                continue  # a concurrent first open of the same id inserted the row: take the next epoch
        raise ConflictError(f"writer {writer_id}: concurrent opens of the same writer id, try again")

    def commit_batch(self, name: str, uid: str, writer_id: str, sequence: int,
                     chunks: Sequence[PendingChunk], epoch: int | None = None) -> CommitResult:
        """Append a writer's batch atomically: every chunk at its segment's tail, plus the writer's
        sequence. A sequence at or below the last committed one is a duplicate and changes nothing;
        the result says whether it was these very chunks that landed before (`landed_before`: a
        retry after an unknown outcome) or another batch of the same id. With an `epoch`, a newer
        epoch of the writer id fences this commit (WriterFenced) unless these chunks landed before."""
        now = self.clock.now_ms()
        with self.db.write() as conn:
            row = self.repository.row(conn, name)
            if row.uid != uid:
                raise NotFound(f"stream {name!r} was deleted")
            writer = conn.execute(sa.select(t.writers.c.last_sequence, t.writers.c.positions, t.writers.c.epoch).where(
                t.writers.c.stream_id == row.id, t.writers.c.writer_id == writer_id).with_for_update()).first()
            if epoch is not None and writer is not None and writer.epoch != epoch:
                if self.repository.chunks_landed(conn, row.id, (c.path for c in chunks)):
                    return CommitResult(True, {}, now, landed_before=True)
                raise WriterFenced(f"writer {writer_id} on {name} was fenced: a newer writer opened with the same id "
                                   f"(epoch {writer.epoch}, this one {epoch}); its unflushed events were not written")
            if writer is not None and sequence <= writer.last_sequence:
                landed = self.repository.chunks_landed(conn, row.id, (c.path for c in chunks))
                return CommitResult(True, {}, now, landed_before=landed)
            if row.state == StreamStatus.SEALED:
                raise StreamSealed(f"stream {name!r} is sealed")
            targets = {c.segment for c in chunks}
            seg_rows = {r.segment_id: r for r in self.repository.lock_segments(conn, row.id, targets)}
            sealed = sorted(s for s in {c.segment for c in chunks} if s not in seg_rows or seg_rows[s].sealed)
            if sealed:
                raise SegmentsSealed(sealed)
            tails = {s: r.tail for s, r in seg_rows.items()}
            bases: dict[int, int] = {}
            chunk_rows = []
            for c in chunks:
                bases.setdefault(c.segment, tails[c.segment])
                chunk_rows.append(dict(stream_id=row.id, segment_id=c.segment, base_offset=tails[c.segment],
                                       length=c.length, event_count=c.event_count, path=c.path,
                                       writer_id=writer_id, sequence=sequence, committed_ms=now))
                tails[c.segment] += c.length
            if chunk_rows:
                conn.execute(sa.insert(t.chunks), chunk_rows)
            for seg, tail in tails.items():
                conn.execute(sa.update(t.segments).where(
                    t.segments.c.stream_id == row.id, t.segments.c.segment_id == seg).values(tail=tail))
            # the writer's position (what a note records): the offset after its last event, per segment
            positions = merge_positions(writer.positions if writer is not None else None, tails)
            if writer is None:
                conn.execute(sa.insert(t.writers).values(stream_id=row.id, writer_id=writer_id, last_sequence=sequence,
                                                         updated_ms=now, positions=positions, epoch=epoch or 0))
            else:
                conn.execute(sa.update(t.writers).where(
                    t.writers.c.stream_id == row.id, t.writers.c.writer_id == writer_id
                ).values(last_sequence=sequence, updated_ms=now, positions=positions))
        fault_error("commit.lost_ack", StoreUnavailable, "connection lost after the commit")
        return CommitResult(False, bases, now)

    def chunk_stats(self, name: str, target_size: int) -> tuple[StreamState, dict[int, ChunkStats]]:
        """The stream's state and its chunks per segment, read in one transaction."""
        with self.db.read() as conn:
            state = self.repository.load(conn, name)
            return state, self.repository.chunk_stats(conn, state.stream_id, target_size)

    def referenced_paths(self, paths: Sequence[str]) -> set[str]:
        """Which of these chunk files committed metadata refers to."""
        with self.db.read() as conn:
            return self.repository.referenced_paths(conn, paths)

    # ---- reads -------------------------------------------------------------------------------
    def plan_read(self, name: str, start: StreamCut | str | None = None,
                  end: StreamCut | str | None = None) -> ReadPlan:
        state = self.state(name)
        start_pos = dict(state.head) if start is None else self.to_positions(state, start)
        end_pos = state.tail() if end is None else self.to_positions(state, end)
        topology = state.topology()
        head_order = topology.compare(state.head, start_pos)
        if head_order in (CutOrder.AFTER, CutOrder.OVERLAPS):
            raise TruncatedData(f"cannot read {name} from {state.shown(start_pos)}: data before the head "
                                f"{state.shown(state.head)} has been truncated")
        if topology.compare(start_pos, end_pos) in (CutOrder.AFTER, CutOrder.OVERLAPS):
            raise InvalidStreamCut(f"start cut {state.shown(start_pos)} is not at or before end cut "
                                  f"{state.shown(end_pos)}")
        seg_ranges = topology.ranges_between(start_pos, end_pos)
        tasks: list[ReadTask] = []
        with self.db.read() as conn:
            for r in seg_ranges:
                rows = self.repository.chunks_overlapping(conn, state.stream_id, r.segment, r.start, r.end)
                covered = r.start
                for row in rows:
                    if row.base_offset > covered:
                        break
                    covered = row.base_offset + row.length
                    tasks.append(ReadTask(chunk_ref(row), max(r.start, row.base_offset),
                                          min(r.end, row.base_offset + row.length)))
                if covered < r.end:
                    # metadata lost a chunk between two reads: only a concurrent truncation does that
                    raise TruncatedData(f"cannot read {name}: segment {segment_name(r.segment)} was truncated "
                                        "while the read was being planned")
        return ReadPlan(name, state.cut(start_pos), state.cut(end_pos), tasks, seg_ranges)

    def explain_missing_chunk(self, name: str, error: ChunkMissing, task: ReadTask) -> Exception:
        """A chunk file vanished during a read: a truncation that moved past it explains that as
        TruncatedData; anything else is a genuinely missing chunk."""
        try:
            state = self.state(name)
        except NotFound:
            return NotFound(f"stream {name!r} was deleted during the read")
        segment = state.segments.get(task.chunk.segment)
        if segment is None or segment.head >= task.chunk.base_offset + task.chunk.length:
            return TruncatedData(f"cannot read {name}: the data at segment {segment_name(task.chunk.segment)} "
                                 f"offset {task.start} was truncated during the read")
        return error

    # ---- sweep -------------------------------------------------------------------------------
    def sweep(self, grace_ms: int, fence: LeaseFence | None = None) -> SweepResult:
        """Delete chunk files no committed chunk refers to, once older than the grace period (so a
        writer between writing its file and committing it is never robbed); a file whose store gives
        no modification time is kept, its age unknown (streams/sweep_plan.py). With a `fence` (the
        service's sweep lease) the lease is confirmed before each batch of deletions and the sweep
        stops with LeaseLost once another process has taken it over. A sweep that deleted files is
        audited (action "sweep": the files, the bytes)."""
        self.storage.require_deletable()
        cutoff = self.clock.now_ms() - grace_ms
        files = self.storage.list_files("streams")
        with self.db.read() as conn:
            # staged chunks of open transactions are referenced too (aborts drop their rows). They
            # are read first: a commit moves a path from staged to committed, and under READ
            # COMMITTED the later query sees the move, so a committing path is never missed by both
            known = set(conn.execute(sa.select(transaction_chunks.c.path)).scalars())
            known.update(conn.execute(sa.select(t.chunks.c.path)).scalars())
            # files compaction replaced stay for the grace period after their replacement: a reader
            # that planned its read before the swap still finds them (streams/compaction_store.py).
            # Read after the chunks, for the same reason: a swap moves a path from committed to replaced
            known.update(conn.execute(sa.select(t.chunk_origins.c.path).where(
                t.chunk_origins.c.retired_ms > cutoff)).scalars())
        plan = plan_sweep(files, known, cutoff)
        doomed = plan.doomed
        if plan.unknown_age:
            log.warning("sweep kept %d unreferenced chunk file(s) whose modification time the store does not "
                        "give (their age is unknown), e.g. %s", len(plan.unknown_age), plan.unknown_age[0].path)
        deleted = 0
        removed: list[StoredFile] = []
        failed: list[FileLeft] = []
        try:
            for start in range(0, len(doomed), SWEEP_BATCH):
                confirm_fence(self.db, fence)
                batch = doomed[start:start + SWEEP_BATCH]
                outcome = self.storage.delete(f.path for f in batch)
                deleted += outcome.deleted
                failed.extend(outcome.failed)
                left = {f.path for f in outcome.failed}
                removed.extend(f for f in batch if f.path not in left)
        finally:
            if removed:  # audited even when a lost lease stopped the sweep part-way
                self._audit_sweep(removed, grace_ms)
            warn_files_left(log, "sweep", tuple(failed), left_for="the next sweep")
        return SweepResult(len(files), deleted, sum(f.size for f in removed), tuple(failed), len(plan.unknown_age))

    def _audit_sweep(self, removed: Sequence[StoredFile], grace_ms: int) -> None:
        freed = sum(f.size for f in removed)
        log.info("sweep removed %d orphan chunk files (%d bytes)", len(removed), freed)
        with self.db.write() as conn:
            self._audit(conn, "sweep", "streams", None, None, freed,
                        f"orphan chunk files older than the {grace_ms} ms grace period", {
                            "files": len(removed), "paths": [f.path for f in removed[:SWEEP_PATHS_AUDITED]],
                            "grace_ms": grace_ms})

    # ---- audit -------------------------------------------------------------------------------
    def _audit(self, conn: Connection, action: str, target: str, old_head: str | None, new_head: str | None,
               bytes_freed: int, reason: str, details: dict[str, Any] | None = None,
               actor: str | None = None) -> None:
        AuditLog(self.clock, self.actor).append(conn, AuditEntry(
            action, target, reason, bytes_freed, details, old_head, new_head, actor))

    def audit_entries(self, target: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return audit_rows(self.db, target, limit)


def merge_positions(stored: Mapping[int, int] | None, ends: Mapping[int, int]) -> dict[int, int]:
    """A writer's stored positions moved to `ends` in the segments it just appended to."""
    return dict(sorted(furthest(stored or {}, ends).items()))


__all__ = ["DeleteResult", "StreamController"]
