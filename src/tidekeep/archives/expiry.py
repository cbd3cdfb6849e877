"""The garbage collectors' decisions, as pure functions of values (no store, storage or Spark).

Archive expiry (docs/design/archives.md#safe-expiry): with retention TTL (minutes), the *safe expiry* is
`base − TTL`, where `base` is the creation time of the oldest RUNNING search job, or `now` when
none runs. An archive expires iff it has timestamps and its newest one (`end_ts`) is before the
safe expiry: `end_ts < expiry`, i.e. `now − end_ts > TTL`. A search created at `C`
reads only archives with `end_ts ≥ C − TTL` (its lower bound, fixed at creation), so no archive a
running search may read is ever a candidate. CLP works in whole seconds; we work in milliseconds,
so with TTL 1 h an archive ending 16:00:00.000 is kept at 17:00:00.000 and expired at 17:00:00.001.

Beyond CLP: a RUNNING search whose process died is marked FAILED first — it promised a heartbeat
every `heartbeat_interval_ms` and none came for more than MISSED_HEARTBEATS intervals — and a
search RUNNING longer than `search.max_runtime` is KILLED; either then holds nothing back, so
neither a dead nor a hanging search stops collection for long. Held archives (a hold on the
archive or on its dataset) are never candidates; they are reported as held.

Search results expire `retention` after their job's completion time
(docs/design/archives.md#search-results), for every final state (SUCCEEDED, FAILED, CANCELLED,
KILLED); a RUNNING job's results never expire.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from .model import FINAL_STATES, Archive, JobState, SearchJob

MINUTE_MS = 60_000


def retention_ms(retention_minutes: int) -> int:
    return retention_minutes * MINUTE_MS


def safe_expiry_ms(now_ms: int, retention_minutes: int, oldest_running_created_ms: int | None) -> int:
    """CLP's safe expiry: the oldest RUNNING search job's creation time replaces `now`. A job
    created at or after `now` cannot hold anything back (its lower bound is later still)."""
    base = now_ms if oldest_running_created_ms is None else min(now_ms, oldest_running_created_ms)
    return base - retention_ms(retention_minutes)


def is_expired(end_ts: int | None, expiry_ms: int) -> bool:
    """Expired iff the archive has timestamps and its newest is strictly before the expiry; an
    archive without timestamps never expires."""
    return end_ts is not None and end_ts < expiry_ms


# A search silent for more than this many of its heartbeat intervals is taken for dead. Three, so
# that one or two late beats (a busy metadata store, a long garbage collection pause in the
# searching process) never fail a live search.
MISSED_HEARTBEATS = 3


def heartbeat_deadline_ms(job: SearchJob) -> int | None:
    """The last moment at which the job still counts as alive without a new heartbeat: its last
    heartbeat + MISSED_HEARTBEATS intervals. None for a job without heartbeats (created before
    them, or promising none): only search.max_runtime ends that one."""
    if job.heartbeat_ms is None or job.heartbeat_interval_ms is None:
        return None
    return job.heartbeat_ms + MISSED_HEARTBEATS * job.heartbeat_interval_ms


def jobs_without_heartbeat(jobs: Iterable[SearchJob], now_ms: int) -> list[SearchJob]:
    """RUNNING jobs whose process died: `now − last heartbeat > MISSED_HEARTBEATS × interval`
    (exactly that many intervals of silence is still alive)."""
    def dead(job: SearchJob) -> bool:
        deadline = heartbeat_deadline_ms(job)
        return job.state is JobState.RUNNING and deadline is not None and now_ms > deadline

    return sorted((j for j in jobs if dead(j)), key=lambda j: j.id)


def jobs_to_kill(jobs: Iterable[SearchJob], now_ms: int, max_runtime_ms: int) -> list[SearchJob]:
    """RUNNING jobs that have run longer than `search.max_runtime` (created before now − max)."""
    limit = now_ms - max_runtime_ms
    return sorted((j for j in jobs if j.state is JobState.RUNNING and j.created_ms < limit), key=lambda j: j.id)


def is_held(archive: Archive, held_datasets: Collection[str], held_archives: Collection[str]) -> bool:
    return archive.dataset in held_datasets or archive.id in held_archives


@dataclass(frozen=True)
class ArchivePlan:
    """One sweep's decision: which searches to fail or kill, the expiry, what to delete and what is held."""

    now_ms: int
    retention_minutes: int
    expiry_ms: int
    held_back_by: SearchJob | None  # the oldest RUNNING job that moved expiry earlier than now − TTL
    kill: list[SearchJob] = field(default_factory=list)  # RUNNING longer than search.max_runtime: KILLED
    dead: list[SearchJob] = field(default_factory=list)  # no heartbeat for too long: FAILED
    candidates: list[Archive] = field(default_factory=list)  # expired, not held: to delete
    held: list[Archive] = field(default_factory=list)  # expired but held: kept


def plan_archive_sweep(now_ms: int, retention_minutes: int, max_runtime_ms: int, archives: Iterable[Archive],
                       jobs: Iterable[SearchJob], held_datasets: Collection[str],
                       held_archives: Collection[str]) -> ArchivePlan:
    """Fail dead searches and kill overlong ones, compute the safe expiry from the searches still
    RUNNING (those created before now, as CLP asks), and split the expired archives into candidates
    and held. A search both dead and overlong is failed: that its process died says more."""
    jobs = list(jobs)
    dead = jobs_without_heartbeat(jobs, now_ms)
    ended = {j.id for j in dead}
    kill = jobs_to_kill((j for j in jobs if j.id not in ended), now_ms, max_runtime_ms)
    ended |= {j.id for j in kill}
    running = [j for j in jobs if j.state is JobState.RUNNING and j.id not in ended and j.created_ms < now_ms]
    oldest = min(running, key=lambda j: (j.created_ms, j.id), default=None)
    expiry = safe_expiry_ms(now_ms, retention_minutes, None if oldest is None else oldest.created_ms)
    held_back_by = oldest if oldest is not None and expiry < now_ms - retention_ms(retention_minutes) else None
    candidates: list[Archive] = []
    held: list[Archive] = []
    for archive in sorted(archives, key=lambda a: (a.dataset, a.end_ts or 0, a.id)):
        if not is_expired(archive.end_ts, expiry):
            continue
        (held if is_held(archive, held_datasets, held_archives) else candidates).append(archive)
    return ArchivePlan(now_ms, retention_minutes, expiry, held_back_by, kill, dead, candidates, held)


