"""The store-wide figures behind the API's /metrics (docs/api.md, "Metrics"): a few grouped
queries over the metadata tables, read together by the API's refresher every `api.metrics_interval`
rather than on every scrape.

Everything here is raw figures (counts, bytes, milliseconds since the epoch); turning them into
Prometheus families, and ages into seconds, is the API's job (api/metrics.py).

The counters that must only ever grow are not kept anywhere: they are sums over the audit table,
one row per deletion (store/audit.py), in one grouped query. They survive restarts and agree with
`tidekeep audit list` by construction. Per action, `items` counts what the rows deleted: a row of
most actions is one deletion, but one `archive_expire` row names every archive of a dataset that a
collection removed, one `sweep` row every orphan file, one `catalog_purge` row every purged record,
and one `catalog_delete` row the records of a period, per rule (their details JSON).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from . import schema as t
from .database import Database
from .schema_archives import archive_gc_journal, archive_search_jobs, archives
from .schema_catalog import catalog_runs
from .schema_leases import leases
from .schema_transactions import transactions
from .schema_watermarks import watermarks

# the lease of a stream's retention cycles (service/stream_tasks.py); its work time is the last cycle's end
RETENTION_LEASE_PREFIX = "retention:"


@dataclass(frozen=True)
class StreamFigures:
    stream: str  # "scope/name"
    retained_bytes: int  # from the head to the tail (what `stream describe` calls size_bytes)
    retained_events: int  # events of the chunks still kept (a chunk the head cuts through counts whole)
    open_transactions: int
    retention_done_ms: int | None  # when `tidekeep serve` last ended a retention cycle of it
    watermark_ms: int | None  # the lower time of its newest watermark


@dataclass(frozen=True)
class AuditTotals:
    """Cumulative sums over the audit rows of one action."""

    entries: int
    bytes_freed: int
    items: int  # what the rows deleted (see the module doc)


@dataclass(frozen=True)
class StoreFigures:
    streams: list[StreamFigures] = field(default_factory=list)
    audit: dict[str, AuditTotals] = field(default_factory=dict)  # by action
    archives: dict[str, tuple[int, int]] = field(default_factory=dict)  # state -> (archives, stored bytes)
    search_jobs: dict[str, int] = field(default_factory=dict)  # by state
    catalog_runs: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, state) -> runs
    catalog_last_run_ms: dict[str, int] = field(default_factory=dict)  # kind -> duration of its newest finished run
    leases_held: dict[tuple[str, str], int] = field(default_factory=dict)  # (owner, kind) -> leases


# what one audit row deleted, by action; every other row counts as one (see the module doc)
_ITEMS_SQLITE = """CASE action
    WHEN 'archive_expire' THEN json_array_length(details, '$.archives')
    WHEN 'sweep' THEN json_extract(details, '$.files')
    WHEN 'catalog_purge' THEN json_extract(details, '$.count')
    WHEN 'catalog_delete' THEN (SELECT SUM(json_extract(r.value, '$.rows')) FROM json_each(details, '$.rules') AS r)
    ELSE 1 END"""
_ITEMS_POSTGRES = """CASE action
    WHEN 'archive_expire' THEN json_array_length(details::json -> 'archives')
    WHEN 'sweep' THEN (details::json ->> 'files')::bigint
    WHEN 'catalog_purge' THEN (details::json ->> 'count')::bigint
    WHEN 'catalog_delete' THEN (SELECT SUM((r.value ->> 'rows')::bigint) FROM json_each(details::json -> 'rules') AS r)
    ELSE 1 END"""


def audit_totals(conn: Connection, is_sqlite: bool) -> dict[str, AuditTotals]:
    """Per action: rows, the sum of bytes_freed and the items deleted, over the whole audit table."""
    items = _ITEMS_SQLITE if is_sqlite else _ITEMS_POSTGRES
    rows = conn.execute(sa.text(
        f"SELECT action, COUNT(*) AS entries, COALESCE(SUM(bytes_freed), 0) AS freed, "
        f"COALESCE(SUM({items}), 0) AS items FROM audit GROUP BY action")).all()
    return {r.action: AuditTotals(int(r.entries), int(r.freed), int(r.items)) for r in rows}


def stream_figures(conn: Connection) -> list[StreamFigures]:
    """Every stream's retained bytes and events, open transactions, last retention cycle and watermark."""
    streams = conn.execute(sa.select(t.streams.c.id, t.streams.c.scope, t.streams.c.name)
                           .order_by(t.streams.c.scope, t.streams.c.name)).all()
    retained = dict(conn.execute(sa.select(t.segments.c.stream_id, sa.func.sum(t.segments.c.tail - t.segments.c.head))
                                 .group_by(t.segments.c.stream_id)).all())
    events = dict(conn.execute(sa.select(t.chunks.c.stream_id, sa.func.sum(t.chunks.c.event_count))
                               .group_by(t.chunks.c.stream_id)).all())
    open_txns: dict[int, int] = dict(conn.execute(sa.select(transactions.c.stream_id, sa.func.count())
                                  .where(transactions.c.state == "OPEN")
                                  .group_by(transactions.c.stream_id)).all())
    # a watermark's lower time only grows with its revision: the largest is the newest watermark's
    marks = dict(conn.execute(sa.select(watermarks.c.stream_id, sa.func.max(watermarks.c.lower_time_ms))
                              .group_by(watermarks.c.stream_id)).all())
    cycles = dict(conn.execute(sa.select(leases.c.resource, leases.c.work_done_ms).where(
        leases.c.resource.startswith(RETENTION_LEASE_PREFIX), leases.c.work_done_ms.is_not(None))).all())
    result = []
    for row in streams:
        name = f"{row.scope}/{row.name}"
        done = cycles.get(RETENTION_LEASE_PREFIX + name)
        mark = marks.get(row.id)
        result.append(StreamFigures(name, int(retained.get(row.id) or 0), int(events.get(row.id) or 0),
                                    int(open_txns.get(row.id) or 0), None if done is None else int(done),
                                    None if mark is None else int(mark)))
    return result


