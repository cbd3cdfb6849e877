"""Legal holds: a held stream is never truncated (the error names the hold, nothing changes), removing
the hold lets truncation proceed, adding and removing are audited, bad input is refused with typed
one-line errors and changes nothing; the CLI end to end in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.storage import chunk_rows, stored_files
from tidekeep.errors import HoldActive, InvalidInput, InvalidName, NotFound
from tidekeep.store.schema_holds import holds as holds_table
from tidekeep.streams.of_workspace import stream_controller

STREAM = "legal/orders"
CLI = [sys.executable, "-m", "tidekeep.cli.main"]


def _write(client: tk.Client, first: int, last: int) -> None:
    with client.stream(STREAM).writer("w1", batch_size="200B") as writer:
        for i in range(first, last):
            writer.write(f"order-{i:04d}".encode(), routing_key=f"k{i % 5}")


def _snapshot(client: tk.Client) -> dict[str, Any]:
    """Everything a truncation would change: head, truncated bytes, chunk rows, files, readable events."""
    state = client.stream(STREAM).state()
    return {
        "head": dict(state.head),
        "truncated_bytes": state.truncated_bytes,
        "chunks": sorted(r.path for r in chunk_rows(client, STREAM)),
        "files": sorted(stored_files(client)),
        "events": sorted(e.payload for e in client.stream(STREAM).read()),
    }


@pytest.fixture
def held(client: tk.Client) -> tk.Client:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 60)
    return client


def test_a_held_stream_is_never_truncated_and_removing_the_hold_lets_truncation_proceed(held: tk.Client) -> None:
    client = held
    hold_id = client.holds.add("stream", STREAM, "litigation 2024-117")
    before = _snapshot(client)
    audit_before = client.audit(STREAM)

    # also a truncation that would move nothing
    for cut in (client.stream(STREAM).tail_cut(), client.stream(STREAM).head_cut()):
        with pytest.raises(HoldActive) as caught:
            client.stream(STREAM).truncate(cut)
        assert str(caught.value) == (f"stream {STREAM} is under legal hold {hold_id} (litigation 2024-117); "
                                     "it cannot be truncated until the hold is removed")
        assert caught.value.hold_id == hold_id and caught.value.exit_code == 10
    assert _snapshot(client) == before
    assert client.audit(STREAM) == audit_before  # no truncate row

    removed = client.holds.remove(hold_id)
    assert (removed.id, removed.kind, removed.target, removed.reason) == (hold_id, "stream", STREAM,
                                                                           "litigation 2024-117")
    assert client.holds.active_for("stream", STREAM) == []
    state = client.stream(STREAM).state()
    stored = sum(seg.tail - seg.head for seg in state.segments.values())
    result = client.stream(STREAM).truncate(client.stream(STREAM).tail_cut())
    assert stored > 0 and result.bytes_freed == stored
    assert list(client.stream(STREAM).read()) == []
    assert client.stream(STREAM).state().truncated_bytes == before["truncated_bytes"] + result.bytes_freed


def test_every_hold_must_go_before_truncation_and_holds_are_per_stream(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    client.create_stream("legal/other", tk.StreamConfig(segments=1))
    _write(client, 0, 20)
    with client.stream("legal/other").writer("w1") as writer:
        writer.write(b"x" * 40)
    first = client.holds.add("stream", STREAM, "case A")
    second = client.holds.add("stream", STREAM, "case B")
    assert second > first
    assert [h.id for h in client.holds.active_for("stream", STREAM)] == [first, second]

    # the other stream is not held
    other_tail = client.stream("legal/other").tail_cut()
    assert client.stream("legal/other").truncate(other_tail).bytes_freed == sum(other_tail.positions.values()) > 40

    client.holds.remove(first)
    with pytest.raises(HoldActive, match=f"legal hold {second} \\(case B\\)"):
        client.stream(STREAM).truncate(client.stream(STREAM).tail_cut())
    client.holds.remove(second)
    assert client.stream(STREAM).truncate(client.stream(STREAM).tail_cut()).bytes_freed > 0


def test_holds_persist_and_list_filters(client: tk.Client, tmp_path: Path, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    client.create_stream("legal/b", tk.StreamConfig(segments=1))
    a = client.holds.add("stream", STREAM, "  keep\n  everything ")
    b = client.holds.add("stream", "legal/b", "audit by regulator")
    listed = client.holds.list()
    assert [(h.id, h.target, h.reason) for h in listed] == [(a, STREAM, "keep everything"),
                                                             (b, "legal/b", "audit by regulator")]
    assert all(h.created_by == stream_controller(client.workspace).actor for h in listed)
    assert [h.id for h in client.holds.list(kind="stream", target="legal/b")] == [b]
    assert client.holds.list(target="legal/none") == []

    # another client on the same workspace sees them: they live in the metadata store
    other = tk.connect(home=tmp_path / "ws", metadata_url=client.settings.metadata_url,
                       storage=client.settings.storage_uri, create=True)
    try:
        assert [h.to_dict() for h in other.holds.list()] == [h.to_dict() for h in listed]
        with pytest.raises(HoldActive):
            other.stream(STREAM).truncate(other.stream(STREAM).tail_cut())
    finally:
        other.close()


def test_holds_take_their_time_from_the_clock(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> None:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
        create=True)
    try:
        c.create_stream(STREAM)
        now = clock.now_ms()
        hold_id = c.holds.add("stream", STREAM, "clocked")
        assert [h.created_ms for h in c.holds.list()] == [now]
        clock.advance(5_000)
        c.holds.remove(hold_id)
        times = {e["action"]: e["time_ms"] for e in c.audit(STREAM)}
        assert times == {"hold_add": now, "hold_remove": now + 5_000}
    finally:
        c.close()


def test_adding_and_removing_holds_is_audited(held: tk.Client) -> None:
    client = held
    hold_id = client.holds.add("stream", STREAM, "subpoena 42")
    client.holds.remove(hold_id)
    entries = client.audit(STREAM)  # newest first
    assert [e["action"] for e in entries] == ["hold_remove", "hold_add"]
    remove_row, add_row = entries
    assert add_row["target"] == remove_row["target"] == STREAM
    assert add_row["reason"] == "subpoena 42"
    assert remove_row["reason"] == f"released hold {hold_id} (subpoena 42)"
    assert json.loads(add_row["details"]) == json.loads(remove_row["details"]) == {"hold": hold_id, "kind": "stream"}
    assert add_row["bytes_freed"] == remove_row["bytes_freed"] == 0
    assert add_row["actor"] == stream_controller(client.workspace).actor


def test_bad_input_is_refused_with_typed_errors_and_changes_nothing(held: tk.Client) -> None:
    client = held
    existing = client.holds.add("stream", STREAM, "baseline")
    before = ([h.to_dict() for h in client.holds.list()], client.audit(limit=1000))
    bad: list[tuple[type[Exception], str, Any]] = [
        (InvalidInput, f"invalid archive id {STREAM!r}: expected 32 lowercase hex digits",
         lambda: client.holds.add("archive", STREAM, "r")),
        (InvalidInput, "unknown hold kind 'Stream': expected one of stream, records, dataset, archive",
         lambda: client.holds.add("Stream", STREAM, "r")),
        (NotFound, "stream 'legal/missing' does not exist", lambda: client.holds.add("stream", "legal/missing", "r")),
        (NotFound, "scope 'nope' does not exist", lambda: client.holds.add("stream", "nope/x", "r")),
        (InvalidName, "invalid stream name 'no-slash': expected 'scope/stream'",
         lambda: client.holds.add("stream", "no-slash", "r")),
        (InvalidInput, "a hold needs a reason: got an empty one", lambda: client.holds.add("stream", STREAM, "")),
        (InvalidInput, "a hold needs a reason: got an empty one", lambda: client.holds.add("stream", STREAM, " \n")),
        (InvalidInput, "invalid reason: contains a NUL character", lambda: client.holds.add("stream", STREAM, "a\x00")),
        (InvalidInput, "invalid target: contains a NUL character", lambda: client.holds.list("stream", "x\x00")),
        (InvalidInput, "invalid reason: contains a lone surrogate (text that is not Unicode)",
         lambda: client.holds.add("stream", STREAM, "a\ud800")),
        (NotFound, f"hold {existing + 100} does not exist", lambda: client.holds.remove(existing + 100)),
        (InvalidInput, "invalid hold id 0: expected a positive integer", lambda: client.holds.remove(0)),
        (InvalidInput, "invalid hold id '1': expected a positive integer", lambda: client.holds.remove("1")),
        (InvalidInput, "invalid hold id True: expected a positive integer", lambda: client.holds.remove(True)),
        (InvalidInput, "unknown hold kind 'record': expected one of stream, records, dataset, archive",
         lambda: client.holds.list("record")),
        (InvalidInput, "unknown hold kind 'x': expected one of stream, records, dataset, archive",
         lambda: client.holds.active_for("x", STREAM)),
    ]
    for error, message, call in bad:
        with pytest.raises(error) as caught:
            call()
        assert type(caught.value) is error and str(caught.value) == message
        assert "\n" not in str(caught.value)
    assert ([h.to_dict() for h in client.holds.list()], client.audit(limit=1000)) == before


def test_an_audited_change_whose_reason_no_store_can_hold_changes_nothing(held: tk.Client) -> None:
    # PostgreSQL's text refuses NUL: the audit row refuses it on both stores, and the change it
    # records rolls back with it
    before = (_snapshot(held), held.audit(limit=1000))
    handle = held.stream(STREAM)
    with pytest.raises(InvalidInput, match=r"^invalid reason: contains a NUL character$"):
        handle.truncate(handle.tail_cut(), "nul \x00 reason")
    assert (_snapshot(held), held.audit(limit=1000)) == before


def _stream_snapshot(client: tk.Client) -> dict[str, Any]:
    """Everything a deletion (or the seal before it) would change."""
    state = client.stream(STREAM).state()
    return {**_snapshot(client), "uid": state.info.uid, "state": state.info.state,
            "sealed": sorted(s.id for s in state.segments.values() if s.sealed),
            "stored": sum(s.tail - s.head for s in state.segments.values())}


@pytest.mark.parametrize("active", [False, True], ids=["sealed", "active-forced"])
def test_delete_of_a_held_stream_is_refused_and_changes_nothing(held: tk.Client, active: bool) -> None:
    client = held
    hold_id = client.holds.add("stream", STREAM, "litigation 2024-117")
    if not active:
        client.stream(STREAM).seal()
    before = _stream_snapshot(client)
    audit_before = client.audit(limit=1000)
    message = (f"stream {STREAM} is under legal hold {hold_id} (litigation 2024-117); it cannot be deleted until "
               "the hold is removed")
    # (active: without force the hold is named before the missing seal)
    calls = [lambda: client.stream(STREAM).delete(), lambda: client.stream(STREAM).delete(force=True),
             lambda: stream_controller(client.workspace).delete(STREAM, force=True)]
    for call in calls:
        with pytest.raises(HoldActive) as caught:
            call()
        assert str(caught.value) == message and caught.value.hold_id == hold_id
    # not deleted, and an active stream was not left sealed either
    assert _stream_snapshot(client) == before and before["state"] == ("ACTIVE" if active else "SEALED")
    assert client.audit(limit=1000) == audit_before
    if active:
        _write(client, 60, 65)  # it still takes writes

    client.holds.remove(hold_id)
    stored = _stream_snapshot(client)["stored"]
    assert client.stream(STREAM).delete(force=active).bytes_freed == stored > 0
    assert client.list_streams() == [] and stored_files(client) == set()
    entry = client.audit(STREAM, limit=1)[0]
    assert entry["action"] == "delete_stream" and json.loads(entry["details"]) == (
        {"uid": before["uid"], "sealed_first": True} if active else {"uid": before["uid"]})


def test_a_scope_holding_a_held_stream_cannot_be_deleted(held: tk.Client) -> None:
    client = held
    hold_id = client.holds.add("stream", STREAM, "case 5")
    with pytest.raises(HoldActive) as caught:
        client.delete_scope("legal")
    assert str(caught.value) == (f"scope legal cannot be deleted while stream {STREAM} is under legal hold {hold_id} "
                                 "(case 5); remove the hold first")
    assert client.list_scopes() == ["legal"] and client.stream(STREAM).state().info.state == "ACTIVE"
    # a scope whose name is a LIKE pattern of the held one's is not affected by it
    client.create_scope("lega_")
    client.delete_scope("lega_")
    assert client.list_scopes() == ["legal"]


def _leave_hold_of_a_deleted_stream(client: tk.Client, reason: str) -> int:
    """A hold on the name of a stream that is gone, as an older version (which deleted held streams)
    could leave behind: delete the stream, then restore its hold row."""
    hold_id = client.holds.add("stream", STREAM, reason)
    [row] = [h.to_dict() for h in client.holds.list(target=STREAM)]
    client.holds.remove(hold_id)
    client.stream(STREAM).delete(force=True)
    with client.workspace.db.write() as conn:
        conn.execute(sa.insert(holds_table).values(**row))
    return hold_id


def test_a_hold_left_on_a_deleted_name_holds_a_recreated_stream_and_its_scope(held: tk.Client) -> None:
    # a hold names the stream, not one incarnation of it
    client = held
    hold_id = _leave_hold_of_a_deleted_stream(client, "keep the name held")
    with pytest.raises(HoldActive, match=f"^scope legal cannot be deleted while stream {STREAM} is under legal "
                                         f"hold {hold_id} "):
        client.delete_scope("legal")  # empty of streams, but one of its names is held
    assert client.list_scopes() == ["legal"]
    client.create_stream(STREAM)
    _write(client, 0, 5)
    with pytest.raises(HoldActive, match=f"legal hold {hold_id} "):
        client.stream(STREAM).truncate(client.stream(STREAM).tail_cut())
    with pytest.raises(HoldActive, match=f"legal hold {hold_id} "):
        client.stream(STREAM).delete(force=True)
    client.holds.remove(hold_id)
    client.stream(STREAM).delete(force=True)
    client.delete_scope("legal")
    assert client.list_scopes() == []


# ---- CLI ------------------------------------------------------------------------------------------


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env["TIDEKEEP_HOME"] = str(home)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=120, check=False)


def _ok(home: Path, *args: str) -> str:
    done = _cli(home, *args)
    assert done.returncode == 0 and done.stderr == "", (args, done.returncode, done.stderr)
    return done.stdout


def _fails(home: Path, code: int, message: str, *args: str) -> None:
    done = _cli(home, *args)
    assert (done.returncode, done.stderr) == (code, f"error: {message}\n"), args
    assert done.stdout == ""


def test_hold_cli_end_to_end(tmp_path: Path, metadata_url: str) -> None:
    home = tmp_path / "ws"
    flags = ("--metadata-url", metadata_url, "--storage", str(tmp_path / "data"))
    _ok(home, *flags, "init")
    _ok(home, *flags, "stream", "create", STREAM)
    done = subprocess.run([*CLI, *flags, "stream", "write", STREAM], input="a\nb\nc\n", capture_output=True,
                          text=True, env={**os.environ, "TIDEKEEP_HOME": str(home)}, check=True)
    assert "wrote 3 events" in done.stdout

    added = json.loads(_ok(home, *flags, "hold", "add", "stream", STREAM, "--reason", "case 9", "--json"))
    hold_id = added["id"]
    assert (added["kind"], added["target"], added["reason"]) == ("stream", STREAM, "case 9")
    assert _ok(home, *flags, "hold", "add", "stream", STREAM, "--reason", "case 10") == \
        f"hold {hold_id + 1} added on stream {STREAM} (case 10)\n"
    listed = json.loads(_ok(home, *flags, "hold", "list", "--kind", "stream", "--target", STREAM, "--json"))
    assert [(h["id"], h["reason"]) for h in listed] == [(hold_id, "case 9"), (hold_id + 1, "case 10")]
    text = _ok(home, *flags, "hold", "list").splitlines()
    assert text[0].split() == ["ID", "KIND", "TARGET", "CREATED", "BY", "REASON"] and len(text) == 3

    _fails(home, 10, f"stream {STREAM} is under legal hold {hold_id} (case 9); it cannot be truncated until the "
           "hold is removed", *flags, "stream", "truncate", STREAM, "tail")
    # --force seals before deleting: a held stream is refused before either happens
    for args in (("stream", "delete", STREAM, "--force"), ("stream", "delete", STREAM)):
        _fails(home, 10, f"stream {STREAM} is under legal hold {hold_id} (case 9); it cannot be deleted until the "
               "hold is removed", *flags, *args)
    assert json.loads(_ok(home, *flags, "stream", "describe", STREAM, "--json"))["state"] == "ACTIVE"
    _fails(home, 2, "unknown hold kind 'disk': expected one of stream, records, dataset, archive",
           *flags, "hold", "add", "disk", STREAM, "--reason", "x")
    _fails(home, 3, "stream 'legal/none' does not exist",
           *flags, "hold", "add", "stream", "legal/none", "--reason", "x")
    _fails(home, 2, "a hold needs a reason: got an empty one", *flags, "hold", "add", "stream", STREAM, "--reason", "")
    _fails(home, 3, "hold 999 does not exist", *flags, "hold", "remove", "999")
    _fails(home, 2, "unknown hold kind 'k': expected one of stream, records, dataset, archive",
           *flags, "hold", "list", "--kind", "k")
    assert len(json.loads(_ok(home, *flags, "hold", "list", "--json"))) == 2

    assert _ok(home, *flags, "hold", "remove", str(hold_id)) == f"hold {hold_id} removed from stream {STREAM}\n"
    _fails(home, 10, f"stream {STREAM} is under legal hold {hold_id + 1} (case 10); it cannot be truncated until "
           "the hold is removed", *flags, "stream", "truncate", STREAM, "tail")
    _ok(home, *flags, "hold", "remove", str(hold_id + 1))
    assert _ok(home, *flags, "hold", "list") == "no holds\n"
    assert "truncated" in _ok(home, *flags, "stream", "truncate", STREAM, "tail")
    actions = [e["action"] for e in json.loads(_ok(home, *flags, "audit", "list", "--json"))]
    assert actions == ["truncate", "hold_remove", "hold_remove", "hold_add", "hold_add"]
    deleted = _ok(home, *flags, "stream", "delete", STREAM, "--force")
    assert deleted.startswith(f"deleted stream {STREAM} (sealed it first): ")


# ---- retention --------------------------------------------------------------------------------------


def test_retention_cycles_never_truncate_a_held_stream_and_resume_once_it_is_released(
        tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                        settings={"writer.linger": 0}, create=True)
    try:
        client.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(1000, 2000)))
        hold_id = client.holds.add("stream", STREAM, "retention must wait")
        refused = 0
        for round_number in range(6):  # ~900 bytes a round: far past the 2000-byte maximum
            _write(client, round_number * 50, (round_number + 1) * 50)
            clock.advance(31 * 60_000)  # past the default 30-minute retention frequency
            try:
                decision = client.stream(STREAM).retention.run()
            except HoldActive as refusal:
                assert refusal.hold_id == hold_id and "retention must wait" in str(refusal)
                refused += 1
            else:
                assert decision.cut is None  # nothing to truncate yet
        assert refused >= 3
        state = client.stream(STREAM).state()
        assert state.truncated_bytes == 0 and all(seg.head == 0 for seg in state.segments.values())
        assert len(list(client.stream(STREAM).read())) == 300
        assert client.stream(STREAM).retention.history() == []

        client.holds.remove(hold_id)
        clock.advance(31 * 60_000)
        decision = client.stream(STREAM).retention.run()
        assert decision.cut is not None and decision.freed_bytes > 0
        state = client.stream(STREAM).state()
        retained = sum(seg.tail - seg.head for seg in state.segments.values())
        assert state.truncated_bytes == decision.freed_bytes and 1000 <= retained <= 2000
        assert [e["action"] for e in client.stream(STREAM).retention.history()] == ["truncate"]
    finally:
        client.close()


def test_retention_preview_of_a_held_stream_says_the_hold_blocks_it(
        tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                        settings={"writer.linger": 0}, create=True)
    try:
        client.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(1000, 2000)))
        for round_number in range(4):
            _write(client, round_number * 50, (round_number + 1) * 50)
            clock.advance(31 * 60_000)
            client.stream(STREAM).retention.run()
        _write(client, 200, 400)
        clock.advance(31 * 60_000)
        unheld = client.stream(STREAM).retention.preview()
        assert unheld.truncates and unheld.freed_bytes > 0
        hold_id = client.holds.add("stream", STREAM, "litigation 7")
        held = client.stream(STREAM).retention.preview()
        assert held.rule == "held" and held.cut is None and held.freed_bytes == 0
        assert f"hold {hold_id} (litigation 7)" in held.reason and unheld.reason in held.reason
        client.holds.remove(hold_id)
        assert client.stream(STREAM).retention.preview() == unheld
    finally:
        client.close()
