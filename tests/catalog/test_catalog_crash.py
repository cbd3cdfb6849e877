"""The retention job killed mid-run (a real `tidekeep catalog run` process, killed at named fault
points in a Spark task and on the driver): what it did is consistent with the rules, nothing the
rules retain is deleted, and a rerun completes the work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.procs import worker_env
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.store.schema_catalog import catalog_records, catalog_runs, catalog_trackers

DAY = 86_400_000
pytestmark = pytest.mark.spark


def deleted_ids(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(catalog_records.c.id).where(catalog_records.c.status == "DELETED"))
                   .scalars())


def tracker_count(client: tk.Client) -> int:
    with client.workspace.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(catalog_trackers)).scalar())


@pytest.mark.parametrize("fault", ["catalog.after_slice", "catalog.before_tracker", "catalog.after_period"])
def test_a_killed_run_resumes_and_never_deletes_what_the_rules_retain(tmp_path: Path, metadata_url: str,
                                                                      fault: str, spark) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        now = client.clock.now_ms()
        client.catalog.set_rules([
            RetentionRule(1, "keep special", True, parse('feed = "SPECIAL"'), None),
            RetentionRule(2, "logs", True, parse('feed = "LOGS"'), Age(30, "days")),
            RetentionRule(3, "rest", True, parse("all"), Age(1, "years")),
        ])
        ages = [1, 10, 45, 100, 200, 400, 800]
        ids = client.catalog.add([{"feed": feed, "type": "Events", "create_time": now - days * DAY - i * 1000}
                                  for feed in ("SPECIAL", "LOGS", "OTHER") for days in ages for i in range(12)])
        by_id = {r.id: r for r in client.catalog.records(limit=10_000)}
        # far from every cutoff, so the subprocess's and the rerun's clocks decide alike
        expected = {i for i in ids if (by_id[i].feed == "LOGS" and by_id[i].create_time < now - 30 * DAY)
                    or (by_id[i].feed == "OTHER" and by_id[i].create_time < now - 365 * DAY)}

        env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws", fault)
        env.update({"TIDEKEEP_SPARK_MASTER": "local[2]", "TIDEKEEP_CATALOG_SLICE_ROWS": "5",
                    "TIDEKEEP_CATALOG_PARALLELISM": "2"})
        proc = subprocess.run([sys.executable, "-m", "tidekeep.cli.main", "catalog", "run", "--json"], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode in (77, -9), (proc.returncode, proc.stdout[-2000:], proc.stderr[-3000:])

        partial = deleted_ids(client)
        assert partial <= expected  # nothing the rules retain was touched
        if fault == "catalog.after_slice":
            assert 0 < len(partial) < len(expected)  # killed between two slices of the first period
            assert tracker_count(client) == 0
        elif fault == "catalog.before_tracker":
            assert partial and tracker_count(client) == 0  # the first period's updates, not its tracker
        else:
            assert partial and tracker_count(client) == 1  # the first period finished, tracker saved

        report = client.catalog.run()
        assert deleted_ids(client) == expected
        assert report.rows == len(expected) - len(partial)
        with client.workspace.db.read() as conn:
            states = dict(conn.execute(sa.select(catalog_runs.c.id, catalog_runs.c.state)).all())
        assert sorted(states.values()) == ["INTERRUPTED", "SUCCEEDED"]
    finally:
        client.close()