def archive_figures(conn: Connection) -> dict[str, tuple[int, int]]:
    """Archives "stored", and "expiring": in the collector's journal, their deletion under way."""
    journaled = sa.select(archive_gc_journal.c.archive_id)
    result: dict[str, tuple[int, int]] = {}
    for state, where in (("stored", archives.c.id.not_in(journaled)), ("expiring", archives.c.id.in_(journaled))):
        total = sa.func.coalesce(sa.func.sum(archives.c.stored_bytes), 0)
        count, stored = conn.execute(sa.select(sa.func.count(), total).where(where)).one()
        result[state] = (int(count), int(stored))
    return result


def catalog_figures(conn: Connection) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
    """Runs (dry runs left out: they change nothing) by kind and state, and per kind the duration of
    its newest finished run."""
    real = catalog_runs.c.dry_run.is_(False)
    counts = {(kind, state): int(n) for kind, state, n in conn.execute(
        sa.select(catalog_runs.c.kind, catalog_runs.c.state, sa.func.count()).where(real)
        .group_by(catalog_runs.c.kind, catalog_runs.c.state))}
    newest = (sa.select(catalog_runs.c.kind, sa.func.max(catalog_runs.c.id).label("id"))
              .where(real, catalog_runs.c.finished_ms.is_not(None)).group_by(catalog_runs.c.kind).subquery())
    durations = {kind: int(finished - started) for kind, started, finished in conn.execute(
        sa.select(catalog_runs.c.kind, catalog_runs.c.started_ms, catalog_runs.c.finished_ms)
        .join(newest, newest.c.id == catalog_runs.c.id))}
    return counts, durations


def lease_figures(conn: Connection, now_ms: int) -> dict[tuple[str, str], int]:
    """Leases held at `now_ms` (an owner, not expired), by owner and kind (the resource before its ':')."""
    held: dict[tuple[str, str], int] = {}
    for resource, owner in conn.execute(sa.select(leases.c.resource, leases.c.owner).where(
            leases.c.owner.is_not(None), leases.c.expires_ms > now_ms)):
        key = (str(owner), resource.split(":", 1)[0])
        held[key] = held.get(key, 0) + 1
    return held


def read_store_figures(db: Database, now_ms: int) -> StoreFigures:
    """All of the above in one read transaction."""
    with db.read() as conn:
        runs, durations = catalog_figures(conn)
        return StoreFigures(
            streams=stream_figures(conn),
            audit=audit_totals(conn, db.is_sqlite),
            archives=archive_figures(conn),
            search_jobs={str(state): int(n) for state, n in conn.execute(
                sa.select(archive_search_jobs.c.state, sa.func.count())
                .group_by(archive_search_jobs.c.state))},
            catalog_runs=runs,
            catalog_last_run_ms=durations,
            leases_held=lease_figures(conn, now_ms))


__all__ = ["AuditTotals", "StoreFigures", "StreamFigures", "read_store_figures"]
