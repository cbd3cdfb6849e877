"""api: tokens of the HTTP API, and a version on each stream's config

Revision ID: 0014
Revises: 0013
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False, unique=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("scope", sa.String(255), nullable=True),
        sa.Column("secret_hash", sa.String(255), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("created_by", sa.String(255), nullable=False),
        sa.Column("revoked_ms", sa.BigInteger, nullable=True),
    )
    # existing streams start at version 1, as new ones do. A plain ALTER, never a batch (table copy):
    # on SQLite, dropping the old `streams` would cascade to every table that references it
    op.add_column("streams", sa.Column("config_version", sa.BigInteger, nullable=False, server_default="1"))


def downgrade() -> None:
    op.drop_column("streams", "config_version")  # SQLite >= 3.35 drops a column in place
    op.drop_table("api_tokens")
