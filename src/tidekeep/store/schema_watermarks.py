"""Metadata tables of watermarks (migration 0010).

`writer_marks`: one row per (stream, writer) — the writer's last mark: the time it noted, its
position ({segment id: offset after its last committed event} JSON) and when the mark was recorded
(`noted_ms`, the recording client's clock; the aggregation timeout counts from it). Closing a writer
marks its row `closed` (with the position after its final flush): it never holds watermarks back
again, but its position bounds the next watermark's cut, and the row is deleted when that watermark
is appended. A note by a new writer with that id replaces the row.

`watermarks`: the stream's watermarks, appended with consecutive revisions from 0. The primary key
(stream_id, revision) is the conditional write: two controllers that computed the same next revision
cannot both append it. Rows go with their stream (ON DELETE CASCADE).

`writers.positions` (schema.py) is where a writer's committed positions are kept, updated in the same
transaction as every batch it commits, so a note reads the exact offsets after its last event.
"""

from __future__ import annotations

import sqlalchemy as sa

from .positions import PositionsJSON
from .schema import metadata

writer_marks = sa.Table(
    "writer_marks",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("writer_id", sa.String(255), primary_key=True),
    sa.Column("time_ms", sa.BigInteger, nullable=False),  # the writer's time (application-defined, ms)
    sa.Column("positions", PositionsJSON, nullable=False),  # JSON {segment id: offset}
    sa.Column("noted_ms", sa.BigInteger, nullable=False),  # when it was recorded
    sa.Column("source", sa.String(16), nullable=False),  # note | auto | txn
    # the writer was closed: its time no longer counts, its position bounds the cut until a watermark covers it
    sa.Column("closed", sa.Boolean, nullable=False, server_default=sa.false()),
)
sa.Index("ix_writer_marks_noted", writer_marks.c.noted_ms)

watermarks = sa.Table(
    "watermarks",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("revision", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("lower_time_ms", sa.BigInteger, nullable=False),
    sa.Column("upper_time_ms", sa.BigInteger, nullable=False),
    sa.Column("cut", PositionsJSON, nullable=False),  # JSON {segment id: offset}: a complete, valid cut
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("owner", sa.String(255), nullable=True),  # the process that appended it
)
