"""audit hash chain: audit.prev_hash and row_hash, the chain's head

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from tidekeep.store.audit_chain import CONTENT_COLUMNS, GENESIS, link_hash

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

BATCH = 5_000


def upgrade() -> None:
    # store/audit_chain.py; docs/audit.md "The hash chain". Plain ADD COLUMNs: SQLite adds them
    # without copying the table, however long the trail
    op.add_column("audit", sa.Column("prev_hash", sa.String(64), nullable=True))
    op.add_column("audit", sa.Column("row_hash", sa.String(64), nullable=True))
    chain = op.create_table(
        "audit_chain",
        sa.Column("singleton", sa.Integer, sa.CheckConstraint("singleton = 1", name="ck_audit_chain_singleton"),
                  nullable=False, autoincrement=False),
        sa.Column("head_id", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("singleton", name="pk_audit_chain"),
    )
    # the rows written before the chain are chained now, in id order: the chain vouches for them from
    # here on, not for what happened to them before this upgrade
    conn = op.get_bind()
    audit = sa.table("audit", *(sa.column(name) for name in (*CONTENT_COLUMNS, "prev_hash", "row_hash")))
    last_id, last_hash = 0, GENESIS
    while True:
        rows = conn.execute(sa.select(*(audit.c[name] for name in CONTENT_COLUMNS))
                            .where(audit.c.id > last_id).order_by(audit.c.id).limit(BATCH)).mappings().all()
        if not rows:
            break
        updates = []
        for row in rows:
            row_hash = link_hash(last_hash, dict(row))
            updates.append({"row_id": row["id"], "prev": last_hash, "hash": row_hash})
            last_id, last_hash = int(row["id"]), row_hash
        conn.execute(sa.update(audit).where(audit.c.id == sa.bindparam("row_id"))
                     .values(prev_hash=sa.bindparam("prev"), row_hash=sa.bindparam("hash")), updates)
    conn.execute(sa.insert(chain).values(singleton=1, head_id=last_id, head_hash=last_hash))


def downgrade() -> None:
    op.drop_table("audit_chain")
    with op.batch_alter_table("audit") as batch:  # SQLite drops columns by copying the table
        batch.drop_column("row_hash")
        batch.drop_column("prev_hash")
