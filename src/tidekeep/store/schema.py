"""The metadata schema, as SQLAlchemy Core tables. Alembic migrations create it; a test checks that
the migrated database matches these definitions exactly."""

from __future__ import annotations

import sqlalchemy as sa

from .positions import PositionsJSON

metadata = sa.MetaData(
    naming_convention={
        "pk": "pk_%(table_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ix": "ix_%(table_name)s_%(column_0_name)s",
    }
)

scopes = sa.Table(
    "scopes",
    metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

streams = sa.Table(
    "streams",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("scope", sa.String(255), sa.ForeignKey("scopes.name"), nullable=False),
    sa.Column("name", sa.String(255), nullable=False),
    # uid names the storage directory, so a re-created stream never meets an old stream's files
    sa.Column("uid", sa.String(32), nullable=False, unique=True),
    sa.Column("state", sa.String(16), nullable=False),  # ACTIVE | SEALED
    sa.Column("config", sa.Text, nullable=False),  # JSON of StreamConfig
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("current_epoch", sa.Integer, nullable=False),
    sa.Column("next_segment_number", sa.Integer, nullable=False),
    sa.Column("head", PositionsJSON, nullable=False),  # JSON {segment id: offset}
    sa.Column("truncated_bytes", sa.BigInteger, nullable=False),  # logical bytes before the head
    # +1 on every config (policy) update: the ETag of an edit through the API (docs/api.md)
    sa.Column("config_version", sa.BigInteger, nullable=False, server_default="1"),
    sa.UniqueConstraint("scope", "name", name="uq_streams_scope_name"),
)

epochs = sa.Table(
    "epochs",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("epoch", sa.Integer, primary_key=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)

segments = sa.Table(
    "segments",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("segment_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("key_low", sa.Double, nullable=False),
    sa.Column("key_high", sa.Double, nullable=False),
    sa.Column("head", sa.BigInteger, nullable=False),
    sa.Column("tail", sa.BigInteger, nullable=False),
    sa.Column("sealed", sa.Boolean, nullable=False),
    sa.Column("sealed_epoch", sa.Integer, nullable=True),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("sealed_ms", sa.BigInteger, nullable=True),
)

chunks = sa.Table(
    "chunks",
    metadata,
    sa.Column("stream_id", sa.Integer, primary_key=True),
    sa.Column("segment_id", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("base_offset", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("length", sa.BigInteger, nullable=False),
    sa.Column("event_count", sa.Integer, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("writer_id", sa.String(255), nullable=False),
    sa.Column("sequence", sa.BigInteger, nullable=False),
    sa.Column("committed_ms", sa.BigInteger, nullable=False),
    # how many commits the chunk holds: 1 for a writer's or a transaction's, more once compaction
    # merged adjacent chunks (its file then carries each event's writer_id and committed_ms)
    sa.Column("parts", sa.Integer, nullable=False, server_default="1"),
    sa.ForeignKeyConstraint(
        ["stream_id", "segment_id"],
        ["segments.stream_id", "segments.segment_id"],
        ondelete="CASCADE",
        name="fk_chunks_segment",
    ),
)
sa.Index("ix_chunks_path", chunks.c.path)

# Files compaction replaced (streams/compaction_store.py): each path with the offsets it held and
# when it was replaced. A retry of a commit whose files were compacted since still finds them
# committed, and the sweep keeps a replaced file for `sweep.grace` after `retired_ms`, so a reader
# that planned its read before the swap finishes it. Rows go with the data: a truncation past
# `base_offset + length` or the stream's deletion removes them.
chunk_origins = sa.Table(
    "chunk_origins",
    metadata,
    sa.Column("path", sa.Text, primary_key=True),
    sa.Column("stream_id", sa.Integer, nullable=False),
    sa.Column("segment_id", sa.BigInteger, nullable=False),
    sa.Column("base_offset", sa.BigInteger, nullable=False),
    sa.Column("length", sa.BigInteger, nullable=False),
    sa.Column("retired_ms", sa.BigInteger, nullable=False),
    sa.ForeignKeyConstraint(
        ["stream_id", "segment_id"],
        ["segments.stream_id", "segments.segment_id"],
        ondelete="CASCADE",
        name="fk_chunk_origins_segment",
    ),
)
sa.Index("ix_chunk_origins_segment", chunk_origins.c.stream_id, chunk_origins.c.segment_id,
         chunk_origins.c.base_offset)
sa.Index("ix_chunk_origins_retired_ms", chunk_origins.c.retired_ms)

writers = sa.Table(
    "writers",
    metadata,
    sa.Column("stream_id", sa.Integer, sa.ForeignKey("streams.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("writer_id", sa.String(255), primary_key=True),
    # the highest batch sequence committed: a replayed batch at or below it is a duplicate
    sa.Column("last_sequence", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
    # JSON {segment id: offset after the writer's last committed event}: the position a note records
    sa.Column("positions", PositionsJSON, nullable=True),
    # taken anew by every writer opened with this id: only the newest epoch may commit
    sa.Column("epoch", sa.BigInteger, nullable=False, server_default="0"),
)

audit = sa.Table(
    "audit",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("time_ms", sa.BigInteger, nullable=False),
    sa.Column("action", sa.String(32), nullable=False),
    sa.Column("target", sa.String(600), nullable=False),
    sa.Column("old_head", sa.Text, nullable=True),
    sa.Column("new_head", sa.Text, nullable=True),
    sa.Column("bytes_freed", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("actor", sa.String(255), nullable=False),
    sa.Column("details", sa.Text, nullable=True),
    # the hash chain (store/audit_chain.py): the hash this row follows, and its own over it and its content
    sa.Column("prev_hash", sa.String(64), nullable=True),
    sa.Column("row_hash", sa.String(64), nullable=True),
)
sa.Index("ix_audit_target_time", audit.c.target, audit.c.time_ms)
# the rows of a time window (the overview's deletions of the last 24 hours, audit lists by time)
sa.Index("ix_audit_time", audit.c.time_ms)

# the audit chain's head: the last chained row (store/audit.py takes this row's lock to append)
audit_chain = sa.Table(
    "audit_chain",
    metadata,
    sa.Column("singleton", sa.Integer, sa.CheckConstraint("singleton = 1", name="ck_audit_chain_singleton"),
              primary_key=True, autoincrement=False),
    sa.Column("head_id", sa.BigInteger, nullable=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
)

# the tables of later features live in modules of their own, on the same MetaData
from . import (  # noqa: E402, F401
    schema_archives,
    schema_catalog,
    schema_holds,
    schema_leases,
    schema_readergroups,
    schema_retention,
    schema_subscribers,
    schema_tokens,
    schema_transactions,
    schema_watermarks,
    schema_workspace,
)
