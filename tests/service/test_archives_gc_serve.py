"""The collectors under `tidekeep serve`: each on its sweep interval under its lease, counted from
the last sweep's end shared through the lease row, so two services never both sweep; a collector
whose retention is null is not started; a failing sweep is retried next interval; --no-archives."""

from __future__ import annotations

import itertools
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from helpers.procs import worker_env
from tidekeep.archives.gc import collect_archives
from tidekeep.service.assembly import (
    ARCHIVE_GC_RESOURCE,
    COMPACTION_RESOURCE,
    RESULT_GC_RESOURCE,
    collector_task,
    collector_tasks,
)
from tidekeep.service.scheduler import RetentionService
from tidekeep.service.server import ServeOptions, build_service
from tidekeep.service.tasks import IntervalTask, interval_due
from tidekeep.store.leases import LeaseStore
from tidekeep.store.schema_archives import archives

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_700_000_000_000
SETTINGS = {"archive_output.retention_period": 60, "garbage_collector.sweep_interval.archive": 15,
            "garbage_collector.sweep_interval.search_result": 10}


@pytest.fixture
def two_clients(tmp_path: Path, metadata_url: str) -> Iterator[tuple[tk.Client, tk.Client, tk.ManualClock]]:
    clock = tk.ManualClock(T0)
    a = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                   settings=SETTINGS, create=True)
    b = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                   settings=SETTINGS, create=True)
    yield a, b, clock
    a.close()
    b.close()


def service(client: tk.Client, owner: str, tasks: list[IntervalTask]) -> RetentionService:
    return RetentionService(LeaseStore(client.workspace.db, client.clock), client.clock, owner,
                            ttl_ms=30_000, tasks=tasks)


def live_ids(client: tk.Client) -> set[str]:
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(archives.c.id)).scalars())


def test_interval_due() -> None:
    assert interval_due(None, 0, 10)
    assert not interval_due(100, 109, 10) and interval_due(100, 110, 10)


def test_two_services_sweep_once_per_interval_and_really_collect(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock]) -> None:
    a, b, clock = two_clients
    sweeps: list[tuple[str, int]] = []

    def task(owner: str, client: tk.Client) -> IntervalTask:
        def collect() -> object:
            sweeps.append((owner, clock.now_ms()))
            return collect_archives(client.workspace)
        return collector_task("archive collector", ARCHIVE_GC_RESOURCE, 15 * MIN, collect)

    services = [service(a, "A", [task("A", a)]), service(b, "B", [task("B", b)])]
    made = []
    for step in range(30):  # 90 minutes in 3-minute steps; both services look every step
        made.append(make_archive(a, "web", [(clock.now_ms() - 2 * HOUR, f"m{step}")]))  # expired on arrival
        for s in services if step % 2 else reversed(services):
            s.run_pass()
        clock.advance(3 * MIN)
    times = [t for _, t in sweeps]
    assert times[0] == T0  # a collector that never swept sweeps at once
    assert all(later - earlier == 15 * MIN for earlier, later in itertools.pairwise(times))
    assert len(times) == 6 and {o for o, _ in sweeps} == {"A", "B"}
    lease = LeaseStore(a.workspace.db, clock).get(ARCHIVE_GC_RESOURCE)
    assert lease is not None and lease.owner is None and lease.work_done_ms == times[-1]
    # everything made up to the last sweep is gone; later ones wait for the next interval
    swept_until = times[-1]
    assert live_ids(a) == {m.id for m in made if m.created_ms > swept_until}


def test_a_failing_sweep_is_logged_and_retried_next_interval(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock], caplog: pytest.LogCaptureFixture) -> None:
    a, _, clock = two_clients
    attempts: list[int] = []

    def flaky() -> str:
        attempts.append(clock.now_ms())
        if len(attempts) == 1:
            raise OSError("storage unreachable")
        return "swept"

    s = service(a, "A", [collector_task("archive collector", ARCHIVE_GC_RESOURCE, 15 * MIN, flaky)])
    with caplog.at_level("INFO", logger="tidekeep.archives.gc"):
        for _ in range(12):
            s.run_pass()
            clock.advance(3 * MIN)
    assert attempts == [T0, T0 + 15 * MIN, T0 + 30 * MIN]
    assert any("archive collector failed" in r.getMessage() and "storage unreachable" in r.getMessage()
               for r in caplog.records)


def test_collector_tasks_follow_the_settings(tmp_path: Path, metadata_url: str) -> None:
    def tasks(settings: dict[str, object]) -> list[tuple[str, int]]:
        c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                       settings=settings, create=True)
        try:
            return [(t.resource, t.interval_ms) for t in collector_tasks(c.workspace)]
        finally:
            c.close()

    # the defaults: archive retention null (its collector not started), results kept 60 min, swept every 30
    assert tasks({}) == [(RESULT_GC_RESOURCE, 30 * MIN)]
    assert tasks({"archive_output.retention_period": 5, "results_cache.retention_period": "null",
                  "garbage_collector.sweep_interval.archive": 7}) == [(ARCHIVE_GC_RESOURCE, 7 * MIN)]
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), settings=SETTINGS,
        create=True)
    try:
        options = ServeOptions(frequency_ms=60_000, lease_ttl_ms=30_000, sweep_every_ms=HOUR, catalog=False)
        assert [t.resource for t in build_service(c.workspace, options).tasks] == [
            "sweep", COMPACTION_RESOURCE, ARCHIVE_GC_RESOURCE, RESULT_GC_RESOURCE]
        off = ServeOptions(frequency_ms=60_000, lease_ttl_ms=30_000, sweep_every_ms=HOUR, catalog=False,
                           archives=False, compaction=False)
        assert [t.resource for t in build_service(c.workspace, off).tasks] == ["sweep"]
    finally:
        c.close()


def test_serve_once_runs_the_collectors_and_no_archives_turns_them_off(tmp_path: Path, metadata_url: str) -> None:
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    env["TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD"] = "60"
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        old = make_archive(c, "web", [(int(time.time() * 1000) - 3 * HOUR, "old")])
        serve = [sys.executable, "-m", "tidekeep.cli.main", "serve", "--once", "--no-catalog"]
        off = subprocess.run([*serve, "--no-archives"], env=env, capture_output=True, text=True, timeout=120,
                             check=False)
        assert off.returncode == 0, off.stderr
        assert old.id in live_ids(c) and LeaseStore(c.workspace.db, c.clock).get(ARCHIVE_GC_RESOURCE) is None
        on = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=120, check=False)
        assert on.returncode == 0, on.stderr
        assert old.id not in live_ids(c) and not Path(c.workspace.storage.full_path(old.path)).exists()
        assert "archive collector: archives: deleted 1" in on.stderr
        lease = LeaseStore(c.workspace.db, c.clock).get(ARCHIVE_GC_RESOURCE)
        assert lease is not None and lease.work_done_ms is not None and lease.owner is None
    finally:
        c.close()
