"""streams core: scopes, streams, epochs, segments, chunks, writers, audit

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "scopes",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_scopes"),
    )
    op.create_table(
        "streams",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("scope", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("uid", sa.String(32), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("current_epoch", sa.Integer, nullable=False),
        sa.Column("next_segment_number", sa.Integer, nullable=False),
        sa.Column("head", sa.Text, nullable=False),
        sa.Column("truncated_bytes", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["scope"], ["scopes.name"], name="fk_streams_scope"),
        sa.PrimaryKeyConstraint("id", name="pk_streams"),
        sa.UniqueConstraint("scope", "name", name="uq_streams_scope_name"),
        sa.UniqueConstraint("uid", name="uq_streams_uid"),
    )
    op.create_table(
        "epochs",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("epoch", sa.Integer, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], name="fk_epochs_stream_id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("stream_id", "epoch", name="pk_epochs"),
    )
    op.create_table(
        "segments",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("segment_id", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("key_low", sa.Double, nullable=False),
        sa.Column("key_high", sa.Double, nullable=False),
        sa.Column("head", sa.BigInteger, nullable=False),
        sa.Column("tail", sa.BigInteger, nullable=False),
        sa.Column("sealed", sa.Boolean, nullable=False),
        sa.Column("sealed_epoch", sa.Integer, nullable=True),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("sealed_ms", sa.BigInteger, nullable=True),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], name="fk_segments_stream_id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("stream_id", "segment_id", name="pk_segments"),
    )
    op.create_table(
        "chunks",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("segment_id", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("base_offset", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("length", sa.BigInteger, nullable=False),
        sa.Column("event_count", sa.Integer, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("writer_id", sa.String(255), nullable=False),
        sa.Column("sequence", sa.BigInteger, nullable=False),
        sa.Column("committed_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["stream_id", "segment_id"],
            ["segments.stream_id", "segments.segment_id"],
            name="fk_chunks_segment",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("stream_id", "segment_id", "base_offset", name="pk_chunks"),
    )
    op.create_table(
        "writers",
        sa.Column("stream_id", sa.Integer, nullable=False),
        sa.Column("writer_id", sa.String(255), nullable=False),
        sa.Column("last_sequence", sa.BigInteger, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(["stream_id"], ["streams.id"], name="fk_writers_stream_id", ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("stream_id", "writer_id", name="pk_writers"),
    )
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("time_ms", sa.BigInteger, nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("target", sa.String(600), nullable=False),
        sa.Column("old_head", sa.Text, nullable=True),
        sa.Column("new_head", sa.Text, nullable=True),
        sa.Column("bytes_freed", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("details", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_audit"),
    )
    op.create_index("ix_audit_target_time", "audit", ["target", "time_ms"])


def downgrade() -> None:
    op.drop_index("ix_audit_target_time", table_name="audit")
    for table in ("audit", "writers", "chunks", "segments", "epochs", "streams", "scopes"):
        op.drop_table(table)
