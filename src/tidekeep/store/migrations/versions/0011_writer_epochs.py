"""writer epochs: one live writer per writer id; an index on chunk paths

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # opening a writer takes epoch + 1; a writer whose epoch is behind may not commit (docs/streams.md)
    op.add_column("writers", sa.Column("epoch", sa.BigInteger, nullable=False, server_default="0"))
    # whether a batch's files landed is answered by their paths (writers resolving an unknown outcome,
    # the sweep, aborts): without an index every such question scanned all chunk rows
    op.create_index("ix_chunks_path", "chunks", ["path"])


def downgrade() -> None:
    op.drop_index("ix_chunks_path", "chunks")
    with op.batch_alter_table("writers") as batch:
        batch.drop_column("epoch")
