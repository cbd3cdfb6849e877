"""controller service leases (stream ownership with TTL)

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leases",
        sa.Column("resource", sa.String(600), nullable=False),
        sa.Column("owner", sa.String(255), nullable=True),
        sa.Column("expires_ms", sa.BigInteger, nullable=False),
        sa.Column("version", sa.BigInteger, nullable=False),
        sa.Column("acquired_ms", sa.BigInteger, nullable=False),
        sa.Column("work_done_ms", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("resource", name="pk_leases"),
    )


def downgrade() -> None:
    op.drop_table("leases")
