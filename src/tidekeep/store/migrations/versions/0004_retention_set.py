"""retention sets (recorded tail cuts with time and absolute size)

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "retention_set",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("recording_time_ms", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("recording_size", sa.BigInteger, nullable=False),
        sa.Column("positions", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("stream_id", "recording_time_ms", name="pk_retention_set"),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], name="fk_retention_set_stream_id",
                                ondelete="CASCADE"),
    )


def downgrade() -> None:
    op.drop_table("retention_set")
