"""Per-stream periodic work: a retention cycle and a watermark computation as `PeriodicTask`s.

Each stream with a retention policy, or with recent writer marks, has a lease
"retention:<stream>", which one process holds for its fair share of the streams
(service/scheduler.py decides the share). The two kinds of work on a stream are tasks of the
shape in service/tasks.py, run through the same `run_exclusive`, that use that lease rather than
take one of their own (`LeaseUse`):

- `RetentionTask`: due `frequency_ms` after its previous run ENDED, by this process or, via the
  lease row's work time, by whichever process held the stream before (so a takeover keeps the
  spacing); a failure is retried with exponential backoff, capped at the frequency; a skip error
  (a legal hold, a stream deleted or sealed) is logged and waits for the next run, never retried
  with backoff. Its lease is renewed just before the cycle.
- `WatermarkTask`: due `every_ms` after its previous computation started, on its own time (the
  lease row's time is retention's); runs only while the lease is held, without renewing it.

The pure decisions (when a stream is due, what a success or a failure does to its track) are plain
functions here, tested against brute-force oracles. `StreamTasks` is one kind of per-stream work:
which streams want it and each stream's task, kept across passes (a task holds its track).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Generic, TypeVar

from ..clock import Clock
from ..errors import LeaseLost
from .tasks import DoneAt, LeaseUse, PeriodicTask, backoff_ms, interval_due

log = logging.getLogger("tidekeep.service")

RETENTION_PREFIX = "retention:"


def stream_resource(stream: str) -> str:
    """The lease of a stream's per-stream work."""
    return RETENTION_PREFIX + stream


# ---- pure decisions ----------------------------------------------------------------------------
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
    return most_overdue_first({s: due_at(tracks.get(s, StreamTrack()), shared_ends.get(s), frequency_ms)
                               for s in owned}, now_ms)


def most_overdue_first(due_times: Mapping[str, int], now_ms: int) -> list[str]:
    """The streams whose due time has come, earliest due time first (ties by name)."""
    return sorted((s for s, at in due_times.items() if at <= now_ms), key=lambda s: (due_times[s], s))


def after_success(track: StreamTrack, ended_ms: int) -> StreamTrack:
    return StreamTrack(last_end_ms=ended_ms)


def after_failure(track: StreamTrack, ended_ms: int, base_ms: int, cap_ms: int) -> StreamTrack:
    failures = track.failures + 1
    return replace(track, failures=failures, retry_at_ms=ended_ms + backoff_ms(failures, base_ms, cap_ms))


# ---- the tasks ---------------------------------------------------------------------------------
def describe_plainly(stream: str, decision: Any) -> str:
    return f"ran {stream}: {decision!r}"


@dataclass
class RetentionTask:
    """One stream's retention cycle (`cycle(stream)` returns its decision, rendered by `describe`)."""

    stream: str
    cycle: Callable[[str], Any]
    clock: Clock
    frequency_ms: int
    retry_base_ms: int = 1_000
    skip_errors: tuple[type[BaseException], ...] = ()
    describe: Callable[[str, Any], str] = describe_plainly
    track: StreamTrack = field(default_factory=StreamTrack)
    skipped: bool = False  # the last successful run was a skip
    done_at: DoneAt = DoneAt.END
    lease_use: LeaseUse = LeaseUse.RENEW

    @property
    def name(self) -> str:
        return f"retention of {self.stream}"

    @property
    def resource(self) -> str:
        return stream_resource(self.stream)

    @property
    def retry_cap_ms(self) -> int:
        return max(self.retry_base_ms, self.frequency_ms)  # never retried less often than a normal run

    def due(self, last_done_ms: int | None, now_ms: int) -> bool:
        return due_at(self.track, last_done_ms, self.frequency_ms) <= now_ms

    def run(self) -> None:
        self.skipped = False
        try:
            decision = self.cycle(self.stream)
        except LeaseLost:  # run_exclusive forgets the lease: the new holder decides
            raise
        except self.skip_errors as exc:
            log.info("skipped %s: %s (%s)", self.stream, exc, type(exc).__name__)
            self.track = after_success(self.track, self.clock.now_ms())
            self.skipped = True
            return
        self.track = after_success(self.track, self.clock.now_ms())
        log.info("%s", self.describe(self.stream, decision))

    def failed(self, error: Exception, now_ms: int) -> bool:
        self.track = after_failure(self.track, now_ms, self.retry_base_ms, self.retry_cap_ms)
        wait = (self.track.retry_at_ms or now_ms) - now_ms
        log.warning("failed %s (attempt %d, retry in %d ms): %s: %s", self.stream, self.track.failures, wait,
                    type(error).__name__, error)
        return False  # retried at its backoff, not a frequency later


