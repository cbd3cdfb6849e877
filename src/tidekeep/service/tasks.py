"""Periodic work under a lease: one shape for every task, one way to run it.

A `PeriodicTask` names the lease it runs under (`resource`), says when it is due given the last
time its work was done (the lease row's `work_done_ms`, shared by every process, so a takeover
keeps the spacing) and runs. `run_exclusive` is the lease-guarded sequence every task goes
through, written once:

1. not due → nothing (no lease is taken just to look);
2. take the lease (or, for per-stream work, renew or confirm the stream lease this process already
   holds for its fair share: `LeaseUse`); another process holds it → nothing;
3. look again under the lease: another process may have done the work between the first look and
   our lease → nothing;
4. run; the work is fenced by the lease (store/fencing.py), so it raises LeaseLost once another
   process has taken the lease over: the lease is forgotten (no retry, no backoff: the work is the
   new holder's) and no work is recorded;
5. on success, record when the work counts as done (its start or its end, by the task), only while
   this process still holds the lease at the version it was granted (a fenced write);
   on failure, the task decides whether the attempt counts (an interval task waits a whole interval)
   or is retried by its own rule (a cron task's or a retention cycle's backoff); work that keeps its
   own time (`DoneAt.NEVER`: the watermarks, which share the stream lease with retention) records
   nothing, so the lease row's time stays the other work's;
6. give the lease back, whatever happened — unless it is a stream lease, which the process keeps
   for its fair share (service/scheduler.py gives it back when the share shrinks).

Invariants: at most one process runs a task at a time (the lease); a task's work is recorded once
per success; a task's failure never escapes `run_exclusive` (it is logged), so one task cannot stop
the service. Families expose plain functions; the service's assembly (service/assembly.py) wraps
them in the two task kinds below and in the per-stream ones (service/stream_tasks.py).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..catalog.schedule import Cron
from ..catalog.schedule import is_due as cron_is_due
from ..clock import Clock
from ..errors import LeaseLost
from ..store.leases import Lease

log = logging.getLogger("tidekeep.service")

MINUTE_MS = 60_000


class DoneAt(enum.Enum):
    """Which moment of a successful run is recorded as the work's time."""

    START = "start"  # a schedule: a fire time that comes while the run is going is still due after it
    END = "end"  # an interval: it counts from the end of the previous run
    NEVER = "never"  # the task keeps its own time: the lease row's time belongs to other work on the lease


class LeaseUse(enum.Enum):
    """How a task uses its lease."""

    EXCLUSIVE = "exclusive"  # taken for the run and given back after it (the sweep, the catalog, the collectors)
    RENEW = "renew"  # a stream lease held across passes: renewed just before the run (so the TTL counts
    #                  from there) and kept after it (a retention cycle)
    HELD = "held"  # a stream lease held across passes: the run only goes ahead while it is held, without
    #                a renewal, which the heartbeat does (a watermark, computed every second or so)


class Outcome(enum.Enum):
    """What `run_exclusive` did with a task; true only for DONE (the task ran successfully)."""

    NOT_DUE = "not due"
    NOT_HELD = "not held"  # another process holds the lease
    DONE = "done"
    FAILED = "failed"
    LOST = "lost"  # the lease was taken over during the run

    def __bool__(self) -> bool:
        return self is Outcome.DONE


class PeriodicTask(Protocol):
    """What `run_exclusive` needs of a task."""

    @property
    def name(self) -> str: ...  # in log lines

    @property
    def resource(self) -> str: ...  # the lease the task runs under

    @property
    def done_at(self) -> DoneAt: ...

    @property
    def lease_use(self) -> LeaseUse: ...

    def due(self, last_done_ms: int | None, now_ms: int) -> bool:
        """Is the work due now, given when it was last done by any process (None: never)?"""
        ...

    def run(self) -> None:
        """Do the work (and log its result); raises LeaseLost when the lease was taken over."""
        ...

    def failed(self, error: Exception, now_ms: int) -> bool:
        """The run raised `error` (not LeaseLost): log it; True when the attempt counts as done."""
        ...


class LeaseHolder(Protocol):
    """The leases of one service process, as `run_exclusive` uses them (scheduler.RetentionService)."""

    @property
    def clock(self) -> Clock: ...

    def lease(self, resource: str) -> Lease | None: ...

    def take(self, resource: str) -> bool: ...

    def holds(self, resource: str) -> bool: ...

    def give_back(self, resource: str) -> None: ...

    def record_work_done(self, resource: str, done_ms: int) -> None: ...

    def lease_lost(self, resource: str, error: LeaseLost) -> None: ...


def _due(holder: LeaseHolder, task: PeriodicTask, now_ms: int) -> bool:
    if task.done_at is DoneAt.NEVER:  # its own time: the lease row's is another task's
        return task.due(None, now_ms)
    row = holder.lease(task.resource)
    return task.due(None if row is None else row.work_done_ms, now_ms)


def _get_lease(holder: LeaseHolder, task: PeriodicTask) -> bool:
    if task.lease_use is LeaseUse.HELD:
        return holder.holds(task.resource)
    return holder.take(task.resource)


