"""The slices inside the database (catalog/slice_sql.py, slice_runner.py), on SQLite and PostgreSQL:
the planner's grouped count agrees with the pure span arithmetic, the job's result does not depend
on how it is sliced or where the slices run (driver or Spark tasks), holds added while it runs
protect their records, SQLite's write lock is free between slices, and `catalog.parallelism`
bounds PostgreSQL's concurrent slices."""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.catalog_job import NOW, oracle, statuses
from helpers.procs import worker_env
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.catalog.slice_plan import span_of
from tidekeep.catalog.slice_runner import try_slot
from tidekeep.catalog.slice_sql import span_counts
from tidekeep.store.holds import lock_holds

DAY = 86_400_000


def rules_of(*specs: tuple[int, str, Age | None]) -> list[RetentionRule]:
    return [RetentionRule(n, f"rule {n}", True, parse(text), age) for n, text, age in specs]


def deleted(client: tk.Client) -> set[int]:
    return {i for i, (status, _) in statuses(client).items() if status == "DELETED"}


def test_the_grouped_count_puts_every_create_time_in_its_span(client: tk.Client) -> None:
    rng = random.Random(3)
    low, high = 1_000, 1_000 + 977
    times = [rng.randrange(low, high) for _ in range(400)] + [low, high - 1]
    client.catalog.add([{"feed": "F", "type": "T", "create_time": t} for t in times])
    for n in (1, 2, 7, 256, 977, 5000):
        with client.workspace.db.read() as conn:
            found = dict(conn.execute(span_counts(low, high, n)).all())
        expected: dict[int, int] = {}
        for t in times:
            expected[span_of(t, low, high, n)] = expected.get(span_of(t, low, high, n), 0) + 1
        assert found == expected


@pytest.mark.spark
@pytest.mark.parametrize("slice_rows", [1, 7, 1_000])
def test_the_result_does_not_depend_on_the_slicing(tmp_path: Path, metadata_url: str, slice_rows: int,
                                                   spark) -> None:
    """Random rules and records against the Python oracle: one slice (the driver), many slices
    (Spark tasks on PostgreSQL, the driver in turn on SQLite); the dry run and the impact summary
    count what the run then deletes."""
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        settings={"catalog.slice_rows": slice_rows}, create=True)
    try:
        rng = random.Random(slice_rows)
        client.catalog.add([{"feed": rng.choice(["A", "B", "LOGS"]), "type": rng.choice(["Raw", "Events"]),
                             "create_time": NOW - rng.randrange(0, 900) * DAY - rng.randrange(DAY),
                             "file_size": rng.randrange(1, 1000),
                             "status": rng.choice(["UNLOCKED"] * 6 + ["LOCKED"])} for _ in range(120)])
        rules = rules_of((1, 'feed = "A" and type = "Raw"', None), (2, 'feed = "LOGS"', Age(30, "days")),
                         (3, 'type = "Events"', Age(1, "years")), (4, "all", Age(2, "years")))
        client.catalog.set_rules(rules)
        expected = oracle(client, rules, NOW)
        impact = client.catalog.impact(now_ms=NOW)
        dry = client.catalog.run(now_ms=NOW, dry_run=True)
        assert deleted(client) == set()
        report = client.catalog.run(now_ms=NOW)
        assert deleted(client) == expected
        assert report.rows == dry.rows == impact.total_rows == len(expected)
        assert {k: v.rows for k, v in report.by_rule().items()} == {k: v.rows for k, v in dry.by_rule().items()}
        assert report.bytes == dry.bytes == impact.total_bytes
        # the candidates: the records UNLOCKED when the run started, in its periods
        unlocked = [r.create_time for r in client.catalog.records(limit=1000) if r.status != "LOCKED"]
        assert sum(p.candidates for p in report.periods) == sum(
            1 for t in unlocked if any(p.from_ms <= t < p.to_ms for p in report.periods))
    finally:
        client.close()


