"""Metadata tables of reader groups (migration 0003).

One row per group. The group's shared state (segments with their offsets, owners and status,
readers, pending checkpoints, the last completed checkpoint's cut per stream) is one JSON document
in `state`, changed only through optimistic concurrency: every write is
`UPDATE ... WHERE id = :id AND version = :v` and bumps `version`, so readers in separate processes
or hosts coordinate through this row alone. `generation` counts resets (consumption-based retention
will use it to tell a reset group's old positions from its new ones).
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

reader_groups = sa.Table(
    "reader_groups",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("config", sa.Text, nullable=False),  # JSON of ReaderGroupConfig (cuts as positions)
    sa.Column("generation", sa.Integer, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),  # optimistic concurrency token
    sa.Column("state", sa.Text, nullable=False),  # JSON of rg_state.GroupState
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("updated_ms", sa.BigInteger, nullable=False),
)