@dataclass
class WatermarkTask:
    """One stream's watermark computation (`compute(stream)` returns the watermark or None)."""

    stream: str
    compute: Callable[[str], Any]
    clock: Clock
    every_ms: int
    skip_errors: tuple[type[BaseException], ...] = ()
    last_ms: int | None = None  # when the last computation started (failed or not)
    skipped: bool = False  # the last successful run was a skip
    done_at: DoneAt = DoneAt.NEVER  # the lease row's work time is the retention cycle's
    lease_use: LeaseUse = LeaseUse.HELD

    @property
    def name(self) -> str:
        return f"watermark of {self.stream}"

    @property
    def resource(self) -> str:
        return stream_resource(self.stream)

    def due(self, last_done_ms: int | None, now_ms: int) -> bool:
        return interval_due(self.last_ms, now_ms, self.every_ms)

    def run(self) -> None:
        self.skipped = False
        self.last_ms = self.clock.now_ms()
        try:
            result = self.compute(self.stream)
        except LeaseLost:
            raise
        except self.skip_errors as exc:
            log.debug("watermark of %s skipped: %s", self.stream, exc)
            self.skipped = True
            return
        if result is not None:
            log.debug("watermark of %s: %r", self.stream, result)

    def failed(self, error: Exception, now_ms: int) -> bool:
        log.warning("watermark of %s failed: %s: %s", self.stream, type(error).__name__, error)
        return False  # tried again at the next interval


TaskT = TypeVar("TaskT", bound=PeriodicTask)


@dataclass
class StreamTasks(Generic[TaskT]):
    """One kind of per-stream work: the streams that want it now, and each stream's task, made on
    first use and kept (it holds the stream's track, e.g. its backoff)."""

    streams: Callable[[], list[str]]
    task_for: Callable[[str], TaskT]
    tasks: dict[str, TaskT] = field(default_factory=dict)

    def task(self, stream: str) -> TaskT:
        if stream not in self.tasks:
            self.tasks[stream] = self.task_for(stream)
        return self.tasks[stream]


def retention_tasks(streams: Callable[[], list[str]], cycle: Callable[[str], Any], *, clock: Clock,
                    frequency_ms: int, retry_base_ms: int = 1_000, skip_errors: tuple[type[BaseException], ...] = (),
                    describe: Callable[[str, Any], str] = describe_plainly) -> StreamTasks[RetentionTask]:
    """The retention cycles of the streams `streams()` lists."""
    return StreamTasks(streams, lambda stream: RetentionTask(stream, cycle, clock, frequency_ms, retry_base_ms,
                                                             skip_errors, describe))


def watermark_tasks(streams: Callable[[], list[str]], compute: Callable[[str], Any], *, clock: Clock,
                    every_ms: int, skip_errors: tuple[type[BaseException], ...] = ()) -> StreamTasks[WatermarkTask]:
    """The watermark computations of the streams `streams()` lists."""
    return StreamTasks(streams, lambda stream: WatermarkTask(stream, compute, clock, every_ms, skip_errors))


__all__ = ["RETENTION_PREFIX", "RetentionTask", "StreamTasks", "StreamTrack", "WatermarkTask", "after_failure",
           "after_success", "describe_plainly", "due_at", "due_streams", "is_due", "most_overdue_first",
           "retention_tasks", "stream_resource", "watermark_tasks"]