def recheck_candidates(candidates: Sequence[Archive], expiry_ms: int, held_datasets: Collection[str],
                       held_archives: Collection[str]) -> tuple[list[Archive], list[Archive]]:
    """Inside the deleting transaction: (still to delete, now kept) — a hold or a new RUNNING
    search (an earlier expiry) may have appeared since the candidates were chosen."""
    delete: list[Archive] = []
    keep: list[Archive] = []
    for archive in candidates:
        ok = is_expired(archive.end_ts, expiry_ms) and not is_held(archive, held_datasets, held_archives)
        (delete if ok else keep).append(archive)
    return delete, keep


def completion_ms(job: SearchJob) -> int:
    """When a job ended. Every final state records completed_ms; a row without one (written by
    hand, say) falls back to its creation time rather than keeping its results forever."""
    return job.completed_ms if job.completed_ms is not None else job.created_ms


def results_to_expire(jobs: Iterable[SearchJob], now_ms: int, retention_minutes: int) -> list[SearchJob]:
    """Ended jobs whose results are not yet expired and whose completion is older than the TTL:
    `completion < now − TTL` (`now − completion > TTL`)."""
    limit = now_ms - retention_ms(retention_minutes)
    return sorted((j for j in jobs if j.state in FINAL_STATES and j.results_expired_ms is None
                   and completion_ms(j) < limit), key=lambda j: j.id)


# ---- the orphan sweep --------------------------------------------------------------------------
STAGING_PREFIX = "_ingest-"  # an ingest writes under archives/<dataset>/_ingest-<id>/ before moving files in place


@dataclass(frozen=True)
class StoredEntry:
    path: str  # relative to the storage root, e.g. archives/web/<id>.parquet
    mtime_ms: int | None  # None: the filesystem does not say (object-store "directories")
    size: int
    is_dir: bool


@dataclass(frozen=True)
class OrphanPlan:
    files: list[StoredEntry]  # unnamed archive files older than the grace, in no dataset with an active ingest
    staging_dirs: list[str]  # staging directories of ingests that are over (removed after their files)
    busy_datasets: list[str]  # datasets skipped this time: an ingest there changed something within the grace


def _dataset_and_staging(path: str) -> tuple[str | None, str | None]:
    parts = path.split("/")
    if len(parts) < 3:
        return None, None
    staging = "/".join(parts[:3]) if parts[2].startswith(STAGING_PREFIX) else None
    return parts[1], staging


def plan_orphans(entries: Iterable[StoredEntry], named: Collection[str], cutoff_ms: int) -> OrphanPlan:
    """Files under archives/ that no archive row or journal row names and that are older than the
    grace (`cutoff_ms = now − sweep.grace`) are left by a crashed ingest. A file of unknown age is
    never deleted. An ingest can run longer than the grace, so a dataset where one may be running
    is left alone until it has registered its archives and removed its staging directory. It shows
    as any of (docs/archives-retention.md#orphan-sweep-on-an-object-store):

    - a staging directory that changed within the grace: a file written into it or moved out of it
      (local roots; a rename keeps the file's own mtime but touches both directories);
    - a staging file that changed within the grace, or whose time the store does not give;
    - an unnamed file in place (archives/<dataset>/<id>.parquet) that changed within the grace, or
      whose time the store does not give: an ingest moving its files in and not yet registered. On
      an object store that is the only sign once the moves began, as it has no directory times and
      a move is a copy, which gives the copy a new modification time while the staged files still
      waiting to move keep their old ones.
    """
    entries = list(entries)
    busy: set[str] = set()
    staging_dirs: set[str] = set()
    for entry in entries:
        dataset, staging = _dataset_and_staging(entry.path)
        if dataset is None:
            continue
        if staging is not None:
            staging_dirs.add(staging)
        elif entry.is_dir or entry.path in named:
            continue  # only an unnamed file in place says a move happened
        # an entry of unknown age may be an upload or a move in flight. A directory without a time
        # says nothing (object stores have no directory times)
        if entry.mtime_ms >= cutoff_ms if entry.mtime_ms is not None else not entry.is_dir:
            busy.add(dataset)
    files = [e for e in entries if not e.is_dir and e.path not in named and e.mtime_ms is not None
             and e.mtime_ms < cutoff_ms and _dataset_and_staging(e.path)[0] not in busy]
    stale = [d for d in staging_dirs if _dataset_and_staging(d)[0] not in busy]
    return OrphanPlan(sorted(files, key=lambda e: e.path), sorted(stale), sorted(busy))


__all__ = ["MISSED_HEARTBEATS", "ArchivePlan", "OrphanPlan", "StoredEntry", "completion_ms", "heartbeat_deadline_ms",
           "is_expired", "is_held", "jobs_to_kill", "jobs_without_heartbeat", "plan_archive_sweep", "plan_orphans",
           "recheck_candidates", "results_to_expire", "retention_ms", "safe_expiry_ms"]
