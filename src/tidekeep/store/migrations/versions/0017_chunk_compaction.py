"""chunk compaction: chunks.parts and the files compaction replaced

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # streams/compaction_store.py merges adjacent small chunks; docs/streams.md "Compaction"
    # a plain ADD COLUMN: SQLite adds it without copying the table, however many chunks it holds
    op.add_column("chunks", sa.Column("parts", sa.Integer, nullable=False, server_default="1"))
    op.create_table(
        "chunk_origins",
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("segment_id", sa.BigInteger, nullable=False),
        sa.Column("base_offset", sa.BigInteger, nullable=False),
        sa.Column("length", sa.BigInteger, nullable=False),
        sa.Column("retired_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("path", name="pk_chunk_origins"),
        sa.ForeignKeyConstraint(["stream_id", "segment_id"], ["segments.stream_id", "segments.segment_id"],
                                ondelete="CASCADE", name="fk_chunk_origins_segment"),
    )
    op.create_index("ix_chunk_origins_segment", "chunk_origins", ["stream_id", "segment_id", "base_offset"])
    op.create_index("ix_chunk_origins_retired_ms", "chunk_origins", ["retired_ms"])


def downgrade() -> None:
    op.drop_index("ix_chunk_origins_retired_ms", table_name="chunk_origins")
    op.drop_index("ix_chunk_origins_segment", table_name="chunk_origins")
    op.drop_table("chunk_origins")
    with op.batch_alter_table("chunks") as batch:
        batch.drop_column("parts")
