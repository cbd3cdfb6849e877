"""Metadata tables of transactional writers (migration 0002).

A transaction row lives from begin to commit or abort; its staged chunks are files under the
stream's storage directory that no reader sees until the commit turns them into chunk rows. The
commit timestamp, writer id and landing positions stay on the row for watermarking.
"""

from __future__ import annotations

import sqlalchemy as sa

from .positions import PositionsJSON
from .schema import metadata

transactions = sa.Table(
    "transactions",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),  # uuid hex
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), nullable=False),
    sa.Column("writer_id", sa.String(255), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),  # OPEN | COMMITTED | ABORTED
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("lease_ms", sa.BigInteger, nullable=False),  # how far a ping moves the expiry
    sa.Column("lease_expiry_ms", sa.BigInteger, nullable=False),
    sa.Column("commit_timestamp", sa.BigInteger, nullable=True),  # the writer's event time, if given
    sa.Column("committed_ms", sa.BigInteger, nullable=True),
    sa.Column("ended_ms", sa.BigInteger, nullable=True),  # committed or aborted at
    sa.Column("end_reason", sa.String(32), nullable=True),  # committed | aborted | lease expired
    sa.Column("positions", PositionsJSON, nullable=True),  # JSON {segment id: end offset} of the commit
    sa.Column("events", sa.BigInteger, nullable=False),  # events staged (and, once committed, appended)
)
sa.Index("ix_transactions_stream_state", transactions.c.stream_id, transactions.c.state)

transaction_chunks = sa.Table(
    "transaction_chunks",
    metadata,
    sa.Column("txn_id", sa.String(32), sa.ForeignKey("transactions.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),  # staging order
    sa.Column("segment_id", sa.BigInteger, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("length", sa.BigInteger, nullable=False),
    sa.Column("event_count", sa.Integer, nullable=False),
)
