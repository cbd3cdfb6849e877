"""`tidekeep catalog purge [--dry-run] [--json]` end to end in a subprocess: the summary line, the
JSON report, held records left alone, the failure table and exit 1 when the purge stops early."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store.schema_catalog import catalog_records

CLI = [sys.executable, "-m", "tidekeep.cli.main"]
DAY = 86_400_000


def test_catalog_purge_cli(tmp_path: Path, metadata_url: str) -> None:
    home = tmp_path / "ws"
    flags = ["--metadata-url", metadata_url, "--storage", str(tmp_path / "data")]
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env["TIDEKEEP_HOME"] = str(home)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *flags, *args], capture_output=True, text=True, env=env, timeout=120,
                              check=False)

    assert cli("init").returncode == 0
    client = tk.connect(home=home, metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        now = int(time.time() * 1000)
        with client.workspace.db.write() as conn:
            for i in range(5):
                feed = "KEEP" if i == 0 else "F"
                conn.execute(sa.insert(catalog_records).values(
                    feed=feed, type="Raw", create_time=now - 90 * DAY, status="DELETED",
                    status_time=now - 10 * DAY - i, file_size=1000, location=f"catalog/{i}.dat"))
                Path(client.workspace.storage.full_path(f"catalog/{i}.dat")).parent.mkdir(parents=True, exist_ok=True)
                Path(client.workspace.storage.full_path(f"catalog/{i}.dat")).write_bytes(b"x")
        assert cli("hold", "add", "records", 'feed = "KEEP"', "--reason", "keep").returncode == 0

        dry = cli("catalog", "purge", "--dry-run")
        assert dry.returncode == 0 and dry.stderr == "", dry.stderr
        assert re.fullmatch(r"purge run 1 at now=\S+Z \(dry run\): would purge 4 record\(s\), "
                            r"4,000 bytes \(3\.9 KiB\) in 1 batch\(es\); deleted before \S+Z; 0 failure\(s\); "
                            r"1 held\n", dry.stdout), dry.stdout
        assert client.catalog.purge(dry_run=True).purged == 4  # the dry run changed nothing

        done = cli("catalog", "purge", "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert (report["purged"], report["bytes"], report["held"], report["dry_run"], report["aborted"]) == \
            (4, 4000, 1, False, False)
        with client.workspace.db.read() as conn:
            assert [r.feed for r in conn.execute(sa.select(catalog_records))] == ["KEEP"]

        with client.workspace.db.write() as conn:
            for i in range(3):
                conn.execute(sa.insert(catalog_records).values(
                    feed="BAD", type="Raw", create_time=now - 90 * DAY, status="DELETED",
                    status_time=now - 9 * DAY, file_size=1, location=f"nosuch{i}://x/y"))
        failed = cli("--set", "catalog.purge_failure_threshold=2", "catalog", "purge")
        assert failed.returncode == 1
        assert failed.stderr == ("error: purge stopped: 3 failures exceed catalog.purge_failure_threshold (2); "
                                 "failed records keep their rows\n")
        lines = failed.stdout.splitlines()
        assert "purged 0 record(s)" in lines[0] and "3 failure(s)" in lines[0]
        assert lines[2].split() == ["ID", "LOCATION", "ERROR"] and len(lines) == 6
        assert all("nosuch" in line for line in lines[3:])

        bad_flag = cli("catalog", "purge", "--now")
        assert bad_flag.returncode == 2 and "No such option: --now" in bad_flag.stderr
    finally:
        client.close()
