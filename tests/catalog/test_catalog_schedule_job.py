"""The schedule with the real retention job and purge: two services on one store, a ManualClock
stepping over two midnights. Each fire time runs the Spark job once, then the purge, under the
catalog lease; the job logically deletes what the rules say and the purge removes what was DELETED
longer ago than catalog.purge_age."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.service.assembly import catalog_task
from tidekeep.service.scheduler import RetentionService
from tidekeep.store.leases import LeaseStore
from tidekeep.store.schema_catalog import catalog_records, catalog_runs

pytestmark = pytest.mark.spark

DAY = 86_400_000
MINUTE = 60_000
START = int(datetime(2024, 3, 30, 23, 50, tzinfo=UTC).timestamp() * 1000)
MIDNIGHT_1 = START + 10 * MINUTE
MIDNIGHT_2 = MIDNIGHT_1 + DAY


def test_two_services_run_the_real_job_then_the_purge_once_per_midnight(tmp_path: Path, metadata_url: str,
                                                                       spark) -> None:
    clock = tk.ManualClock(START)
    settings = {"catalog.purge_age": "1d"}
    clients = [tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                          clock=clock, settings=settings, create=True) for _ in range(2)]
    a = clients[0]
    try:
        a.catalog.set_rules([RetentionRule(1, "three days", True, parse("all"), Age(3, "days"))])
        young, old = a.catalog.add([{"feed": "F", "type": "Raw", "create_time": START - 1 * DAY},
                                    {"feed": "F", "type": "Raw", "create_time": START - 5 * DAY,
                                     "location": "catalog/old.dat", "file_size": 3}])
        Path(a.workspace.storage.full_path("catalog/old.dat")).parent.mkdir(parents=True)
        Path(a.workspace.storage.full_path("catalog/old.dat")).write_bytes(b"old")
        services = [RetentionService(LeaseStore(c.workspace.db, clock), clock, f"owner-{i}",
                                     ttl_ms=60_000,
                                     tasks=[catalog_task("0 0 * * *", run_job=c.catalog.run,
                                                         purge=c.catalog.purge)])
                    for i, c in enumerate(clients)]

        def status(record_id: int) -> tuple[str, int] | None:
            with a.workspace.db.read() as conn:
                row = conn.execute(sa.select(catalog_records.c.status, catalog_records.c.status_time)
                                   .where(catalog_records.c.id == record_id)).one_or_none()
            return None if row is None else (row.status, row.status_time)

        def runs() -> list[tuple[str, str, int]]:
            with a.workspace.db.read() as conn:
                return [(r.kind, r.state, r.now_ms) for r in conn.execute(
                    sa.select(catalog_runs).order_by(catalog_runs.c.id))]

        def look(times: int) -> None:
            for _ in range(times):
                for s in services:
                    s.run_pass()
                clock.advance(5 * MINUTE)

        look(2)  # 23:50, 23:55: not yet
        assert runs() == []
        look(3)  # midnight: one job, one purge
        assert runs() == [("retention", "SUCCEEDED", MIDNIGHT_1), ("purge", "SUCCEEDED", MIDNIGHT_1)]
        assert status(old) == ("DELETED", MIDNIGHT_1) and status(young)[0] == "UNLOCKED"  # type: ignore[index]
        clock.set(MIDNIGHT_2 - 5 * MINUTE)
        look(3)  # the next midnight: the old record has been DELETED for a day, so the purge takes it
        assert [r[:2] for r in runs()] == [("retention", "SUCCEEDED"), ("purge", "SUCCEEDED")] * 2
        assert runs()[2][2] == MIDNIGHT_2
        assert status(old) is None and not Path(a.workspace.storage.full_path("catalog/old.dat")).exists()
        assert status(young)[0] == "UNLOCKED"  # type: ignore[index]  # 2 days old at MIDNIGHT_2: kept
    finally:
        for c in clients:
            c.close()


def test_serve_once_runs_the_due_catalog_job_and_purge_and_no_catalog_skips_them(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from helpers.procs import worker_env

    url = f"sqlite:///{tmp_path / 'meta.db'}"
    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True)
    try:
        now = int(time.time() * 1000)
        client.catalog.add([{"feed": "F", "type": "Raw", "create_time": now - 90 * DAY,
                                        "status": "DELETED", "status_time": now - 30 * DAY,
                                        "location": "catalog/r.dat", "file_size": 1}])
        Path(client.workspace.storage.full_path("catalog/r.dat")).parent.mkdir(parents=True)
        Path(client.workspace.storage.full_path("catalog/r.dat")).write_bytes(b"r")
        leases = LeaseStore(client.workspace.db, client.clock)

        def last_run(at_ms: int) -> None:  # as if a service ran the catalog two days ago
            version = leases.acquire("catalog", "setup", 60_000).lease.version
            assert leases.record_work_done("catalog", "setup", version, at_ms)
            assert leases.release("catalog", "setup")

        serve = [sys.executable, "-m", "tidekeep.cli.main", "serve", "--once", "--lease-ttl", "5s"]
        env = worker_env(url, tmp_path / "data", tmp_path / "ws")
        last_run(now - 2 * DAY)
        skipped = subprocess.run([*serve, "--no-catalog"], env=env, capture_output=True, text=True, timeout=300,
                                 check=False)
        assert skipped.returncode == 0, skipped.stderr
        assert "catalog" not in skipped.stderr and client.catalog.count() == 1

        done = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr
        lines = done.stderr.splitlines()
        assert len([line for line in lines if "catalog job: run " in line]) == 1, done.stderr
        [purged] = [line for line in lines if "catalog purge: " in line]
        assert "catalog purge: purged 1 records (1 bytes) in 1 batches; 0 failures; 0 held" in purged
        assert client.catalog.count() == 0 and not Path(client.workspace.storage.full_path("catalog/r.dat")).exists()
        lease = leases.get("catalog")
        assert lease is not None and lease.owner is None and lease.work_done_ms is not None
        assert lease.work_done_ms > now  # the run began after this test started
    finally:
        client.close()
