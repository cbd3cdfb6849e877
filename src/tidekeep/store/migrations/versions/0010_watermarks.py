"""watermarks: writer marks, the watermarks of each stream, and writers' committed positions

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for writers that committed before this revision: their next batch sets it
    op.add_column("writers", sa.Column("positions", sa.Text, nullable=True))
    op.create_table(
        "writer_marks",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("writer_id", sa.String(255), nullable=False),
        sa.Column("time_ms", sa.BigInteger, nullable=False),
        sa.Column("positions", sa.Text, nullable=False),
        sa.Column("noted_ms", sa.BigInteger, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("closed", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], ondelete="CASCADE", name="fk_writer_marks_stream_id"),
        sa.PrimaryKeyConstraint("stream_id", "writer_id", name="pk_writer_marks"),
    )
    op.create_index("ix_writer_marks_noted", "writer_marks", ["noted_ms"])
    op.create_table(
        "watermarks",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("lower_time_ms", sa.BigInteger, nullable=False),
        sa.Column("upper_time_ms", sa.BigInteger, nullable=False),
        sa.Column("cut", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], ondelete="CASCADE", name="fk_watermarks_stream_id"),
        sa.PrimaryKeyConstraint("stream_id", "revision", name="pk_watermarks"),
    )


def downgrade() -> None:
    op.drop_table("watermarks")
    op.drop_index("ix_writer_marks_noted", table_name="writer_marks")
    op.drop_table("writer_marks")
    with op.batch_alter_table("writers") as batch:
        batch.drop_column("positions")
