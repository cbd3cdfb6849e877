"""catalog: meta records, dictionaries, the rule set, trackers and job runs

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

RECORD_ID_TYPE = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "catalog_records",
        sa.Column("id", RECORD_ID_TYPE, autoincrement=True, nullable=False),
        sa.Column("feed", sa.String(255), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("create_time", sa.BigInteger, nullable=False),
        sa.Column("effective_time", sa.BigInteger, nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_time", sa.BigInteger, nullable=False),
        sa.Column("parent_id", sa.BigInteger, nullable=True),
        sa.Column("pipeline", sa.String(255), nullable=True),
        sa.Column("file_size", sa.BigInteger, nullable=True),
        sa.Column("raw_size", sa.BigInteger, nullable=True),
        sa.Column("location", sa.Text, nullable=True),
        sa.Column("attributes", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_catalog_records"),
    )
    op.create_index("ix_catalog_records_status_create_time", "catalog_records", ["status", "create_time"])
    op.create_index("ix_catalog_records_status_status_time", "catalog_records", ["status", "status_time"])
    op.create_table(
        "catalog_dictionaries",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("words", sa.Text, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_catalog_dictionaries"),
    )
    op.create_table(
        "catalog_rules",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.String(36), nullable=False),
        sa.Column("document", sa.Text, nullable=False),
        sa.Column("updated_ms", sa.BigInteger, nullable=False),
        sa.Column("updated_by", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_catalog_rules"),
    )
    op.create_table(
        "catalog_trackers",
        sa.Column("rules_version", sa.String(36), nullable=False),
        sa.Column("rule_age", sa.String(64), nullable=False),
        sa.Column("last_run_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("rules_version", "rule_age", name="pk_catalog_trackers"),
    )
    op.create_table(
        "catalog_runs",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("dry_run", sa.Boolean, nullable=False),
        sa.Column("now_ms", sa.BigInteger, nullable=False),
        sa.Column("started_ms", sa.BigInteger, nullable=False),
        sa.Column("finished_ms", sa.BigInteger, nullable=True),
        sa.Column("rules_version", sa.String(36), nullable=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.Column("report", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_catalog_runs"),
    )


def downgrade() -> None:
    op.drop_table("catalog_runs")
    op.drop_table("catalog_trackers")
    op.drop_table("catalog_rules")
    op.drop_table("catalog_dictionaries")
    op.drop_index("ix_catalog_records_status_status_time", table_name="catalog_records")
    op.drop_index("ix_catalog_records_status_create_time", table_name="catalog_records")
    op.drop_table("catalog_records")
