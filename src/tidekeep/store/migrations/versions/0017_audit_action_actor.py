"""audit action and actor indexes: a page of one action's or one actor's rows without a scan

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # audit lists (CLI, API, dashboard) filtered by action or actor page newest first by id
    # (store/audit.py audit_page): with (action, id) and (actor, id) a page is a walk of its own rows,
    # however rare the action (docs/benchmarks.md, "Dashboard at scale")
    op.create_index("ix_audit_action_id", "audit", ["action", "id"])
    op.create_index("ix_audit_actor_id", "audit", ["actor", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_actor_id", table_name="audit")
    op.drop_index("ix_audit_action_id", table_name="audit")
