"""search heartbeats: when a running search last said it is alive, and how often it promised to

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL for jobs created before this revision: the collector leaves those to search.max_runtime
    with op.batch_alter_table("archive_search_jobs") as batch:
        batch.add_column(sa.Column("heartbeat_ms", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("heartbeat_interval_ms", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("archive_search_jobs") as batch:
        batch.drop_column("heartbeat_interval_ms")
        batch.drop_column("heartbeat_ms")
