"""Scheduling of the controller service: which streams this process works on, then a thin loop.

Pure (values in, values out): each process's fair share of the streams and which stream leases to
take or give back (and, in service/stream_tasks.py, when a stream is due and its backoff).
The loop (`RetentionService.run_pass`) renews its membership, claims its share of the streams that
want per-stream work (retention cycles, watermarks: service/stream_tasks.py), then runs that work
and every other `PeriodicTask` (the sweep, the catalog, the collectors) through the one
`run_exclusive` (service/tasks.py). It is tested with injected work, without the families; the
service's assembly (service/assembly.py) decides what is injected.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..clock import Clock
from ..errors import LeaseLost
from ..store.fencing import LeaseFence
from ..store.leases import Lease, LeaseStore
from .stream_tasks import (
    RETENTION_PREFIX,
    RetentionTask,
    StreamTasks,
    WatermarkTask,
    due_at,
    most_overdue_first,
    stream_resource,
)
from .tasks import Outcome, PeriodicTask, run_exclusive

log = logging.getLogger("tidekeep.service")

MEMBER_PREFIX = "member:"
SWEEP_RESOURCE = "sweep"


# ---- pure core ---------------------------------------------------------------------------------
def fair_share(stream_count: int, member_count: int) -> int:
    """How many streams one of `member_count` live processes may hold: ceil(streams / members)."""
    return math.ceil(stream_count / max(1, member_count))


@dataclass(frozen=True)
class ClaimPlan:
    acquire: list[str] = field(default_factory=list)  # free streams to try, in order
    release: list[str] = field(default_factory=list)  # held streams beyond our share (or gone)


def plan_claims(streams: Sequence[str], mine: Iterable[str], others: Iterable[str], member_count: int) -> ClaimPlan:
    """Keep up to our fair share of the streams we hold, give back the rest (and streams that no
    longer have a policy), and try free streams until the share is full."""
    wanted = set(streams)
    mine_set, others_set = set(mine), set(others)
    share = fair_share(len(wanted), member_count)
    keep = sorted(mine_set & wanted)[:share]
    release = sorted(mine_set - set(keep))
    free = [s for s in sorted(wanted) if s not in mine_set and s not in others_set]
    return ClaimPlan(acquire=free[:max(0, share - len(keep))], release=release)


# ---- the loop ----------------------------------------------------------------------------------
@dataclass
class PassReport:
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # the lease was taken over during the cycle
    done: list[str] = field(default_factory=list)  # the periodic tasks (by resource) run successfully

    @property
    def swept(self) -> bool:
        return SWEEP_RESOURCE in self.done

    def note(self, stream: str, outcome: Outcome, skipped: bool) -> None:
        """File a retention cycle's outcome (not due or not held: nothing to file)."""
        if outcome is Outcome.DONE:
            (self.skipped if skipped else self.ran).append(stream)
        elif outcome is Outcome.FAILED:
            self.failed.append(stream)
        elif outcome is Outcome.LOST:
            self.lost.append(stream)


