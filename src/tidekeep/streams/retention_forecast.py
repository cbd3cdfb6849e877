"""What-if retention of a stream on the metadata store: one read of what a cycle decides on
(RetentionManager.inputs) and of the stream's chunk metadata, then the pure simulation
(retention_simulation.py). Reads only: nothing is recorded, truncated or pruned
(docs/retention.md#what-if-retention)."""

from __future__ import annotations

import sqlalchemy as sa

from ..errors import InvalidInput
from ..forecast import DEFAULT_DAYS, check_days
from ..store import schema as t
from .config import RetentionPolicy
from .retention_simulation import ChunkSpan, HoldOn, StreamSimulation, StreamSnapshot, simulate
from .retention_store import RetentionManager


def chunk_spans(manager: RetentionManager, stream_id: int) -> dict[int, tuple[ChunkSpan, ...]]:
    """The stream's chunks (offset, length, event count) by segment, in offset order: the metadata
    the events of a truncation are counted from, without reading any data."""
    query = (sa.select(t.chunks.c.segment_id, t.chunks.c.base_offset, t.chunks.c.length, t.chunks.c.event_count)
             .where(t.chunks.c.stream_id == stream_id)
             .order_by(t.chunks.c.segment_id, t.chunks.c.base_offset))
    found: dict[int, list[ChunkSpan]] = {}
    with manager.controller.db.read() as conn:
        for row in conn.execute(query):
            found.setdefault(int(row.segment_id), []).append(
                ChunkSpan(int(row.base_offset), int(row.length), int(row.event_count)))
    return {segment: tuple(spans) for segment, spans in found.items()}


def simulate_stream(manager: RetentionManager, stream: str, policy: RetentionPolicy | None = None,
                    now: int | None = None, days: int = DEFAULT_DAYS) -> StreamSimulation:
    """The stream's retention cycles over days 0..`days` under `policy` (default: its own), from
    `now` (default: the clock). Day 0 is what `preview(now)` says."""
    days = check_days(days)
    if policy is not None and not isinstance(policy, RetentionPolicy):
        raise InvalidInput(f"invalid retention policy {policy!r}: use RetentionPolicy.by_time/by_size")
    if now is not None and (isinstance(now, bool) or not isinstance(now, int) or now < 0):
        raise InvalidInput(f"invalid time {now!r}: expected milliseconds since the epoch")
    now_ms = manager.controller.clock.now_ms() if now is None else now
    found = manager.inputs(stream)
    state = found.state
    snapshot = StreamSnapshot(state.name, state.segments, state.head, state.tail(), tuple(found.records),
                              tuple(found.views), tuple(HoldOn(h.id, h.reason) for h in found.holds),
                              chunk_spans(manager, state.stream_id))
    chosen = state.info.config.retention if policy is None else policy
    return simulate(snapshot, chosen, now_ms, days, manager.frequency_ms, current=policy is None)


__all__ = ["chunk_spans", "simulate_stream"]
