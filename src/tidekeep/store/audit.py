"""The audit trail: one row per deletion or other decision worth answering for later.

Every family writes its rows through `AuditLog.append` with an `AuditEntry`, inside the same
transaction as the change it records, so a row exists exactly when its change committed. The rows
are chained (store/audit_chain.py) as the transaction's last step: under the chain head's row lock
each gets the next id and its hash, and the head moves, so concurrent writers on PostgreSQL form
one chain in commit order (SQLite's writers are one at a time already). Taken last, that lock is
never held while the transaction waits for another. An entry
names only what its family knows: `old_head`/`new_head` are the positions of a stream truncation
and stay empty (NULL) for every other row; `bytes_freed` is 0 for a row that freed nothing (a hold,
a rule change, a killed search). `tidekeep audit list` reads the rows back (docs/retention.md).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from ..clock import Clock
from ..errors import AuditTrailBroken
from .audit_chain import GENESIS, ChainHead, link_hash
from .database import Database, before_commit, check_storable_text
from .schema import audit as audit_table
from .schema import audit_chain


def default_actor() -> str:
    """Who acts: this host and process, unless the caller names another actor."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class AuditEntry:
    """One audit row. `details` is stored as JSON; `actor` defaults to the log's actor and
    `time_ms` to the log's clock now (a caller that decided at an earlier `now` passes that)."""

    action: str
    target: str
    reason: str
    bytes_freed: int = 0
    details: dict[str, Any] | None = None
    old_head: str | None = None  # a stream truncation's positions (JSON), before
    new_head: str | None = None  # and after
    actor: str | None = None
    time_ms: int | None = None


@dataclass(frozen=True)
class AuditLog:
    """Appends and lists audit rows, stamped with this clock and this actor."""

    clock: Clock
    actor: str

    def append(self, conn: Connection, entry: AuditEntry) -> None:
        # refused here, the change it records rolls back with it: no family's audited change
        # fails in the database (PostgreSQL) on a reason it could have refused
        check_storable_text(entry.reason, "reason")
        check_storable_text(entry.target, "target")
        row = {"time_ms": self.clock.now_ms() if entry.time_ms is None else entry.time_ms,
               "action": entry.action, "target": entry.target, "old_head": entry.old_head,
               "new_head": entry.new_head, "bytes_freed": entry.bytes_freed, "reason": entry.reason,
               "actor": entry.actor or self.actor,
               "details": None if entry.details is None else json.dumps(entry.details)}
        pending = before_commit(conn, "audit", PendingRows)
        if pending is None:  # a transaction not opened by Database.write: chained at once
            chain_rows(conn, [row])
        else:
            pending.rows.append(row)


class PendingRows:
    """A write transaction's audit rows, chained just before it commits."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def __call__(self, conn: Connection) -> None:
        if self.rows:
            chain_rows(conn, self.rows)


def _locked_head(conn: Connection) -> ChainHead:
    """The chain's head, locked until the transaction ends (PostgreSQL: the row lock; SQLite: the
    write transaction already excludes every other writer). A trail with no head and no rows gets
    one at GENESIS. A trail whose head was deleted, or that holds rows after it (written around
    tidekeep), is refused rather than chained on past what happened to it."""
    newest = sa.select(sa.func.max(audit_table.c.id)).scalar_subquery()  # the primary key's last entry
    query = (sa.select(audit_chain.c.head_id, audit_chain.c.head_hash, newest.label("newest"))
             .where(audit_chain.c.singleton == 1).with_for_update(of=audit_chain))
    found = conn.execute(query).one_or_none()
    if found is None:
        if conn.execute(sa.select(audit_table.c.id).limit(1)).first() is not None:
            raise AuditTrailBroken("the audit chain's head is missing, so nothing audited can be done; "
                                   "run 'tidekeep audit verify' (docs/audit.md)")
        insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
        conn.execute(insert(audit_chain).values(singleton=1, head_id=0, head_hash=GENESIS)
                     .on_conflict_do_nothing(index_elements=["singleton"]))
        found = conn.execute(query).one()
    if found.newest is not None and found.newest > found.head_id:
        raise AuditTrailBroken(f"audit rows after the chain's head (row {found.head_id}) were written around "
                               "tidekeep, so nothing audited can be done; run 'tidekeep audit verify' (docs/audit.md)")
    return ChainHead(int(found.head_id), str(found.head_hash))


def chain_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert `rows` (audit columns but id and hashes) at the end of the chain and move its head."""
    head = _locked_head(conn)
    last_id, last_hash = head.id, head.hash
    chained = []
    for row in rows:
        last_id += 1
        content = {**row, "id": last_id}
        row_hash = link_hash(last_hash, content)
        chained.append({**content, "prev_hash": last_hash, "row_hash": row_hash})
        last_hash = row_hash
    conn.execute(sa.insert(audit_table), chained)
    conn.execute(sa.update(audit_chain).where(audit_chain.c.singleton == 1)
                 .values(head_id=last_id, head_hash=last_hash))


def audit_rows(db: Database, target: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The newest `limit` rows (of `target`, when given), newest first, as plain mappings."""
    with db.read() as conn:
        query = sa.select(audit_table).order_by(audit_table.c.id.desc()).limit(limit)
        if target is not None:
            query = query.where(audit_table.c.target == target)
        return [dict(r._mapping) for r in conn.execute(query)]


@dataclass(frozen=True)
class AuditFilter:
    """Which rows `audit_page` returns: each given field must match (times inclusive, in ms);
    `target_prefix` keeps rows whose target starts with it (a scope's streams: "scope/")."""

    target: str | None = None
    action: str | None = None
    actor: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    target_prefix: str | None = None


def audit_page(db: Database, where: AuditFilter, limit: int = 100,
               before_id: int | None = None) -> list[dict[str, Any]]:
    """At most `limit` rows matching `where`, newest first (by id), older than `before_id` when
    given: one keyset query, so a page costs the same however deep it lies."""
    for what, text in (("target", where.target), ("action", where.action), ("actor", where.actor),
                       ("target prefix", where.target_prefix)):
        check_storable_text(text, what)
    table = audit_table
    conditions = [column == value for column, value in ((table.c.target, where.target),
                                                        (table.c.action, where.action),
                                                        (table.c.actor, where.actor)) if value is not None]
    if where.since_ms is not None:
        conditions.append(table.c.time_ms >= where.since_ms)
    if where.until_ms is not None:
        conditions.append(table.c.time_ms <= where.until_ms)
    if where.target_prefix is not None:
        conditions.append(table.c.target.startswith(where.target_prefix, autoescape=True))
    if before_id is not None:
        conditions.append(table.c.id < before_id)
    query = sa.select(table).where(*conditions).order_by(table.c.id.desc()).limit(limit)
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


__all__ = ["AuditEntry", "AuditFilter", "AuditLog", "audit_page", "audit_rows", "default_actor"]
