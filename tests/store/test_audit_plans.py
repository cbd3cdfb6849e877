"""The audit queries of the dashboard's busiest pages walk the index that bounds them, whatever
other index the table has: a stream's truncation history the (target, time) index, the overview's
last 24 hours the time index. An (action, id) index tried for rare-action filters made SQLite walk
every truncate row for both (241 ms and 133 ms at a million rows, docs/benchmarks.md); these plans
would have caught it."""

from __future__ import annotations

import pytest
from tests.helpers.query_plans import plan_of

import tidekeep as tk
from tidekeep.store.overview_queries import deletions_by_hour


@pytest.fixture
def audited(sqlite_client: tk.Client) -> tk.Client:
    """A workspace with a truncated stream. (Creating an (action, id) index here makes both tests
    fail: that is how they were checked.)"""
    sqlite_client.create_stream("s/a")
    with sqlite_client.stream("s/a").writer("w") as writer:
        writer.write_many([b"x" * 10] * 5)
    sqlite_client.stream("s/a").truncate(sqlite_client.stream("s/a").tail_cut(), reason="test")
    return sqlite_client


def test_a_streams_truncation_history_walks_the_target_index(audited: tk.Client) -> None:
    plan = plan_of(audited.workspace.db.engine, "audit", lambda: audited.stream("s/a").retention.history(11))
    assert any("ix_audit_target_time" in step for step in plan), plan


def test_the_last_day_of_deletions_walks_the_time_index(audited: tk.Client) -> None:
    now = audited.clock.now_ms()
    plan = plan_of(audited.workspace.db.engine, "audit",
                   lambda: deletions_by_hour(audited.workspace.db, now - 86_400_000, now))
    assert any("ix_audit_time" in step for step in plan), plan
