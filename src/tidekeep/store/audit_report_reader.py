"""Loading a deletion report (store/audit_report.py) from the store: the signature, the window's
deleting audit rows and every hold_add/hold_remove row, in keyset pages by id, in one read
transaction.

The deletions are bounded by the signature's row: the signature is read first, and only rows at or
below its id are read after it, so a row appended meanwhile cannot join a report its signature does
not cover (the trail gives ids in commit order, store/audit.py). The holds' rows are read whole
(holds are few): a hold removed after the window is reported with its removal.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .audit_report import DELETION_ACTIONS, SCOPED_FAMILY, DeletionReport, Signature, build_report, check_window
from .database import Database, check_storable_text
from .overview_queries import FAMILY_ACTIONS
from .schema import audit as audit_table

PAGE_ROWS = 1000  # rows a page: a large window is read in bounded statements, never one huge fetch


def window_signature(conn: Connection, since_ms: int, until_ms: int) -> Signature:
    """The `row_hash` of the newest audit row (by id) with `since <= time_ms <= until`, or when the
    window has none, of the newest row with `time_ms <= until`; (None, None) when there is none."""
    table = audit_table
    for conditions in ((table.c.time_ms >= since_ms, table.c.time_ms <= until_ms), (table.c.time_ms <= until_ms,)):
        row = conn.execute(sa.select(table.c.id, table.c.row_hash).where(*conditions)
                           .order_by(table.c.id.desc()).limit(1)).one_or_none()
        if row is not None:
            return Signature(int(row.id), row.row_hash)
    return Signature(None, None)


def _pages(conn: Connection, conditions: list[Any]) -> Iterator[dict[str, Any]]:
    """The rows matching `conditions`, oldest first, a keyset page at a time."""
    after = 0
    while True:
        page = [dict(r._mapping) for r in conn.execute(
            sa.select(audit_table).where(*conditions, audit_table.c.id > after)
            .order_by(audit_table.c.id).limit(PAGE_ROWS))]
        yield from page
        if len(page) < PAGE_ROWS:
            return
        after = page[-1]["id"]


def read_deletion_report(db: Database, since_ms: int, until_ms: int, now_ms: int,
                         scope: str | None = None) -> DeletionReport:
    """The deletion report of [since, until] (inclusive, ms), generated at `now_ms`; of `scope`'s
    streams only when given (a token limited to a scope)."""
    check_window(since_ms, until_ms)
    check_storable_text(scope, "scope")
    table = audit_table
    actions = list(FAMILY_ACTIONS[SCOPED_FAMILY]) if scope is not None else list(DELETION_ACTIONS)
    deleting: list[sa.ColumnElement[bool]] = [table.c.time_ms >= since_ms, table.c.time_ms <= until_ms,
                                              table.c.action.in_(actions)]
    # every hold's whole life, whenever it was: build_report keeps those in force during the window
    hold_changes: list[sa.ColumnElement[bool]] = [table.c.action.in_(["hold_add", "hold_remove"])]
    if scope is not None:
        prefix = table.c.target.startswith(f"{scope}/", autoescape=True)
        deleting.append(prefix)
        hold_changes.append(prefix)
    with db.read() as conn:
        signature = window_signature(conn, since_ms, until_ms)
        rows = list(_pages(conn, [*deleting, table.c.id <= (signature.row_id or 0)]))
        hold_rows = list(_pages(conn, hold_changes))
    return build_report(rows, since_ms=since_ms, until_ms=until_ms, generated_ms=now_ms, scope=scope,
                        hold_rows=hold_rows, signature=signature)


__all__ = ["PAGE_ROWS", "read_deletion_report", "window_signature"]
