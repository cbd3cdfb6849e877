"""Leases in the metadata store: who works on a resource, until when.

`decide_lease` is the pure rule; `LeaseStore` loads the row under a lock (BEGIN IMMEDIATE on
SQLite, SELECT ... FOR UPDATE on PostgreSQL), asks the rule, and writes its answer in the same
transaction, so two processes asking at once never both win. Time comes from the client clock.
"""

from __future__ import annotations

import enum
import os
import socket
import uuid
from dataclasses import dataclass, replace

import sqlalchemy as sa

from ..clock import Clock
from ..errors import InvalidInput
from .database import Database
from .schema_leases import leases as leases_table


@dataclass(frozen=True)
class Lease:
    resource: str
    owner: str | None  # None: released
    expires_ms: int
    version: int  # fencing token: grows with every new holder
    acquired_ms: int
    work_done_ms: int | None = None

    def held_at(self, now_ms: int) -> bool:
        return self.owner is not None and self.expires_ms > now_ms


class LeaseAction(enum.Enum):
    ACQUIRE = "acquire"  # free, released or expired: a new holder, version + 1
    RENEW = "renew"  # already ours: same version, later expiry
    DENY = "deny"  # another owner holds it and its lease has not expired


@dataclass(frozen=True)
class LeaseDecision:
    action: LeaseAction
    lease: Lease  # the row after the decision (unchanged on DENY: it names the holder)

    @property
    def granted(self) -> bool:
        return self.action is not LeaseAction.DENY


def decide_lease(row: Lease | None, resource: str, owner: str, now_ms: int, ttl_ms: int) -> LeaseDecision:
    """The lease rule. Ours (even if it ran out: nobody took it, so nothing happened in between)
    → renew; free, released or expired → a new holder with the next version; otherwise deny."""
    if row is None:
        return LeaseDecision(LeaseAction.ACQUIRE, Lease(resource, owner, now_ms + ttl_ms, 1, now_ms))
    if row.owner == owner:
        return LeaseDecision(LeaseAction.RENEW, replace(row, expires_ms=max(row.expires_ms, now_ms + ttl_ms)))
    if row.held_at(now_ms):
        return LeaseDecision(LeaseAction.DENY, row)
    return LeaseDecision(LeaseAction.ACQUIRE, replace(row, owner=owner, expires_ms=now_ms + ttl_ms,
                                                      version=row.version + 1, acquired_ms=now_ms))


def new_owner_id() -> str:
    """host:pid:uuid — unique per process start, readable in `lease list` output."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _check(resource: str, owner: str | None = None, ttl_ms: int | None = None) -> None:
    if not isinstance(resource, str) or not resource.strip() or len(resource) > 600:
        raise InvalidInput(f"invalid lease resource {resource!r}: expected a non-empty name of at most 600 characters")
    if owner is not None and (not isinstance(owner, str) or not owner.strip() or len(owner) > 255):
        raise InvalidInput(f"invalid lease owner {owner!r}: expected a non-empty id of at most 255 characters")
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms <= 0):
        raise InvalidInput(f"invalid lease ttl {ttl_ms!r}: must be a whole number of milliseconds above zero")


def _lease(row: sa.Row) -> Lease:
    return Lease(row.resource, row.owner, row.expires_ms, row.version, row.acquired_ms, row.work_done_ms)


class LeaseStore:
    def __init__(self, db: Database, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    def acquire(self, resource: str, owner: str, ttl_ms: int) -> LeaseDecision:
        """Take or renew `resource` for `owner` for `ttl_ms` from now; DENY names the holder."""
        _check(resource, owner, ttl_ms)
        try:
            return self._acquire(resource, owner, ttl_ms)
        except sa.exc.IntegrityError:
            # another process inserted the first row of this resource at the same moment and won;
            # its transaction has committed, so asking again sees (and is denied by) its lease
            return self._acquire(resource, owner, ttl_ms)

    def _acquire(self, resource: str, owner: str, ttl_ms: int) -> LeaseDecision:
        with self.db.write() as conn:
            now = self.clock.now_ms()
            found = conn.execute(sa.select(leases_table).where(
                leases_table.c.resource == resource).with_for_update()).first()
            row = None if found is None else _lease(found)
            decision = decide_lease(row, resource, owner, now, ttl_ms)
            new = decision.lease
            if row is None:
                conn.execute(sa.insert(leases_table).values(
                    resource=resource, owner=new.owner, expires_ms=new.expires_ms, version=new.version,
                    acquired_ms=new.acquired_ms, work_done_ms=None))
            elif decision.granted:
                conn.execute(sa.update(leases_table).where(leases_table.c.resource == resource).values(
                    owner=new.owner, expires_ms=new.expires_ms, version=new.version, acquired_ms=new.acquired_ms))
            return decision

    def release(self, resource: str, owner: str) -> bool:
        """Give the lease up at once (False if `owner` did not hold it). The row stays, so the next
        holder's version is still larger."""
        _check(resource, owner)
        with self.db.write() as conn:
            done = conn.execute(sa.update(leases_table).where(
                leases_table.c.resource == resource, leases_table.c.owner == owner
            ).values(owner=None, expires_ms=0))
            return done.rowcount > 0

    def release_all(self, owner: str) -> list[str]:
        """Release every lease `owner` holds (shutdown); returns the resources."""
        _check("all", owner)
        with self.db.write() as conn:
            held = sorted(conn.execute(sa.select(leases_table.c.resource).where(
                leases_table.c.owner == owner).with_for_update()).scalars())
            conn.execute(sa.update(leases_table).where(leases_table.c.owner == owner).values(owner=None, expires_ms=0))
        return held

    def record_work_done(self, resource: str, owner: str, version: int, done_ms: int) -> bool:
        """Note when work on `resource` ended — only if `owner` still holds it at `version` (fenced:
        a holder whose lease was taken over records nothing)."""
        _check(resource, owner)
        with self.db.write() as conn:
            done = conn.execute(sa.update(leases_table).where(
                leases_table.c.resource == resource, leases_table.c.owner == owner,
                leases_table.c.version == version).values(work_done_ms=done_ms))
            return done.rowcount > 0

    def purge(self, prefix: str, expired_before_ms: int) -> int:
        """Delete the rows under `prefix` released or expired before `expired_before_ms`. Only for
        resources whose names are never reused (a process's membership, named by its unique owner
        id): deleting their rows loses no fencing token. Returns how many were deleted."""
        _check(prefix)
        with self.db.write() as conn:
            done = conn.execute(sa.delete(leases_table).where(
                leases_table.c.resource.startswith(prefix, autoescape=True),
                leases_table.c.expires_ms < expired_before_ms))
            return done.rowcount

    def get(self, resource: str) -> Lease | None:
        _check(resource)
        with self.db.read() as conn:
            row = conn.execute(sa.select(leases_table).where(leases_table.c.resource == resource)).first()
        return None if row is None else _lease(row)

    def list(self, prefix: str | None = None) -> list[Lease]:
        """Every lease row (held or not), by resource; only those starting with `prefix` if given."""
        query = sa.select(leases_table).order_by(leases_table.c.resource)
        if prefix is not None:
            query = query.where(leases_table.c.resource.startswith(prefix, autoescape=True))
        with self.db.read() as conn:
            return [_lease(r) for r in conn.execute(query)]
