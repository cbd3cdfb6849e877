"""Metadata tables: retention sets (migration 0004).

One row per retention-set record: a tail cut recorded by a retention cycle at `recording_time_ms`,
with `recording_size` = the cut's absolute logical byte position since the stream was created
(docs/retention.md) and the cut's positions as JSON ({"segment id": offset}). The primary key
(stream, recording time) makes two processes recording the same instant collide instead of
duplicating; rows go with their stream (cascade).
"""

from __future__ import annotations

import sqlalchemy as sa

from .positions import PositionsJSON
from .schema import metadata

retention_set = sa.Table(
    "retention_set",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("recording_time_ms", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("recording_size", sa.BigInteger, nullable=False),
    sa.Column("positions", PositionsJSON, nullable=False),
)
