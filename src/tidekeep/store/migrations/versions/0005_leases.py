"""controller service leases (stream ownership with TTL)

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa  # noqa: F401 - used once the tables are defined
from alembic import op  # noqa: F401

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
