"""catalog record lists: (status, id) and (feed, id) indexes for records listed in id order

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # `records list` (CLI, API, dashboard) pages WHERE status/feed = ? AND id > cursor ORDER BY id: with
    # these an index walk of one page; without, SQLite sorts every record of the status, or scans
    # the table for a feed that has few records (docs/dashboard.md, "Catalog")
    op.create_index("ix_catalog_records_status_id", "catalog_records", ["status", "id"])
    op.create_index("ix_catalog_records_feed_id", "catalog_records", ["feed", "id"])


def downgrade() -> None:
    op.drop_index("ix_catalog_records_feed_id", table_name="catalog_records")
    op.drop_index("ix_catalog_records_status_id", table_name="catalog_records")
