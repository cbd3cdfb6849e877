"""subscribers of consumption-based retention and their acknowledged stream cuts

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

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


def downgrade() -> None:
    op.drop_index("ix_stream_subscribers_reader_group", table_name="stream_subscribers")
    op.drop_table("stream_subscribers")
