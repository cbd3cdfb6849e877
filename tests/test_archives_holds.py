"""Holds on archive datasets and archives: a held archive is never expired and is reported as
held; releasing the hold lets the next sweep delete it; bad targets are typed errors that change
nothing; the CLI's `hold add dataset|archive` works."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from helpers.procs import worker_env
from tidekeep.archives.gc import collect_archives
from tidekeep.errors import InvalidInput, NotFound
from tidekeep.store.schema_archives import archives

HOUR = 3_600_000
T0 = 1_700_000_000_000


@pytest.fixture
def hclient(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"archive_output.retention_period": 60}, create=True)
    yield c
    c.close()


def live_ids(client: tk.Client) -> set[str]:
    with client.db.read() as conn:
        return set(conn.execute(sa.select(archives.c.id)).scalars())


def test_a_held_dataset_keeps_its_expired_archives_until_released(hclient: tk.Client) -> None:
    kept_a = make_archive(hclient, "legal", [(T0 - 3 * HOUR, "a")])
    kept_b = make_archive(hclient, "legal", [(T0 - 4 * HOUR, "b")])
    other = make_archive(hclient, "web", [(T0 - 3 * HOUR, "c")])
    hold_id = hclient.holds.add("dataset", "legal", "litigation 42")
    report = collect_archives(hclient)
    assert live_ids(hclient) == {kept_a.id, kept_b.id}
    assert {h["archive_id"] for h in report.held} == {kept_a.id, kept_b.id}
    assert all("dataset hold" in h["why"] for h in report.held)
    assert {c["archive_id"] for c in report.candidates} == {other.id}
    assert Path(hclient.storage.full_path(kept_a.path)).exists()
    hclient.holds.remove(hold_id)
    report = collect_archives(hclient)
    assert live_ids(hclient) == set() and report.deleted == 2 and report.held == []


def test_a_held_archive_is_kept_its_siblings_are_not(hclient: tk.Client) -> None:
    held = make_archive(hclient, "web", [(T0 - 3 * HOUR, "a")])
    sibling = make_archive(hclient, "web", [(T0 - 3 * HOUR, "b")])
    hold_id = hclient.holds.add("archive", held.id, "keep this one")
    report = collect_archives(hclient)
    assert live_ids(hclient) == {held.id} and [h["archive_id"] for h in report.held] == [held.id]
    assert "archive hold" in report.held[0]["why"] and sibling.id not in live_ids(hclient)
    assert [h.target for h in hclient.holds.list("archive")] == [held.id]
    hclient.holds.remove(hold_id)
    collect_archives(hclient)
    assert live_ids(hclient) == set()


def test_bad_targets_are_typed_errors_and_change_nothing(hclient: tk.Client) -> None:
    archive = make_archive(hclient, "web", [(T0, "a")])
    before = ([h.to_dict() for h in hclient.holds.list()], hclient.audit(limit=1000))
    bad = [
        (NotFound, "dataset 'nope' does not exist", lambda: hclient.holds.add("dataset", "nope", "r")),
        (InvalidInput, "invalid dataset name 'a/b'", lambda: hclient.holds.add("dataset", "a/b", "r")),
        (NotFound, f"archive {'0' * 32} does not exist", lambda: hclient.holds.add("archive", "0" * 32, "r")),
        (InvalidInput, "invalid archive id 'XYZ': expected 32 lowercase hex digits",
         lambda: hclient.holds.add("archive", "XYZ", "r")),
        (InvalidInput, "a hold needs a reason: got an empty one", lambda: hclient.holds.add("archive", archive.id, "")),
    ]
    for error, message, call in bad:
        with pytest.raises(error) as caught:
            call()
        assert isinstance(caught.value, error) and str(caught.value).startswith(message), str(caught.value)
        assert "\n" not in str(caught.value)
    assert ([h.to_dict() for h in hclient.holds.list()], hclient.audit(limit=1000)) == before


def test_cli_hold_add_dataset_and_archive(tmp_path: Path, metadata_url: str) -> None:
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        archive = make_archive(c, "web", [(1, "ancient")])

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", *args], env=env, capture_output=True,
                                  text=True, timeout=120, check=False)

        added = cli("hold", "add", "dataset", "web", "--reason", "audit", "--json")
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout)["kind"] == "dataset" and json.loads(added.stdout)["target"] == "web"
        added = cli("hold", "add", "archive", archive.id, "--reason", "audit")
        assert added.returncode == 0 and f"on archive {archive.id}" in added.stdout, added.stderr
        missing = cli("hold", "add", "dataset", "nope", "--reason", "x")
        assert missing.returncode != 0 and missing.stderr.strip().endswith("dataset 'nope' does not exist")
        assert len(missing.stderr.strip().splitlines()) == 1
        gc = cli("archives", "gc", "--json")
        assert gc.returncode == 0, gc.stderr
        assert json.loads(gc.stdout)["archives"]["enabled"] is False  # retention off by default: nothing expires
        env["TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD"] = "60"
        gc = cli("archives", "gc", "--dry-run")
        assert gc.returncode == 0 and "expired but held" in gc.stdout and archive.id in gc.stdout, gc.stdout
        assert archive.id in live_ids(c)
    finally:
        c.close()
