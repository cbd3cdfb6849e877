"""One run of a kind at a time (catalog/runs.py, store/run_lock.py): while a real process runs a
purge or a retention job (held at a gate once its run row is written), a second run of that kind —
from Python, the CLI, or as `tidekeep serve` runs it under its lease — is refused with RunInProgress
naming the running run, and changes nothing; a dry run beside it is allowed; the first run ends
SUCCEEDED, never INTERRUPTED. A holder killed with SIGKILL frees the lock, and the next run marks
its row INTERRUPTED as soon as it starts."""

from __future__ import annotations

import logging
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.procs import worker_env
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.errors import ConflictError, RunInProgress
from tidekeep.service.assembly import CATALOG_RESOURCE, ServeOptions
from tidekeep.service.server import build_service
from tidekeep.service.tasks import CronTask
from tidekeep.store.database import Database
from tidekeep.store.fencing import LeaseFence
from tidekeep.store.leases import LeaseAction, LeaseStore
from tidekeep.store.run_lock import lock_file_path, run_lock
from tidekeep.store.schema_catalog import catalog_records, catalog_runs, catalog_trackers

CLI = [sys.executable, "-m", "tidekeep.cli.main"]
MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR
T0 = 1_750_000_000_000
OLD = 12  # DELETED records old enough to purge; two more are too young
# a purge as the CLI runs it, or as `tidekeep serve` does: under the catalog lease, fenced
PURGE = """
import sys
import tidekeep as tk
from tidekeep.store.fencing import LeaseFence
from tidekeep.store.leases import LeaseStore
c = tk.connect()
fence = None
if sys.argv[1] == "service":
    lease = LeaseStore(c.workspace.db, c.clock).acquire(sys.argv[2], "service", 600_000).lease
    fence = LeaseFence(sys.argv[2], "service", lease.version)
print(c.catalog.purge(fence=fence).summary())
c.close()
"""


@dataclass
class Ws:
    client: tk.Client
    env: dict[str, str]
    gate: Path
    tmp: Path

    def start(self, args: list[str], point: str) -> subprocess.Popen[str]:
        """A process that stops at `point` (a run holding its lock, its row written) while the gate exists."""
        self.gate.write_text("")
        Path(f"{self.gate}.reached").unlink(missing_ok=True)
        env = {**self.env, "TIDEKEEP_PAUSE": f"{point}=@{self.gate}"}
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(f"the run reached {point}", Path(f"{self.gate}.reached").exists, proc)
        return proc

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args], env=self.env, capture_output=True, text=True, timeout=120, check=False)


def wait_for(what: str, check: Callable[[], object], alive: subprocess.Popen[str] | None = None) -> None:
    """Poll until check() is true; fail naming `what` if the process ended first (pytest's timeout
    ends a hang)."""
    while not check():
        if alive is not None and alive.poll() is not None:
            pytest.fail(f"the process ended before {what}: {alive.communicate()}")
        time.sleep(0.02)


@pytest.fixture
def ws(tmp_path: Path, metadata_url: str) -> Iterator[Ws]:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        yield Ws(client, worker_env(metadata_url, tmp_path / "data", tmp_path / "ws"), tmp_path / "gate", tmp_path)
    finally:
        client.close()


def runs(client: tk.Client) -> list[tuple[int, str, str, bool]]:
    with client.workspace.db.read() as conn:
        return [(r.id, r.kind, r.state, r.dry_run)
                for r in conn.execute(sa.select(catalog_runs).order_by(catalog_runs.c.id))]


def newest_running(client: tk.Client, kind: str, rows: int) -> int:
    """The id of the newest run, which must be a RUNNING run of `kind` (not dry) and the rows-th row."""
    found = runs(client)
    assert len(found) == rows and found[-1][1:] == (kind, "RUNNING", False), found
    return found[-1][0]


def records(client: tk.Client) -> list[tuple[Any, ...]]:
    with client.workspace.db.read() as conn:
        return [tuple(r) for r in conn.execute(sa.select(catalog_records.c.id, catalog_records.c.status,
                                                         catalog_records.c.status_time)
                                               .order_by(catalog_records.c.id))]


# ---- the purge ------------------------------------------------------------------------------------
def add_deleted_records(client: tk.Client) -> None:
    """OLD records DELETED 30 days ago and 2 deleted yesterday, each with its file."""
    now = int(time.time() * 1000)
    with client.workspace.db.write() as conn:
        for i in range(OLD + 2):
            conn.execute(sa.insert(catalog_records).values(
                feed="F", type="Raw", create_time=now - 400 * DAY, status="DELETED",
                status_time=now - (30 if i < OLD else 1) * DAY - i * 1000, file_size=7, location=f"catalog/r{i}.dat"))
    for i in range(OLD + 2):
        path = Path(client.workspace.storage.full_path(f"catalog/r{i}.dat"))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"1234567")


