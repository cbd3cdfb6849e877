"""The archive garbage collector (docs/design/archives.md), and `collect_all`.

One sweep, in crash-safe order (the decisions are in expiry.py):

0. Replay the journal (`archive_gc_journal`): a journaled archive whose row is gone was deleted
   from the metadata by a sweep that died before deleting its file — delete the file (a missing
   file is fine) and then the journal row. A journaled archive whose row still exists was never
   committed as deleted: drop the journal row and delete nothing (CLP would delete the file of a
   live archive here: docs/design/archives.md#deletion).
1. Mark RUNNING searches whose process died FAILED — no heartbeat for more than
   MISSED_HEARTBEATS of their intervals (audited "search_fail") — then those older than
   `search.max_runtime` KILLED (audited "search_kill"). Both only end jobs still RUNNING, and a
   job that beat again since it was read is left alone.
2. Compute the safe expiry from the oldest RUNNING search (now − TTL when none runs).
3. Choose the candidates: end_ts < expiry, not held (by a dataset or archive hold, or by a records
   hold matching the archive's catalog record, which the deletion would take with it).
4. Journal the candidates and commit (fault point `archive_gc.after_journal`).
5. One transaction: lock the datasets' rows, re-read holds and the oldest RUNNING search, re-check
   every candidate, delete the survivors' archive rows and catalog records, make sure each has its
   journal row (so a deleted row never lacks one, even if a concurrent replay dropped it), drop the
   journal rows of candidates the re-check kept, audit "archive_expire" per dataset, commit
   (fault point `archive_gc.after_metadata`).
6. Delete the files one by one, each followed by removing its journal row (fault point
   `archive_gc.mid_files` after the first file).
7. Orphan sweep: files under archives/ that no archive row and no journal row names, older than
   `sweep.grace` (left by a crashed ingest), are deleted — except in a dataset where an ingest
   changed something within the grace (its staging directory, a staging file, or an unnamed file it
   moved in: an ingest is running there; expiry.plan_orphans).

Steps 4–6 go in rounds of GC_BATCH_SIZE candidates, so a long backlog keeps each transaction small.

The journal lives in the metadata store rather than in a local file (CLP's choice) so a collector
on another host that takes over the lease finds and finishes a crashed sweep. Every step is
idempotent; a rerun after a crash anywhere finishes the work.

Under `tidekeep serve` the sweep gets the "archive-gc" lease's fence (store/fencing.py): the
transactions of steps 0, 1, 4 and 5 check it, and it is confirmed before the orphan files go
(step 7), so a collector whose lease was taken over stops with LeaseLost and deletes no archive
row. The files of step 6 belong to deletions already committed under the lease; they are finished
regardless (the journal would have the next sweep finish them anyway).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..faults import fault_point
from ..store.audit import AuditEntry
from ..store.deletion import DeleteOutcome, FileLeft, files_left_json, warn_files_left
from ..store.fencing import LeaseFence, check_fence, confirm_fence
from ..store.holds import holds_covering, holds_of, kind_named
from ..store.schema_archives import archive_gc_journal as journal
from ..store.schema_archives import archive_search_jobs as jobs_table
from ..store.schema_archives import archives as archives_table
from ..store.schema_catalog import catalog_records
from ..units import format_duration, iso_utc
from .expiry import (
    MISSED_HEARTBEATS,
    ArchivePlan,
    StoredEntry,
    plan_archive_sweep,
    plan_orphans,
    recheck_candidates,
    safe_expiry_ms,
)
from .gc_log import LEFT_FOR, configure_gc_logging, log
from .holds import load_holds
from .model import ARCHIVES_DIR, Archive, JobState, SearchJob
from .store import archive_from_row, job_from_row, lock_dataset, oldest_running_created_ms

if TYPE_CHECKING:
    from ..store.house import Workspace

Progress = Callable[[int, int], None]  # (files done, files total)
RECORDS_KIND = "records"  # the catalog's hold kind on records (catalog/holds.py registers it)
GC_BATCH_SIZE = 1000  # candidates journaled, deleted from the metadata and from storage per round


@dataclass
class ArchiveGcReport:
    now_ms: int
    dry_run: bool
    enabled: bool
    retention_minutes: int | None
    expiry_ms: int | None = None
    held_back_by_job: int | None = None  # the RUNNING search that moved the expiry earlier
    held_back_by_created_ms: int | None = None
    candidates: list[dict[str, Any]] = field(default_factory=list)  # deleted (dry run: would be), with why
    held: list[dict[str, Any]] = field(default_factory=list)  # expired but held
    killed_jobs: list[dict[str, Any]] = field(default_factory=list)  # (dry run: would be)
    failed_jobs: list[dict[str, Any]] = field(default_factory=list)  # no heartbeat: process died (dry run: would be)
    kept_by_recheck: list[str] = field(default_factory=list)  # candidates a new hold/search saved
    deleted: int = 0
    bytes_freed: int = 0
    files_deleted: int = 0
    replayed: int = 0  # files of a crashed sweep finished from the journal
    journal_dropped: int = 0  # journal rows of archives that were never deleted
    orphans: int = 0  # orphan files deleted (dry run: found)
    orphan_bytes: int = 0
    # files that could not be deleted (read-only storage, permissions): a deleted archive's file keeps
    # its journal row, so the next run's replay deletes it; an orphan stays an orphan for the next run
    files_left: list[FileLeft] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), files_left=files_left_json(self.files_left))

    def summary(self) -> str:
        if not self.enabled:
            text = "archive collector disabled (archive_output.retention_period is null)"
            return text + (f"; finished {self.replayed} file deletion(s) from the journal" if self.replayed else "")
        verb = "would delete" if self.dry_run else "deleted"
        count = len(self.candidates) if self.dry_run else self.deleted
        size = sum(c["bytes"] for c in self.candidates) if self.dry_run else self.bytes_freed
        text = (f"archives: {verb} {count} ({size} bytes), expiry {iso_utc(self.expiry_ms)}; "
                f"{len(self.held)} held; {len(self.killed_jobs)} search(es) {'to kill' if self.dry_run else 'killed'}")
        if self.failed_jobs:
            text += (f"; {len(self.failed_jobs)} dead search(es) {'to fail' if self.dry_run else 'failed'} "
                     f"(no heartbeat)")
        if self.held_back_by_job is not None:
            text += f"; expiry held back by running search {self.held_back_by_job}"
        if self.replayed or self.journal_dropped:
            text += f"; journal: {self.replayed} file(s) finished, {self.journal_dropped} row(s) dropped"
        if self.kept_by_recheck:
            text += f"; {len(self.kept_by_recheck)} kept by the re-check"
        text += f"; {self.orphans} orphan file(s){' found' if self.dry_run else ' deleted'}"
        return text + (f"; {len(self.files_left)} file(s) could not be deleted" if self.files_left else "")


@dataclass
class GcReport:
    """What `collect_all` did: the archive collector's report, then the search-result collector's."""

    archives: ArchiveGcReport
    results: Any  # gc_results.ResultGcReport

    def to_dict(self) -> dict[str, Any]:
        return {"archives": self.archives.to_dict(), "results": self.results.to_dict()}

    def summary(self) -> str:
        return f"{self.archives.summary()}\n{self.results.summary()}"


# ---- loading state ----------------------------------------------------------------------------
def archives_with_held_records(conn: Connection, now_ms: int, archive_ids: Iterable[str]) -> set[str]:
    """Of `archive_ids`, the archives whose catalog record a hold on records matches: deleting such
    an archive would delete a held record, so the collector keeps it. The catalog registers that
    coverage with the foundation's `holds_covering` (catalog/holds.py, docs/holds.md)."""
    if not holds_of(conn, (RECORDS_KIND,)):
        return set()  # no hold on records: one query, whatever the number of archives
    # the kind and its coverage are registered together: without them every archive would look
    # unheld, so a process that did not wire the catalog's holds fails here (LookupError) instead
    kind_named(RECORDS_KIND)
    return {archive_id for archive_id in archive_ids
            if any(hold.kind == RECORDS_KIND for hold in holds_covering(conn, "archive", archive_id, now_ms))}


