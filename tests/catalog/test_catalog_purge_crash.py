"""Crash safety of the purge: a real process dies (exit 77, like kill -9) after deleting a batch's
files but before deleting its rows, or right after the rows. At no moment is there data without a
row, and a rerun finishes the purge: every old DELETED record and its file gone, nothing else."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.procs import worker_env
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.store.schema_catalog import catalog_records, catalog_runs

DAY = 86_400_000
PURGE = "import tidekeep as tk; c = tk.connect(); print(c.catalog.purge().summary()); c.close()"


def run_purge(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", PURGE], env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def rows(client: tk.Client) -> dict[int, str]:
    with client.workspace.db.read() as conn:
        return {r.id: r.location for r in conn.execute(sa.select(catalog_records.c.id, catalog_records.c.location))}


def files(client: tk.Client) -> set[str]:
    return {f.path for f in client.workspace.storage.list_files("catalog")}


@pytest.mark.parametrize("fault", ["purge.after_files", "purge.after_rows"])
def test_a_crash_leaves_no_orphan_data_and_the_rerun_finishes(fault: str, metadata_url: str, tmp_path: Path) -> None:
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    env["TIDEKEEP_CATALOG_PURGE_BATCH_SIZE"] = "5"
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        now = int(time.time() * 1000)
        young_ids = []
        with client.workspace.db.write() as conn:
            for i in range(14):
                old = i < 12
                values = {"feed": "F", "type": "Raw", "create_time": now - 400 * DAY, "status": "DELETED",
                          "status_time": now - (30 if old else 1) * DAY - i * 1000, "file_size": 7,
                          "location": f"catalog/r{i}.dat"}
                record_id = conn.execute(sa.insert(catalog_records).values(**values)).inserted_primary_key[0]
                if not old:
                    young_ids.append(int(record_id))
        for i in range(14):
            path = Path(client.workspace.storage.full_path(f"catalog/r{i}.dat"))
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"1234567")

        crashed = run_purge({**env, "TIDEKEEP_FAULT": fault})
        assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
        left = rows(client)
        # the first batch is the five newest old records: their files are gone; their rows too
        # only when the crash came after the row transaction
        assert files(client) == {f"catalog/r{i}.dat" for i in range(5, 14)}
        assert len(left) == (14 if fault == "purge.after_files" else 9)
        assert files(client) <= set(left.values()), "data without a row: an orphan"

        rerun = run_purge(env)
        assert rerun.returncode == 0, rerun.stderr
        assert set(rows(client)) == set(young_ids)
        assert files(client) == {"catalog/r12.dat", "catalog/r13.dat"}
        expected = "purged 12 records" if fault == "purge.after_files" else "purged 7 records"
        assert rerun.stdout.startswith(expected), rerun.stdout
        with client.workspace.db.read() as conn:
            states = [r.state for r in conn.execute(sa.select(catalog_runs).order_by(catalog_runs.c.id))]
        assert states == ["INTERRUPTED", "SUCCEEDED"]  # the killed run never finished; the rerun did its work
        assert run_purge(env).stdout.startswith("purged 0 records")
    finally:
        client.close()
