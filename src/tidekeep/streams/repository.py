"""The stream repository: how streams persist in the metadata store, and nothing else.

Every method runs in the caller's transaction (a Connection): the controller and the other stream
stores decide what to lock and when to commit, the repository reads and writes rows and turns them
into values (StreamState, ChunkRef). Locks it takes (`lock=True`, `lock_segments`) are the row locks
of that transaction; callers that lock several segments get them in ascending id order, so two
transactions never wait for each other in opposite orders. Positions columns hold
{segment id: offset} through one column type (store/positions.py).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from ..errors import NotFound
from ..names import split_stream_name, stream_directory_name
from ..store import schema as t
from ..store.chunks import ChunkRef
from .config import StreamConfig
from .cuts import StreamCut, Topology
from .model import Segment


class StreamStatus(enum.StrEnum):
    """A stream's lifecycle: ACTIVE takes writes; SEALED takes none and may be deleted. Stored by value."""

    ACTIVE = "ACTIVE"
    SEALED = "SEALED"


@dataclass(frozen=True)
class StreamInfo:
    name: str
    uid: str
    state: StreamStatus
    config: StreamConfig
    created_ms: int
    current_epoch: int
    config_version: int = 1  # +1 per config update: what an edit names to fail on a stale read (docs/api.md)


@dataclass(frozen=True)
class StreamState:
    """A consistent snapshot of one stream."""

    info: StreamInfo
    stream_id: int
    segments: dict[int, Segment]
    head: dict[int, int]
    truncated_bytes: int
    next_segment_number: int
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, created_ms)

    @property
    def name(self) -> str:
        return self.info.name

    def active_segments(self) -> list[Segment]:
        return [s for s in self.segments.values() if s.active_in(self.info.current_epoch)]

    def tail(self) -> dict[int, int]:
        return {s.id: s.tail for s in self.active_segments()}

    def topology(self) -> Topology:
        """The segments as they are in this snapshot: compare cuts, measure what lies between them."""
        return Topology(self.segments)

    def cut(self, positions: Mapping[int, int]) -> StreamCut:
        """A cut of this stream, self-describing: with key ranges and this incarnation's uid."""
        ranges = self.topology().ranges
        return StreamCut(self.name, positions, {s: ranges[s] for s in positions}, self.info.uid)

    def shown(self, positions: Mapping[int, int]) -> str:
        """A cut in compact form without the uid, for messages (they name the stream already)."""
        return StreamCut(self.name, positions).display()

    def storage_dir(self) -> str:
        scope, stream = split_stream_name(self.name)
        return f"streams/{scope}/{stream_directory_name(stream, self.info.uid)}"


@dataclass(frozen=True)
class ChunkStats:
    """A segment's chunks at a glance (`stream describe`)."""

    chunks: int
    compacted: int  # merged by compaction
    below_target: int  # smaller than chunks.target_size
    smallest: int  # logical bytes
    largest: int
    total: int


def chunk_ref(row: Any) -> ChunkRef:
    """A committed chunk row (of the chunks table) as the value readers and storage use."""
    return ChunkRef(row.path, row.segment_id, row.base_offset, row.length, row.event_count, row.committed_ms,
                    row.writer_id, row.parts)


def stream_info(row: Any) -> StreamInfo:
    return StreamInfo(f"{row.scope}/{row.name}", row.uid, StreamStatus(row.state), StreamConfig.from_json(row.config),
                      row.created_ms, row.current_epoch, row.config_version)


