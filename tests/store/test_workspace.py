"""A workspace knows itself: one id in the metadata store and the storage root, checked before
anything is deleted; read-only commands create nothing; a typo never conjures a workspace."""

from __future__ import annotations

import itertools
import json
import os
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.store.chunks import ChunkStorage
from tidekeep.store.fileio import FileIO
from tidekeep.store.workspace import (
    MARKER_FILE,
    check_stamps,
    plan_init,
    read_storage_id,
    storage_has_data,
    write_storage_id,
)

STREAM = "s/a"


@pytest.fixture
def metadata_url(new_store_url: str) -> str:
    """This module's subject is creating a store, so both backends start with nothing in them."""
    return new_store_url


# ---- the pure decisions ----------------------------------------------------------------------------
IDS = (None, "aaaa", "bbbb")


@pytest.mark.parametrize(("database_id", "storage_id", "database_is_new", "has_data"), [
    combo for combo in itertools.product(IDS, IDS, (False, True), (False, True))
    if not (combo[0] is not None and combo[2])  # a new store has no stamp
    and not (combo[1] is not None and not combo[3])  # a stamped storage root has (at least) its marker
])
def test_plan_init_never_lets_a_store_adopt_data_it_did_not_write(
        database_id: str | None, storage_id: str | None, database_is_new: bool, has_data: bool) -> None:
    plan = plan_init(database_id, storage_id, database_is_new, has_data, "db-url", "storage-uri")
    if plan.refusal is not None:
        assert not (plan.stamp_database or plan.stamp_storage)
        # refused exactly when the two cannot be proven one workspace
        assert (database_id is not None and storage_id is not None and database_id != storage_id) \
            or (database_id is not None and storage_id is None and has_data) \
            or (database_id is None and storage_id is not None) \
            or (database_id is None and storage_id is None and database_is_new and has_data)
        assert "db-url" in plan.refusal and "storage-uri" in plan.refusal
        return
    # accepted: afterwards both carry one id, and an existing stamp is never replaced
    final_database = database_id if database_id is not None else "new"
    final_storage = storage_id if storage_id is not None else (plan.workspace_id or "new")
    assert final_database == final_storage
    assert plan.stamp_database == (database_id is None)
    assert plan.stamp_storage == (storage_id is None)
    assert not (storage_id is not None and database_id is None)  # the id travels store -> storage only
    if storage_id is None and has_data:
        assert database_id is None and not database_is_new  # only a workspace from before the ids adopts its data


def test_check_stamps() -> None:
    assert check_stamps("aaaa", "aaaa", "db", "st") == "aaaa"
    assert check_stamps(None, None, "db", "st") is None
    for database_id, storage_id in (("aaaa", "bbbb"), ("aaaa", None), (None, "bbbb")):
        with pytest.raises(tk.WorkspaceMismatch, match=r"the metadata store db .* and the storage root st .* are "
                                                       "not one workspace") as info:
            check_stamps(database_id, storage_id, "db", "st")
        assert (database_id or "no workspace id") in str(info.value)
        assert (storage_id or "no workspace id") in str(info.value)


# ---- stamping and checking -------------------------------------------------------------------------
def make_workspace(tmp_path: Path, metadata_url: str, name: str = "ws") -> tuple[tk.Client, Path]:
    storage = tmp_path / f"{name}-data"
    client = tk.connect(home=tmp_path / name, metadata_url=metadata_url, storage=str(storage),
                        settings={"writer.linger": 0}, create=True)
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w") as writer:
        for i in range(20):
            writer.write(b"event-%d" % i, routing_key=f"k{i % 3}")
    return client, storage


def chunk_files(storage: Path) -> list[Path]:
    return sorted(p for p in (storage / "streams").rglob("*.parquet"))


def test_init_stamps_one_id_into_the_store_and_the_storage_root(tmp_path: Path, metadata_url: str) -> None:
    client, storage = make_workspace(tmp_path, metadata_url)
    marker = (storage / MARKER_FILE).read_text()
    assert client.workspace_id is not None and len(client.workspace_id) == 32
    assert f'"workspace_id": "{client.workspace_id}"' in marker
    client.close()
    again = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(storage), create=True)
    assert again.workspace_id == client.workspace_id and (storage / MARKER_FILE).read_text() == marker
    again.close()


