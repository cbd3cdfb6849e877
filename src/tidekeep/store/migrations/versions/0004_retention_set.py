"""retention sets (recorded tail cuts with time and absolute size)

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa  # noqa: F401 - used once the tables are defined
from alembic import op  # noqa: F401

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