class RetentionService:
    """One process of the controller service. `run_pass` does one scheduling pass; `renew` (called
    from a heartbeat thread by the server) keeps every lease this process holds alive.

    `retention` and `watermarks` are the per-stream work (service/stream_tasks.py) run on the
    streams this process holds for its fair share; `tasks` the lease-exclusive periodic tasks,
    looked at in this order once per pass after the streams."""

    def __init__(self, leases: LeaseStore, clock: Clock, owner: str, *, ttl_ms: int,
                 retention: StreamTasks[RetentionTask] | None = None,
                 watermarks: StreamTasks[WatermarkTask] | None = None,
                 tasks: Sequence[PeriodicTask] = ()) -> None:
        self.leases = leases
        self.clock = clock
        self.owner = owner
        self.ttl_ms = ttl_ms
        self.retention = retention
        # watermarks (docs/watermarks.md): streams with recent writer marks are leased like retention streams (the
        # same "retention:<stream>" lease), and their owner computes a watermark every interval
        self.watermarks = watermarks
        self.tasks = list(tasks)
        self._watermark_owned: list[str] = []
        self._watermark_lock = threading.Lock()  # the pass and the server's watermark thread take turns
        self.held: dict[str, int] = {}  # resource → lease version we hold
        # resource → the version we were last granted, kept when the lease is lost or given back: the
        # fence of work started under it must go on refusing, not turn into "no fence"
        self._granted: dict[str, int] = {}
        self._held_lock = threading.Lock()
        self.stop = threading.Event()

    # leases -------------------------------------------------------------------------------------
    def take(self, resource: str) -> bool:
        """Take or renew the lease on `resource` for this process; False if another process holds it."""
        decision = self.leases.acquire(resource, self.owner, self.ttl_ms)
        with self._held_lock:
            if decision.granted:
                if resource not in self.held:
                    log.info("lease taken: %s (version %d)", resource, decision.lease.version)
                self.held[resource] = decision.lease.version
                self._granted[resource] = decision.lease.version
            elif self.held.pop(resource, None) is not None:
                log.warning("lease lost: %s is now held by %s", resource, decision.lease.owner)
        return decision.granted

    def give_back(self, resource: str) -> None:
        with self._held_lock:
            self.held.pop(resource, None)
        if self.leases.release(resource, self.owner):
            log.info("lease released: %s", resource)

    def renew(self) -> None:
        """Renew every held lease (heartbeat); a lease someone else took is dropped, logged."""
        with self._held_lock:
            resources = sorted(self.held)
        for resource in resources:
            self.take(resource)

    def release_all(self) -> list[str]:
        with self._held_lock:
            self.held.clear()
        released = self.leases.release_all(self.owner)
        for resource in released:
            log.info("lease released: %s", resource)
        return released

    def lease(self, resource: str) -> Lease | None:
        """The lease row on `resource` as stored (held by anyone, or not)."""
        return self.leases.get(resource)

    def record_work_done(self, resource: str, done_ms: int) -> None:
        """Note in the lease row that the work under `resource` was done at `done_ms` — only while
        this process holds the lease at the version it was granted (fenced: store/leases.py)."""
        with self._held_lock:
            version = self.held.get(resource)
        if version is not None:
            self.leases.record_work_done(resource, self.owner, version, done_ms)

    def holds(self, resource: str) -> bool:
        with self._held_lock:
            return resource in self.held

    def fence(self, resource: str) -> LeaseFence:
        """The fencing token of the lease on `resource` this process was last granted: passed to the
        work done under it, whose deleting transactions check it (store/fencing.py). If the heartbeat
        has meanwhile found the lease taken over, the fence is still that version, so the work is
        refused rather than run unfenced."""
        with self._held_lock:
            version = self._granted.get(resource)
        if version is None:
            raise LookupError(f"{self.owner} has never been granted the lease {resource}: no work may run under it")
        return LeaseFence(resource, self.owner, version)

    def lease_lost(self, resource: str, error: LeaseLost) -> None:
        """Work under `resource` was refused because another process took the lease over: forget the
        lease (no retry, no backoff: the work is the new holder's now; if the lease comes back, the
        next pass decides afresh)."""
        with self._held_lock:
            self.held.pop(resource, None)
        log.warning("lease lost: %s", error)

    # one pass -----------------------------------------------------------------------------------
    def run_pass(self) -> PassReport:
        report = PassReport()
        self.take(MEMBER_PREFIX + self.owner)
        now = self.clock.now_ms()
        # memberships of processes gone for over a TTL: their owner ids never come back
        self.leases.purge(MEMBER_PREFIX, now - self.ttl_ms)
        rows = self.leases.list()
        members = sum(1 for r in rows if r.resource.startswith(MEMBER_PREFIX) and r.held_at(now))
        policy_streams = self.retention.streams() if self.retention is not None else []
        watermark_streams = self.watermarks.streams() if self.watermarks is not None else []
        streams = sorted(set(policy_streams) | set(watermark_streams))
        mine = [r.resource[len(RETENTION_PREFIX):] for r in rows
                if r.resource.startswith(RETENTION_PREFIX) and r.owner == self.owner]
        others = [r.resource[len(RETENTION_PREFIX):] for r in rows
                  if r.resource.startswith(RETENTION_PREFIX) and r.owner not in (None, self.owner) and r.held_at(now)]
        plan = plan_claims(streams, mine, others, members)
        for stream in plan.release:
            self.give_back(stream_resource(stream))
        owned = [s for s in sorted(set(mine) - set(plan.release)) if self.take(stream_resource(s))]
        owned += [s for s in plan.acquire if self.take(stream_resource(s))]
        with self._watermark_lock:
            self._watermark_owned = sorted(set(owned) & set(watermark_streams))
        self.run_watermarks()
        if self.retention is not None:
            self._run_retention(sorted(set(owned) & set(policy_streams)), rows, report)
        for task in self.tasks:
            if self.stop.is_set():
                break
            if run_exclusive(self, task):
                report.done.append(task.resource)
        return report

    def _run_retention(self, owned: list[str], rows: list[Lease], report: PassReport) -> None:
        """The retention cycles of the owned streams that are due, most overdue first."""
        assert self.retention is not None
        retention = self.retention
        tasks = {stream: retention.task(stream) for stream in owned}
        shared_ends = {r.resource[len(RETENTION_PREFIX):]: r.work_done_ms for r in rows
                       if r.resource.startswith(RETENTION_PREFIX)}
        order = most_overdue_first({s: due_at(t.track, shared_ends.get(s), t.frequency_ms) for s, t in tasks.items()},
                                   self.clock.now_ms())
        for stream in order:
            if self.stop.is_set():
                break  # shutting down: the stream in hand is finished, no new one is started
            task = tasks[stream]
            report.note(stream, run_exclusive(self, task), task.skipped)

    def run_watermarks(self) -> list[str]:
        """Compute the watermark of every owned stream with recent marks whose last computation is an
        interval old; called by each pass and by the server's watermark thread (so a long retention
        cycle or catalog job does not stall watermarks). Returns the streams computed."""
        if self.watermarks is None:
            return []
        computed = []
        with self._watermark_lock:
            for stream in self._watermark_owned:
                if self.stop.is_set():
                    break
                task = self.watermarks.task(stream)
                if run_exclusive(self, task) and not task.skipped:
                    computed.append(stream)
        return computed
