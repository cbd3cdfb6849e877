"""What the catalog job's tests share: the fixed "now", the records' statuses as stored, and a
plain-Python oracle of which records a run must leave DELETED."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

import tidekeep as tk
from tidekeep.catalog.ages import cutoff_ms
from tidekeep.catalog.expressions import CompileContext, to_python
from tidekeep.catalog.rules import RetentionRule, active_rules
from tidekeep.store.schema_catalog import catalog_records

NOW = int(datetime(2024, 3, 31, tzinfo=UTC).timestamp() * 1000)


def statuses(client: tk.Client) -> dict[int, tuple[str, int]]:
    with client.workspace.db.read() as conn:
        rows = conn.execute(sa.select(catalog_records.c.id, catalog_records.c.status, catalog_records.c.status_time))
        return {r.id: (r.status, r.status_time) for r in rows}


def oracle(client: tk.Client, rules: list[RetentionRule], now_ms: int) -> set[int]:
    """Ids the job must leave DELETED: UNLOCKED, first matching active rule not forever, created
    before that rule's cutoff, not held (holds are checked by the callers that add them)."""
    ctx = CompileContext(now_ms, client.catalog.dictionaries())
    doomed = set()
    for record in client.catalog.records(limit=100_000):
        row = record.to_row() | {"id": record.id}
        deciding = next((r for r in active_rules(rules) if to_python(r.expression, ctx)(row)), None)
        if record.status == "UNLOCKED" and deciding is not None and deciding.age is not None \
                and record.create_time < cutoff_ms(now_ms, deciding.age):
            doomed.add(record.id)
    return doomed