def _plan(workspace: Workspace, retention: int, now: int) -> tuple[ArchivePlan, dict[str, str]]:
    # nothing ending at or after now − TTL can expire whatever searches run, so read only older ones
    horizon = now - retention * 60_000
    with workspace.db.read() as conn:
        archives = [archive_from_row(r) for r in conn.execute(sa.select(archives_table).where(
            archives_table.c.end_ts.is_not(None), archives_table.c.end_ts < horizon))]
        running = [job_from_row(r) for r in conn.execute(sa.select(jobs_table).where(
            jobs_table.c.state == str(JobState.RUNNING)))]
        held_datasets, held_archives = load_holds(conn)
        held_records = archives_with_held_records(conn, now, [a.id for a in archives])
    plan = plan_archive_sweep(now, retention, workspace.settings["search.max_runtime"], archives, running,
                              held_datasets, held_archives | held_records)
    return plan, held_reasons(plan.held, held_datasets, held_archives, held_records)


def _why(archive: Archive, plan: ArchivePlan) -> str:
    text = (f"end {iso_utc(archive.end_ts)} is before expiry {iso_utc(plan.expiry_ms)} "
            f"(retention {plan.retention_minutes} min)")
    if plan.held_back_by is not None:
        text += f"; expiry held back by running search {plan.held_back_by.id}"
    return text


