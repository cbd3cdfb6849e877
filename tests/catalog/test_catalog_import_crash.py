"""A bulk import killed part-way (a real `tidekeep catalog import` subprocess dying at a named fault
point after some of its write jobs committed): the committed batches stay, and rerunning the import
of rows with ids completes it exactly, without duplicates, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.store.schema_catalog import catalog_records

FILES, PER_FILE = 6, 40


def tidekeep(home: Path, metadata_url: str, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    env.update({"TIDEKEEP_HOME": str(home), "TIDEKEEP_METADATA_URL": metadata_url})
    if fault is not None:
        env["TIDEKEEP_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=300, check=False)


def import_cli(home: Path, metadata_url: str, path: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return tidekeep(home, metadata_url, "--set", "spark.master=local[2]", "catalog", "import", str(path), "--json",
                    fault=fault)


def stored_ids(client: tk.Client) -> list[int]:
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(catalog_records.c.id).order_by(catalog_records.c.id)).scalars())


def test_killed_import_rerun_completes_without_duplicates(tmp_path: Path, metadata_url: str) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for f in range(FILES):  # one file per partition at least, so the writes run as several jobs
        lines = [json.dumps({"id": f * 1000 + i + 1, "feed": f"F{f}", "type": "T", "create_time": i})
                 for i in range(PER_FILE)]
        (folder / f"part-{f}.jsonl").write_text("\n".join(lines) + "\n")
    expected = sorted(f * 1000 + i + 1 for f in range(FILES) for i in range(PER_FILE))
    home = tmp_path / "ws"
    assert tidekeep(home, metadata_url, "init").returncode == 0

    crashed = import_cli(home, metadata_url, folder, fault="catalog_import_after_group")
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr[-2000:]
    with tk.connect(home, metadata_url=metadata_url, create=True) as client:
        partial = stored_ids(client)
    assert 0 < len(partial) < len(expected) and set(partial) < set(expected)  # some batches landed, not all

    done = import_cli(home, metadata_url, folder)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert (report["rows"], report["inserted"], report["skipped"]) == (len(expected),
                                                                        len(expected) - len(partial), len(partial))
    with tk.connect(home, metadata_url=metadata_url, create=True) as client:
        assert stored_ids(client) == expected
        assert client.catalog.add([{"feed": "F", "type": "T", "create_time": 1}])[0] > max(expected)