@pytest.mark.parametrize("command", [("sweep", "--grace", "0s"), ("serve", "--once")])
def test_sweep_and_serve_against_a_mistyped_metadata_url_delete_nothing(
        tmp_path: Path, metadata_url: str, command: tuple[str, ...]) -> None:
    client, storage = make_workspace(tmp_path, metadata_url)
    orphan = storage / "streams" / "s" / "orphan.parquet"
    orphan.write_bytes(b"a crashed writer's file")
    os.utime(orphan, (0, 0))  # old enough for any grace period
    files = chunk_files(storage)
    client.close()
    typo = tmp_path / "metdata.db"
    done = run_cli(tmp_path / "ws", "--metadata-url", f"sqlite:///{typo}", "--storage", str(storage), *command)
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith(f"error: no tidekeep workspace at sqlite:///{typo}")
    assert "Traceback" not in done.stderr
    assert not typo.exists()  # nothing conjured
    assert chunk_files(storage) == files
    with tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(storage)) as again:
        assert len(list(again.stream(STREAM).read())) == 20


@pytest.mark.parametrize("command", [("sweep", "--grace", "0s"), ("serve", "--once"),
                                     ("stream", "truncate", STREAM, "tail"), ("stream", "list")])
def test_another_workspaces_store_cannot_touch_this_storage_root(
        tmp_path: Path, metadata_url: str, command: tuple[str, ...]) -> None:
    """Workspace B's metadata store pointed at workspace A's storage root: every one of A's chunk files
    is an orphan to B, so B's sweep would have deleted them all."""
    a, a_storage = make_workspace(tmp_path, metadata_url, "a")
    b_url = f"sqlite:///{tmp_path / 'b.db'}"
    b = tk.connect(home=tmp_path / "b", metadata_url=b_url, storage=str(tmp_path / "b-data"), create=True)
    files = chunk_files(a_storage)
    done = run_cli(tmp_path / "b", "--metadata-url", b_url, "--storage", str(a_storage), *command)
    assert done.returncode == tk.WorkspaceMismatch.exit_code, done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert f"(workspace {b.workspace_id})" in done.stderr and f"(workspace {a.workspace_id})" in done.stderr
    assert chunk_files(a_storage) == files
    assert len(list(a.stream(STREAM).read())) == 20
    a.close()
    b.close()


def test_init_refuses_to_join_a_store_to_another_workspaces_storage(tmp_path: Path, metadata_url: str) -> None:
    a, a_storage = make_workspace(tmp_path, metadata_url, "a")
    fresh = tmp_path / "fresh.db"
    with pytest.raises(tk.WorkspaceMismatch, match=f"belongs to workspace {a.workspace_id}.* is new"):
        tk.init_workspace(tmp_path / "b", {"metadata.url": f"sqlite:///{fresh}", "storage.uri": str(a_storage)})
    assert not fresh.exists() and not (tmp_path / "b").exists()  # refused before creating anything
    # a storage root that holds data but no id (a workspace from before the ids, say) is not adopted by a new store
    (a_storage / MARKER_FILE).unlink()
    with pytest.raises(tk.WorkspaceMismatch, match=r"holds data, and the metadata store .* is new"):
        tk.init_workspace(tmp_path / "b", {"metadata.url": f"sqlite:///{fresh}", "storage.uri": str(a_storage)})
    assert not fresh.exists()
    a.close()


def test_read_only_commands_create_nothing(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    before = sorted(tmp_path.rglob("*"))
    for args, fragment in [
        (("stream", "list"), "no tidekeep workspace at"),  # no tidekeep.yaml in the home
        (("--metadata-url", f"sqlite:///{tmp_path / 'x' / 'm.db'}", "--storage", str(tmp_path / "d"), "stream",
          "list"), f"no tidekeep workspace at sqlite:///{tmp_path / 'x' / 'm.db'}"),
        (("--metadata-url", f"sqlite:///{tmp_path / 'm.db'}", "--storage", str(tmp_path / "d"), "audit", "list"),
         "the metadata database"),
    ]:
        done = run_cli(home, *args)
        assert done.returncode == 3 and fragment in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1
    assert sorted(tmp_path.rglob("*")) == before
    with pytest.raises(tk.NotFound, match="no tidekeep workspace"):
        tk.connect(home=home, metadata_url=f"sqlite:///{tmp_path / 'm.db'}", storage=str(tmp_path / "d"))
    assert sorted(tmp_path.rglob("*")) == before


def test_a_store_without_the_schema_is_no_workspace(tmp_path: Path, pg_url: str) -> None:
    """PostgreSQL: a reachable database (here a fresh schema) without tidekeep's tables is refused,
    and no table is created in it."""
    with pytest.raises(tk.NotFound, match="holds no tidekeep schema"):
        tk.connect(home=tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path))
    engine = sa.create_engine(pg_url)
    try:
        with engine.connect() as conn:
            assert sa.inspect(conn).get_table_names() == []
    finally:
        engine.dispose()


def test_missing_storage_root_is_refused_and_not_created(tmp_path: Path, metadata_url: str) -> None:
    client, _ = make_workspace(tmp_path, metadata_url)
    client.close()
    missing = tmp_path / "nowhere"
    with pytest.raises(tk.NotFound, match=f"no tidekeep workspace storage at {missing}"):
        tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(missing))
    assert not missing.exists()


