"""Holds on catalog records: a hold of kind "records" is an expression (stored in canonical text);
the purge leaves every record it matches alone while it exists; the SQL condition and the Python
helper agree on which records are held. Bad expressions are typed errors naming the column and
change nothing. On SQLite and PostgreSQL, and through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from tidekeep.catalog.expressions import CompileContext
from tidekeep.catalog.holds import held_predicate, holds_matching, load_held_records, record_holds
from tidekeep.errors import HoldActive, InvalidInput
from tidekeep.store.schema_catalog import catalog_records

DAY = 86_400_000
NOW = 1_750_000_000_000
CLI = [sys.executable, "-m", "tidekeep.cli.main"]


@pytest.fixture
def held_client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(NOW), settings={"catalog.purge_batch_size": 3}, create=True)
    yield c
    c.close()


def add(client: tk.Client, feed: str, i: int, **extra: Any) -> int:
    location = f"catalog/{feed}/{i}.dat"
    path = Path(client.workspace.storage.full_path(location))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"data")
    values = {"feed": feed, "type": "Raw Events", "create_time": NOW - 100 * DAY, "status": "DELETED",
              "status_time": NOW - 30 * DAY - i * 1000, "file_size": 4, "location": location, **extra}
    with client.workspace.db.write() as conn:
        return int(conn.execute(sa.insert(catalog_records).values(**values)).inserted_primary_key[0])


def remaining(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return {r.id for r in conn.execute(sa.select(catalog_records.c.id))}


def test_a_records_hold_is_stored_in_canonical_text_and_audited(held_client: tk.Client) -> None:
    client = held_client
    hold_id = client.holds.add("records", 'feed="X"   AND type in ("Raw Events","Events")', "  case\n7 ")
    [hold] = client.holds.list("records")
    assert (hold.id, hold.kind, hold.target, hold.reason) == (
        hold_id, "records", 'feed = "X" and type in ("Raw Events", "Events")', "case 7")
    assert client.holds.add("records", 'feed = "Y"', "other") == hold_id + 1
    [entry] = [a for a in client.audit(limit=10) if a["action"] == "hold_add" and a["target"] == hold.target]
    assert json.loads(entry["details"]) == {"hold": hold_id, "kind": "records"}
    assert [h.id for h in client.holds.list(target='feed = "Y"')] == [hold_id + 1]


def test_bad_expressions_are_refused_naming_the_place_and_change_nothing(held_client: tk.Client) -> None:
    client = held_client
    client.holds.add("records", 'feed = "X"', "baseline")
    before = ([h.to_dict() for h in client.holds.list()], client.audit(limit=100))
    long_list = ", ".join(f'"feed-{i:04d}"' for i in range(60))
    bad = [
        ('feed = "X" and (type = "Raw"', "expression: unbalanced parentheses: '(' is never closed at column 16"),
        ("size > 5", "expression: unknown field 'size': expected one of Feed, Type, Status, Id, Parent Id, "
                     "Pipeline, Create Time, Effective Time, Status Time, File Size, Raw Size or attr.<name> at "
                     "column 1"),
        ('file_size > "abc"', "expression: invalid size 'abc' for File Size: expected bytes or a size like 10MB "
                              "at column 13"),
        ("", "a records hold needs an expression: got an empty one"),
        (f"feed in ({long_list})", "records hold expression too long: 788 characters in canonical form, at most 600"),
    ]
    for expression, message in bad:
        with pytest.raises(InvalidInput) as caught:
            client.holds.add("records", expression, "r")
        assert str(caught.value) == message
    with pytest.raises(InvalidInput, match=r"^a hold needs a reason: got an empty one$"):
        client.holds.add("records", 'feed = "Z"', " ")
    assert ([h.to_dict() for h in client.holds.list()], client.audit(limit=100)) == before


def test_the_purge_leaves_held_records_until_the_hold_goes(held_client: tk.Client) -> None:
    client = held_client
    held = [add(client, "LEGAL", i) for i in range(4)]
    free = [add(client, "OTHER", i) for i in range(5)]
    also_held = add(client, "OTHER", 99, attributes=json.dumps({"case": "c-17"}))
    hold_a = client.holds.add("records", 'feed = "LEGAL"', "litigation")
    client.holds.add("records", 'attr.case = "c-17"', "case 17")
    for _ in range(2):
        report = client.catalog.purge()
        assert remaining(client) == {*held, also_held}
    assert (report.purged, report.held) == (0, 5)
    files = {f.path for f in client.workspace.storage.list_files("catalog")}
    assert files == {f"catalog/LEGAL/{i}.dat" for i in range(4)} | {"catalog/OTHER/99.dat"}
    assert free  # all purged above
    client.holds.remove(hold_a)
    report = client.catalog.purge()
    assert (report.purged, report.held) == (4, 1) and remaining(client) == {also_held}


def test_a_hold_added_during_a_purge_protects_the_rest_of_the_run(held_client: tk.Client) -> None:
    client = held_client
    ids = [add(client, f"F{i}", i) for i in range(9)]  # newest first: F0, F1, ... in batches of 3
    added: list[int] = []

    def progress(done: int, total: int) -> None:
        if done == 3 and not added:
            added.append(client.holds.add("records", 'feed in ("F1", "F5", "F8")', "late"))

    report = client.catalog.purge(progress=progress)
    assert added and remaining(client) == {ids[5], ids[8]}  # F1 went in the first batch, before the hold
    assert report.purged == 7


def test_sql_and_python_agree_on_what_is_held(held_client: tk.Client) -> None:
    client = held_client
    client.catalog.set_dictionary("legal_feeds", ["A", "C"])
    for i, feed in enumerate(["A", "B", "C", "D", "A"]):
        add(client, feed, i, status="UNLOCKED" if i % 2 else "DELETED", file_size=i * 100,
            attributes=json.dumps({"owner": f"o{i % 3}"}))
    client.holds.add("records", "feed in dictionary legal_feeds", "dict")
    client.holds.add("records", 'attr.owner = "o2" and file_size > 100', "owner")
    with client.workspace.db.read() as conn:
        holds = record_holds(conn)
        ctx = CompileContext(NOW, {"legal_feeds": ["A", "C"]})
        by_sql = {r.id for r in conn.execute(sa.select(catalog_records.c.id).where(held_predicate(holds, ctx)))}
        rows = [dict(r._mapping) for r in conn.execute(sa.select(catalog_records))]
        loaded = load_held_records(conn, NOW)
        by_loaded = {r.id for r in conn.execute(sa.select(catalog_records.c.id).where(loaded.condition))}
    by_python = {row["id"] for row in rows if holds_matching(row, holds, ctx)}
    assert by_sql == by_python == by_loaded
    feeds = {row["id"]: row["feed"] for row in rows}
    assert {feeds[i] for i in by_sql} == {"A", "C"}  # o2 records: i=2 (C) and no other with size > 100
    assert [h.reason for h in holds_matching(next(r for r in rows if r["feed"] == "C"), holds, ctx)] == \
        ["dict", "owner"]
    with client.workspace.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(catalog_records)
                            .where(held_predicate([], ctx))).scalar_one() == 0
    assert holds_matching(rows[0], [], ctx) == []


def test_hold_records_through_the_cli(tmp_path: Path, metadata_url: str) -> None:
    home = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env["TIDEKEEP_HOME"] = str(home)
    flags = ["--metadata-url", metadata_url, "--storage", str(tmp_path / "data")]

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *flags, *args], capture_output=True, text=True, env=env, timeout=120,
                              check=False)

    assert cli("init").returncode == 0
    done = cli("hold", "add", "records", 'feed = "X*"', "--reason", "audit 2026", "--json")
    assert done.returncode == 0, done.stderr
    added = json.loads(done.stdout)
    assert (added["kind"], added["target"], added["reason"]) == ("records", 'feed = "X*"', "audit 2026")
    text = cli("hold", "add", "records", 'type = "Events"', "--reason", "r")
    assert text.stdout == f'hold {added["id"] + 1} added on records type = "Events" (r)\n'
    listed = json.loads(cli("hold", "list", "--kind", "records", "--json").stdout)
    assert [h["target"] for h in listed] == ['feed = "X*"', 'type = "Events"']
    bad = cli("hold", "add", "records", "feed = ", "--reason", "r")
    assert bad.returncode == 2 and bad.stderr.startswith("error: expression: ") and "column" in bad.stderr
    assert len(json.loads(cli("hold", "list", "--json").stdout)) == 2


def test_a_hold_added_between_fetch_and_file_deletion_still_protects(held_client: tk.Client) -> None:
    """The purge looks at the holds again right before deleting a fetched batch's files."""
    from tidekeep.catalog.purge import _Candidate, _without_newly_held

    client = held_client
    ids = [add(client, feed, i) for i, feed in enumerate(["A", "B", "C"])]
    batch = [_Candidate(i, NOW - 30 * DAY, None, 4) for i in ids]
    with client.workspace.db.read() as conn:
        before = load_held_records(conn, NOW)
    assert _without_newly_held(client.workspace, batch, before, NOW) == batch  # no change in the holds: as fetched
    client.holds.add("records", 'feed = "B"', "late")
    assert [c.id for c in _without_newly_held(client.workspace, batch, before, NOW)] == [ids[0], ids[2]]


