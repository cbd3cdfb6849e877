"""subscribers of consumption-based retention and their acknowledged stream cuts

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import json
import uuid

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stream_subscribers",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("reader_group", sa.String(255), nullable=False),
        sa.Column("group_uid", sa.String(32), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("positions", sa.Text, nullable=True),
        sa.Column("start_positions", sa.Text, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=True),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], ondelete="CASCADE",
                                name="fk_stream_subscribers_stream_id"),
        sa.PrimaryKeyConstraint("stream_id", "reader_group", name="pk_stream_subscribers"),
    )
    op.create_index("ix_stream_subscribers_reader_group", "stream_subscribers", ["reader_group"])
    _register_existing_groups()


def _register_existing_groups() -> None:
    """Reader groups created before this revision stored a retention type without acting on it:
    a subscribing one becomes a subscriber of its streams now, holding them at its start cut."""
    conn = op.get_bind()
    groups = sa.table("reader_groups", sa.column("name"), sa.column("config"), sa.column("generation"))
    streams = sa.table("streams", sa.column("id"), sa.column("scope"), sa.column("name"))
    subscribers = sa.table("stream_subscribers", sa.column("stream_id"), sa.column("reader_group"),
                           sa.column("group_uid"), sa.column("generation"), sa.column("positions"),
                           sa.column("start_positions"), sa.column("updated_ms"))
    for group in conn.execute(sa.select(groups.c.name, groups.c.config, groups.c.generation)).all():
        config = json.loads(group.config)
        if config.get("retention_type", "NONE") == "NONE":
            continue
        uid = uuid.uuid4().hex
        for name, bounds in sorted(config["streams"].items()):
            scope, _, stream = name.partition("/")
            stream_id = conn.execute(sa.select(streams.c.id).where(streams.c.scope == scope,
                                                                   streams.c.name == stream)).scalar()
            if stream_id is None:
                continue  # the stream was deleted; the group cannot read it either
            conn.execute(sa.insert(subscribers).values(
                stream_id=stream_id, reader_group=group.name, group_uid=uid, generation=group.generation,
                positions=None, start_positions=json.dumps(bounds["start"]), updated_ms=None))


def downgrade() -> None:
    op.drop_index("ix_stream_subscribers_reader_group", table_name="stream_subscribers")
    op.drop_table("stream_subscribers")