def run_job_in_background(tmp_path: Path, metadata_url: str, gate: Path, slice_rows: int,
                          extra: dict[str, str] | None = None) -> subprocess.Popen[str]:
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    env.update({"TIDEKEEP_SPARK_MASTER": "local[2]", "TIDEKEEP_CATALOG_SLICE_ROWS": str(slice_rows),
                "TIDEKEEP_PAUSE": f"catalog.slice=@{gate}", **(extra or {})})
    return subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", "catalog", "run", "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(path: Path, process: subprocess.Popen[str], timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if process.poll() is not None:
            raise AssertionError(f"the job ended early ({process.returncode}): {process.stderr.read()[-2000:]}")
        assert time.monotonic() < deadline, "the job never reached the gate"
        time.sleep(0.05)


@pytest.mark.spark
def test_a_hold_added_while_the_job_runs_protects_its_records(tmp_path: Path, metadata_url: str, spark) -> None:
    """The job waits before its first slice; a hold on half the old records is added then; the job
    deletes every old record except the held ones."""
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        create=True)
    try:
        client.catalog.set_rules(rules_of((1, "all", Age(10, "days"))))
        ids = client.catalog.add([{"feed": "KEEP" if i % 2 else "GO", "type": "T",
                                   "create_time": NOW - 20 * DAY - i * 60_000} for i in range(40)])
        young = client.catalog.add([{"feed": "GO", "type": "T", "create_time": client.clock.now_ms()}])
        gate = tmp_path / "gate"
        gate.touch()
        job = run_job_in_background(tmp_path, metadata_url, gate, slice_rows=5)
        try:
            wait_for(Path(f"{gate}.reached"), job)
            client.holds.add("records", 'feed = "KEEP"', "legal hold")
        finally:
            gate.unlink()
        _, err = job.communicate(timeout=300)
        assert job.returncode == 0, err[-3000:]
        by_id = {r.id: r for r in client.catalog.records(limit=1000)}
        assert {i for i in ids if by_id[i].status == "DELETED"} == {i for i in ids if by_id[i].feed == "GO"}
        assert by_id[young[0]].status == "UNLOCKED"
    finally:
        client.close()


def test_adding_a_hold_waits_for_a_slice_in_flight(pg_url: str, tmp_path: Path) -> None:
    """PostgreSQL: a slice holds the holds lock shared until it commits; adding a hold takes it
    exclusively, so it waits, and completes once the slice is done."""
    client = tk.connect(home=tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path / "data"), create=True)
    try:
        with client.workspace.db.engine.connect() as slice_conn:
            slice_conn.begin()
            lock_holds(slice_conn, shared=True)
            added: list[int] = []
            adder = threading.Thread(target=lambda: added.append(client.holds.add("records", "all", "why")))
            adder.start()
            with client.workspace.db.engine.connect() as observer:
                deadline = time.monotonic() + 60
                while not observer.execute(sa.text(
                        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).scalar():
                    assert time.monotonic() < deadline, "the hold was added while a slice held the lock"
                    assert not added, "the hold was added while a slice held the lock"
                    time.sleep(0.02)
            assert not added
            slice_conn.rollback()
        adder.join(timeout=60)
        assert len(added) == 1
    finally:
        client.close()


def test_at_most_parallelism_slots_are_taken_at_once(pg_url: str, tmp_path: Path) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path / "data"), create=True)
    engine = client.workspace.db.engine
    try:
        with engine.connect() as a, engine.connect() as b, engine.connect() as c:
            assert try_slot(a, 2, 0) and try_slot(b, 2, 0)  # b finds slot 0 taken and takes slot 1
            assert not try_slot(c, 2, 5)
            a.invalidate()  # a slice's connection ends (a task that died too): its slot is freed
            # by the server when its backend has seen the connection close, a moment later: wait for it
            deadline = time.monotonic() + 30
            while not try_slot(c, 2, 5):
                assert time.monotonic() < deadline, "the slot of a closed connection was never freed"
                c.rollback()
                time.sleep(0.02)
    finally:
        client.close()


def test_sqlite_holds_no_write_lock_between_slices(tmp_path: Path, spark) -> None:
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"),
                        settings={"metadata.busy_timeout": 200}, create=True)
    try:
        client.catalog.set_rules(rules_of((1, "all", Age(10, "days"))))
        client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW - 20 * DAY - i} for i in range(30)])
        gate = tmp_path / "gate"
        gate.touch()
        job = run_job_in_background(tmp_path, url, gate, slice_rows=4)
        try:
            wait_for(Path(f"{gate}.reached"), job)
            # the job waits before a slice: another writer gets the write lock at once
            client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW}])
        finally:
            gate.unlink()
        _, err = job.communicate(timeout=300)
        assert job.returncode == 0, err[-3000:]
    finally:
        client.close()
