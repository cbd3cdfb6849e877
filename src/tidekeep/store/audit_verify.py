"""Reading the audit chain back: its head (`tidekeep audit anchor`) and a verification of the whole
trail (`tidekeep audit verify`), page by page in id order, while writers go on appending.

A verification reads pages of rows by id, then the head. Rows take their ids under the head's lock
and commit with it (store/audit.py), so every row up to the head's id is there to read once the
head is: a head beyond the last row read means rows were appended meanwhile (read on) or rows were
cut off the end (none left to read: the verdict says so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .audit_chain import GENESIS, ChainHead, ChainVerdict, ChainVerifier, check_anchor
from .database import Database
from .schema import audit as audit_table
from .schema import audit_chain

PAGE_ROWS = 5_000

Progress = Callable[[int], None]  # rows checked so far


def read_head(conn: Connection) -> ChainHead | None:
    found = conn.execute(sa.select(audit_chain.c.head_id, audit_chain.c.head_hash)
                         .where(audit_chain.c.singleton == 1)).one_or_none()
    return None if found is None else ChainHead(int(found.head_id), str(found.head_hash))


def chain_head(db: Database) -> dict[str, Any]:
    """The head to keep elsewhere: the last row's id, hash and time (id 0 and GENESIS before the
    first row)."""
    with db.read() as conn:
        head = read_head(conn) or ChainHead(0, GENESIS)
        time_ms = conn.execute(sa.select(audit_table.c.time_ms).where(audit_table.c.id == head.id)).scalar()
    return {"id": head.id, "hash": head.hash, "time_ms": time_ms}


def verify_trail(db: Database, anchor: str | None = None, progress: Progress | None = None) -> ChainVerdict:
    """Re-compute the chain from the stored rows and compare it with their hashes and the head."""
    verifier = ChainVerifier(None if anchor is None else check_anchor(anchor))
    after = 0
    while True:
        with db.read() as conn:
            rows = conn.execute(sa.select(audit_table).where(audit_table.c.id > after)
                                .order_by(audit_table.c.id).limit(PAGE_ROWS)).mappings().all()
            for row in rows:
                if not verifier.feed(dict(row)):
                    return verifier.verdict(read_head(conn))
            if rows:
                after = int(rows[-1]["id"])
            if progress is not None:
                progress(verifier.rows)
            if len(rows) == PAGE_ROWS:
                continue
            head = read_head(conn)
            appended = conn.execute(sa.select(audit_table.c.id).where(audit_table.c.id > after).limit(1)).first()
        if head is None or head.id <= after or appended is None:
            return verifier.verdict(head)


__all__ = ["PAGE_ROWS", "chain_head", "read_head", "verify_trail"]
