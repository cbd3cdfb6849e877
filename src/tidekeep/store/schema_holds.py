"""Metadata tables: legal holds (migration 0006).

One row per active hold. A hold names its target by `kind` and `target` so the same table serves
every kind of thing that can be held: "stream" targets are full stream names ("scope/stream");
later issues add "record" (catalog records) and "archive". Removing a hold deletes its row; the
audit table keeps the history (actions "hold_add" and "hold_remove").
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

holds = sa.Table(
    "holds",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("target", sa.String(600), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("created_by", sa.String(255), nullable=False),
)
# truncation asks "is this target held?" inside its write transaction: one index lookup
sa.Index("ix_holds_kind_target", holds.c.kind, holds.c.target)