def purge_state(client: tk.Client) -> tuple[Any, ...]:
    return records(client), sorted(f.path for f in client.workspace.storage.list_files("catalog")), runs(client)


@pytest.mark.parametrize("holder", ["cli", "service"])
def test_a_second_purge_beside_a_running_one_is_refused_and_changes_nothing(ws: Ws, holder: str) -> None:
    client = ws.client
    add_deleted_records(client)
    args = ([*CLI, "catalog", "purge"] if holder == "cli"
            else [sys.executable, "-c", PURGE, "service", CATALOG_RESOURCE])
    first = ws.start(args, "catalog.purge_started")
    try:
        first_id = newest_running(client, "purge", 1)
        before = purge_state(client)

        with pytest.raises(RunInProgress) as refused:
            client.catalog.purge()
        assert isinstance(refused.value, ConflictError) and refused.value.exit_code == 7
        assert (refused.value.kind, refused.value.run_id) == ("purge", first_id)
        assert str(refused.value).startswith(f"purge run {first_id} is in progress (started ")
        assert purge_state(client) == before  # no row, no record, no file touched

        if holder == "cli":  # `serve` beside it, running the purge under the catalog lease: refused too
            taken = LeaseStore(client.workspace.db, client.clock).acquire(CATALOG_RESOURCE, "service", 60_000)
            assert taken.action is LeaseAction.ACQUIRE
            with pytest.raises(RunInProgress):
                client.catalog.purge(fence=LeaseFence(CATALOG_RESOURCE, "service", taken.lease.version))
            assert purge_state(client) == before

        cli = ws.cli("catalog", "purge")
        assert cli.returncode == 7, (cli.stdout, cli.stderr)
        assert cli.stdout == ""
        assert cli.stderr.splitlines() == [f"error: {refused.value}"]

        dry = client.catalog.purge(dry_run=True)  # dry runs take no lock: allowed beside it
        assert dry.purged == OLD
        records_before, files_before, runs_before = before
        assert purge_state(client) == (records_before, files_before,
                                       [*runs_before, (dry.run_id, "purge", "SUCCEEDED", True)])
    finally:
        ws.gate.unlink()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert f"purged {OLD} record" in out, out  # the work was done once, by the first run
    assert runs(client) == [(first_id, "purge", "SUCCEEDED", False), (dry.run_id, "purge", "SUCCEEDED", True)]
    assert len(records(client)) == 2


def test_serve_beside_a_running_purge_fails_its_catalog_run_and_retries_it(
        ws: Ws, caplog: pytest.LogCaptureFixture) -> None:
    """`tidekeep serve`'s catalog task (the job, then the purge) while a purge by hand is running:
    its purge is refused, the task is logged as failed and retried by its backoff, and the purge
    by hand, still running, is not marked INTERRUPTED."""
    add_deleted_records(ws.client)
    first = ws.start([*CLI, "catalog", "purge"], "catalog.purge_started")
    served = tk.connect(home=ws.tmp / "ws", metadata_url=ws.client.settings.metadata_url,
                        storage=str(ws.tmp / "data"), clock=tk.ManualClock(T0),
                        settings={"catalog.schedule": "* * * * *"})
    try:
        first_id = newest_running(ws.client, "purge", 1)
        before = purge_state(ws.client)
        options = ServeOptions(frequency_ms=HOUR, lease_ttl_ms=30_000, sweep_every_ms=HOUR, archives=False,
                               watermark_every_ms=None)
        service = build_service(served.workspace, options, owner="A")
        catalog = next(task for task in service.tasks if isinstance(task, CronTask))
        service.run_pass()  # the catalog task notes when it first looked
        clock = served.clock
        assert isinstance(clock, tk.ManualClock)
        clock.advance(MINUTE)  # the schedule fires
        with caplog.at_level(logging.WARNING, logger="tidekeep"):
            report = service.run_pass()
        assert CATALOG_RESOURCE not in report.done and catalog.failures == 1 and catalog.retry_at_ms is not None
        warnings = [r.getMessage() for r in caplog.records if "catalog run failed" in r.getMessage()]
        assert len(warnings) == 1 and f"RunInProgress: purge run {first_id} is in progress" in warnings[0], warnings
        assert purge_state(ws.client) == before  # the job had no rules; the purge was refused
    finally:
        ws.gate.unlink()
        out, err = first.communicate(timeout=120)
        served.close()
    assert first.returncode == 0, err
    assert f"purged {OLD} record" in out, out
    assert runs(ws.client) == [(first_id, "purge", "SUCCEEDED", False)]


