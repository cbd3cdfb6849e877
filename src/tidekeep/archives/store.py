"""The archives family's metadata: datasets, archives (registered with their catalog records) and
search jobs. Every write is one transaction; the collectors (gc.py) add their own statements on
the same tables inside their transactions.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import InvalidInput, NotFound
from ..store.audit import AuditEntry
from ..store.database import inserted_id
from ..store.schema_archives import archive_datasets, archive_search_jobs, archives
from ..store.schema_catalog import catalog_records
from .model import ARCHIVE_TYPE, Archive, JobState, SearchJob, check_archive_id, check_dataset, check_job_id

if TYPE_CHECKING:
    from ..store.house import Workspace


def archive_from_row(row: Any) -> Archive:
    return Archive(row.id, row.dataset, row.begin_ts, row.end_ts, row.message_count, row.raw_bytes,
                   row.stored_bytes, row.path, row.created_ms, row.ingest_id, row.catalog_record_id)


def job_from_row(row: Any) -> SearchJob:
    return SearchJob(row.id, row.dataset, row.query, bool(row.regex), bool(row.ignore_case), row.begin_ts, row.end_ts,
                     JobState(row.state), row.created_ms, row.completed_ms, row.lower_bound_ms, row.archives_searched,
                     row.results_count, row.results_path, row.results_expired_ms, row.error, row.actor,
                     row.heartbeat_ms, row.heartbeat_interval_ms)


def lock_dataset(conn: Connection, dataset: str) -> Any:
    """The dataset row, locked for the rest of the transaction (FOR UPDATE on PostgreSQL; SQLite
    write transactions are exclusive already). Holds on a dataset and the collector both take it."""
    row = conn.execute(sa.select(archive_datasets).where(archive_datasets.c.name == dataset)
                       .with_for_update()).one_or_none()
    if row is None:
        raise NotFound(f"dataset {dataset!r} does not exist")
    return row


def catalog_row_of(archive: Archive) -> dict[str, Any]:
    """The archive's catalog meta record. It is LOCKED: the catalog's retention job and purge only
    touch UNLOCKED and DELETED records, so an archive's lifetime stays with the archive collector
    (which deletes the record together with the archive) and the purge can never delete an
    archive file that the archive metadata still points at (docs/design/archives.md#deletion)."""
    attributes = {"archive_id": archive.id, "message_count": str(archive.message_count)}
    if archive.begin_ts is not None:
        attributes["begin_ts"] = str(archive.begin_ts)
    if archive.end_ts is not None:
        attributes["end_ts"] = str(archive.end_ts)
    return {"feed": archive.dataset, "type": ARCHIVE_TYPE, "create_time": archive.created_ms,
            "effective_time": archive.end_ts if archive.end_ts is not None else archive.created_ms,
            "status": "LOCKED", "status_time": archive.created_ms, "file_size": archive.stored_bytes,
            "raw_size": archive.raw_bytes, "location": archive.path,
            "attributes": json.dumps(dict(sorted(attributes.items())), separators=(",", ":"))}


class ArchiveStore:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.db = workspace.db

    def register(self, new: Sequence[Archive], audit_reason: str = "ingest") -> builtins.list[Archive]:
        """Register archives whose files are already written, with their catalog records, in one
        transaction (datasets are created on first use). Returns them with catalog record ids."""
        if not new:
            return []
        registered: builtins.list[Archive] = []
        with self.db.write() as conn:
            for dataset in sorted({a.dataset for a in new}):
                check_dataset(dataset)
                exists = conn.execute(sa.select(archive_datasets.c.name)
                                      .where(archive_datasets.c.name == dataset)).one_or_none()
                if exists is None:
                    conn.execute(sa.insert(archive_datasets).values(name=dataset,
                                                                    created_ms=self.workspace.clock.now_ms()))
            for archive in new:
                record_id = conn.execute(sa.insert(catalog_records).values(**catalog_row_of(archive))
                                         .returning(catalog_records.c.id)).scalar_one()
                archive = replace(archive, catalog_record_id=int(record_id))
                conn.execute(sa.insert(archives).values(**archive.to_dict()))
                registered.append(archive)
            by_dataset: dict[str, builtins.list[Archive]] = {}
            for archive in registered:
                by_dataset.setdefault(archive.dataset, []).append(archive)
            for dataset, group in by_dataset.items():
                self.workspace.audit.append(conn, AuditEntry(
                    "archive_ingest", f"archives/{dataset}",
                    f"{audit_reason}: {len(group)} archive(s), {sum(a.message_count for a in group)} messages",
                    details={"archives": [a.id for a in group], "stored_bytes": sum(a.stored_bytes for a in group)}))
        return registered

    def get(self, archive_id: str) -> Archive:
        check_archive_id(archive_id)
        with self.db.read() as conn:
            row = conn.execute(sa.select(archives).where(archives.c.id == archive_id)).one_or_none()
        if row is None:
            raise NotFound(f"archive {archive_id} does not exist")
        return archive_from_row(row)

    def list(self, dataset: str | None = None) -> builtins.list[Archive]:
        """Archives, newest end timestamp first (archives without timestamps last), per dataset."""
        query = sa.select(archives).order_by(archives.c.dataset, archives.c.end_ts.desc().nulls_last(),
                                             archives.c.id)
        if dataset is not None:
            query = query.where(archives.c.dataset == check_dataset(dataset))
        with self.db.read() as conn:
            return [archive_from_row(r) for r in conn.execute(query)]

    def datasets(self) -> builtins.list[str]:
        with self.db.read() as conn:
            return list(conn.execute(sa.select(archive_datasets.c.name).order_by(archive_datasets.c.name)).scalars())

    def dataset_exists(self, dataset: str) -> bool:
        with self.db.read() as conn:
            return conn.execute(sa.select(archive_datasets.c.name)
                                .where(archive_datasets.c.name == check_dataset(dataset))).one_or_none() is not None

    def for_search(self, dataset: str, begin_ts: int | None, end_ts: int | None,
                   lower_bound_ms: int | None) -> builtins.list[Archive]:
        """The archives a search may read (docs/design/archives.md#safe-expiry): overlapping
        [begin_ts, end_ts] and not expired at the job's creation (end ≥ lower bound, or no timestamps
        at all), newest first.
        Archives without timestamps only match a search without a time range."""
        query = sa.select(archives).where(archives.c.dataset == dataset)
        if begin_ts is not None:
            query = query.where(archives.c.end_ts >= begin_ts)
        if end_ts is not None:
            query = query.where(archives.c.begin_ts <= end_ts)
        if lower_bound_ms is not None:
            query = query.where(sa.or_(archives.c.end_ts >= lower_bound_ms, archives.c.end_ts.is_(None)))
        query = query.order_by(archives.c.end_ts.desc().nulls_last(), archives.c.id)
        with self.db.read() as conn:
            return [archive_from_row(r) for r in conn.execute(query)]


class SearchJobStore:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.db = workspace.db

    def create(self, dataset: str, query: str, *, regex: bool, ignore_case: bool, begin_ts: int | None,
               end_ts: int | None, retention_minutes: int | None,
               heartbeat_interval_ms: int | None = None) -> SearchJob:
        """A RUNNING job created now; its lower bound is fixed here from the archive retention. With
        `heartbeat_interval_ms` the job promises a heartbeat that often (its first one is now); the
        caller must then keep beating (`heartbeat`) or the archive collector marks it FAILED. Without
        it only search.max_runtime ends the job."""
        dataset = check_dataset(dataset)
        if heartbeat_interval_ms is not None and (isinstance(heartbeat_interval_ms, bool)
                                                  or not isinstance(heartbeat_interval_ms, int)
                                                  or heartbeat_interval_ms <= 0):
            raise InvalidInput(f"invalid heartbeat interval {heartbeat_interval_ms!r}: expected milliseconds above 0")
        if not isinstance(query, str) or not query:
            raise InvalidInput("a search needs a query: got an empty one")
        if begin_ts is not None and end_ts is not None and begin_ts > end_ts:
            raise InvalidInput(f"search time range is backwards: begin {begin_ts} is after end {end_ts}")
        now = self.workspace.clock.now_ms()
        lower = None if retention_minutes is None else now - retention_minutes * 60_000
        with self.db.write() as conn:
            if conn.execute(sa.select(archive_datasets.c.name)
                            .where(archive_datasets.c.name == dataset)).one_or_none() is None:
                raise NotFound(f"dataset {dataset!r} does not exist")
            job_id = inserted_id(conn.execute(sa.insert(archive_search_jobs).values(
                dataset=dataset, query=query, regex=regex, ignore_case=ignore_case, begin_ts=begin_ts, end_ts=end_ts,
                state=str(JobState.RUNNING), created_ms=now, completed_ms=None, lower_bound_ms=lower,
                archives_searched=0, results_count=0, results_path=None, results_expired_ms=None, error=None,
                actor=self.workspace.audit.actor, heartbeat_ms=None if heartbeat_interval_ms is None else now,
                heartbeat_interval_ms=heartbeat_interval_ms)))
        return self.get(job_id)

    def get(self, job_id: int) -> SearchJob:
        job_id = check_job_id(job_id)
        with self.db.read() as conn:
            row = conn.execute(sa.select(archive_search_jobs).where(archive_search_jobs.c.id == job_id)).one_or_none()
        if row is None:
            raise NotFound(f"search job {job_id} does not exist")
        return job_from_row(row)

    def list(self, limit: int = 100, state: str | None = None, before: int | None = None) -> builtins.list[SearchJob]:
        """Jobs, newest first; with `before`, only jobs whose id is lower (the next page after it)."""
        if before is not None:
            before = check_job_id(before)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"invalid job limit {limit!r}: expected a whole number from 1")
        if state is not None and (not isinstance(state, str) or state.upper() not in JobState.__members__):
            raise InvalidInput(f"invalid job state {state!r}: expected one of {', '.join(JobState)}")
        query = sa.select(archive_search_jobs).order_by(archive_search_jobs.c.id.desc()).limit(limit)
        if state is not None:
            query = query.where(archive_search_jobs.c.state == str(JobState(state.upper())))
        if before is not None:
            query = query.where(archive_search_jobs.c.id < before)
        with self.db.read() as conn:
            return [job_from_row(r) for r in conn.execute(query)]

    def set_results_path(self, job_id: int, path: str) -> None:
        with self.db.write() as conn:
            conn.execute(sa.update(archive_search_jobs).where(archive_search_jobs.c.id == job_id)
                         .values(results_path=path))

    def finish(self, job_id: int, state: JobState, *, archives_searched: int, results_count: int,
               error: str | None = None) -> bool:
        """End a RUNNING job; False (nothing changed) if it had already ended — cancelled by a user,
        KILLED by the collector or marked FAILED by it for a missing heartbeat — whose verdict stands."""
        if state is JobState.RUNNING:
            raise InvalidInput("finish: a job cannot end in state RUNNING")
        with self.db.write() as conn:
            done = conn.execute(sa.update(archive_search_jobs).where(
                archive_search_jobs.c.id == job_id, archive_search_jobs.c.state == str(JobState.RUNNING)).values(
                state=str(state), completed_ms=self.workspace.clock.now_ms(), archives_searched=archives_searched,
                results_count=results_count, error=error)).rowcount
        return bool(done)

    def heartbeat(self, job_id: int) -> bool:
        """Record that the job's process is alive (one UPDATE). Only a RUNNING job beats: a job the
        collector has already marked FAILED (or that was KILLED, cancelled or has ended) is never
        brought back, and False says so."""
        with self.db.write() as conn:
            done = conn.execute(sa.update(archive_search_jobs).where(
                archive_search_jobs.c.id == job_id, archive_search_jobs.c.state == str(JobState.RUNNING)).values(
                heartbeat_ms=self.workspace.clock.now_ms())).rowcount
        return bool(done)

    def update_counts(self, job_id: int, *, archives_searched: int, results_count: int) -> None:
        """Progress of a job that has already ended (e.g. cancelled): its counts, not its state."""
        with self.db.write() as conn:
            conn.execute(sa.update(archive_search_jobs).where(archive_search_jobs.c.id == job_id).values(
                archives_searched=archives_searched, results_count=results_count))

    def cancel(self, job_id: int) -> SearchJob:
        """Mark a RUNNING job CANCELLED (its process notices and stops its Spark job). Cancelling a
        job that already ended changes nothing and says so."""
        job = self.get(job_id)
        if job.state is not JobState.RUNNING:
            raise InvalidInput(f"search job {job.id} already ended: {job.state}")
        with self.db.write() as conn:
            conn.execute(sa.update(archive_search_jobs).where(
                archive_search_jobs.c.id == job.id, archive_search_jobs.c.state == str(JobState.RUNNING)).values(
                state=str(JobState.CANCELLED), completed_ms=self.workspace.clock.now_ms()))
        return self.get(job.id)

    def state(self, job_id: int) -> JobState:
        with self.db.read() as conn:
            return JobState(conn.execute(sa.select(archive_search_jobs.c.state)
                                         .where(archive_search_jobs.c.id == job_id)).scalar_one())


def oldest_running_created_ms(conn: Connection, before_ms: int) -> int | None:
    """The creation time of the oldest RUNNING search job created before `before_ms` (the safe
    expiry's input: docs/design/archives.md#safe-expiry)."""
    return conn.execute(sa.select(sa.func.min(archive_search_jobs.c.created_ms)).where(
        archive_search_jobs.c.state == str(JobState.RUNNING),
        archive_search_jobs.c.created_ms < before_ms)).scalar_one_or_none()


__all__ = ["ArchiveStore", "SearchJobStore", "archive_from_row", "catalog_row_of", "job_from_row", "lock_dataset",
           "oldest_running_created_ms"]
