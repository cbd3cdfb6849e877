"""The garbage collectors under `tidekeep serve` (CLP's garbage_collector process, reference 2.2).

Two periodic tasks, looked at once per service pass: the archive collector every
`garbage_collector.sweep_interval.archive` minutes under the lease "archive-gc", the search-result
collector every `.search_result` minutes under the lease "search-result-gc". A collector whose
retention period is null is not started (as in CLP). The interval counts from the end of the last
sweep, recorded in the lease row's `work_done_ms`, which every process shares: whichever process
takes the lease sweeps, and the others see that it swept — two serve processes never both sweep
one interval. A sweep that fails is logged and tried again one interval later (CLP's collector
dies with its exception; ours never takes serve down). Each sweep gets its lease's fence: a
collector whose lease was taken over mid-sweep deletes nothing more, logs "lease lost" and records
no sweep (archives/gc.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import LeaseLost

if TYPE_CHECKING:
    from ..client import Client
    from ..service.scheduler import RetentionService
    from ..store.fencing import LeaseFence

log = logging.getLogger("tidekeep.archives.gc")

ARCHIVE_GC_RESOURCE = "archive-gc"
RESULT_GC_RESOURCE = "search-result-gc"
MINUTE_MS = 60_000


def sweep_due(last_end_ms: int | None, now_ms: int, interval_ms: int) -> bool:
    """A collector that never swept is due at once (CLP sweeps when it starts); afterwards one
    interval after the last sweep ended."""
    return last_end_ms is None or now_ms >= last_end_ms + interval_ms


@dataclass
class CollectorTask:
    """One collector as a periodic task of RetentionService (called with the service each pass)."""

    name: str
    resource: str
    interval_ms: int
    collect: Callable[[], Any]

    def _due(self, service: RetentionService) -> bool:
        row = service.leases.get(self.resource)
        return sweep_due(None if row is None else row.work_done_ms, service.clock.now_ms(), self.interval_ms)

    def __call__(self, service: RetentionService) -> bool:
        """True when this call swept successfully."""
        if not self._due(service):
            return False
        if not service._take(self.resource):
            log.debug("%s: another process holds the lease %s", self.name, self.resource)
            return False
        try:
            if not self._due(service):  # another process swept between our look and our lease
                return False
            ok = True
            try:
                result = self.collect()
                summary = getattr(result, "summary", None)
                log.info("%s: %s", self.name, summary() if callable(summary) else result)
            except LeaseLost as exc:  # taken over mid-sweep: the new holder sweeps; nothing to record
                service.lease_lost(self.resource, exc)
                return False
            except Exception as exc:  # logged; the next interval tries again; serve goes on
                ok = False
                log.warning("%s failed (next try in %d min): %s: %s", self.name, self.interval_ms // MINUTE_MS,
                            type(exc).__name__, exc)
            with service._held_lock:
                version = service.held.get(self.resource)
            if version is not None:
                service.leases.record_work_done(self.resource, service.owner, version, service.clock.now_ms())
            return ok
        finally:
            service._give_back(self.resource)


def collector_tasks(client: Client,
                    fence_of: Callable[[str], LeaseFence | None] = lambda resource: None) -> list[CollectorTask]:
    """The collectors whose retention period is set, with their sweep intervals. `fence_of` gives the
    fence of the collector's lease when its sweep starts (store/fencing.py; the service's `fence`)."""
    from .gc import collect_archives
    from .gc_results import collect_search_results

    settings = client.settings
    tasks = []
    if settings["archive_output.retention_period"] is not None:
        tasks.append(CollectorTask("archive collector", ARCHIVE_GC_RESOURCE,
                                   settings["garbage_collector.sweep_interval.archive"] * MINUTE_MS,
                                   lambda: collect_archives(client, fence=fence_of(ARCHIVE_GC_RESOURCE))))
    if settings["results_cache.retention_period"] is not None:
        tasks.append(CollectorTask("search-result collector", RESULT_GC_RESOURCE,
                                   settings["garbage_collector.sweep_interval.search_result"] * MINUTE_MS,
                                   lambda: collect_search_results(client, fence=fence_of(RESULT_GC_RESOURCE))))
    return tasks


__all__ = ["ARCHIVE_GC_RESOURCE", "RESULT_GC_RESOURCE", "CollectorTask", "collector_tasks", "sweep_due"]
