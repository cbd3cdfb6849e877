"""Compaction: adjacent small chunks of a segment merged into one larger file (docs/streams.md
"Compaction"). Pravega merges small appends into large storage chunks and Kafka rolls log segments
by size; without this every flush stays a file forever.

Per group that streams/compaction_plan.py chooses, in this order:

1. read the group's files and write the merged file (each event keeps its offset, routing key,
   payload, writer and commit time), durably, beside them; nothing refers to it yet;
2. in one metadata transaction, under the segment's row lock (the lock commits and truncations
   take), check that the group's chunk rows are exactly as planned — a truncation or a concurrent
   compaction changes them, and then this group is skipped and its file discarded — and swap them
   for one row naming the merged file. The replaced files are recorded in `chunk_origins` with the
   time they were replaced;
3. nothing is deleted here: the sweep removes a replaced file once `sweep.grace` has passed since
   its replacement, so a reader that planned its read before the swap still finds it.

A crash after 1 leaves an unreferenced file the sweep removes after the grace period; a crash after
2 leaves replaced files the sweep removes the same way. Offsets never change, so stream cuts,
reader positions, watermarks and transaction landings mean what they meant.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from ..errors import ChunkMissing, LeaseLost, NotFound
from ..faults import fault_point, pause_point
from ..names import compacted_chunk_file_name
from ..store import schema as t
from ..store.chunks import ChunkRef, read_chunk_file
from ..store.deletion import warn_files_left
from ..store.fencing import LeaseFence, check_fence
from .compaction_plan import ChunkSpan, plan_compaction
from .controller import StreamController
from .model import segment_name
from .repository import StreamState, chunk_ref

log = logging.getLogger("tidekeep.compaction")

Progress = Callable[[int, int], None]  # (groups done, groups planned) of one stream


@dataclass(frozen=True)
class CompactionResult:
    stream: str
    chunks_before: int
    chunks_after: int
    groups_merged: int
    groups_skipped: int  # changed by a truncation or another compaction meanwhile: left for the next run
    bytes_merged: int  # logical bytes of the chunks merged

    def summary(self) -> str:
        if not self.groups_merged and not self.groups_skipped:
            return f"{self.stream}: nothing to compact ({self.chunks_before} chunks)"
        skipped = f", {self.groups_skipped} group(s) skipped (changed meanwhile)" if self.groups_skipped else ""
        return (f"{self.stream}: {self.chunks_before} chunks -> {self.chunks_after} "
                f"({self.groups_merged} merged file(s), {self.bytes_merged} bytes){skipped}")

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "chunks_before": self.chunks_before, "chunks_after": self.chunks_after,
                "groups_merged": self.groups_merged, "groups_skipped": self.groups_skipped,
                "bytes_merged": self.bytes_merged}


@dataclass
class _Tally:
    before: int = 0
    merged: int = 0
    skipped: int = 0
    removed: int = 0  # chunks fewer after the merges that landed
    merged_bytes: int = 0
    groups: list[tuple[int, list[ChunkRef]]] = field(default_factory=list)


class Compactor:
    """Compacts the streams of one controller's workspace."""

    def __init__(self, controller: StreamController) -> None:
        self.controller = controller

    def compact(self, name: str, target_size: int, fence: LeaseFence | None = None,
                progress: Progress | None = None) -> CompactionResult:
        """Merge the stream's adjacent chunks below `target_size` (logical bytes) into chunks of at
        most that size. With a `fence` (the service's lease) each swap is refused once another
        process has taken the lease over (LeaseLost)."""
        state = self.controller.state(name)
        tally = _Tally()
        for segment in sorted(state.segments):
            refs = self._chunks(state, segment)
            tally.before += len(refs)
            spans = [ChunkSpan(r.base_offset, r.length, r.path) for r in refs]
            by_path = {r.path: r for r in refs}
            tally.groups.extend((segment, [by_path[s.path] for s in g]) for g in plan_compaction(spans, target_size))
        for done, (segment, group) in enumerate(tally.groups):
            if self._merge(state, segment, group, fence):
                tally.merged += 1
                tally.removed += len(group) - 1
                tally.merged_bytes += sum(r.length for r in group)
            else:
                tally.skipped += 1
            if progress is not None:
                progress(done + 1, len(tally.groups))
        result = CompactionResult(name, tally.before, tally.before - tally.removed, tally.merged, tally.skipped,
                                  tally.merged_bytes)
        if tally.merged:
            # not audited: no data goes, and the audit trail is about what goes and why; the files it
            # replaced are deleted by the sweep, which is audited
            log.info("compacted %s", result.summary())
        return result

    def compact_all(self, target_size: int, fence: LeaseFence | None = None) -> list[CompactionResult]:
        """Every stream, one after another; a stream deleted meanwhile is passed over."""
        results = []
        for info in self.controller.list_streams():
            try:
                results.append(self.compact(info.name, target_size, fence))
            except NotFound:
                continue
        return results

    # ---- internals ---------------------------------------------------------------------------------
    def _chunks(self, state: StreamState, segment: int) -> list[ChunkRef]:
        with self.controller.db.read() as conn:
            rows = conn.execute(sa.select(t.chunks).where(
                t.chunks.c.stream_id == state.stream_id, t.chunks.c.segment_id == segment,
            ).order_by(t.chunks.c.base_offset)).all()
        return [chunk_ref(r) for r in rows]

    def _merge(self, state: StreamState, segment: int, group: Sequence[ChunkRef], fence: LeaseFence | None) -> bool:
        storage = self.controller.storage
        path = f"{state.storage_dir()}/{segment_name(segment)}/{compacted_chunk_file_name(group[0].base_offset)}"
        try:
            table = merged_table([(ref, read_chunk_file(storage, ref)) for ref in group])
        except ChunkMissing as exc:
            if any(r.path == exc.path for r in self._chunks(state, segment)):
                raise  # committed and gone: a damaged store, which reads report too; never skipped quietly
            # a truncation or another compaction took it meanwhile: this group is stale
            log.info("compaction of %s segment %s skipped a group: %s", state.name, segment_name(segment), exc)
            return False
        storage.write_compacted_chunk(path, table)
        fault_point("compaction.after_write")
        pause_point("compaction.before_swap")  # tests: a truncation between the plan and the swap
        try:
            swapped = self._swap(state, segment, group, path, fence)
        except LeaseLost:  # refused before anything changed: the file is nobody's
            self._discard(path)
            raise
        # any other error may hide a swap that landed: the file stays, and if it is unreferenced the
        # sweep removes it after the grace period
        if not swapped:
            self._discard(path)
            return False
        fault_point("compaction.after_commit")
        return True

    def _swap(self, state: StreamState, segment: int, group: Sequence[ChunkRef], path: str,
              fence: LeaseFence | None) -> bool:
        c = t.chunks.c
        first, last = group[0], group[-1]
        now = self.controller.clock.now_ms()
        with self.controller.db.write() as conn:
            check_fence(conn, fence)
            row = conn.execute(sa.select(t.streams.c.uid).where(t.streams.c.id == state.stream_id)).first()
            if row is None or row.uid != state.info.uid:
                return False
            if not self.controller.repository.lock_segments(conn, state.stream_id, [segment]):
                return False
            in_range = (c.stream_id == state.stream_id) & (c.segment_id == segment) & (
                c.base_offset >= first.base_offset) & (c.base_offset <= last.base_offset)
            current = [(r.base_offset, r.path) for r in conn.execute(
                sa.select(c.base_offset, c.path).where(in_range).order_by(c.base_offset))]
            if current != [(r.base_offset, r.path) for r in group]:
                return False
            conn.execute(sa.delete(t.chunks).where(in_range))
            conn.execute(sa.insert(t.chunks).values(
                stream_id=state.stream_id, segment_id=segment, base_offset=first.base_offset,
                length=sum(r.length for r in group), event_count=sum(r.event_count for r in group), path=path,
                writer_id="", sequence=0, committed_ms=max(r.committed_ms for r in group),
                parts=sum(r.parts for r in group)))
            conn.execute(sa.insert(t.chunk_origins), [
                dict(path=r.path, stream_id=state.stream_id, segment_id=segment, base_offset=r.base_offset,
                     length=r.length, retired_ms=now) for r in group])
        return True

    def _discard(self, path: str) -> None:
        left = self.controller.storage.discard([path]).failed
        warn_files_left(log, "compaction: an unused merged file", left, in_result=False)


def merged_table(parts: Sequence[tuple[ChunkRef, Any]]) -> Any:
    """One compacted chunk's table from adjacent chunks and their tables, in offset order: offsets
    relative to the first chunk, each event with its own commit's writer and time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..store.chunks import compacted_chunk_schema

    base = parts[0][0].base_offset
    tables = []
    for ref, table in parts:
        n = table.num_rows
        if ref.compacted:
            writers, committed = table["writer_id"], table["committed_ms"]
        else:
            writers = pa.repeat(pa.scalar(ref.writer_id, pa.string()), n)
            committed = pa.repeat(pa.scalar(ref.committed_ms, pa.int64()), n)
        tables.append(pa.Table.from_arrays([
            pc.add(table["rel_offset"], ref.base_offset - base), table["routing_key"], table["payload"], writers,
            committed], schema=compacted_chunk_schema()))
    return pa.concat_tables(tables).combine_chunks()


__all__ = ["CompactionResult", "Compactor", "merged_table"]
