"""How chunk files name segments and size events: the part of the stream model the chunk format
(store/chunks.py) is written in, kept in the store so the store never imports a family.

Segment id = (epoch << 32) | number: the creation epoch sits in the high bits, the segment's number
in that epoch in the low 32. People see "epoch.number" (`segment_name`). Every event occupies an
8-byte header plus its payload, so an event's length, and offsets within a segment, count both.
The streams model (streams/model.py) offers these names as its own.
"""

from __future__ import annotations

EVENT_HEADER_BYTES = 8  # every event occupies an 8-byte header plus its payload, as in Pravega


def segment_id(epoch: int, number: int) -> int:
    return (epoch << 32) | number


def segment_epoch(seg_id: int) -> int:
    return seg_id >> 32


def segment_number(seg_id: int) -> int:
    return seg_id & 0xFFFFFFFF


def segment_name(seg_id: int) -> str:
    """Display form "epoch.number", also used in the compact stream-cut string."""
    return f"{segment_epoch(seg_id)}.{segment_number(seg_id)}"


__all__ = ["EVENT_HEADER_BYTES", "segment_epoch", "segment_id", "segment_name", "segment_number"]
