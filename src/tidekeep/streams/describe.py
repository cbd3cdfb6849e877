"""A stream's description as plain data, for the API, the CLI and --json."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .model import segment_name
from .repository import ChunkStats, StreamState


def chunks_document(stats: Mapping[int, ChunkStats], target_size: int) -> dict[str, Any]:
    """The stream's chunks: totals, and per segment; sizes are logical bytes (header + payload)."""
    every = list(stats.values())
    return {
        "count": sum(s.chunks for s in every),
        "compacted": sum(s.compacted for s in every),
        "below_target": sum(s.below_target for s in every),
        "target_size": target_size,
        "smallest": min((s.smallest for s in every), default=None),
        "largest": max((s.largest for s in every), default=None),
        "segments": {segment_name(seg): {"count": s.chunks, "compacted": s.compacted, "below_target": s.below_target,
                                         "smallest": s.smallest, "largest": s.largest, "bytes": s.total}
                     for seg, s in sorted(stats.items())},
    }


def describe(state: StreamState, chunks: dict[str, Any] | None = None) -> dict[str, Any]:
    """`chunks`: chunks_document(...) when the caller read it (the chunk table is not in the state)."""
    segments = state.segments
    topology = state.topology()
    tail = state.tail()
    config = state.info.config
    return {
        "name": state.name,
        "state": state.info.state.value,
        "created_ms": state.info.created_ms,
        "current_epoch": state.info.current_epoch,
        "config_version": state.info.config_version,
        "retention": None if config.retention is None else config.retention.describe(),
        "timestamp_aggregation_timeout_ms": config.timestamp_aggregation_timeout_ms,
        "epochs": [
            {"epoch": epoch, "created_ms": created,
             "segments": [segment_name(s.id) for s in segments.values() if s.active_in(epoch)]}
            for epoch, created in state.epochs
        ],
        "segments": [
            {"segment": segment_name(s.id), "epoch": s.epoch, "key_range": [s.key_low, s.key_high],
             "head": s.head, "tail": s.tail, "length": s.tail, "readable_bytes": s.tail - s.head,
             "sealed": s.sealed}
            for s in segments.values()
        ],
        "head": str(state.cut(state.head)),
        "tail": str(state.cut(tail)),
        "size_bytes": topology.size_between(state.head, tail),
        "written_bytes": topology.size_at(tail),
        "truncated_bytes": state.truncated_bytes,
        **({} if chunks is None else {"chunks": chunks}),
    }
