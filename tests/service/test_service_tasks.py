"""Periodic tasks (service/tasks.py): `run_exclusive`, the one lease-guarded sequence, with a task
written against the `PeriodicTask` shape alone, on real leases (SQLite and PostgreSQL); and the
layering rule that no family imports the service."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.imports import SRC, imported_modules
from helpers.service_env import T0, TTL
from tidekeep.errors import LeaseLost
from tidekeep.service.scheduler import RetentionService
from tidekeep.service.tasks import DoneAt, LeaseUse, PeriodicTask, backoff_ms, interval_due, run_exclusive
from tidekeep.store.fencing import LeaseFence
from tidekeep.store.leases import LeaseStore


@dataclass
class Probe:
    """A task of its own kind: due every 10 s from its last record; `outcome` says what a run does."""

    resource: str = "probe"
    name: str = "probe"
    done_at: DoneAt = DoneAt.END
    lease_use: LeaseUse = LeaseUse.EXCLUSIVE
    outcome: str = "ok"  # ok | fail | fail-counts | lost | slow
    clock: tk.ManualClock | None = None
    runs: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def due(self, last_done_ms: int | None, now_ms: int) -> bool:
        return last_done_ms is None or now_ms >= last_done_ms + 10_000

    def run(self) -> None:
        assert self.clock is not None
        self.runs.append(self.clock.now_ms())
        if self.outcome == "slow":
            self.clock.advance(4_000)
        elif self.outcome == "lost":
            raise LeaseLost("taken over", self.resource, 1, "other", 2)
        elif self.outcome.startswith("fail"):
            raise OSError("storage unreachable")

    def failed(self, error: Exception, now_ms: int) -> bool:
        self.failures.append(str(error))
        return self.outcome == "fail-counts"


def test_a_task_of_its_own_kind_runs_once_per_interval_under_its_lease(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    task: PeriodicTask = (probe := Probe(clock=clock))
    assert run_exclusive(service, task) and probe.runs == [T0]  # never done: due at once
    row = leases.get("probe")
    assert row is not None and row.owner is None and row.work_done_ms == T0  # recorded, lease given back
    clock.advance(9_999)
    assert not run_exclusive(service, task) and probe.runs == [T0]
    clock.advance(1)
    assert run_exclusive(service, task) and probe.runs == [T0, T0 + 10_000]


def test_another_holder_keeps_the_task_from_running(env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    probe = Probe(clock=clock)
    assert leases.acquire("probe", "B", TTL).granted
    assert not run_exclusive(service, probe) and probe.runs == []
    row = leases.get("probe")
    assert row is not None and row.owner == "B" and row.work_done_ms is None


@pytest.mark.parametrize(("done_at", "recorded"), [(DoneAt.START, T0), (DoneAt.END, T0 + 4_000)])
def test_the_task_says_which_moment_of_a_run_is_recorded(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock], done_at: DoneAt, recorded: int) -> None:
    service, leases, clock = env
    assert run_exclusive(service, Probe(clock=clock, outcome="slow", done_at=done_at))
    row = leases.get("probe")
    assert row is not None and row.work_done_ms == recorded


@pytest.mark.parametrize(("outcome", "recorded"), [("fail", None), ("fail-counts", T0)])
def test_a_failure_is_handed_to_the_task_which_says_whether_it_counts(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock], outcome: str, recorded: int | None) -> None:
    service, leases, clock = env
    probe = Probe(clock=clock, outcome=outcome)
    assert not run_exclusive(service, probe)  # never raises: one task cannot stop the service
    assert probe.failures == ["storage unreachable"]
    row = leases.get("probe")
    assert row is not None and row.owner is None and row.work_done_ms == recorded


def test_a_lost_lease_is_forgotten_and_nothing_is_recorded(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    service, leases, clock = env
    probe = Probe(clock=clock, outcome="lost")
    assert not run_exclusive(service, probe)
    assert probe.failures == []  # lost is not failed: the task's retry rule is not involved
    assert not service.holds("probe")
    row = leases.get("probe")
    assert row is not None and row.work_done_ms is None


def test_work_is_recorded_only_under_the_version_it_was_granted(
        env: tuple[RetentionService, LeaseStore, tk.ManualClock]) -> None:
    """A run that outlives its lease (another process took it over meanwhile) records nothing."""
    service, leases, clock = env
    probe = Probe(clock=clock)

    def run_past_the_ttl() -> None:
        clock.advance(TTL + 1)
        assert leases.acquire("probe", "B", TTL).granted  # B takes the expired lease over
        fence = service.fence("probe")
        assert fence == LeaseFence("probe", "A", 1)

    probe.run = run_past_the_ttl  # type: ignore[method-assign]
    assert run_exclusive(service, probe)  # the work itself (unfenced here) succeeded
    row = leases.get("probe")
    assert row is not None and row.owner == "B" and row.version == 2 and row.work_done_ms is None


@given(last=st.none() | st.integers(0, 10**6), now=st.integers(0, 2 * 10**6), interval=st.integers(1, 10**5))
def test_interval_due_against_a_tick_oracle(last: int | None, now: int, interval: int) -> None:
    ticks_since = None if last is None else now - last
    assert interval_due(last, now, interval) == (ticks_since is None or ticks_since >= interval)


@given(failures=st.integers(1, 80), base=st.integers(1, 10_000), cap=st.integers(1, 10**7))
def test_backoff_doubles_and_is_capped(failures: int, base: int, cap: int) -> None:
    wait = base
    for _ in range(failures - 1):
        wait *= 2  # the oracle doubles step by step, unbounded
    assert backoff_ms(failures, base, cap) == min(cap, wait)


@pytest.mark.parametrize("family", ["store", "streams", "catalog", "archives", "spark"])
def test_no_family_imports_the_service(family: str) -> None:
    """The service sits above the families: it assembles their work, they never reach up to it
    (not even for type checking)."""
    offenders = [f"{path.relative_to(SRC)} imports {name}" for path in sorted((SRC / family).rglob("*.py"))
                 for name in imported_modules(path)
                 if name == "tidekeep.service" or name.startswith("tidekeep.service.")]
    assert offenders == []
