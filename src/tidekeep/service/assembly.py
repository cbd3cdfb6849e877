"""The service's assembly: the one place that knows every family's periodic work.

It takes the Workspace and the family facades the work comes from (`Families`, which the CLI
builds with `families_of`), never the client facade above the service; wraps the families' plain
functions into the service's task shapes (service/tasks.py, service/stream_tasks.py) and hands them
to the scheduler (service/scheduler.py), in this order per pass:

- watermarks of the streams with recent writer marks, under the per-stream leases
  "retention:<stream>" (streams/watermark_store.py), every `watermark_every_ms`;
- retention cycles of the streams with a policy, under the same per-stream leases;
- housekeeping every `sweep_every_ms` under the lease "sweep": abort expired transactions, prune
  watermarks, sweep orphan chunk files;
- compaction of every stream's small chunks every `chunks.compaction_interval` (0: never) under
  the lease "compaction" (streams/compaction_store.py);
- the catalog retention job and then the purge on `catalog.schedule` (cron, UTC) under the lease
  "catalog" (catalog/schedule.py parses the schedule);
- the archive collector every `garbage_collector.sweep_interval.archive` minutes under the lease
  "archive-gc" and the search-result collector every `.search_result` minutes under
  "search-result-gc" (archives/gc.py, archives/gc_results.py); a collector whose retention period
  is null is not started. A failed sweep of a collector waits a whole interval, as a successful one.

Each piece of work is handed the fence of the lease it runs under, looked up when it starts
(store/fencing.py): its deleting transactions are refused once another process has taken that
lease over.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import errors
from ..catalog.api import Catalog
from ..catalog.schedule import parse_cron

# Every family's hold kinds and coverage are registered before any deleting work runs
# (docs/holds.md): the client imports them as it is built, and the service runs without a client.
from ..holds import load_family_holds  # noqa: F401 (importing it registers the families' hold kinds)
from ..store.fencing import LeaseFence
from ..store.house import Workspace
from ..store.leases import LeaseStore, new_owner_id
from ..streams.compaction_store import Compactor
from ..streams.controller import StreamController
from ..streams.of_workspace import stream_controller
from ..streams.retention_store import RetentionManager
from ..streams.txn_store import TransactionStore
from ..streams.watermark_store import WatermarkStore
from .scheduler import SWEEP_RESOURCE, RetentionService
from .stream_tasks import RetentionTask, StreamTasks, WatermarkTask, retention_tasks, stream_resource, watermark_tasks
from .tasks import MINUTE_MS, CronTask, IntervalTask, PeriodicTask

log = logging.getLogger("tidekeep.service")

CATALOG_RESOURCE = "catalog"
COMPACTION_RESOURCE = "compaction"
ARCHIVE_GC_RESOURCE = "archive-gc"
RESULT_GC_RESOURCE = "search-result-gc"
COLLECTOR_LOGGER = "tidekeep.archives.gc"


@dataclass(frozen=True)
class ServeOptions:
    frequency_ms: int
    lease_ttl_ms: int
    sweep_every_ms: int
    once: bool = False
    json_logs: bool = False
    retry_base_ms: int = 1_000
    catalog: bool = True  # run the catalog job and purge on catalog.schedule
    archives: bool = True  # run the archive and search-result collectors
    compaction: bool = True  # compact small chunks every chunks.compaction_interval
    watermark_every_ms: int | None = 1_000  # compute watermarks this often; None: not at all


@dataclass(frozen=True)
class Families:
    """The family facades the service's work comes from, over one workspace."""

    streams: StreamController  # the orphan-chunk sweep
    transactions: TransactionStore  # expiring transactions whose lease ran out
    retention: RetentionManager  # the streams with a policy and their retention cycles
    watermarks: WatermarkStore  # the streams with recent writer marks, their watermarks, pruning
    catalog: Catalog  # the catalog job and purge


def families_of(workspace: Workspace) -> Families:
    """The family facades over `workspace` (the archive collectors are plain functions of it)."""
    streams = stream_controller(workspace)
    return Families(streams=streams, transactions=TransactionStore(streams),
                    retention=RetentionManager(streams, workspace.settings["retention.frequency"]),
                    watermarks=WatermarkStore(streams), catalog=Catalog(workspace))


FenceOf = Callable[[str], LeaseFence | None]  # the fence of a lease this process holds, by resource


def no_fences(resource: str) -> LeaseFence | None:
    return None