class StreamRepository:
    """Rows of streams, segments, epochs and chunks in, values out (see the module docstring)."""

    # ---- scopes ------------------------------------------------------------------------------
    @staticmethod
    def scope_exists(conn: Connection, scope: str) -> bool:
        return conn.execute(sa.select(t.scopes.c.name).where(t.scopes.c.name == scope)).first() is not None

    @staticmethod
    def require_scope(conn: Connection, scope: str) -> None:
        if not StreamRepository.scope_exists(conn, scope):
            raise NotFound(f"scope {scope!r} does not exist")

    # ---- streams -----------------------------------------------------------------------------
    @staticmethod
    def row(conn: Connection, name: str, lock: bool = False) -> Row[Any]:
        """The stream's row (with `lock`, locked for this transaction); NotFound names the missing
        scope or stream."""
        scope, stream = split_stream_name(name)
        query = sa.select(t.streams).where(t.streams.c.scope == scope, t.streams.c.name == stream)
        if lock:
            query = query.with_for_update()
        found = conn.execute(query).one_or_none()
        if found is None:
            StreamRepository.require_scope(conn, scope)
            raise NotFound(f"stream {name!r} does not exist")
        return found

    @staticmethod
    def stream_id(conn: Connection, name: str) -> int:
        return int(StreamRepository.row(conn, name).id)

    @staticmethod
    def load(conn: Connection, name: str, lock: bool = False) -> StreamState:
        """A consistent snapshot of the stream: its row, segments and epochs in this transaction."""
        row = StreamRepository.row(conn, name, lock)
        seg_rows = conn.execute(
            sa.select(t.segments).where(t.segments.c.stream_id == row.id).order_by(t.segments.c.segment_id)
        ).all()
        segments = {
            r.segment_id: Segment(r.segment_id, r.key_low, r.key_high, r.head, r.tail, bool(r.sealed), r.sealed_epoch)
            for r in seg_rows
        }
        epochs = [(r.epoch, r.created_ms) for r in conn.execute(
            sa.select(t.epochs).where(t.epochs.c.stream_id == row.id).order_by(t.epochs.c.epoch))]
        return StreamState(stream_info(row), row.id, segments, dict(row.head), row.truncated_bytes,
                           row.next_segment_number, epochs)

    # ---- segments ----------------------------------------------------------------------------
    @staticmethod
    def lock_segments(conn: Connection, stream_id: int, ids: Iterable[int]) -> list[Row[Any]]:
        """Lock these segments' rows (ascending id) and return them; missing ids are left out."""
        ordered = sorted(ids)
        if not ordered:
            return []
        return list(conn.execute(
            sa.select(t.segments).where(t.segments.c.stream_id == stream_id, t.segments.c.segment_id.in_(ordered))
            .order_by(t.segments.c.segment_id).with_for_update()
        ).all())

    # ---- chunks ------------------------------------------------------------------------------
    @staticmethod
    def chunks_overlapping(conn: Connection, stream_id: int, segment: int, start: int, end: int) -> list[Row[Any]]:
        """The committed chunks of a segment that hold bytes of [start, end), by base offset."""
        return list(conn.execute(sa.select(t.chunks).where(
            t.chunks.c.stream_id == stream_id, t.chunks.c.segment_id == segment,
            t.chunks.c.base_offset < end, t.chunks.c.base_offset + t.chunks.c.length > start,
        ).order_by(t.chunks.c.base_offset)).all())

    @staticmethod
    def chunk_at_or_before(conn: Connection, stream_id: int, segment: int, offset: int) -> Row[Any] | None:
        """The committed chunk of a segment with the greatest base offset at or before `offset`."""
        return conn.execute(sa.select(t.chunks).where(
            t.chunks.c.stream_id == stream_id, t.chunks.c.segment_id == segment,
            t.chunks.c.base_offset <= offset).order_by(t.chunks.c.base_offset.desc()).limit(1)).first()

    @staticmethod
    def chunk_stats(conn: Connection, stream_id: int, target_size: int) -> dict[int, ChunkStats]:
        """Per segment: how many chunks, how many compaction merged, how many are below the target
        size (what compaction would look at), and their logical sizes."""
        c = t.chunks.c
        rows = conn.execute(sa.select(
            c.segment_id, sa.func.count(), sa.func.sum(sa.case((c.parts > 1, 1), else_=0)),
            sa.func.sum(sa.case((c.length < target_size, 1), else_=0)), sa.func.min(c.length),
            sa.func.max(c.length), sa.func.sum(c.length),
        ).where(c.stream_id == stream_id).group_by(c.segment_id)).all()
        return {r[0]: ChunkStats(int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6])) for r in rows}

    @staticmethod
    def chunks_landed(conn: Connection, stream_id: int, paths: Iterable[str]) -> bool:
        """Whether committed chunks of the stream already refer to any of these files, or did
        before compaction merged them into a larger one."""
        wanted = list(paths)
        if not wanted:
            return False
        for table in (t.chunks, t.chunk_origins):
            if conn.execute(sa.select(table.c.path).where(
                    table.c.stream_id == stream_id, table.c.path.in_(wanted)).limit(1)).first() is not None:
                return True
        return False

    @staticmethod
    def referenced_paths(conn: Connection, paths: Iterable[str]) -> set[str]:
        """Which of these chunk files committed metadata of any stream refers to, now or before
        compaction replaced them (a commit of theirs landed either way)."""
        wanted = list(paths)
        if not wanted:
            return set()
        found = set(conn.execute(sa.select(t.chunks.c.path).where(t.chunks.c.path.in_(wanted))).scalars())
        found.update(conn.execute(sa.select(t.chunk_origins.c.path).where(t.chunk_origins.c.path.in_(wanted)))
                     .scalars())
        return found


__all__ = ["ChunkStats", "StreamInfo", "StreamRepository", "StreamState", "StreamStatus", "chunk_ref", "stream_info"]
