"""The figures of the dashboard's overview (docs/dashboard.md, "Overview"): a few grouped queries,
each one statement whatever the number of streams, archives or records.

- the bytes each family retains: streams from their heads to their tails (as `stream_figures`),
  archives stored (not in the collector's journal, as `archive_figures`), catalog records not
  logically deleted (their `file_size`);
- the deletions of a time window by hour and family, from the audit rows (one row per deletion);
- the newest failed catalog runs;
- when the periodic work under each lease was last done (the lease rows' `work_done_ms`).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from . import schema as t
from .database import Database
from .metrics_queries import RETENTION_LEASE_PREFIX, archive_figures
from .schema import audit
from .schema_catalog import catalog_records, catalog_runs
from .schema_leases import leases

HOUR_MS = 3_600_000
# the audit actions whose rows delete data, by the family whose data they delete
FAMILY_ACTIONS: dict[str, tuple[str, ...]] = {
    "streams": ("truncate", "delete_stream"),
    "archives": ("archive_expire", "search_results_expire"),
    "catalog": ("catalog_delete", "catalog_purge"),
}
FAMILIES = tuple(FAMILY_ACTIONS)
_FAMILY_OF = {action: family for family, actions in FAMILY_ACTIONS.items() for action in actions}


@dataclass(frozen=True)
class FailedRun:
    id: int
    kind: str
    started_ms: int
    finished_ms: int | None
    actor: str


def stream_bytes(db: Database, scope: str | None = None) -> int:
    """Bytes from every stream's head to its tail (of `scope`'s streams only, when given)."""
    query = sa.select(sa.func.coalesce(sa.func.sum(t.segments.c.tail - t.segments.c.head), 0))
    if scope is not None:
        query = query.join(t.streams, t.streams.c.id == t.segments.c.stream_id).where(t.streams.c.scope == scope)
    with db.read() as conn:
        return int(conn.execute(query).scalar_one())


def retained_bytes(db: Database) -> dict[str, int]:
    """Per family, the bytes it keeps now (the module doc says what each counts)."""
    streams = stream_bytes(db)
    with db.read() as conn:
        archives = archive_figures(conn)["stored"][1]
        catalog = conn.execute(sa.select(sa.func.coalesce(sa.func.sum(catalog_records.c.file_size), 0))
                               .where(catalog_records.c.status != "DELETED")).scalar_one()
    return {"streams": streams, "archives": archives, "catalog": int(catalog)}


def deletions_by_hour(db: Database, since_ms: int, until_ms: int,
                      target_prefix: str | None = None) -> dict[tuple[int, str], int]:
    """Deleting audit rows with `since_ms <= time_ms <= until_ms` (of targets starting with
    `target_prefix`, when given), counted by (hour, family): the hour as its start in ms. One
    grouped query over the window's rows."""
    hour = (audit.c.time_ms // HOUR_MS).label("hour")  # integer division on both dialects ("/" is true division)
    conditions = [audit.c.time_ms >= since_ms, audit.c.time_ms <= until_ms, audit.c.action.in_(list(_FAMILY_OF))]
    if target_prefix is not None:
        conditions.append(audit.c.target.startswith(target_prefix, autoescape=True))
    counts: dict[tuple[int, str], int] = {}
    with db.read() as conn:
        for number, action, rows in conn.execute(
                sa.select(hour, audit.c.action, sa.func.count()).where(*conditions).group_by(hour, audit.c.action)):
            key = (int(number) * HOUR_MS, _FAMILY_OF[action])
            counts[key] = counts.get(key, 0) + int(rows)
    return counts


def failed_catalog_runs(db: Database, limit: int) -> list[FailedRun]:
    """The newest `limit` failed catalog runs (dry runs included: a failure is worth seeing either way)."""
    query = (sa.select(catalog_runs.c.id, catalog_runs.c.kind, catalog_runs.c.started_ms, catalog_runs.c.finished_ms,
                       catalog_runs.c.actor).where(catalog_runs.c.state == "FAILED")
             .order_by(catalog_runs.c.id.desc()).limit(limit))
    with db.read() as conn:
        return [FailedRun(int(r.id), r.kind, int(r.started_ms), r.finished_ms, r.actor) for r in conn.execute(query)]


def work_done(db: Database, resources: tuple[str, ...]) -> dict[str, int]:
    """When the work under each of `resources` was last done (leases never used, or whose work was
    never recorded, are absent)."""
    with db.read() as conn:
        return {r: int(done) for r, done in conn.execute(sa.select(leases.c.resource, leases.c.work_done_ms).where(
            leases.c.resource.in_(list(resources)), leases.c.work_done_ms.is_not(None)))}


@dataclass(frozen=True)
class LeaseRow:
    resource: str
    owner: str | None
    expires_ms: int
    version: int
    work_done_ms: int | None


def service_leases(db: Database) -> list[LeaseRow]:
    """Every lease row but the per-stream retention leases (one a stream: `held_by_owner` counts
    them), by resource: the service members, the sweep, the catalog, the collectors."""
    query = (sa.select(leases.c.resource, leases.c.owner, leases.c.expires_ms, leases.c.version, leases.c.work_done_ms)
             .where(sa.not_(leases.c.resource.startswith(RETENTION_LEASE_PREFIX))).order_by(leases.c.resource))
    with db.read() as conn:
        return [LeaseRow(r.resource, r.owner, int(r.expires_ms), int(r.version),
                         None if r.work_done_ms is None else int(r.work_done_ms)) for r in conn.execute(query)]


def held_by_owner(db: Database, now_ms: int) -> dict[str, int]:
    """Per owner, the retention leases it holds at `now_ms` (its share of the streams)."""
    query = (sa.select(leases.c.owner, sa.func.count()).where(
        leases.c.resource.startswith(RETENTION_LEASE_PREFIX), leases.c.owner.is_not(None), leases.c.expires_ms > now_ms)
             .group_by(leases.c.owner))
    with db.read() as conn:
        return {str(owner): int(n) for owner, n in conn.execute(query)}


def retention_cycles(db: Database) -> tuple[int, int | None]:
    """How many streams a retention cycle has ended for, and the earliest of those ends (None: none)."""
    with db.read() as conn:
        count, earliest = conn.execute(sa.select(sa.func.count(), sa.func.min(leases.c.work_done_ms)).where(
            leases.c.resource.startswith(RETENTION_LEASE_PREFIX), leases.c.work_done_ms.is_not(None))).one()
    return int(count), None if earliest is None else int(earliest)


__all__ = ["FAMILIES", "FAMILY_ACTIONS", "HOUR_MS", "FailedRun", "LeaseRow", "deletions_by_hour", "failed_catalog_runs",
           "held_by_owner", "retained_bytes", "retention_cycles", "service_leases", "stream_bytes", "work_done"]
