"""archives: datasets, archives, search jobs and the archive collector's journal

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "archive_datasets",
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_archive_datasets"),
    )
    op.create_table(
        "archives",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("dataset", sa.String(255), nullable=False),
        sa.Column("begin_ts", sa.BigInteger, nullable=True),
        sa.Column("end_ts", sa.BigInteger, nullable=True),
        sa.Column("message_count", sa.BigInteger, nullable=False),
        sa.Column("raw_bytes", sa.BigInteger, nullable=False),
        sa.Column("stored_bytes", sa.BigInteger, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("ingest_id", sa.String(32), nullable=False),
        sa.Column("catalog_record_id", sa.BigInteger, nullable=True),
        sa.ForeignKeyConstraint(["dataset"], ["archive_datasets.name"], name="fk_archives_dataset"),
        sa.PrimaryKeyConstraint("id", name="pk_archives"),
    )
    op.create_index("ix_archives_dataset_end_ts", "archives", ["dataset", "end_ts"])
    op.create_table(
        "archive_search_jobs",
        sa.Column("id", sa.Integer, autoincrement=True, nullable=False),
        sa.Column("dataset", sa.String(255), nullable=False),
        sa.Column("query", sa.Text, nullable=False),
        sa.Column("regex", sa.Boolean, nullable=False),
        sa.Column("ignore_case", sa.Boolean, nullable=False),
        sa.Column("begin_ts", sa.BigInteger, nullable=True),
        sa.Column("end_ts", sa.BigInteger, nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_ms", sa.BigInteger, nullable=False),
        sa.Column("completed_ms", sa.BigInteger, nullable=True),
        sa.Column("lower_bound_ms", sa.BigInteger, nullable=True),
        sa.Column("archives_searched", sa.Integer, nullable=False),
        sa.Column("results_count", sa.BigInteger, nullable=False),
        sa.Column("results_path", sa.Text, nullable=True),
        sa.Column("results_expired_ms", sa.BigInteger, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("actor", sa.String(255), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_archive_search_jobs"),
    )
    op.create_index("ix_archive_search_jobs_state_created_ms", "archive_search_jobs", ["state", "created_ms"])
    op.create_table(
        "archive_gc_journal",
        sa.Column("archive_id", sa.String(32), nullable=False),
        sa.Column("dataset", sa.String(255), nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("stored_bytes", sa.BigInteger, nullable=False),
        sa.Column("end_ts", sa.BigInteger, nullable=True),
        sa.Column("journaled_ms", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("archive_id", name="pk_archive_gc_journal"),
    )


def downgrade() -> None:
    op.drop_table("archive_gc_journal")
    op.drop_index("ix_archive_search_jobs_state_created_ms", table_name="archive_search_jobs")
    op.drop_table("archive_search_jobs")
    op.drop_index("ix_archives_dataset_end_ts", table_name="archives")
    op.drop_table("archives")
    op.drop_table("archive_datasets")
