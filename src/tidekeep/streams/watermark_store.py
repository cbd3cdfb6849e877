"""Watermarks (docs/watermarks.md): writer marks and watermarks in the metadata store — the thin shell
around the pure computation in watermarks.py.

- A **note** records (writer, time, position) in one transaction: the position is read from the
  writer's committed positions (`writers.positions`, updated with every batch it commits) unless the
  caller gives one; it is checked against the writer's previous mark (time and offsets never go
  backwards, docs/watermarks.md) and against the stream (known segments, offsets within the tail).
- A transaction commit with a timestamp records its writer's mark at the offsets where it landed, in
  the commit's own transaction (`record_mark`), so the mark and the data appear together.
- **compute** loads the marks and the last stored watermark, calls `next_watermark` and appends the
  result with revision = previous + 1. The append is conditional: it happens only if the stored last
  revision is still the one the computation started from, and the primary key (stream, revision)
  refuses a second append of the same revision, so two controllers never both append and a new owner
  after a failover simply continues from the stored watermark.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import ConflictError, InvalidInput, InvalidStreamCut, WriterFenced
from ..names import check_writer_id
from ..store import schema as t
from ..store.fencing import LeaseFence, check_fence
from ..store.schema_watermarks import watermarks as wm_table
from ..store.schema_watermarks import writer_marks
from .controller import StreamController
from .cuts import StreamCut, check_incarnation, furthest
from .model import Segment, segment_name
from .repository import StreamState
from .watermarks import Watermark, WriterMark, active_writers, compare, latest_marks, next_watermark

MARK_SOURCES = ("note", "auto", "txn")
_TIME_MAX = 2**63 - 1


def check_time(time_ms: object, what: str = "time") -> int:
    """A writer's time: an integer number of ms, >= 0 as transaction commit timestamps are, that fits
    the store's 64-bit column."""
    if not isinstance(time_ms, int) or isinstance(time_ms, bool):
        raise InvalidInput(f"invalid {what} {time_ms!r}: must be an integer number of milliseconds")
    if time_ms < 0:
        raise InvalidInput(f"invalid {what} {time_ms}: must not be negative")
    if time_ms > _TIME_MAX:
        raise InvalidInput(f"invalid {what} {time_ms}: outside the 64-bit range")
    return time_ms


def prune_position(positions: Mapping[int, int], segments: Mapping[int, Segment]) -> dict[int, int]:
    """Drop the segments of a position that a later segment in it overlaps: a writer that wrote to a
    successor has left its predecessor behind, and the cut passes the predecessor anyway. Keeps a
    writer's stored position small across many scales."""
    kept = {}
    for seg, offset in positions.items():
        later = [o for o in positions if o > seg and segments[o].overlaps(segments[seg])]
        if not later:
            kept[seg] = offset
    return kept


def _load_positions(stored: dict[int, int] | None) -> dict[int, int]:
    return {} if stored is None else stored


def _mark(row: Any) -> WriterMark:
    return WriterMark(row.writer_id, row.time_ms, _load_positions(row.positions), row.noted_ms, bool(row.closed))


def _watermark(row: Any) -> Watermark:
    return Watermark(row.revision, row.lower_time_ms, row.upper_time_ms, _load_positions(row.cut))


def record_mark(conn: Connection, state: StreamState, writer_id: str, time_ms: int, positions: Mapping[int, int],
                source: str, now_ms: int, merge_previous: bool = False) -> WriterMark:
    """Replace the writer's mark by (time_ms, positions) inside the caller's transaction, after checking
    it against the stream and the writer's previous mark (nothing is written if a check fails).
    `merge_previous` keeps the previous mark's offsets in segments `positions` does not name (a
    transaction's landing offsets cover only the segments it wrote to)."""
    row = conn.execute(sa.select(writer_marks).where(
        writer_marks.c.stream_id == state.stream_id, writer_marks.c.writer_id == writer_id).with_for_update()).first()
    if merge_previous and row is not None:
        positions = furthest(_load_positions(row.positions), positions)
    new = WriterMark(writer_id, time_ms, prune_position(positions, state.segments), now_ms)
    previous = [] if row is None else [_mark(row)]
    latest_marks([*previous, new], state.segments)  # typed errors: unknown segment, beyond tail, backwards
    values = dict(time_ms=time_ms, positions=new.positions, noted_ms=now_ms, source=source,
                  closed=False)
    if row is None:
        conn.execute(sa.insert(writer_marks).values(stream_id=state.stream_id, writer_id=writer_id, **values))
    else:
        conn.execute(sa.update(writer_marks).where(
            writer_marks.c.stream_id == state.stream_id, writer_marks.c.writer_id == writer_id).values(**values))
    return new