def run_exclusive(holder: LeaseHolder, task: PeriodicTask) -> Outcome:
    """Run `task` if it is due, under its lease (the sequence in this module's docstring). The
    outcome is true only when this call ran the task successfully."""
    if not _due(holder, task, holder.clock.now_ms()):
        return Outcome.NOT_DUE
    if not _get_lease(holder, task):
        log.debug("%s: another process holds the lease %s", task.name, task.resource)
        return Outcome.NOT_HELD
    try:
        if not _due(holder, task, holder.clock.now_ms()):  # another process did it meanwhile
            return Outcome.NOT_DUE
        began = holder.clock.now_ms()
        task.run()
        if task.done_at is not DoneAt.NEVER:
            holder.record_work_done(task.resource, began if task.done_at is DoneAt.START else holder.clock.now_ms())
        return Outcome.DONE
    except LeaseLost as exc:  # taken over mid-run: the new holder does the work; nothing recorded
        holder.lease_lost(task.resource, exc)
        return Outcome.LOST
    except Exception as exc:  # logged; tried again by the task's rule; the service goes on
        if task.failed(exc, holder.clock.now_ms()) and task.done_at is not DoneAt.NEVER:
            holder.record_work_done(task.resource, holder.clock.now_ms())
        return Outcome.FAILED
    finally:
        if task.lease_use is LeaseUse.EXCLUSIVE:
            holder.give_back(task.resource)


def summary_of(result: Any) -> str:
    """One log line for a result: its summary() if it has one, else its text."""
    summary = getattr(result, "summary", None)
    return str(summary() if callable(summary) else result)


@dataclass
class IntervalTask:
    """Work every `interval_ms`, counted from the end of the last run by any process; a task never
    run is due at once. `failure_counts`: a failed run waits a whole interval like a successful one
    (the collectors); otherwise it is tried again at the next look (the sweep)."""

    name: str
    resource: str
    interval_ms: int
    work: Callable[[], Any]
    failure_counts: bool = False
    logger: str = "tidekeep.service"
    done_at: DoneAt = DoneAt.END
    lease_use: LeaseUse = LeaseUse.EXCLUSIVE

    def due(self, last_done_ms: int | None, now_ms: int) -> bool:
        return interval_due(last_done_ms, now_ms, self.interval_ms)

    def run(self) -> None:
        logging.getLogger(self.logger).info("%s: %s", self.name, summary_of(self.work()))

    def failed(self, error: Exception, now_ms: int) -> bool:
        if self.failure_counts:
            logging.getLogger(self.logger).warning("%s failed (next try in %d min): %s: %s", self.name,
                                                   self.interval_ms // MINUTE_MS, type(error).__name__, error)
        else:
            logging.getLogger(self.logger).warning("%s failed: %s: %s", self.name, type(error).__name__, error)
        return self.failure_counts


def interval_due(last_done_ms: int | None, now_ms: int, interval_ms: int) -> bool:
    """Never run: due at once; afterwards once `interval_ms` has passed since the last run ended."""
    return last_done_ms is None or now_ms >= last_done_ms + interval_ms


def backoff_ms(failures: int, base_ms: int, cap_ms: int) -> int:
    """The wait before retry number `failures` (1, 2, ...): base, 2·base, 4·base, ... at most cap."""
    if failures < 1:
        raise ValueError("backoff is for one or more failures")
    # exponent bounded so the power never grows huge; beyond it the cap applies anyway
    return min(cap_ms, base_ms << min(failures - 1, 62))


@dataclass
class CronTask:
    """Work on a cron schedule (UTC). Due when the first fire time after the last run's START has
    come; a schedule never run counts from this task's first look (starting the service does not
    run it at once); fire times missed while no service ran are caught up by one run. A failed run
    is retried with exponential backoff from `retry_base_ms`, at most `retry_cap_ms` apart."""

    name: str
    resource: str
    cron: Cron
    work: Callable[[], Any]  # logs its own result lines
    retry_base_ms: int = 60_000
    retry_cap_ms: int = 3_600_000
    started_ms: int | None = None  # the first look: the anchor of a schedule never run
    failures: int = 0
    retry_at_ms: int | None = None
    done_at: DoneAt = field(default=DoneAt.START)
    lease_use: LeaseUse = LeaseUse.EXCLUSIVE

    def due(self, last_done_ms: int | None, now_ms: int) -> bool:
        if self.started_ms is None:
            self.started_ms = now_ms
        if self.retry_at_ms is not None and now_ms < self.retry_at_ms:
            return False
        last = last_done_ms if last_done_ms is not None else self.started_ms
        return cron_is_due(self.cron, last, now_ms)

    def run(self) -> None:
        self.work()
        self.failures, self.retry_at_ms = 0, None

    def failed(self, error: Exception, now_ms: int) -> bool:
        self.failures += 1
        wait = backoff_ms(self.failures, self.retry_base_ms, self.retry_cap_ms)
        self.retry_at_ms = now_ms + wait
        log.warning("%s run failed (attempt %d, retry in %d ms): %s: %s", self.name, self.failures, wait,
                    type(error).__name__, error)
        return False


__all__ = ["CronTask", "DoneAt", "IntervalTask", "LeaseHolder", "LeaseUse", "Outcome", "PeriodicTask", "backoff_ms",
           "interval_due", "run_exclusive", "summary_of"]
