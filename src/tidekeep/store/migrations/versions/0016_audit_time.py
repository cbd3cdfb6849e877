"""audit time index: the rows of a time window without reading the whole trail

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # the dashboard's overview counts the deletions of the last 24 hours (store/overview_queries.py)
    # and the audit lists filter by time: a range of this index, however long the trail
    op.create_index("ix_audit_time", "audit", ["time_ms"])


def downgrade() -> None:
    op.drop_index("ix_audit_time", table_name="audit")
