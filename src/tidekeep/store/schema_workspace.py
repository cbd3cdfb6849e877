"""Metadata table: the workspace's own id (migration 0013).

At most one row (`singleton` = 1): the id `tidekeep init` stamped into this store and into the
storage root (store/workspace.py). A store without the row is from before the stamps.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

workspace = sa.Table(
    "workspace",
    metadata,
    sa.Column("singleton", sa.Integer, sa.CheckConstraint("singleton = 1", name="ck_workspace_singleton"),
              primary_key=True, autoincrement=False),
    sa.Column("workspace_id", sa.String(32), nullable=False),
    sa.Column("created_ms", sa.BigInteger, nullable=False),
)