def _candidate_view(archive: Archive, plan: ArchivePlan, why: str) -> dict[str, Any]:
    return {"archive_id": archive.id, "dataset": archive.dataset, "end_ts": archive.end_ts,
            "age_ms": plan.now_ms - (archive.end_ts or 0), "bytes": archive.stored_bytes, "path": archive.path,
            "why": why}


def _job_view(job: SearchJob, now: int) -> dict[str, Any]:
    return {"job_id": job.id, "dataset": job.dataset, "query": job.query, "created_ms": job.created_ms,
            "runtime_ms": now - job.created_ms}


def _dead_job_view(job: SearchJob, now: int) -> dict[str, Any]:
    silent = None if job.heartbeat_ms is None else now - job.heartbeat_ms  # never None: dead jobs have beaten
    return {**_job_view(job, now), "heartbeat_ms": job.heartbeat_ms, "heartbeat_interval_ms": job.heartbeat_interval_ms,
            "silent_ms": silent}


def dead_search_error(job: SearchJob, now: int) -> str:
    """The error a search whose process died is FAILED with."""
    interval = format_duration(job.heartbeat_interval_ms or 0)
    return (f"no heartbeat since {iso_utc(job.heartbeat_ms)} (expected every {interval}): its process died; "
            f"marked FAILED by the archive collector at {iso_utc(now)}")


# ---- storage ----------------------------------------------------------------------------------
def delete_file(workspace: Workspace, rel_path: str) -> DeleteOutcome:
    """Delete one file: `deleted` 1, or 0 if it was already gone (which is fine: gone is gone), or
    the file in `failed` with why it could not be deleted (never raised)."""
    return workspace.storage.delete([rel_path])


def _drop_journal_row(workspace: Workspace, archive_id: str) -> None:
    with workspace.db.write() as conn:
        conn.execute(sa.delete(journal).where(journal.c.archive_id == archive_id))


# ---- the steps --------------------------------------------------------------------------------
def replay_journal(workspace: Workspace, report: ArchiveGcReport, fence: LeaseFence | None = None) -> None:
    """Step 0: finish what a crashed sweep committed; forget what it never committed."""
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        rows = conn.execute(sa.select(journal).order_by(journal.c.archive_id)).all()
        if not rows:
            return
        alive = set(conn.execute(sa.select(archives_table.c.id).where(
            archives_table.c.id.in_([r.archive_id for r in rows]))).scalars())
        never_deleted = [r.archive_id for r in rows if r.archive_id in alive]
        if never_deleted:
            # re-tested in the statement itself: a concurrent sweep may have just committed their deletion
            still_alive = sa.exists().where(archives_table.c.id == journal.c.archive_id)
            conn.execute(sa.delete(journal).where(journal.c.archive_id.in_(never_deleted), still_alive))
    report.journal_dropped += len(never_deleted)
    for row in rows:
        if row.archive_id in alive:
            continue
        left = delete_file(workspace, row.path).failed
        if left:  # the journal row stays: the next replay tries again
            report.files_left.extend(left)
            continue
        _drop_journal_row(workspace, row.archive_id)
        report.replayed += 1
    log.info("journal replay: %d file deletion(s) finished, %d row(s) of archives never deleted dropped",
             report.replayed, report.journal_dropped)


