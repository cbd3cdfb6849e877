"""Scheduling of the controller service: pure decisions, then a thin loop that applies them.

Pure (values in, values out): which owned streams are due (runs spaced by the frequency from the
END of the previous run), the retry backoff after a failure (exponential, capped), each process's
fair share of the streams and which stream leases to take or give back.
The loop (`RetentionService.run_pass`) loads leases, calls these and does the work; the retention
cycle and the watermark computation are injected callables and every other piece of periodic work
is a `PeriodicTask` (service/tasks.py) run through `run_exclusive`, so the loop is tested without
the retention API. The service's assembly (service/assembly.py) decides what is injected.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..clock import Clock
from ..errors import LeaseLost
from ..store.fencing import LeaseFence
from ..store.leases import Lease, LeaseStore
from .tasks import PeriodicTask, backoff_ms, run_exclusive

log = logging.getLogger("tidekeep.service")

RETENTION_PREFIX = "retention:"
MEMBER_PREFIX = "member:"
SWEEP_RESOURCE = "sweep"


# ---- pure core ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamTrack:
    """What this process knows about one stream's runs."""

    last_end_ms: int | None = None  # when the last run (ok or skipped) ended
    failures: int = 0  # consecutive failed runs
    retry_at_ms: int | None = None  # when a failed run may be retried


def is_due(last_end_ms: int | None, now_ms: int, frequency_ms: int) -> bool:
    """A stream never run is due; otherwise once `frequency_ms` has passed since its last run ENDED."""
    return last_end_ms is None or now_ms >= last_end_ms + frequency_ms


def due_at(track: StreamTrack, shared_last_end_ms: int | None, frequency_ms: int) -> int:
    """When the stream is next due: a failed stream at its retry time, otherwise `frequency_ms`
    after the later of the last ends this process and the lease row know of (0: now)."""
    if track.failures > 0 and track.retry_at_ms is not None:
        return track.retry_at_ms
    ends = [e for e in (track.last_end_ms, shared_last_end_ms) if e is not None]
    return max(ends) + frequency_ms if ends else 0


def due_streams(owned: Iterable[str], tracks: Mapping[str, StreamTrack], shared_ends: Mapping[str, int | None],
                now_ms: int, frequency_ms: int) -> list[str]:
    """The owned streams due now, most overdue first (ties by name)."""
    times = {s: due_at(tracks.get(s, StreamTrack()), shared_ends.get(s), frequency_ms) for s in owned}
    return sorted((s for s, at in times.items() if at <= now_ms), key=lambda s: (times[s], s))


def after_success(track: StreamTrack, ended_ms: int) -> StreamTrack:
    return StreamTrack(last_end_ms=ended_ms)


def after_failure(track: StreamTrack, ended_ms: int, base_ms: int, cap_ms: int) -> StreamTrack:
    failures = track.failures + 1
    return replace(track, failures=failures, retry_at_ms=ended_ms + backoff_ms(failures, base_ms, cap_ms))


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


def stream_resource(stream: str) -> str:
    return RETENTION_PREFIX + stream


# ---- the loop ----------------------------------------------------------------------------------
CycleFn = Callable[[str], Any]  # runs one retention cycle of a stream; returns its decision


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