def test_sweeps_are_audited(tmp_path: Path, metadata_url: str) -> None:
    client, storage = make_workspace(tmp_path, metadata_url)
    orphans = [storage / "streams" / "s" / f"orphan-{i}.parquet" for i in range(3)]
    for i, orphan in enumerate(orphans):
        orphan.write_bytes(b"x" * (10 + i))
    result = client.sweep(grace=0)
    assert result.files_deleted == 3 and result.bytes_deleted == 33
    (row,) = [e for e in client.audit() if e["action"] == "sweep"]
    assert row["target"] == "streams" and row["bytes_freed"] == 33
    details = json.loads(row["details"])
    assert details["files"] == 3 and sorted(details["paths"]) == [f"streams/s/orphan-{i}.parquet" for i in range(3)]
    assert client.sweep(grace=0).files_deleted == 0
    assert [e["action"] for e in client.audit()].count("sweep") == 1  # nothing deleted: nothing to audit
    client.close()


def test_a_workspace_from_before_the_ids_deletes_nothing_until_init_stamps_it(
        tmp_path: Path, metadata_url: str) -> None:
    client, storage = make_workspace(tmp_path, metadata_url)
    with client.workspace.db.write() as conn:  # as a store upgraded from before the ids: the table, no row
        conn.execute(sa.text("DELETE FROM workspace"))
    (storage / MARKER_FILE).unlink()
    client.close()
    legacy = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(storage),
                        settings={"writer.linger": 0})
    assert legacy.workspace_id is None
    assert len(list(legacy.stream(STREAM).read())) == 20  # reads and writes work as before
    with legacy.stream(STREAM).writer("w2") as writer:
        writer.write(b"more")
    for delete in (lambda: legacy.stream(STREAM).truncate(legacy.stream(STREAM).tail_cut()),
                   lambda: legacy.sweep(grace=0),
                   lambda: legacy.catalog.purge(), lambda: legacy.transactions.expire()):
        with pytest.raises(tk.WorkspaceMismatch, match="run 'tidekeep init' to stamp the workspace"):
            delete()
    assert len(list(legacy.stream(STREAM).read())) == 21
    legacy.close()
    done = run_cli(tmp_path / "ws", "--metadata-url", metadata_url, "--storage", str(storage), "init", "--json")
    assert done.returncode == 0, done.stderr
    stamped = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(storage))
    assert stamped.workspace_id is not None
    assert stamped.stream(STREAM).truncate(stamped.stream(STREAM).tail_cut()).bytes_freed > 0
    stamped.close()


def test_a_damaged_marker_is_named(tmp_path: Path, metadata_url: str) -> None:
    client, storage = make_workspace(tmp_path, metadata_url)
    client.close()
    (storage / MARKER_FILE).write_text("{not json")
    with pytest.raises(tk.WorkspaceMismatch, match=f"has a damaged {MARKER_FILE}"):
        tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(storage))


def test_init_cli_reports_the_workspace_id(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    done = run_cli(home, "init", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    marker = (home / "data" / MARKER_FILE).read_text()
    assert report["workspace_id"] and report["workspace_id"] in marker
    with sqlite3.connect(home / "metadata.db") as conn:
        assert conn.execute("SELECT workspace_id FROM workspace").fetchall() == [(report["workspace_id"],)]


def test_the_marker_is_never_seen_half_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A concurrent init reads the marker while another writes it: it finds no marker or the whole
    one, never an empty or partial file it would call damaged."""
    root = tmp_path / "data"
    storage = ChunkStorage(str(root), create=True)
    seen_while_writing: list[str | None] = []
    real_create = FileIO.create

    def create_then_look(self: FileIO, key: str) -> object:
        sink = real_create(self, key)  # the file exists now, still empty
        seen_while_writing.append(read_storage_id(storage))
        return sink

    monkeypatch.setattr(FileIO, "create", create_then_look)
    write_storage_id(storage, "a" * 32, 0)
    assert seen_while_writing == [None]
    assert read_storage_id(storage) == "a" * 32
    assert sorted(p.name for p in root.iterdir()) == [MARKER_FILE]


def test_a_marker_left_half_written_by_a_crash_is_not_data(tmp_path: Path, metadata_url: str) -> None:
    root = tmp_path / "data"
    root.mkdir()
    (root / f"{MARKER_FILE}.{'0' * 32}.partial").write_bytes(b'{"workspace')  # killed while writing it
    assert not storage_has_data(FileIO(str(root)))
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(root), create=True)
    client.close()
    assert json.loads((root / MARKER_FILE).read_text())["workspace_id"]
    (root / "streams").mkdir()
    assert storage_has_data(FileIO(str(root)))
