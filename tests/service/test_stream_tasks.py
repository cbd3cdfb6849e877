"""Per-stream work as periodic tasks (service/stream_tasks.py): the retention cycle's and the
watermark's `due` against brute-force oracles, and both run through `run_exclusive` on real
leases (SQLite and PostgreSQL): they use the stream lease this process holds for its fair share —
renewed and kept, or only confirmed — and never take one of their own. Also: the service stands
on the Workspace, not on the client facade."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.imports import SRC, imported_modules
from helpers.service_env import T0, TTL
from tidekeep.errors import ConflictError, LeaseLost, NotFound
from tidekeep.service.scheduler import RetentionService
from tidekeep.service.stream_tasks import RetentionTask, WatermarkTask, stream_resource
from tidekeep.service.tasks import Outcome, run_exclusive
from tidekeep.store.leases import LeaseStore

FREQ = 60_000

# ---- pure decisions against oracles --------------------------------------------------------------

OUTCOMES = st.sampled_from(["ok", "skip", "fail"])


class Scripted:
    """A cycle that takes `duration` ms of clock and then succeeds, skips or fails, as scripted."""

    def __init__(self, clock: tk.ManualClock, script: list[tuple[str, int]]) -> None:
        self.clock, self.script, self.calls = clock, list(script), 0

    def __call__(self, stream: str) -> str:
        outcome, duration = self.script[self.calls]
        self.calls += 1
        self.clock.advance(duration)
        if outcome == "skip":
            raise NotFound(f"stream {stream!r} does not exist")
        if outcome == "fail":
            raise ConflictError("busy")
        return "decision"


@given(script=st.lists(st.tuples(OUTCOMES, st.integers(0, 40)), min_size=1, max_size=10),
       frequency=st.integers(1, 300), base=st.integers(1, 50), start=st.integers(0, 1_000))
def test_retention_runs_follow_the_frequency_and_the_backoff(script: list[tuple[str, int]], frequency: int,
                                                             base: int, start: int) -> None:
    """Tick a clock 1 ms at a time and drive the task as run_exclusive does (the lease row's time is
    the END of the last successful or skipped run). Oracle: the first run starts at once; after a
    success or a skip the next starts exactly `frequency` after it ended; after the n-th failure in
    a row, exactly min(max(base, frequency), base·2^(n-1)) after it ended."""
    clock = tk.ManualClock(start)
    cycle = Scripted(clock, script)
    task = RetentionTask("s/a", cycle, clock, frequency, retry_base_ms=base, skip_errors=(NotFound,))
    recorded: int | None = None
    starts: list[int] = []
    ends: list[int] = []
    while len(ends) < len(script):
        if task.due(recorded, clock.now_ms()):
            starts.append(clock.now_ms())
            try:
                task.run()
            except ConflictError as exc:
                ends.append(clock.now_ms())
                assert task.failed(exc, clock.now_ms()) is False  # a failure never counts as done
            else:
                ends.append(clock.now_ms())
                recorded = clock.now_ms()
                assert task.skipped == (script[len(ends) - 1][0] == "skip")
        else:
            clock.advance(1)
    assert starts[0] == start
    failures_in_a_row = 0
    for (outcome, _), end, next_start in zip(script, ends, starts[1:], strict=False):
        if outcome == "fail":
            failures_in_a_row += 1
            wait = base
            for _ in range(failures_in_a_row - 1):
                wait *= 2
            assert next_start == end + min(max(base, frequency), wait)
        else:
            failures_in_a_row = 0
            assert next_start == end + frequency


@given(every=st.integers(1, 500), last_done=st.none() | st.integers(0, 10**6),
       outcomes=st.lists(st.sampled_from(["ok", "skip", "fail"]), min_size=1, max_size=8),
       durations=st.lists(st.integers(0, 600), min_size=8, max_size=8))
def test_watermarks_keep_their_own_interval_from_each_start(every: int, last_done: int | None, outcomes: list[str],
                                                           durations: list[int]) -> None:
    """Oracle: the first computation starts at once and each later one exactly `every` after the
    previous one STARTED (or at once if that one took longer), whatever it did, and whatever the
    lease row says (its time is retention's)."""
    clock = tk.ManualClock(0)
    step = iter(zip(outcomes, durations, strict=False))

    def compute(stream: str) -> None:
        outcome, duration = next(step)
        clock.advance(duration)
        if outcome == "skip":
            raise NotFound("gone")
        if outcome == "fail":
            raise OSError("storage unreachable")

    task = WatermarkTask("s/a", compute, clock, every, skip_errors=(NotFound,))
    starts: list[int] = []
    ends: list[int] = []
    while len(starts) < len(outcomes):
        if task.due(last_done, clock.now_ms()):
            starts.append(clock.now_ms())
            try:
                task.run()
            except OSError as exc:
                assert task.failed(exc, clock.now_ms()) is False
            ends.append(clock.now_ms())
        else:
            clock.advance(1)
    assert starts[0] == 0
    for previous_start, end, next_start in zip(starts, ends, starts[1:], strict=False):
        assert next_start == max(previous_start + every, end)


# ---- on real leases ------------------------------------------------------------------------------


def test_a_retention_cycle_renews_its_stream_lease_and_keeps_it(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    resource = stream_resource("s/a")
    assert service.take(resource)  # the stream is in this process's share
    granted = leases.get(resource)
    assert granted is not None
    clock.advance(5_000)

    def cycle(stream: str) -> str:
        clock.advance(2_000)
        return "kept"

    task = RetentionTask("s/a", cycle, clock, FREQ)
    assert run_exclusive(service, task) is Outcome.DONE
    row = leases.get(resource)
    assert row is not None and row.owner == "A" and row.version == granted.version  # kept, not given back
    assert row.expires_ms == T0 + 5_000 + TTL  # renewed just before the cycle: the TTL counts from there
    assert row.work_done_ms == T0 + 7_000  # the end of the cycle
    assert service.holds(resource)
    clock.advance(FREQ - 1)
    assert run_exclusive(service, task) is Outcome.NOT_DUE
    clock.advance(1)
    assert run_exclusive(service, task) is Outcome.DONE


def test_a_retention_cycle_of_a_stream_held_elsewhere_does_not_run(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    calls: list[str] = []
    assert leases.acquire(stream_resource("s/a"), "B", TTL).granted
    task = RetentionTask("s/a", lambda stream: calls.append(stream), clock, FREQ)
    assert run_exclusive(service, task) is Outcome.NOT_HELD and calls == []


def test_a_lost_lease_ends_the_cycle_as_lost_even_when_its_class_is_a_skip_error(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    """LeaseLost is a ConflictError: a skip list that names ConflictError must not turn a takeover
    into a skip (which would record the work under a lease this process no longer holds)."""
    service, leases, clock = env
    resource = stream_resource("s/a")
    assert service.take(resource)

    def cycle(stream: str) -> str:
        raise LeaseLost("taken over", resource, 1, "B", 2)

    task = RetentionTask("s/a", cycle, clock, FREQ, skip_errors=(ConflictError,))
    assert run_exclusive(service, task) is Outcome.LOST
    assert not task.skipped and not service.holds(resource)
    row = leases.get(resource)
    assert row is not None and row.work_done_ms is None


def test_a_skip_counts_as_a_run_and_a_failure_does_not(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    resource = stream_resource("s/a")
    assert service.take(resource)
    errors: list[Exception] = [NotFound("stream 's/a' does not exist"), ConflictError("busy")]

    def cycle(stream: str) -> str:
        raise errors.pop(0)

    task = RetentionTask("s/a", cycle, clock, FREQ, skip_errors=(NotFound,))
    assert run_exclusive(service, task) is Outcome.DONE and task.skipped
    row = leases.get(resource)
    assert row is not None and row.work_done_ms == T0
    clock.advance(FREQ)
    assert run_exclusive(service, task) is Outcome.FAILED
    row = leases.get(resource)
    assert row is not None and row.work_done_ms == T0 and row.owner == "A"  # nothing recorded; lease kept
    assert task.track.failures == 1 and task.track.retry_at_ms == T0 + FREQ + 1_000


def test_a_watermark_runs_only_under_a_held_lease_and_neither_renews_nor_records(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    resource = stream_resource("s/a")
    computed: list[int] = []
    task = WatermarkTask("s/a", lambda stream: computed.append(clock.now_ms()), clock, 1_000)
    assert run_exclusive(service, task) is Outcome.NOT_HELD  # not in this process's share: no lease taken
    assert computed == [] and leases.get(resource) is None
    assert service.take(resource)
    service.record_work_done(resource, T0)  # the retention cycle's time
    clock.advance(500)
    assert run_exclusive(service, task) is Outcome.DONE and computed == [T0 + 500]
    row = leases.get(resource)
    assert row is not None and row.owner == "A"  # kept
    assert row.expires_ms == T0 + TTL  # not renewed (the heartbeat does that)
    assert row.work_done_ms == T0  # retention's time untouched
    clock.advance(999)
    assert run_exclusive(service, task) is Outcome.NOT_DUE
    clock.advance(1)
    assert run_exclusive(service, task) is Outcome.DONE and computed == [T0 + 500, T0 + 1_500]


def test_only_a_successful_run_is_a_true_outcome() -> None:
    assert [outcome for outcome in Outcome if outcome] == [Outcome.DONE]


# ---- the service stands on the Workspace ---------------------------------------------------------


def test_the_service_does_not_import_the_client() -> None:
    """The service sits below the client facade: it takes the Workspace and the family facades."""
    offenders = [f"{path.relative_to(SRC)} imports {name}" for path in sorted((SRC / "service").rglob("*.py"))
                 for name in imported_modules(path) if name == "tidekeep.client" or name.startswith("tidekeep.client.")]
    assert offenders == []


def test_the_service_knows_every_hold_kind_without_a_client() -> None:
    """Deleting work checks holds of every kind; `tidekeep serve` builds no client (whose import used to
    register the families' kinds), so the service itself must bring them."""
    code = ("import tidekeep.service.server\n"
            "from tidekeep.store.holds import HOLD_KINDS, kind_named\n"
            "print(sorted(kind_named(k).name for k in HOLD_KINDS))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['archive', 'dataset', 'records', 'stream']"