def lock_is_free(db: Database, name: str) -> bool:
    with run_lock(db, name) as held:
        return held


def test_a_killed_purge_frees_the_lock_and_the_next_run_marks_it_interrupted_at_once(ws: Ws) -> None:
    client = ws.client
    add_deleted_records(client)
    dead = ws.start([*CLI, "catalog", "purge"], "catalog.purge_started")
    dead_id = newest_running(client, "purge", 1)
    database_file = Database.sqlite_file(client.settings.metadata_url)
    if database_file is not None:  # the lock file beside the database, owner-only
        assert stat.S_IMODE(os.stat(lock_file_path(database_file, "catalog-purge")).st_mode) == 0o600
    with pytest.raises(RunInProgress):
        client.catalog.purge()

    os.kill(dead.pid, signal.SIGKILL)
    dead.communicate(timeout=60)
    # the server ends the dead process's session once it sees the connection closed
    wait_for("the dead run's lock to be released", lambda: lock_is_free(client.workspace.db, "catalog-purge"))
    assert runs(client) == [(dead_id, "purge", "RUNNING", False)]  # nobody could tell it ended

    second = ws.start([*CLI, "catalog", "purge"], "catalog.purge_started")
    try:
        second_id = newest_running(client, "purge", 2)
        # marked as the next run started, before that run did any work
        assert runs(client) == [(dead_id, "purge", "INTERRUPTED", False), (second_id, "purge", "RUNNING", False)]
        assert len(records(client)) == OLD + 2
    finally:
        ws.gate.unlink()
        out, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    assert f"purged {OLD} record" in out, out
    assert runs(client) == [(dead_id, "purge", "INTERRUPTED", False), (second_id, "purge", "SUCCEEDED", False)]


# ---- the retention job ------------------------------------------------------------------------------
def job_state(client: tk.Client) -> tuple[Any, ...]:
    with client.workspace.db.read() as conn:
        trackers = [tuple(r) for r in conn.execute(sa.select(catalog_trackers))]
    return records(client), trackers, runs(client)


@pytest.mark.spark
def test_a_second_retention_job_beside_a_running_one_is_refused_and_the_first_succeeds(ws: Ws, spark: Any) -> None:
    client = ws.client
    now = client.clock.now_ms()
    client.catalog.set_rules([RetentionRule(1, "logs", True, parse('feed = "LOGS"'), Age(30, "days"))])
    ids = client.catalog.add([{"feed": feed, "type": "Events", "create_time": now - days * DAY - i * 1000}
                              for feed in ("LOGS", "OTHER") for days in (1, 100, 400) for i in range(4)])
    expected = set(ids[4:12])  # the LOGS records older than 30 days
    env = {"TIDEKEEP_SPARK_MASTER": "local[1]"}
    ws.env.update(env)
    first = ws.start([*CLI, "catalog", "run"], "catalog.retention_started")
    try:
        first_id = newest_running(client, "retention", 1)
        before = job_state(client)

        with pytest.raises(RunInProgress) as refused:
            client.catalog.run()
        assert (refused.value.kind, refused.value.run_id) == ("retention", first_id)
        assert str(refused.value).startswith(f"retention job run {first_id} is in progress (started ")
        assert job_state(client) == before  # nothing deleted, no tracker, no run row

        cli = ws.cli("catalog", "run")
        assert cli.returncode == 7, (cli.stdout, cli.stderr)
        assert cli.stdout == "" and cli.stderr.splitlines() == [f"error: {refused.value}"]

        dry = client.catalog.run(dry_run=True)  # allowed beside it, and changes nothing but its row
        assert dry.rows == len(expected)
        records_before, trackers_before, runs_before = before
        assert job_state(client) == (records_before, trackers_before,
                                     [*runs_before, (dry.run_id, "retention", "SUCCEEDED", True)])
    finally:
        ws.gate.unlink()
        _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-3000:]
    assert runs(client) == [(first_id, "retention", "SUCCEEDED", False), (dry.run_id, "retention", "SUCCEEDED", True)]
    with client.workspace.db.read() as conn:
        deleted = set(conn.execute(sa.select(catalog_records.c.id).where(catalog_records.c.status == "DELETED"))
                      .scalars())
    assert deleted == expected