def fail_dead_searches(workspace: Workspace, jobs: Sequence[SearchJob], now: int,
                       fence: LeaseFence | None = None) -> list[SearchJob]:
    """Step 1, first half: RUNNING → FAILED for searches silent too long, completion now, audited.
    Each UPDATE also requires the heartbeat read when the job was judged: a search that beat again
    since (it was only slow) is not failed. Its results stay as far as they got, and expire from now."""
    failed: list[SearchJob] = []
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        for job in jobs:
            error = dead_search_error(job, now)
            done = conn.execute(sa.update(jobs_table).where(
                jobs_table.c.id == job.id, jobs_table.c.state == str(JobState.RUNNING),
                jobs_table.c.heartbeat_ms == job.heartbeat_ms).values(
                state=str(JobState.FAILED), completed_ms=now, error=error)).rowcount
            if done:
                details = {"job": job.id, "dataset": job.dataset, "created_ms": job.created_ms,
                           "heartbeat_ms": job.heartbeat_ms, "heartbeat_interval_ms": job.heartbeat_interval_ms,
                           "missed_heartbeats": MISSED_HEARTBEATS}
                workspace.audit.append(conn, AuditEntry("search_fail", f"search/{job.id}", error, details=details,
                                                        time_ms=now))
                failed.append(job)
    for job in failed:
        log.info("failed search %d (last heartbeat %s): its process died", job.id, iso_utc(job.heartbeat_ms))
    return failed


def kill_overlong_searches(workspace: Workspace, jobs: Sequence[SearchJob], now: int,
                           fence: LeaseFence | None = None) -> list[SearchJob]:
    """Step 1, second half: RUNNING → KILLED (only if still RUNNING), completion now, audited."""
    max_runtime = workspace.settings["search.max_runtime"]
    killed: list[SearchJob] = []
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        for job in jobs:
            error = (f"ran longer than search.max_runtime ({max_runtime} ms): killed by the archive collector at "
                     f"{iso_utc(now)}")
            done = conn.execute(sa.update(jobs_table).where(
                jobs_table.c.id == job.id, jobs_table.c.state == str(JobState.RUNNING)).values(
                state=str(JobState.KILLED), completed_ms=now, error=error)).rowcount
            if done:
                workspace.audit.append(conn, AuditEntry(
                    "search_kill", f"search/{job.id}", error,
                    details={"job": job.id, "dataset": job.dataset, "created_ms": job.created_ms,
                             "max_runtime_ms": max_runtime}))
                killed.append(job)
    for job in killed:
        log.info("killed search %d (created %s): ran longer than search.max_runtime", job.id, iso_utc(job.created_ms))
    return killed


def write_journal(workspace: Workspace, candidates: Sequence[Archive], now: int,
                  fence: LeaseFence | None = None) -> None:
    """Step 4: the write-ahead list, committed before any metadata is deleted. Under the datasets'
    locks and only for archives still alive: a concurrent sweep that has meanwhile deleted some of
    them (and their journal rows, with their files) must not get journal rows back from us."""
    if not candidates:
        return
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        for dataset in sorted({a.dataset for a in candidates}):
            lock_dataset(conn, dataset)
        alive = set(conn.execute(sa.select(archives_table.c.id).where(
            archives_table.c.id.in_([a.id for a in candidates]))).scalars())
        _ensure_journaled(conn, [a for a in candidates if a.id in alive], now)


def _ensure_journaled(conn: Connection, candidates: Sequence[Archive], now: int) -> None:
    if not candidates:
        return
    present = set(conn.execute(sa.select(journal.c.archive_id).where(
        journal.c.archive_id.in_([a.id for a in candidates]))).scalars())
    missing = [a for a in candidates if a.id not in present]
    if missing:
        conn.execute(sa.insert(journal), [{"archive_id": a.id, "dataset": a.dataset, "path": a.path,
                                           "stored_bytes": a.stored_bytes, "end_ts": a.end_ts, "journaled_ms": now}
                                          for a in missing])