def skip_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean "this stream cannot be truncated now" — logged and skipped until its next
    run, never retried with backoff: a legal hold, a stream deleted or sealed meanwhile."""
    return (errors.HoldActive, errors.NotFound, errors.StreamSealed)


# ---- the task builders --------------------------------------------------------------------------
def sweep_task(housekeeping: Callable[[], Any], every_ms: int) -> IntervalTask:
    """The housekeeping under the lease "sweep"; a failed sweep is tried again at the next look."""
    return IntervalTask("sweep", SWEEP_RESOURCE, every_ms, housekeeping)


def describe_result(result: Any) -> str:
    """One log line for a run report: its summary(), or its rows and bytes (the job's RunReport)."""
    summary = getattr(result, "summary", None)
    if callable(summary):
        return str(summary())
    if hasattr(result, "rows") and hasattr(result, "bytes"):
        return (f"run {getattr(result, 'run_id', None)}: {result.rows} record(s), {result.bytes} bytes logically "
                f"deleted; state {getattr(result, 'state', '?')}")
    return repr(result)


def compaction_task(workspace: Workspace, families: Families, fence_of: FenceOf) -> IntervalTask | None:
    """Every stream's small chunks merged, under the lease "compaction"; None when
    chunks.compaction_interval is 0."""
    every_ms = workspace.settings["chunks.compaction_interval"]
    if not every_ms:
        return None
    target = workspace.settings["chunks.target_size"]
    compactor = Compactor(families.streams)

    def compact() -> str:
        results = compactor.compact_all(target, fence_of(COMPACTION_RESOURCE))
        merged = [r for r in results if r.groups_merged or r.groups_skipped]
        return f"compacted {len(merged)} of {len(results)} stream(s)" + "".join(f"; {r.summary()}" for r in merged)

    return IntervalTask("compaction", COMPACTION_RESOURCE, every_ms, compact)


def catalog_task(cron: str, run_job: Callable[[], Any], purge: Callable[[], Any],
                 retry_base_ms: int = 60_000, retry_cap_ms: int = 3_600_000) -> CronTask:
    """The catalog retention job, then the purge (not after a failed job), on the cron schedule
    `cron`, under the lease "catalog". A failure of either fails the run: both are retried."""
    def job_then_purge() -> None:
        log.info("catalog job: %s", describe_result(run_job()))
        log.info("catalog purge: %s", describe_result(purge()))

    return CronTask("catalog", CATALOG_RESOURCE, parse_cron(cron), job_then_purge, retry_base_ms=retry_base_ms,
                    retry_cap_ms=retry_cap_ms)


def collector_task(name: str, resource: str, interval_ms: int, collect: Callable[[], Any]) -> IntervalTask:
    """A garbage collector every `interval_ms` (from the end of the last sweep by any process, so two
    services never both sweep one interval); one never run sweeps at once, as CLP's do when they start."""
    return IntervalTask(name, resource, interval_ms, collect, failure_counts=True, logger=COLLECTOR_LOGGER)


def collector_tasks(workspace: Workspace, fence_of: FenceOf = no_fences) -> list[IntervalTask]:
    """The collectors whose retention period is set, with their sweep intervals."""
    from ..archives.gc import collect_archives
    from ..archives.gc_results import collect_search_results

    settings = workspace.settings
    tasks = []
    if settings["archive_output.retention_period"] is not None:
        tasks.append(collector_task("archive collector", ARCHIVE_GC_RESOURCE,
                                    settings["garbage_collector.sweep_interval.archive"] * MINUTE_MS,
                                    lambda: collect_archives(workspace, fence=fence_of(ARCHIVE_GC_RESOURCE))))
    if settings["results_cache.retention_period"] is not None:
        tasks.append(collector_task("search-result collector", RESULT_GC_RESOURCE,
                                    settings["garbage_collector.sweep_interval.search_result"] * MINUTE_MS,
                                    lambda: collect_search_results(workspace, fence=fence_of(RESULT_GC_RESOURCE))))
    return tasks


# ---- the work itself -----------------------------------------------------------------------------
def maintain(workspace: Workspace, families: Families, fence: LeaseFence | None = None) -> str:
    """The periodic housekeeping under the sweep lease: abort transactions whose lease ran out
    (their staged files go with them), prune watermarks wholly before the streams' heads, then sweep
    orphan chunk files older than `sweep.grace` — each refused (LeaseLost) once another process has
    taken the lease over. Files that cannot be deleted (read-only storage) are logged as warnings by
    the expiry and the sweep, counted here, and tried again by the next sweep."""
    expired = families.transactions.expire(fence)
    if expired:
        log.info("aborted %d expired transaction(s): %s", len(expired), ", ".join(expired))
    pruned = families.watermarks.prune_all(fence)
    swept = families.streams.sweep(workspace.settings["sweep.grace"], fence)
    text = f"{swept}; expired transactions: {len(expired)}; watermarks pruned: {pruned}"
    return text + (f"; files left (could not be deleted): {len(swept.files_left)}" if swept.files_left else "")


def periodic_tasks(workspace: Workspace, families: Families, options: ServeOptions,
                   fence_of: FenceOf = no_fences) -> list[PeriodicTask]:
    """The lease-exclusive tasks, in the order a pass looks at them."""
    tasks: list[PeriodicTask] = [sweep_task(lambda: maintain(workspace, families, fence_of(SWEEP_RESOURCE)),
                                            options.sweep_every_ms)]
    compaction = compaction_task(workspace, families, fence_of) if options.compaction else None
    if compaction is not None:
        tasks.append(compaction)
    if options.catalog:
        catalog = families.catalog
        tasks.append(catalog_task(workspace.settings["catalog.schedule"],
                                  run_job=lambda: catalog.run(fence=fence_of(CATALOG_RESOURCE)),
                                  purge=lambda: catalog.purge(fence=fence_of(CATALOG_RESOURCE)),
                                  retry_base_ms=max(options.retry_base_ms, 1_000)))
    if options.archives:
        tasks += collector_tasks(workspace, fence_of)
    return tasks


def retention_work(workspace: Workspace, families: Families, options: ServeOptions,
                   describe: Callable[[str, Any], str], fence_of: FenceOf = no_fences) -> StreamTasks[RetentionTask]:
    """The retention cycles of the streams with a policy, each fenced by its stream lease."""
    retention = families.retention
    return retention_tasks(retention.streams_with_policy,
                           lambda stream: retention.run(stream, fence=fence_of(stream_resource(stream))),
                           clock=workspace.clock, frequency_ms=options.frequency_ms,
                           retry_base_ms=options.retry_base_ms, skip_errors=skip_errors(), describe=describe)


def watermark_work(workspace: Workspace, families: Families, options: ServeOptions, owner: str | None,
                   fence_of: FenceOf = no_fences) -> StreamTasks[WatermarkTask] | None:
    """The watermark computations of the streams with recent writer marks (streams/watermark_store.py),
    each fenced by its stream lease; None when watermarks are off."""
    if options.watermark_every_ms is None:
        return None
    store = families.watermarks

    def compute(stream: str) -> Any:
        watermark = store.compute(stream, owner, fence=fence_of(stream_resource(stream)))
        if watermark is not None:
            log.info("watermark %s revision %d: lower=%d upper=%d", stream, watermark.revision,
                     watermark.lower_time_ms, watermark.upper_time_ms)
        return watermark

    return watermark_tasks(store.streams_due, compute, clock=workspace.clock, every_ms=options.watermark_every_ms,
                           skip_errors=skip_errors())


def assemble(workspace: Workspace, families: Families, options: ServeOptions, owner: str | None,
             describe: Callable[[str, Any], str]) -> RetentionService:
    """The service with the real work; `describe` renders a retention decision in one log line."""
    owner = owner or new_owner_id()
    service: RetentionService | None = None

    def fence_of(resource: str) -> LeaseFence:
        assert service is not None  # work only starts once the service below exists, after its lease is taken
        return service.fence(resource)

    service = RetentionService(
        LeaseStore(workspace.db, workspace.clock), workspace.clock, owner, ttl_ms=options.lease_ttl_ms,
        retention=retention_work(workspace, families, options, describe, fence_of),
        watermarks=watermark_work(workspace, families, options, owner, fence_of),
        tasks=periodic_tasks(workspace, families, options, fence_of))
    return service


__all__ = ["ARCHIVE_GC_RESOURCE", "CATALOG_RESOURCE", "RESULT_GC_RESOURCE", "Families", "ServeOptions", "assemble",
           "catalog_task", "collector_task", "collector_tasks", "describe_result", "families_of", "maintain",
           "periodic_tasks", "retention_work", "skip_errors", "sweep_task", "watermark_work"]
