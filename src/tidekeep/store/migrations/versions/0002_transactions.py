"""transactional writers (staged chunks, leases, commit timestamps)

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "transactions",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("writer_id", sa.String(255), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("lease_ms", sa.BigInteger, nullable=False),
        sa.Column("lease_expiry_ms", sa.BigInteger, nullable=False),
        sa.Column("commit_timestamp", sa.BigInteger, nullable=True),
        sa.Column("committed_ms", sa.BigInteger, nullable=True),
        sa.Column("ended_ms", sa.BigInteger, nullable=True),
        sa.Column("end_reason", sa.String(32), nullable=True),
        sa.Column("positions", sa.Text, nullable=True),
        sa.Column("events", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], name="fk_transactions_stream_id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name="pk_transactions"),
    )
    op.create_index("ix_transactions_stream_state", "transactions", ["stream_id", "state"])
    op.create_table(
        "transaction_chunks",
        sa.Column("txn_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("segment_id", sa.BigInteger, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("length", sa.BigInteger, nullable=False),
        sa.Column("event_count", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(["txn_id"], ["transactions.id"], name="fk_transaction_chunks_txn_id",
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("txn_id", "seq", name="pk_transaction_chunks"),
    )


def downgrade() -> None:
    op.drop_table("transaction_chunks")
    op.drop_index("ix_transactions_stream_state", table_name="transactions")
    op.drop_table("transactions")
