"""Records listed in id order by status or feed (RecordStore.list: the CLI, the API and the
dashboard's records page) walk an index for one page: no sort of every record of a status, no scan
of the table for a feed with few records (migration 0015; docs/dashboard.md, "Catalog")."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from tests.helpers.query_plans import plan_of

import tidekeep as tk
from tidekeep.store.database import alembic_config


def plans_of_list(client: tk.Client, **filters: Any) -> list[str]:
    """SQLite's query plan of the statement `records(**filters)` runs."""
    return plan_of(client.workspace.db.engine, "catalog_records", lambda: client.catalog.records(limit=51, **filters))


@pytest.mark.parametrize("filters, index", [
    ({"status": "UNLOCKED"}, "ix_catalog_records_status_id"),
    ({"status": "DELETED", "after_id": 10}, "ix_catalog_records_status_id"),
    ({"feed": "RARE"}, "ix_catalog_records_feed_id"),
    ({"feed": "RARE", "after_id": 10}, "ix_catalog_records_feed_id"),
])
def test_a_filtered_page_walks_an_index_in_id_order(sqlite_client: tk.Client, filters: dict[str, Any],
                                                    index: str) -> None:
    plan = plans_of_list(sqlite_client, **filters)
    assert any(index in step for step in plan), plan
    assert not any("TEMP B-TREE" in step or step.startswith("SCAN") for step in plan), plan


def test_the_indexes_go_with_a_downgrade_and_come_back(sqlite_client: tk.Client) -> None:
    ids = sqlite_client.catalog.add([{"feed": f, "type": "Events", "create_time": 1} for f in ("A", "B", "A")])
    engine = sqlite_client.workspace.db.engine
    with engine.connect() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0014")
        conn.commit()
        names = {i["name"] for i in sa.inspect(conn).get_indexes("catalog_records")}
        assert not names & {"ix_catalog_records_status_id", "ix_catalog_records_feed_id"}
    sqlite_client.workspace.db.upgrade()
    with engine.connect() as conn:
        names = {i["name"] for i in sa.inspect(conn).get_indexes("catalog_records")}
    assert {"ix_catalog_records_status_id", "ix_catalog_records_feed_id"} <= names
    assert [r.id for r in sqlite_client.catalog.records(feed="A")] == [ids[0], ids[2]]
