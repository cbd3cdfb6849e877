"""legal holds on streams (and later catalog records and archives)

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "holds",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("target", sa.String(600), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_holds"),
    )
    op.create_index("ix_holds_kind_target", "holds", ["kind", "target"])


def downgrade() -> None:
    op.drop_index("ix_holds_kind_target", table_name="holds")
    op.drop_table("holds")
