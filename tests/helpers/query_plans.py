"""SQLite's query plan of the statement a call runs, to test that a list walks an index."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa


def plan_of(engine: sa.Engine, table: str, call: Callable[[], object]) -> list[str]:
    """The EXPLAIN QUERY PLAN steps of the one SELECT on `table` that `call()` runs."""
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT") and table in statement:
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        call()
    finally:
        sa.event.remove(engine, "before_cursor_execute", capture)
    [(statement, parameters)] = seen
    with engine.connect() as conn:
        return [str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters)]