class RetentionService:
    """One process of the controller service. `run_pass` does one scheduling pass; `renew` (called
    from a heartbeat thread by the server) keeps every lease this process holds alive."""

    def __init__(self, leases: LeaseStore, clock: Clock, owner: str, *, streams: Callable[[], list[str]],
                 cycle: CycleFn, frequency_ms: int, ttl_ms: int,
                 retry_base_ms: int = 1_000, skip_errors: tuple[type[BaseException], ...] = (),
                 describe: Callable[[str, Any], str] | None = None,
                 tasks: Sequence[PeriodicTask] = (),
                 watermark_streams: Callable[[], list[str]] | None = None,
                 watermark: Callable[[str], Any] | None = None, watermark_every_ms: int = 1_000) -> None:
        self.leases = leases
        self.clock = clock
        self.owner = owner
        self.list_streams = streams
        self.cycle = cycle
        self.frequency_ms = frequency_ms
        self.ttl_ms = ttl_ms
        self.retry_base_ms = retry_base_ms
        self.retry_cap_ms = max(retry_base_ms, frequency_ms)  # never retry less often than a normal run
        self.skip_errors = skip_errors
        self.describe = describe or (lambda stream, decision: f"ran {stream}: {decision!r}")
        # the periodic tasks (the sweep, the catalog job, the collectors), looked at in this order once
        # per pass after the streams, each run through run_exclusive (service/tasks.py)
        self.tasks = list(tasks)
        # watermarks (docs/watermarks.md): streams with recent writer marks are leased like retention streams (the
        # same "retention:<stream>" lease), and their owner computes a watermark every watermark_every_ms
        self.list_watermark_streams = watermark_streams
        self.watermark = watermark
        self.watermark_every_ms = watermark_every_ms
        self._watermark_owned: list[str] = []
        self._watermark_last: dict[str, int] = {}
        self._watermark_lock = threading.Lock()
        self.tracks: dict[str, StreamTrack] = {}
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
        policy_streams = self.list_streams()
        watermark_streams = self.list_watermark_streams() if self.watermark is not None and \
            self.list_watermark_streams is not None else []
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
        shared_ends = {r.resource[len(RETENTION_PREFIX):]: r.work_done_ms for r in rows
                       if r.resource.startswith(RETENTION_PREFIX)}
        with self._watermark_lock:
            self._watermark_owned = sorted(set(owned) & set(watermark_streams))
        self.run_watermarks()
        policy_owned = sorted(set(owned) & set(policy_streams))
        for stream in due_streams(policy_owned, self.tracks, shared_ends, self.clock.now_ms(), self.frequency_ms):
            if self.stop.is_set():
                break  # shutting down: the stream in hand is finished, no new one is started
            self._run_stream(stream, report)
        for task in self.tasks:
            if self.stop.is_set():
                break
            if run_exclusive(self, task):
                report.done.append(task.resource)
        return report

    def run_watermarks(self) -> list[str]:
        """Compute the watermark of every owned stream with recent marks whose last computation is
        `watermark_every_ms` old; called by each pass and by the server's watermark thread (so a long
        retention cycle or catalog job does not stall watermarks). Returns the streams computed."""
        if self.watermark is None:
            return []
        computed = []
        with self._watermark_lock:
            for stream in self._watermark_owned:
                if self.stop.is_set():
                    break
                now = self.clock.now_ms()
                last = self._watermark_last.get(stream)
                if last is not None and now < last + self.watermark_every_ms:
                    continue
                if not self.holds(stream_resource(stream)):  # lost to another process since the pass
                    continue
                self._watermark_last[stream] = now
                try:
                    result = self.watermark(stream)
                except LeaseLost as exc:
                    self.lease_lost(stream_resource(stream), exc)
                    continue
                except self.skip_errors as exc:
                    log.debug("watermark of %s skipped: %s", stream, exc)
                    continue
                except Exception as exc:  # logged; tried again at the next interval
                    log.warning("watermark of %s failed: %s: %s", stream, type(exc).__name__, exc)
                    continue
                computed.append(stream)
                if result is not None:
                    log.debug("watermark of %s: %r", stream, result)
        return computed

    def _run_stream(self, stream: str, report: PassReport) -> None:
        resource = stream_resource(stream)
        if not self.take(resource):  # renewed just before the work: the TTL counts from here
            return
        track = self.tracks.get(stream, StreamTrack())
        try:
            decision = self.cycle(stream)
        except LeaseLost as exc:  # taken over mid-cycle: nothing was applied; the new holder decides
            self.lease_lost(resource, exc)
            report.lost.append(stream)
            return
        except self.skip_errors as exc:
            log.info("skipped %s: %s (%s)", stream, exc, type(exc).__name__)
            self.tracks[stream] = after_success(track, self.clock.now_ms())
            report.skipped.append(stream)
        except Exception as exc:  # any failure is retried with backoff; the service keeps going
            self.tracks[stream] = after_failure(track, self.clock.now_ms(), self.retry_base_ms, self.retry_cap_ms)
            wait = self.tracks[stream].retry_at_ms - self.clock.now_ms()  # type: ignore[operator]
            log.warning("failed %s (attempt %d, retry in %d ms): %s: %s", stream, self.tracks[stream].failures,
                        wait, type(exc).__name__, exc)
            report.failed.append(stream)
            return
        else:
            self.tracks[stream] = after_success(track, self.clock.now_ms())
            log.info("%s", self.describe(stream, decision))
            report.ran.append(stream)
        self.record_work_done(resource, self.tracks[stream].last_end_ms or 0)
