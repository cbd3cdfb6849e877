"""workspace: the id that ties the metadata store to its storage root

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # empty until `tidekeep init` stamps it: an upgraded workspace reads and writes as before and
    # deletes nothing until then (docs/workspace.md)
    op.create_table(
        "workspace",
        sa.Column("singleton", sa.Integer, sa.CheckConstraint("singleton = 1", name="ck_workspace_singleton"),
                  primary_key=True, autoincrement=False),
        sa.Column("workspace_id", sa.String(32), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("workspace")