def delete_metadata(workspace: Workspace, plan: ArchivePlan, report: ArchiveGcReport,
                    batch: Sequence[Archive] | None = None, fence: LeaseFence | None = None) -> list[Archive]:
    """Step 5: in one transaction, re-check and delete the rows (and catalog records) of the
    candidates (of `batch`, default all) that are still expired and unheld; returns those deleted."""
    retention = plan.retention_minutes
    now = plan.now_ms
    candidates = plan.candidates if batch is None else batch
    ids = [a.id for a in candidates]
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        for dataset in sorted({a.dataset for a in candidates}):
            lock_dataset(conn, dataset)  # a hold on the dataset or one of its archives waits for us
        held_datasets, held_archives = load_holds(conn)
        held_archives |= archives_with_held_records(conn, now, ids)
        expiry = safe_expiry_ms(now, retention, oldest_running_created_ms(conn, now))
        current = [archive_from_row(r) for r in conn.execute(
            sa.select(archives_table).where(archives_table.c.id.in_(ids)))]
        survivors, kept = recheck_candidates(current, expiry, held_datasets, held_archives)
        if kept:
            # still alive and no longer to be deleted: forget their journal rows. Candidates whose
            # row is already gone were deleted by a concurrent sweep: their journal rows stay for it
            conn.execute(sa.delete(journal).where(journal.c.archive_id.in_([a.id for a in kept])))
        if survivors:
            _ensure_journaled(conn, survivors, now)
            record_ids = [a.catalog_record_id for a in survivors if a.catalog_record_id is not None]
            if record_ids:
                conn.execute(sa.delete(catalog_records).where(catalog_records.c.id.in_(record_ids)))
            conn.execute(sa.delete(archives_table).where(archives_table.c.id.in_([a.id for a in survivors])))
            by_dataset: dict[str, list[Archive]] = {}
            for archive in survivors:
                by_dataset.setdefault(archive.dataset, []).append(archive)
            for dataset, group in sorted(by_dataset.items()):
                freed = sum(a.stored_bytes for a in group)
                reason = (f"retention: {len(group)} archive(s) ending before the safe expiry {iso_utc(expiry)} "
                          f"(archive_output.retention_period {retention} min")
                reason += (f", held back by running search {plan.held_back_by.id})"
                           if plan.held_back_by is not None and expiry == plan.expiry_ms else ")")
                workspace.audit.append(conn, AuditEntry("archive_expire", f"archives/{dataset}", reason, freed, {
                    "archives": [a.id for a in group], "end_ts": [a.end_ts for a in group],
                    "bytes": [a.stored_bytes for a in group], "expiry_ms": expiry, "retention_minutes": retention,
                    "held_back_by_job": plan.held_back_by.id if plan.held_back_by is not None else None,
                    "reason": "retention"}))
    report.kept_by_recheck += [a.id for a in kept]
    report.deleted += len(survivors)
    report.bytes_freed += sum(a.stored_bytes for a in survivors)
    return survivors


def _shifted(progress: Progress, base: int, total: int) -> Progress:
    """A batch's file progress as progress over the whole run: `base` files came before it."""
    return lambda done, _total: progress(base + done, total)


def delete_files(workspace: Workspace, archives: Sequence[Archive], report: ArchiveGcReport,
                 progress: Progress | None = None) -> None:
    """Step 6: each file, then its journal row; a missing file counts as deleted. A file that
    cannot be deleted keeps its journal row, so the next run's replay deletes it."""
    total = len(archives)
    for i, archive in enumerate(archives):
        outcome = delete_file(workspace, archive.path)
        report.files_deleted += outcome.deleted
        if i == 0:
            fault_point("archive_gc.mid_files")
        if outcome.failed:
            report.files_left.extend(outcome.failed)
        else:
            _drop_journal_row(workspace, archive.id)
        if progress is not None:
            progress(i + 1, total)


def list_archive_storage(workspace: Workspace) -> list[StoredEntry]:
    """Every file and directory under archives/, with mtimes (directories too: see plan_orphans)."""
    return [StoredEntry(e.path, e.mtime_ms, e.size, e.is_dir) for e in workspace.storage.list(ARCHIVES_DIR)]


def sweep_orphans(workspace: Workspace, now: int, dry_run: bool, report: ArchiveGcReport,
                  fence: LeaseFence | None = None) -> None:
    """Step 7: archive files nothing names, older than sweep.grace, in datasets where no ingest is
    running (an ingest that died between writing and registering). Storage is listed before the
    rows are read, so a file registered meanwhile is seen as named."""
    entries = list_archive_storage(workspace)
    if not entries:
        return
    with workspace.db.read() as conn:
        named = set(conn.execute(sa.select(archives_table.c.path)).scalars())
        named |= set(conn.execute(sa.select(journal.c.path)).scalars())
    plan = plan_orphans(entries, named, now - workspace.settings["sweep.grace"])
    if not dry_run and (plan.files or plan.staging_dirs):
        confirm_fence(workspace.db, fence)
    for orphan in plan.files:
        if not dry_run:
            outcome = delete_file(workspace, orphan.path)
            report.files_left.extend(outcome.failed)
            if not outcome.deleted:
                continue  # already gone, or left for the next run
        report.orphans += 1
        report.orphan_bytes += orphan.size
    if not dry_run:
        for directory in plan.staging_dirs:
            report.files_left.extend(workspace.storage.delete_dir(directory).failed)
    if plan.files:
        log.info("orphan archive files %s: %d (%d bytes)", "found" if dry_run else "deleted", report.orphans,
                 report.orphan_bytes)
    if plan.busy_datasets:
        log.info("orphan sweep skipped datasets with an ingest in progress: %s", ", ".join(plan.busy_datasets))


