"""Metadata tables: subscribers of consumption-based retention (migration 0009).

One row per (stream, subscribing reader group): a reader group whose retention type is not NONE
holds each of its streams back at its acknowledged cut. `positions` is the latest acknowledgement
({segment id: offset} JSON), NULL until the group acknowledges anything; `start_positions` is the
group's start cut in that stream, which holds the stream meanwhile. `generation` is the group's
generation when the row was last registered: a publication from an older generation is refused.
`group_uid` is new whenever a group starts subscribing (creation, or a reset from NONE), so a
handle of a deleted and re-created group with the same name is never taken for the new one.
Rows go with their stream (ON DELETE CASCADE) and are deleted with their reader group.
"""

from __future__ import annotations

import sqlalchemy as sa

from .positions import PositionsJSON
from .schema import metadata

stream_subscribers = sa.Table(
    "stream_subscribers",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("reader_group", sa.String(255), primary_key=True),
    sa.Column("group_uid", sa.String(32), nullable=False),
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("positions", PositionsJSON, nullable=True),  # JSON {segment id: offset}; NULL: nothing acknowledged yet
    sa.Column("start_positions", PositionsJSON, nullable=False),  # JSON {segment id: offset}
    sa.Column("updated_ms", sa.BigInteger, nullable=True),  # when `positions` was published (client clock)
)
# deleting or resetting a reader group finds its rows by name
sa.Index("ix_stream_subscribers_reader_group", stream_subscribers.c.reader_group)
