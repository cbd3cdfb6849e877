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
from tidekeep.errors import HoldActive, InvalidInput, NotFound
from tidekeep.store.schema_archives import archives
from tidekeep.store.schema_catalog import catalog_records

HOUR = 3_600_000
T0 = 1_700_000_000_000
LATER = T0 + 8 * 24 * HOUR  # past the default catalog.purge_age (7 days) after T0


@pytest.fixture
def hclient(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"archive_output.retention_period": 60}, create=True)
    yield c
    c.close()


def live_ids(client: tk.Client) -> set[str]:
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(archives.c.id)).scalars())


def test_a_held_dataset_keeps_its_expired_archives_until_released(hclient: tk.Client) -> None:
    kept_a = make_archive(hclient, "legal", [(T0 - 3 * HOUR, "a")])
    kept_b = make_archive(hclient, "legal", [(T0 - 4 * HOUR, "b")])
    other = make_archive(hclient, "web", [(T0 - 3 * HOUR, "c")])
    hold_id = hclient.holds.add("dataset", "legal", "litigation 42")
    report = collect_archives(hclient.workspace)
    assert live_ids(hclient) == {kept_a.id, kept_b.id}
    assert {h["archive_id"] for h in report.held} == {kept_a.id, kept_b.id}
    assert all("dataset hold" in h["why"] for h in report.held)
    assert {c["archive_id"] for c in report.candidates} == {other.id}
    assert Path(hclient.workspace.storage.full_path(kept_a.path)).exists()
    hclient.holds.remove(hold_id)
    report = collect_archives(hclient.workspace)
    assert live_ids(hclient) == set() and report.deleted == 2 and report.held == []


def test_a_held_archive_is_kept_its_siblings_are_not(hclient: tk.Client) -> None:
    held = make_archive(hclient, "web", [(T0 - 3 * HOUR, "a")])
    sibling = make_archive(hclient, "web", [(T0 - 3 * HOUR, "b")])
    hold_id = hclient.holds.add("archive", held.id, "keep this one")
    report = collect_archives(hclient.workspace)
    assert live_ids(hclient) == {held.id} and [h["archive_id"] for h in report.held] == [held.id]
    assert "archive hold" in report.held[0]["why"] and sibling.id not in live_ids(hclient)
    assert [h.target for h in hclient.holds.list("archive")] == [held.id]
    hclient.holds.remove(hold_id)
    collect_archives(hclient.workspace)
    assert live_ids(hclient) == set()


def record_ids(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(catalog_records.c.id)).scalars())


def test_a_records_hold_on_an_archives_catalog_record_keeps_the_archive(hclient: tk.Client) -> None:
    """The collector deletes an archive together with its catalog record: a hold on records that
    matches the record keeps both, before the sweep and in the re-check under the dataset lock."""
    from tidekeep.archives.gc import ArchiveGcReport, _plan, delete_metadata

    held = make_archive(hclient, "web", [(T0 - 3 * HOUR, "a")])
    late = make_archive(hclient, "db", [(T0 - 3 * HOUR, "b")])
    free = make_archive(hclient, "app", [(T0 - 3 * HOUR, "c")])
    hold_id = hclient.holds.add("records", 'feed = "web" and type = "Archive"', "case 3")
    plan, _ = _plan(hclient.workspace, 60, T0)
    assert {a.id for a in plan.candidates} == {late.id, free.id} and [a.id for a in plan.held] == [held.id]
    late_hold = hclient.holds.add("records", 'feed = "db"', "just in time")
    report = ArchiveGcReport(now_ms=T0, dry_run=False, enabled=True, retention_minutes=60)
    assert [a.id for a in delete_metadata(hclient.workspace, plan, report)] == [free.id]
    assert report.kept_by_recheck == [late.id]
    assert live_ids(hclient) == {held.id, late.id}
    assert record_ids(hclient) == {held.catalog_record_id, late.catalog_record_id}

    report = collect_archives(hclient.workspace)
    assert report.deleted == 0 and {h["archive_id"]: h["why"] for h in report.held} == {
        held.id: "expired but held (records hold)", late.id: "expired but held (records hold)"}
    assert Path(hclient.workspace.storage.full_path(held.path)).exists()
    hclient.holds.remove(hold_id)
    hclient.holds.remove(late_hold)
    assert collect_archives(hclient.workspace).deleted == 2
    assert live_ids(hclient) == set() and record_ids(hclient) == set()


def test_an_archive_hold_keeps_the_archives_catalog_record_from_deletion_and_purge(hclient: tk.Client) -> None:
    """An archive's catalog record points at the archive's file: marking it DELETED is refused while
    the archive is held, and one marked DELETED before the hold is not purged (nor its file)."""
    from tidekeep.catalog.record_store import RecordStore

    kept = make_archive(hclient, "legal", [(T0, "a")])
    marked = make_archive(hclient, "legal", [(T0, "b")])
    store = RecordStore(hclient.workspace)
    store.set_status([marked.catalog_record_id], "DELETED")  # before any hold: allowed
    hold_id = hclient.holds.add("dataset", "legal", "litigation 42")
    for ids in ([kept.catalog_record_id], [marked.catalog_record_id, kept.catalog_record_id]):
        with pytest.raises(HoldActive) as caught:
            store.set_status(ids, "DELETED")
        assert str(caught.value) == (f"record {kept.catalog_record_id} is under legal hold {hold_id} (litigation 42); "
                                     "it cannot be deleted until the hold is removed")
    assert store.get(kept.catalog_record_id).status == "LOCKED"
    report = hclient.catalog.purge(now_ms=LATER)
    assert (report.purged, report.held) == (0, 1)
    assert record_ids(hclient) == {kept.catalog_record_id, marked.catalog_record_id}
    assert Path(hclient.workspace.storage.full_path(marked.path)).exists()
    hclient.holds.remove(hold_id)
    archive_hold = hclient.holds.add("archive", marked.id, "incident 7")
    assert hclient.catalog.purge(now_ms=LATER).purged == 0
    assert Path(hclient.workspace.storage.full_path(marked.path)).exists()
    store.set_status([kept.catalog_record_id], "DELETED")  # its archive is no longer held
    hclient.holds.remove(archive_hold)
    # unheld, the purge still never deletes an archive's file: archives/ is tidekeep's own area, which
    # only the archive collector deletes from (docs/catalog-purge.md)
    report = hclient.catalog.purge(now_ms=LATER)
    assert (report.purged, report.failures) == (0, 2)
    assert all("lies inside tidekeep's log archives" in f["error"] for f in report.failed)
    assert Path(hclient.workspace.storage.full_path(marked.path)).exists()
    assert Path(hclient.workspace.storage.full_path(kept.path)).exists()


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
