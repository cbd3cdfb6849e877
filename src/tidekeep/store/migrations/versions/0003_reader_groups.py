"""reader groups (config, generation, shared state, readers, checkpoints)

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa  # noqa: F401 - used once the tables are defined
from alembic import op  # noqa: F401

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
