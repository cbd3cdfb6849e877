"""The search-result collector (docs/design/archives.md#search-results).

Results expire `results_cache.retention_period` minutes after their job's completion time
(`completed_ms`, not the time the last result was inserted: docs/design/archives.md#search-results),
for SUCCEEDED, FAILED, CANCELLED and KILLED jobs alike; a RUNNING job's results never expire.
The job rows stay as history and show when their results expired.

Crash-safe order: first mark the jobs (`results_expired_ms`, audit "search_results_expire") in one
transaction, then delete their results directories. Every sweep first deletes the directories of
jobs already marked that still exist, so a sweep that died between the two steps is finished by
the next one (fault point `search_result_gc.after_mark`). Under `tidekeep serve` the marking
transaction checks the "search-result-gc" lease's fence (store/fencing.py): a collector whose lease
was taken over marks nothing and stops with LeaseLost.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..faults import fault_point
from ..store.audit import AuditEntry
from ..store.deletion import FileLeft, files_left_json, warn_files_left
from ..store.fencing import LeaseFence, check_fence
from ..store.schema_archives import archive_search_jobs as jobs_table
from ..units import iso_utc
from .expiry import completion_ms, results_to_expire, retention_ms
from .gc_log import LEFT_FOR, configure_gc_logging
from .model import FINAL_STATES, RESULTS_DIR, JobState, SearchJob, results_dir
from .store import job_from_row

if TYPE_CHECKING:
    from ..store.house import Workspace

log = logging.getLogger("tidekeep.archives.gc")


@dataclass
class ResultGcReport:
    now_ms: int
    dry_run: bool
    enabled: bool
    retention_minutes: int | None
    expiry_ms: int | None = None  # results of jobs completed before this expire
    expired: list[dict[str, Any]] = field(default_factory=list)  # (dry run: would expire)
    bytes_freed: int = 0
    finished: int = 0  # directories of jobs marked by a crashed sweep, deleted now
    # result files that could not be deleted (read-only storage, permissions): their jobs are marked,
    # so the next run deletes them (finish_marked)
    files_left: list[FileLeft] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(asdict(self), files_left=files_left_json(self.files_left))

    def summary(self) -> str:
        if not self.enabled:
            return "search results: collector disabled (results_cache.retention_period is null)"
        verb = "would expire" if self.dry_run else "expired"
        size = sum(e["bytes"] for e in self.expired)
        text = (f"search results: {verb} the results of {len(self.expired)} job(s) ({size} bytes), "
                f"completed before {iso_utc(self.expiry_ms)}")
        text += f"; finished {self.finished} directory deletion(s) of an earlier sweep" if self.finished else ""
        return text + (f"; {len(self.files_left)} file(s) could not be deleted" if self.files_left else "")


def _results_bytes(workspace: Workspace, job_id: int) -> int:
    return sum(f.size for f in workspace.storage.list_files(results_dir(job_id)))


def _present_result_dirs(workspace: Workspace) -> list[int]:
    """Job ids that have a results directory in storage (one listing, not one look-up per job)."""
    names = [posixpath.basename(entry.path) for entry in workspace.storage.list(RESULTS_DIR, recursive=False)
             if entry.is_dir]
    return sorted(int(n) for n in names if n.isdigit())


def finish_marked(workspace: Workspace, report: ResultGcReport) -> None:
    """Delete the directories of jobs already marked expired that still exist (idempotent)."""
    present = _present_result_dirs(workspace)
    if not present:
        return
    with workspace.db.read() as conn:
        marked = list(conn.execute(sa.select(jobs_table.c.id).where(
            jobs_table.c.id.in_(present), jobs_table.c.results_expired_ms.is_not(None))
            .order_by(jobs_table.c.id)).scalars())
    for job_id in marked:
        left = workspace.storage.delete_dir(results_dir(job_id)).failed
        report.files_left.extend(left)
        report.finished += 0 if left else 1
    if report.finished:
        log.info("search results: finished %d directory deletion(s) of an interrupted sweep", report.finished)


def _view(job: SearchJob, now: int, size: int) -> dict[str, Any]:
    done = completion_ms(job)
    return {"job_id": job.id, "dataset": job.dataset, "state": str(job.state), "completed_ms": done,
            "age_ms": now - done, "bytes": size, "results_count": job.results_count}


def collect_search_results(workspace: Workspace, dry_run: bool = False,
                           fence: LeaseFence | None = None) -> ResultGcReport:
    """One sweep of the search-result collector; a dry run changes nothing. `fence`: the service's
    "search-result-gc" lease (store/fencing.py); None for a manual sweep."""
    if not dry_run:
        workspace.storage.require_deletable()
    configure_gc_logging(workspace)
    retention = workspace.settings["results_cache.retention_period"]
    now = workspace.clock.now_ms()
    report = ResultGcReport(now_ms=now, dry_run=dry_run, enabled=retention is not None, retention_minutes=retention)
    if retention is None:
        log.info("search-result sweep: %s", report.summary())
        return report
    report.expiry_ms = now - retention_ms(retention)
    if not dry_run:
        finish_marked(workspace, report)
    with workspace.db.read() as conn:
        rows = conn.execute(sa.select(jobs_table).where(
            jobs_table.c.state.in_([str(s) for s in FINAL_STATES]), jobs_table.c.results_expired_ms.is_(None),
            sa.func.coalesce(jobs_table.c.completed_ms, jobs_table.c.created_ms) < report.expiry_ms))
        due = results_to_expire([job_from_row(r) for r in rows], now, retention)
    sizes = {job.id: _results_bytes(workspace, job.id) for job in due}
    if dry_run:
        report.expired = [_view(j, now, sizes[j.id]) for j in due]
        log.info("search-result sweep (dry run): %s", report.summary())
        return report
    marked: list[SearchJob] = []
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        for job in due:
            done = conn.execute(sa.update(jobs_table).where(
                jobs_table.c.id == job.id, jobs_table.c.results_expired_ms.is_(None),
                jobs_table.c.state != str(JobState.RUNNING)).values(results_expired_ms=now)).rowcount
            if not done:
                continue  # another collector took it meanwhile
            workspace.audit.append(conn, AuditEntry(
                "search_results_expire", f"search/{job.id}",
                f"results of search {job.id} ({job.state}) completed {iso_utc(completion_ms(job))}, more than "
                f"results_cache.retention_period {retention} min ago", sizes[job.id],
                {"job": job.id, "state": str(job.state), "completed_ms": completion_ms(job), "bytes": sizes[job.id],
                 "results_count": job.results_count, "expiry_ms": report.expiry_ms}))
            marked.append(job)
    fault_point("search_result_gc.after_mark")
    for job in marked:
        report.files_left.extend(workspace.storage.delete_dir(results_dir(job.id)).failed)
    report.expired = [_view(j, now, sizes[j.id]) for j in marked]
    report.bytes_freed = sum(sizes[j.id] for j in marked)
    log.info("search-result sweep: %s", report.summary())
    warn_files_left(log, "search-result sweep", report.files_left, LEFT_FOR)
    return report


__all__ = ["ResultGcReport", "collect_search_results", "finish_marked"]