def test_marking_held_records_deleted_is_refused_and_changes_nothing(held_client: tk.Client) -> None:
    """The one API that deletes records outside the retention job, RecordStore.set_status(ids,
    "DELETED"), honours holds on records like the job and the purge do."""
    from tidekeep.catalog.record_store import RecordStore

    client = held_client
    free = add(client, "OTHER", 1, status="UNLOCKED")
    held = [add(client, "LEGAL", i, status="UNLOCKED") for i in range(2, 4)]
    older = client.holds.add("records", 'feed = "NOBODY"', "unrelated")
    hold_id = client.holds.add("records", 'feed = "LEGAL"', "litigation")
    later = client.holds.add("records", f"id = {held[1]}", "also")
    store = RecordStore(client.workspace)
    before = [store.get(i) for i in (free, *held)]
    for ids in ([held[1]], [free, *held], [*held]):
        with pytest.raises(HoldActive) as caught:
            store.set_status(ids, "deleted")
        assert caught.value.hold_id == hold_id and later > hold_id > older  # the oldest hold that applies
        assert str(caught.value) == (f"record {min(set(ids) & set(held))} is under legal hold {hold_id} "
                                     "(litigation); it cannot be deleted until the hold is removed")
    assert [store.get(i) for i in (free, *held)] == before
    assert store.set_status([free, *held], "LOCKED") == 3  # not a deletion
    assert store.set_status([free], "DELETED") == 1
    client.holds.remove(hold_id)
    with pytest.raises(HoldActive, match=f"^record {held[1]} is under legal hold {later} "):
        store.set_status(held, "DELETED")
    client.holds.remove(later)
    assert store.set_status(held, "DELETED") == 2