# ---- the sweep --------------------------------------------------------------------------------
def collect_archives(workspace: Workspace, dry_run: bool = False, progress: Progress | None = None,
                     fence: LeaseFence | None = None) -> ArchiveGcReport:
    """One sweep of the archive collector (see the module docstring); a dry run changes nothing.
    `fence`: the service's "archive-gc" lease (store/fencing.py); None for a manual sweep."""
    if not dry_run:
        workspace.storage.require_deletable()
    configure_gc_logging(workspace)
    retention = workspace.settings["archive_output.retention_period"]
    now = workspace.clock.now_ms()
    report = ArchiveGcReport(now_ms=now, dry_run=dry_run, enabled=retention is not None, retention_minutes=retention)
    if retention is None:
        # nothing expires; still finish the file deletions a crashed sweep committed, so no
        # deleted archive's data outlives it because retention was switched off afterwards
        if not dry_run:
            replay_journal(workspace, report, fence)
        log.info("archive sweep: %s", report.summary())
        warn_files_left(log, "archive sweep", report.files_left, LEFT_FOR)
        return report
    if not dry_run:
        replay_journal(workspace, report, fence)
    plan, why_held = _plan(workspace, retention, now)
    report.expiry_ms = plan.expiry_ms
    if plan.held_back_by is not None:
        report.held_back_by_job = plan.held_back_by.id
        report.held_back_by_created_ms = plan.held_back_by.created_ms
    report.held = [_candidate_view(a, plan, f"expired but held ({why_held[a.id]})") for a in plan.held]
    report.candidates = [_candidate_view(a, plan, _why(a, plan)) for a in plan.candidates]
    if dry_run:
        report.failed_jobs = [_dead_job_view(j, now) for j in plan.dead]
        report.killed_jobs = [_job_view(j, now) for j in plan.kill]
        sweep_orphans(workspace, now, True, report)
        log.info("archive sweep (dry run): %s", report.summary())
        return report
    report.failed_jobs = [_dead_job_view(j, now) for j in fail_dead_searches(workspace, plan.dead, now, fence)]
    report.killed_jobs = [_job_view(j, now) for j in kill_overlong_searches(workspace, plan.kill, now, fence)]
    # in batches, so one sweep over a long backlog keeps its transactions and IN lists bounded
    total = len(plan.candidates)
    for start in range(0, total, GC_BATCH_SIZE):
        batch = plan.candidates[start:start + GC_BATCH_SIZE]
        write_journal(workspace, batch, now, fence)
        fault_point("archive_gc.after_journal")
        deleted = delete_metadata(workspace, plan, report, batch, fence)
        fault_point("archive_gc.after_metadata")
        delete_files(workspace, deleted, report, None if progress is None else _shifted(progress, start, total))
    kept = set(report.kept_by_recheck)
    report.candidates = [c for c in report.candidates if c["archive_id"] not in kept]
    sweep_orphans(workspace, now, False, report, fence)
    log.info("archive sweep: %s", report.summary())
    warn_files_left(log, "archive sweep", report.files_left, LEFT_FOR)
    return report


def collect_all(workspace: Workspace, dry_run: bool = False, progress: Progress | None = None) -> GcReport:
    """Both collectors once: the archive collector first, then the search-result collector."""
    from .gc_results import collect_search_results

    archives = collect_archives(workspace, dry_run=dry_run, progress=progress)
    results = collect_search_results(workspace, dry_run=dry_run)
    return GcReport(archives, results)


def held_reasons(archives: Iterable[Archive], held_datasets: set[str], held_archives: set[str],
                 held_records: Collection[str] = ()) -> dict[str, str]:
    """Why each held archive is held: its dataset's hold, its own, a hold on its catalog record."""
    reasons = {}
    for a in archives:
        parts = [p for p, on in (("dataset hold", a.dataset in held_datasets), ("archive hold", a.id in held_archives),
                                 ("records hold", a.id in held_records)) if on]
        reasons[a.id] = " and ".join(parts)
    return reasons


__all__ = ["ArchiveGcReport", "GcReport", "collect_all", "collect_archives", "delete_file", "load_holds",
           "replay_journal"]
