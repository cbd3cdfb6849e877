"""Audit pages filtered by action or actor walk an index in id order (migration 0017), so a page
of a rare action costs the same as a common one however long the trail: no scan, no sort."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command
from tests.helpers.query_plans import plan_of

import tidekeep as tk
from tidekeep.store.audit import AuditFilter, audit_page
from tidekeep.store.database import alembic_config

INDEXES = {"ix_audit_action_id", "ix_audit_actor_id"}


def plan_of_page(client: tk.Client, where: AuditFilter, before_id: int | None) -> list[str]:
    """SQLite's query plan of the statement audit_page runs."""
    return plan_of(client.workspace.db.engine, "audit", lambda: audit_page(client.workspace.db, where, 51, before_id))


@pytest.mark.parametrize("where, before_id, index", [
    (AuditFilter(action="hold_add"), None, "ix_audit_action_id"),
    (AuditFilter(action="truncate"), 1000, "ix_audit_action_id"),
    (AuditFilter(actor="ops"), None, "ix_audit_actor_id"),
    (AuditFilter(actor="ops"), 1000, "ix_audit_actor_id"),
])
def test_a_page_of_one_action_or_actor_walks_an_index(sqlite_client: tk.Client, where: AuditFilter,
                                                      before_id: int | None, index: str) -> None:
    plan = plan_of_page(sqlite_client, where, before_id)
    assert any(index in step for step in plan), plan
    assert not any("TEMP B-TREE" in step or step.startswith("SCAN") for step in plan), plan


def test_the_indexes_go_with_a_downgrade_and_come_back(sqlite_client: tk.Client) -> None:
    sqlite_client.create_stream("a/b")
    sqlite_client.holds.add("stream", "a/b", "case 1")
    engine = sqlite_client.workspace.db.engine
    with engine.connect() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0016")
        conn.commit()
        assert not INDEXES & {i["name"] for i in sa.inspect(conn).get_indexes("audit")}
    sqlite_client.workspace.db.upgrade()
    with engine.connect() as conn:
        assert {i["name"] for i in sa.inspect(conn).get_indexes("audit")} >= INDEXES
    assert [r["target"] for r in audit_page(sqlite_client.workspace.db, AuditFilter(action="hold_add"))] == ["a/b"]