def test_a_dictionary_a_records_hold_names_can_be_neither_changed_nor_deleted(held_client: tk.Client) -> None:
    """New words would change what the hold protects: editing the dictionary must not release held
    records behind the hold's back."""
    client = held_client
    client.catalog.set_dictionary("legal_feeds", ["A", "B"])
    client.catalog.set_dictionary("spare", ["X"])
    held = add(client, "B", 1)
    hold_id = client.holds.add("records", 'feed in dictionary legal_feeds', "case 8")
    message = (f"dictionary 'legal_feeds' is named by legal hold {hold_id} (case 8) on records; it cannot be {{}} "
               "until the hold is removed")
    with pytest.raises(HoldActive) as caught:
        client.catalog.set_dictionary("legal_feeds", ["A"])
    assert str(caught.value) == message.format("changed") and caught.value.hold_id == hold_id
    with pytest.raises(HoldActive) as caught:
        client.catalog.delete_dictionary("legal_feeds")
    assert str(caught.value) == message.format("deleted")
    assert client.catalog.dictionary("legal_feeds") == ["A", "B"]
    client.catalog.set_dictionary("legal_feeds", [" A", "B", "A"])  # the same words: no change, allowed
    client.catalog.set_dictionary("spare", ["Y"])  # another dictionary is free
    client.catalog.delete_dictionary("spare")
    assert client.catalog.purge().held == 1 and held in remaining(client)
    client.holds.remove(hold_id)
    client.catalog.set_dictionary("legal_feeds", ["A"])
    client.catalog.delete_dictionary("legal_feeds")
    assert client.catalog.purge().purged == 1 and remaining(client) == set()
