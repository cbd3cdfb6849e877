"""The workspace value and the audit trail, on SQLite and PostgreSQL: a family works from a Workspace
alone (no Client), every family's audit rows go through one AuditLog with the workspace's clock and
actor, and only stream truncations fill the stream-shaped head columns."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from tidekeep.archives.model import Archive
from tidekeep.archives.store import ArchiveStore
from tidekeep.catalog.ages import Age
from tidekeep.catalog.api import Catalog
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.config import load_settings
from tidekeep.errors import NotFound, WorkspaceMismatch
from tidekeep.holds import HoldStore
from tidekeep.spark.credentials import MetadataReference
from tidekeep.spark.driver_workspace import open_driver_workspace
from tidekeep.store.audit import AuditEntry, audit_rows
from tidekeep.store.house import Workspace, open_workspace
from tidekeep.streams.controller import StreamController
from tidekeep.streams.of_workspace import stream_controller

NOW = 1_700_000_000_000


@pytest.fixture
def home(tmp_path: Path, metadata_url: str) -> Path:
    """A created workspace (its tidekeep.yaml names the store and the storage root)."""
    tk.init_workspace(tmp_path / "ws", {"metadata.url": metadata_url, "storage.uri": str(tmp_path / "data")})
    return tmp_path / "ws"


@pytest.fixture
def workspace(home: Path) -> Iterator[Workspace]:
    opened = open_workspace(load_settings(home), tk.ManualClock(NOW), actor="tester")
    yield opened
    opened.close()


def test_open_workspace_is_what_the_client_opens(home: Path, workspace: Workspace) -> None:
    with tk.connect(home) as client:
        assert workspace.workspace_id is not None and workspace.workspace_id == client.workspace.workspace_id
        assert client.workspace is client.workspace  # one workspace value for the client's lifetime
        # one actor signs every family's rows
        assert stream_controller(client.workspace).actor == client.workspace.audit.actor
    assert workspace.storage.workspace_id == workspace.workspace_id  # deletions are allowed under it
    assert workspace.audit.actor == "tester" and workspace.clock.now_ms() == NOW


def test_open_workspace_refuses_what_is_not_one(tmp_path: Path, home: Path) -> None:
    with pytest.raises(NotFound):
        open_workspace(load_settings(tmp_path / "nowhere", {"metadata.url": f"sqlite:///{tmp_path / 'none.db'}"}))
    tk.init_workspace(tmp_path / "other", {"storage.uri": str(tmp_path / "other-data")})
    with pytest.raises(WorkspaceMismatch):  # this store with another workspace's storage root
        open_workspace(load_settings(home, {"storage.uri": str(tmp_path / "other-data")}))


def test_a_family_works_from_a_workspace_alone(workspace: Workspace) -> None:
    catalog = Catalog(workspace)
    holds = HoldStore(workspace.db, workspace.clock, workspace.audit.actor)
    ids = catalog.add([{"feed": "F", "type": "Raw", "create_time": NOW - 1000}])
    catalog.set_rules([RetentionRule(1, "three days", True, parse("all"), Age(3, "days"))])
    hold = holds.add("records", 'feed = "F"', "legal")
    assert catalog.get(ids[0]).id == ids[0] and catalog.count() == 1
    rows = audit_rows(workspace.db)
    assert [(r["action"], r["actor"], r["time_ms"]) for r in rows] == [
        ("hold_add", "tester", NOW), ("catalog_rules", "tester", NOW)]
    assert json.loads(rows[0]["details"]) == {"hold": hold, "kind": "records"}


def test_family_rows_carry_no_stream_filler(workspace: Workspace) -> None:
    archive = Archive("a1", "web", NOW - 2000, NOW - 1000, 10, 100, 40, "archives/web/a1.parquet", NOW, "i1")
    ArchiveStore(workspace).register([archive], audit_reason="ingest test")
    streams = StreamController(workspace.db, workspace.storage, workspace.clock, workspace.audit.actor)
    streams.create_scope("s")
    streams.create_stream("s/x", tk.StreamConfig())
    HoldStore(workspace.db, workspace.clock, workspace.audit.actor).add("stream", "s/x", "legal")
    by_action = {r["action"]: r for r in audit_rows(workspace.db)}
    for action in ("archive_ingest", "hold_add"):
        row = by_action[action]
        assert row["old_head"] is None and row["new_head"] is None and row["bytes_freed"] == 0, row
    assert json.loads(by_action["archive_ingest"]["details"]) == {"archives": ["a1"], "stored_bytes": 40}


def test_audit_log_stamps_clock_and_actor_unless_the_entry_names_them(workspace: Workspace) -> None:
    with workspace.db.write() as conn:
        workspace.audit.append(conn, AuditEntry("one", "t/1", "first"))
        workspace.audit.append(conn, AuditEntry("two", "t/2", "second", 5, {"k": [1]}, '{"0": 1}', '{"0": 2}',
                                                actor="other", time_ms=NOW - 7))
    second, first = audit_rows(workspace.db)
    assert (first["time_ms"], first["actor"], first["bytes_freed"], first["details"]) == (NOW, "tester", 0, None)
    assert (second["time_ms"], second["actor"], second["bytes_freed"]) == (NOW - 7, "other", 5)
    assert (second["old_head"], second["new_head"], json.loads(second["details"])) == ('{"0": 1}', '{"0": 2}',
                                                                                       {"k": [1]})
    assert [r["action"] for r in audit_rows(workspace.db, target="t/1")] == ["one"]
    assert [r["action"] for r in audit_rows(workspace.db, limit=1)] == ["two"]  # newest first


def test_an_audit_row_exists_only_when_its_change_committed(workspace: Workspace) -> None:
    with pytest.raises(RuntimeError), workspace.db.write() as conn:
        workspace.audit.append(conn, AuditEntry("gone", "t", "rolled back"))
        raise RuntimeError("the change fails after its audit row")
    assert audit_rows(workspace.db) == []


def test_the_spark_driver_opens_the_workspace_without_a_client(home: Path, tmp_path: Path) -> None:
    with tk.connect(home) as client:
        client.create_scope("s")
        client.create_stream("s/x")
        expected = client.workspace.workspace_id
    driver = open_driver_workspace(str(home), None, None, None, "false")
    try:
        assert driver.workspace.workspace_id == expected
        assert driver.workspace.settings["storage.fsync"] is False  # the options override the settings
        assert driver.streams.state("s/x").info.state == "ACTIVE"
        writer = driver.transactional_writer("s/x", "w", lease="10s")
        txn = writer.begin()
        assert [t.id for t in driver.transactions.list("s/x")] == [txn.id]
    finally:
        driver.close()
    with pytest.raises(NotFound):
        open_driver_workspace(str(tmp_path / "nowhere"), MetadataReference(f"sqlite:///{tmp_path / 'none.db'}"), None,
                              None)