def _check_epoch(conn: Connection, state: StreamState, writer_id: str, epoch: int | None) -> None:
    """Refuse a mark change by a writer whose epoch a newer writer with the same id has replaced."""
    if epoch is None:
        return
    current = conn.execute(sa.select(t.writers.c.epoch).where(
        t.writers.c.stream_id == state.stream_id, t.writers.c.writer_id == writer_id).with_for_update()).scalar()
    if current is not None and current != epoch:
        raise WriterFenced(f"writer {writer_id} on {state.name} was fenced: a newer writer opened with the same id "
                           f"(epoch {current}, this one {epoch}); its time mark is not recorded")


@dataclass(frozen=True)
class WriterStatus:
    """One writer's last mark and whether it holds watermarks back now (`active`)."""

    mark: WriterMark
    source: str
    active: bool
    participating: bool  # noted a time above the last watermark's lower time (never, once closed)

    def to_dict(self) -> dict[str, Any]:
        return {**self.mark.to_dict(), "source": self.source, "active": self.active,
                "participating": self.participating}


class WatermarkStore:
    def __init__(self, controller: StreamController) -> None:
        self.controller = controller
        self.db = controller.db
        self.clock = controller.clock

    # ---- marks -----------------------------------------------------------------------------------
    def note(self, stream: str, writer_id: str, time_ms: int,
             position: StreamCut | str | Mapping[int, int] | None = None, source: str = "note",
             epoch: int | None = None) -> WriterMark:
        """Record that `writer_id` has reached `time_ms` at `position` (default: the offsets after its
        last committed event, as the store has them). A Writer passes its `epoch`: a writer fenced by a
        newer one with the same id may not move that one's mark (WriterFenced)."""
        check_writer_id(writer_id)
        check_time(time_ms)
        if source not in MARK_SOURCES:
            raise InvalidInput(f"invalid mark source {source!r}: one of {', '.join(MARK_SOURCES)}")
        # a given position is checked before the write transaction: the event-boundary check reads chunks
        given = None if position is None else self._given_position(self.controller.state(stream), position)
        now = self.clock.now_ms()
        try:
            with self.db.write() as conn:
                state = self.controller.repository.load(conn, stream)
                _check_epoch(conn, state, writer_id, epoch)
                if given is None:
                    stored = conn.execute(sa.select(t.writers.c.positions).where(
                        t.writers.c.stream_id == state.stream_id, t.writers.c.writer_id == writer_id)).scalar()
                    positions = _load_positions(stored)
                else:
                    positions = given
                # by default the previous mark's offsets are kept where the committed positions do not reach:
                # a writer id whose transactions committed with timestamps has its landings only in its mark
                # (plain transaction commits do not touch `writers`), and a position never moves backwards
                return record_mark(conn, state, writer_id, time_ms, positions, source, now,
                                   merge_previous=given is None)
        except sa.exc.IntegrityError as exc:  # a concurrent first note of the same writer id
            raise ConflictError(f"writer {writer_id}: a concurrent note of the same writer won, try again") from exc

    def _given_position(self, state: StreamState, position: StreamCut | str | Mapping[int, int]) -> dict[int, int]:
        """A caller's position: segments of this stream with offsets within their tails (a writer's
        position need not be a complete cut)."""
        if isinstance(position, str):
            position = StreamCut.parse(position)
        if isinstance(position, StreamCut):
            if position.stream != state.name:
                raise InvalidStreamCut(f"position is for stream {position.stream!r}, not {state.name!r}")
            check_incarnation(position, state.name, state.info.uid)
            positions = dict(position.positions)
        elif isinstance(position, Mapping):
            positions = {}
            for seg, offset in position.items():
                # bools are ints, but True would be stored as segment "True" and break every later read
                if any(not isinstance(v, int) or isinstance(v, bool) for v in (seg, offset)):
                    raise InvalidStreamCut(f"invalid position entry {seg!r}: {offset!r}: expected segment id -> offset")
                positions[seg] = offset
        else:
            raise InvalidStreamCut(f"invalid position {position!r}: expected a StreamCut, its string form or a mapping")
        for seg, offset in positions.items():
            if seg not in state.segments:
                raise InvalidStreamCut(f"position names segment {segment_name(seg)}, which {state.name} does not have")
            if not 0 <= offset <= state.segments[seg].tail:
                raise InvalidStreamCut(f"position offset {offset} in segment {segment_name(seg)} of {state.name} is "
                                       f"outside [0, {state.segments[seg].tail}]")
            # watermark cuts are shown and used as stream cuts (a reader may start at one): event boundaries only
            if not self.controller.is_event_boundary(state, seg, offset):
                raise InvalidStreamCut(f"position offset {offset} in segment {segment_name(seg)} of {state.name} is "
                                       "not at an event boundary")
        return positions

    def close_writer(self, stream: str, writer_id: str, epoch: int | None = None) -> bool:
        """Take a closed writer out of the time aggregation: its mark becomes `closed`, standing at the
        offsets after its last committed event (its final flush included), so the next watermark's cut
        still covers the events it wrote since its last note; the mark is deleted when that watermark
        is appended. False if the writer had no mark (it never noted: nothing to do)."""
        with self.db.write() as conn:
            state = self.controller.repository.load(conn, stream)
            _check_epoch(conn, state, writer_id, epoch)
            row = conn.execute(sa.select(writer_marks).where(
                writer_marks.c.stream_id == state.stream_id, writer_marks.c.writer_id == writer_id)
                .with_for_update()).first()
            if row is None:
                return False
            committed = _load_positions(conn.execute(sa.select(t.writers.c.positions).where(
                t.writers.c.stream_id == state.stream_id, t.writers.c.writer_id == writer_id)).scalar())
            positions = furthest(_load_positions(row.positions), committed)
            conn.execute(sa.update(writer_marks).where(
                writer_marks.c.stream_id == state.stream_id, writer_marks.c.writer_id == writer_id).values(
                positions=prune_position(positions, state.segments), closed=True,
                noted_ms=self.clock.now_ms()))
        return True

    def marks(self, stream: str) -> list[WriterMark]:
        with self.db.read() as conn:
            return [_mark(r) for r in self._mark_rows(conn, self._stream_id(conn, stream))]

    def _stream_id(self, conn: Connection, stream: str) -> int:
        """The stream's id alone (NotFound if it does not exist): most reads here need no segments."""
        return int(self.controller.repository.row(conn, stream).id)

    @staticmethod
    def _mark_rows(conn: Connection, stream_id: int) -> Sequence[Any]:
        return conn.execute(sa.select(writer_marks).where(writer_marks.c.stream_id == stream_id)
                            .order_by(writer_marks.c.writer_id)).all()

    def writers(self, stream: str) -> list[WriterStatus]:
        """Every writer with a mark: its last mark, and whether it is active against the last
        watermark now (docs/watermarks.md)."""
        now = self.clock.now_ms()
        with self.db.read() as conn:
            stream_id = self._stream_id(conn, stream)
            rows = self._mark_rows(conn, stream_id)
            previous = self._latest(conn, stream_id)
            state = self.controller.repository.load(conn, stream)  # after the marks: see compute()
        marks = [_mark(r) for r in rows]
        active = {m.writer_id for m in active_writers(marks, previous, now, state.info.config
                                                      .timestamp_aggregation_timeout_ms, state.segments)}
        return [WriterStatus(m, r.source, m.writer_id in active,
                             not m.closed and (previous is None or m.time_ms > previous.lower_time_ms))
                for m, r in zip(marks, rows, strict=True)]

    # ---- watermarks --------------------------------------------------------------------------------
    @staticmethod
    def _latest(conn: Connection, stream_id: int) -> Watermark | None:
        row = conn.execute(sa.select(wm_table).where(wm_table.c.stream_id == stream_id)
                           .order_by(wm_table.c.revision.desc()).limit(1)).first()
        return None if row is None else _watermark(row)

    def latest(self, stream: str) -> Watermark | None:
        with self.db.read() as conn:
            return self._latest(conn, self._stream_id(conn, stream))

    def list(self, stream: str, after_revision: int | None = None, limit: int | None = None) -> list[Watermark]:
        """The stream's watermarks oldest first (those after `after_revision`, at most `limit`)."""
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise InvalidInput(f"invalid limit {limit!r}: must be an integer >= 1")
        with self.db.read() as conn:
            query = sa.select(wm_table).where(wm_table.c.stream_id == self._stream_id(conn, stream))
            if after_revision is not None:
                query = query.where(wm_table.c.revision > after_revision)
            rows = conn.execute(query.order_by(wm_table.c.revision).limit(limit)).all()
        return [_watermark(r) for r in rows]

    def get(self, stream: str, revision: int) -> Watermark | None:
        with self.db.read() as conn:
            row = conn.execute(sa.select(wm_table).where(wm_table.c.stream_id == self._stream_id(conn, stream),
                                                         wm_table.c.revision == revision)).first()
        return None if row is None else _watermark(row)

    def revision_bounds(self, stream: str) -> tuple[int, int] | None:
        """The oldest and newest stored revisions (older ones may have been pruned), or None."""
        with self.db.read() as conn:
            low, high = conn.execute(sa.select(sa.func.min(wm_table.c.revision), sa.func.max(wm_table.c.revision))
                                     .where(wm_table.c.stream_id == self._stream_id(conn, stream))).one()
        return None if low is None else (low, high)

    def prune(self, stream: str, fence: LeaseFence | None = None) -> int:
        """Delete the watermarks no reader can need: those before the newest one whose cut is at or
        before the stream's head (a reader is never before the head, so it has passed that one, and
        that one alone gives its lower bound). Returns how many were deleted. With a `fence` (the
        service's sweep lease) nothing is deleted once another process has taken it over (LeaseLost)."""
        with self.db.write() as conn:
            check_fence(conn, fence)
            state = self.controller.repository.load(conn, stream)
            rows = conn.execute(sa.select(wm_table.c.revision, wm_table.c.cut)
                                .where(wm_table.c.stream_id == state.stream_id)
                                .order_by(wm_table.c.revision)).all()
            keep_from = None
            for row in rows:  # cuts never go backwards: the ones at or before the head form a prefix
                if compare(state.head, _load_positions(row.cut), state.segments) <= 0:
                    break
                keep_from = row.revision
            if keep_from is None:
                return 0
            return conn.execute(sa.delete(wm_table).where(wm_table.c.stream_id == state.stream_id,
                                                          wm_table.c.revision < keep_from)).rowcount

    def prune_all(self, fence: LeaseFence | None = None) -> int:
        """prune() every stream with watermarks (the service's hourly sweep)."""
        with self.db.read() as conn:
            names = [f"{r.scope}/{r.name}" for r in conn.execute(
                sa.select(t.streams.c.scope, t.streams.c.name).where(
                    t.streams.c.id.in_(sa.select(wm_table.c.stream_id).distinct())))]
        return sum(self.prune(name, fence) for name in names)

    def tail(self, stream: str, limit: int) -> builtins.list[Watermark]:
        """The newest `limit` watermarks, oldest first."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidInput(f"invalid limit {limit!r}: must be an integer >= 1")
        with self.db.read() as conn:
            rows = conn.execute(sa.select(wm_table).where(wm_table.c.stream_id == self._stream_id(conn, stream))
                                .order_by(wm_table.c.revision.desc()).limit(limit)).all()
        return [_watermark(r) for r in reversed(rows)]

    def compute(self, stream: str, owner: str | None = None, fence: LeaseFence | None = None) -> Watermark | None:
        """Compute the stream's next watermark and append it; None when there is none to emit or another
        controller appended first (the next computation starts from that one). With a `fence` (the
        service's lease on the stream) the append, which also deletes covered closed writers' marks, is
        refused with LeaseLost once another process has taken the lease over."""
        now = self.clock.now_ms()
        with self.db.read() as conn:
            stream_id = self._stream_id(conn, stream)
            marks = [_mark(r) for r in self._mark_rows(conn, stream_id)]
            previous = self._latest(conn, stream_id)
            # PostgreSQL reads at READ COMMITTED: each statement sees what was committed before it ran,
            # so a stream state read before the marks may miss offsets (or segments) a mark stands at —
            # a writer's commit and note, or a transaction's commit, landing in between made the marks
            # look "beyond the tail" (InvalidStreamCut). Tails and segments only grow and a mark is
            # committed with or after its data, so the state is read once, last, and covers them.
            state = self.controller.repository.load(conn, stream)
        watermark = next_watermark(marks, previous, state.segments, now,
                                   state.info.config.timestamp_aggregation_timeout_ms)
        if watermark is None:
            return None
        covered = [m for m in marks if m.closed]  # the cut covers them: their rows can go with the append
        return watermark if self.append(state, watermark, now, owner, covered, fence) else None

    def append(self, state: StreamState, watermark: Watermark, now_ms: int, owner: str | None = None,
               covered_closed: Sequence[WriterMark] = (), fence: LeaseFence | None = None) -> bool:
        """Append `watermark` if the stored last revision is still `watermark.revision - 1`, deleting the
        closed writers' marks its cut covers (only if unchanged since they were read)."""
        expected = watermark.revision - 1
        try:
            with self.db.write() as conn:
                check_fence(conn, fence)
                stored = conn.execute(sa.select(sa.func.max(wm_table.c.revision))
                                      .where(wm_table.c.stream_id == state.stream_id)).scalar()
                if (-1 if stored is None else stored) != expected:
                    return False
                conn.execute(sa.insert(wm_table).values(
                    stream_id=state.stream_id, revision=watermark.revision, lower_time_ms=watermark.lower_time_ms,
                    upper_time_ms=watermark.upper_time_ms, cut=dict(watermark.cut), created_ms=now_ms,
                    owner=owner))
                for mark in covered_closed:
                    conn.execute(sa.delete(writer_marks).where(
                        writer_marks.c.stream_id == state.stream_id, writer_marks.c.writer_id == mark.writer_id,
                        writer_marks.c.closed.is_(True), writer_marks.c.noted_ms == mark.noted_ms))
        except sa.exc.IntegrityError:
            return False  # another controller appended this revision between our check and our insert
        return True

    def streams_due(self) -> builtins.list[str]:
        """Streams whose watermark may advance: a mark younger than the stream's aggregation timeout, or
        one recorded after the stream's last watermark (its writer may have stopped since)."""
        now = self.clock.now_ms()
        with self.db.read() as conn:
            noted = conn.execute(sa.select(writer_marks.c.stream_id, sa.func.max(writer_marks.c.noted_ms))
                                 .group_by(writer_marks.c.stream_id)).all()
            if not noted:
                return []
            created = dict(conn.execute(sa.select(wm_table.c.stream_id, sa.func.max(wm_table.c.created_ms))
                                        .group_by(wm_table.c.stream_id)).all())
            streams = {r.id: r for r in conn.execute(sa.select(t.streams.c.id, t.streams.c.scope, t.streams.c.name,
                                                              t.streams.c.config))}
        due = []
        for stream_id, last_noted in noted:
            row = streams.get(stream_id)
            if row is None:
                continue
            timeout = json.loads(row.config).get("timestamp_aggregation_timeout_ms", 0)
            last_emitted = created.get(stream_id)
            if now - last_noted < timeout or last_emitted is None or last_noted > last_emitted:
                due.append(f"{row.scope}/{row.name}")
        return sorted(due)


__all__ = ["WatermarkStore", "WriterStatus", "check_time", "prune_position", "record_mark"]
