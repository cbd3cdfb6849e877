"""Fencing: work decided under a lease is applied only while the lease is still held.

A `LeaseFence` names a lease (resource), its holder (owner) and the version the holder was given
(the fencing token, see store/schema_leases.py). A transaction that applies work decided under the
lease calls `check_fence` first: it reads the lease row and raises `LeaseLost` unless the row still
names the same owner at the same version, and it keeps the row locked until the transaction ends —
FOR SHARE on PostgreSQL (a takeover's SELECT ... FOR UPDATE waits for the commit, while the many
slice transactions of one catalog run do not wait for each other), and on SQLite the write
transaction's BEGIN IMMEDIATE already excludes every other writer. So a takeover either commits
before the check (which then refuses) or after the transaction (whose work is then done and seen by
the new holder): never in between.

Expiry is deliberately not part of the check: a lease that ran out but that nobody took is still
its holder's at the same version (the lease rule renews it, store/leases.py `decide_lease`), and
while the row is locked nobody can take it. Time is also not the same everywhere the check runs (a
Spark task has no access to the client clock); the version alone is the token.

`fence=None` (a manual run from the CLI or the API) skips the check: such runs hold no lease.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import LeaseLost
from .database import Database
from .schema_leases import leases


@dataclass(frozen=True)
class LeaseFence:
    resource: str
    owner: str
    version: int


def check_fence(conn: Connection, fence: LeaseFence | None) -> None:
    """Inside a write transaction: refuse (LeaseLost) unless `fence` still names the lease's holder
    and version; the lease row stays locked until the transaction ends. No-op for None."""
    if fence is None:
        return
    row = conn.execute(sa.select(leases.c.owner, leases.c.version).where(leases.c.resource == fence.resource)
                       .with_for_update(read=True)).first()
    if row is not None and row.owner == fence.owner and row.version == fence.version:
        return
    if row is None:
        now = "no longer exists"
    elif row.owner is None:
        now = f"has been released (version {row.version})"
    else:
        now = f"is now held by {row.owner} at version {row.version}"
    raise LeaseLost(f"{fence.resource} was held by {fence.owner} at version {fence.version} and "
                    f"{now}; the work decided under version {fence.version} is not applied",
                    fence.resource, fence.version, None if row is None else row.owner,
                    None if row is None else row.version)


def confirm_fence(db: Database, fence: LeaseFence | None) -> None:
    """`check_fence` in a transaction of its own: before work outside the metadata store (deleting
    files), so a holder that lost its lease stops. The lock ends with this transaction: a takeover
    right after it still finds the files being deleted (callers delete in batches, confirming
    before each). No-op for None."""
    if fence is None:
        return
    with db.write() as conn:
        check_fence(conn, fence)


__all__ = ["LeaseFence", "check_fence", "confirm_fence"]
