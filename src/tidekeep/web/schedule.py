"""When `tidekeep serve` next runs each piece of periodic work, as the overview shows it: from the
settings the service reads (service/assembly.py) and, where recorded, when the work was last done
(the lease rows' `work_done_ms`, which every service process shares). The due rules are the
service's own (service/tasks.py `interval_due`, catalog/schedule.py `next_fire`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.schedule import next_fire
from ..config import Settings
from ..service.assembly import ARCHIVE_GC_RESOURCE, CATALOG_RESOURCE, COMPACTION_RESOURCE, RESULT_GC_RESOURCE
from ..service.scheduler import SWEEP_RESOURCE
from ..service.tasks import MINUTE_MS
from ..store.database import Database
from ..store.overview_queries import retention_cycles, work_done
from ..units import format_duration

# `tidekeep serve --sweep-every`'s default (cli/serve.py): the API process does not see the flag
DEFAULT_SWEEP_EVERY_MS = 3_600_000


@dataclass(frozen=True)
class Scheduled:
    work: str
    every: str  # the interval or the cron schedule, as text
    last_ms: int | None  # when it was last done (None: not recorded)
    next_ms: int  # when it is next due (at or before now: at the service's next pass)


def interval_next(last_ms: int | None, interval_ms: int, now_ms: int) -> int:
    """Never done: due now; otherwise `interval_ms` after the last run (service/tasks.py `interval_due`)."""
    return now_ms if last_ms is None else last_ms + interval_ms


def cron_next(cron: str, last_ms: int | None, now_ms: int) -> int:
    """The first fire time after the last run; never run: after now (the service anchors a schedule
    never run at its start, service/tasks.py `CronTask`)."""
    return next_fire(cron, now_ms if last_ms is None else last_ms)


def next_runs(db: Database, settings: Settings, now_ms: int) -> list[Scheduled]:
    """The periodic work of `tidekeep serve` with its last and next times, soonest first."""
    done = work_done(db, (SWEEP_RESOURCE, COMPACTION_RESOURCE, CATALOG_RESOURCE, ARCHIVE_GC_RESOURCE,
                          RESULT_GC_RESOURCE))
    frequency, cron = settings["retention.frequency"], settings["catalog.schedule"]
    cycled, earliest = retention_cycles(db)
    runs = [Scheduled(f"retention cycles ({cycled} stream(s) cycled so far)", f"every {format_duration(frequency)}",
                      earliest, interval_next(earliest, frequency, now_ms)),
            Scheduled("catalog retention job, then purge", f"cron {cron} (UTC)", done.get(CATALOG_RESOURCE),
                      cron_next(cron, done.get(CATALOG_RESOURCE), now_ms)),
            Scheduled("orphan sweep, expired transactions", f"every {format_duration(DEFAULT_SWEEP_EVERY_MS)} "
                      "(the default of --sweep-every)", done.get(SWEEP_RESOURCE),
                      interval_next(done.get(SWEEP_RESOURCE), DEFAULT_SWEEP_EVERY_MS, now_ms))]
    compaction = settings["chunks.compaction_interval"]
    if compaction:  # 0: the service does not compact
        runs.append(Scheduled("stream compaction", f"every {format_duration(compaction)}",
                              done.get(COMPACTION_RESOURCE), interval_next(done.get(COMPACTION_RESOURCE), compaction,
                                                                           now_ms)))
    for work, resource, period_key, interval_key in (
            ("archive collector", ARCHIVE_GC_RESOURCE, "archive_output.retention_period",
             "garbage_collector.sweep_interval.archive"),
            ("search-result collector", RESULT_GC_RESOURCE, "results_cache.retention_period",
             "garbage_collector.sweep_interval.search_result")):
        if settings[period_key] is None:  # the service does not start a collector without a retention period
            continue
        interval = settings[interval_key] * MINUTE_MS
        runs.append(Scheduled(work, f"every {format_duration(interval)}", done.get(resource),
                              interval_next(done.get(resource), interval, now_ms)))
    return sorted(runs, key=lambda r: r.next_ms)


__all__ = ["DEFAULT_SWEEP_EVERY_MS", "Scheduled", "cron_next", "interval_next", "next_runs"]
