"""`rg reset` (streams/rg_reset.py and the CLI): a reader group moved to every stream's head or tail,
to given cuts or to a completed checkpoint, on SQLite and PostgreSQL; refused while readers are
online unless forced; a target truncated away is refused naming the head; --dry-run changes nothing.
Reading is real (readers, chunk files), so "the group now reads X" is observed, not assumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.errors import InvalidInput, InvalidStreamCut, NotFound, TruncatedData
from tidekeep.streams.readergroup import ReaderGroup, ReadersOnline
from tidekeep.streams.rg_reset import ResetTarget, apply_reset, plan_reset

STREAM = "rg/reset"


def write(client: tk.Client, first: int, count: int) -> None:
    with client.stream(STREAM).writer(f"w{first}") as writer:  # one key: one segment's order is the write order
        writer.write_many([f"e{i}".encode() for i in range(first, first + count)], ["k"] * count)


def read_all(group: ReaderGroup, reader_id: str = "r", limit: int | None = None, close: bool = True) -> list[str]:
    reader = group.reader(reader_id)
    got: list[str] = []
    try:
        while limit is None or len(got) < limit:
            event = reader.read_next_event(0)
            if event.is_empty:
                break
            if event.is_event:
                assert event.payload is not None
                got.append(event.payload.decode())
    finally:
        if close:
            reader.close()
    return got


def names(first: int, stop: int) -> list[str]:
    return [f"e{i}" for i in range(first, stop)]


def reset(group: ReaderGroup, target: ResetTarget, force: bool = False) -> int:
    return apply_reset(group, plan_reset(group, target), allow_online_readers=force)


def test_reset_to_head_tail_cut_and_checkpoint_moves_what_the_group_reads(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    write(client, 0, 10)
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    assert read_all(group, limit=4) == names(0, 4)

    assert reset(group, ResetTarget.head()) == 1
    assert read_all(group) == names(0, 10)  # earliest: everything again

    assert reset(group, ResetTarget.tail()) == 2
    assert read_all(group) == []  # latest: nothing that was there
    write(client, 10, 3)
    assert read_all(group) == names(10, 13)  # only what is written after

    # a cut between events: the one after e5, taken from the events' own offsets
    events = list(client.stream(STREAM).read())
    sixth = events[6]
    cut = client.stream(STREAM).head_cut()
    positions = dict(cut.positions)
    positions[sixth.segment] = sixth.offset
    target = tk.StreamCut(STREAM, positions, uid=cut.uid)
    assert reset(group, ResetTarget.to_cuts([str(target)])) == 3
    assert read_all(group) == names(6, 13)

    # a checkpoint: the reader passes it somewhere after e4; a reset to it re-reads what came after
    assert reset(group, ResetTarget.head()) == 4
    reader = group.reader("cp", sync_every_events=1)
    assert [reader.read_next_event(0).payload for _ in range(5)] == [n.encode() for n in names(0, 5)]
    handle = group.initiate_checkpoint("mid")
    passed = 5
    while (event := reader.read_next_event(0)).checkpoint_name is None:
        assert event.payload == f"e{passed}".encode()
        passed += 1
    handle.wait(10)
    rest = []
    while (event := reader.read_next_event(0)).is_event:
        rest.append(event.payload)
    assert rest == [n.encode() for n in names(passed, 13)]  # the reader goes on after the marker
    reader.close()
    assert reset(group, ResetTarget.to_checkpoint("mid")) == 5
    assert read_all(group) == names(passed, 13)
    assert group.last_checkpoint() is None  # a reset starts a new generation without the old checkpoints


def test_reset_is_refused_while_readers_are_online_unless_forced(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    write(client, 0, 6)
    group = client.create_reader_group("busy", tk.ReaderGroupConfig(streams=[STREAM]))
    online = group.reader("online", sync_every_events=1)  # syncs before every event: sees the reset at once
    assert [online.read_next_event(0).payload for _ in range(3)] == [b"e0", b"e1", b"e2"]
    plan = plan_reset(group, ResetTarget.head())
    assert plan.online_readers == ("online",)
    with pytest.raises(ReadersOnline, match=r"reader group 'busy' has online readers \(online\): stop them first"):
        apply_reset(group, plan)
    assert group.generation == 0  # nothing changed
    assert [online.read_next_event(0).payload for _ in range(1)] == [b"e3"]
    assert apply_reset(group, plan, allow_online_readers=True) == 1
    # the online reader picks the new positions up at its next sync: from the head again
    got = []
    while (event := online.read_next_event(0)).is_event:
        got.append(event.payload)
    assert got == [f"e{i}".encode() for i in range(6)]
    online.close()


def test_a_target_truncated_away_is_refused_naming_the_head(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    write(client, 0, 6)
    group = client.create_reader_group("late", tk.ReaderGroupConfig(streams=[STREAM]))
    reader = group.reader("r", sync_every_events=1)
    for _ in range(2):
        reader.read_next_event(0)
    group.initiate_checkpoint("early")
    while reader.read_next_event(0).checkpoint_name is None:
        pass
    reader.close()
    assert group.checkpoint("early").cuts[STREAM].positions[0] < 40  # before e4, where the truncation goes
    old_head = client.stream(STREAM).head_cut()
    events = list(client.stream(STREAM).read())
    client.stream(STREAM).truncate(tk.StreamCut(STREAM, {events[4].segment: events[4].offset}, uid=old_head.uid))
    before = group.row()
    for target in (ResetTarget.to_cuts([old_head]), ResetTarget.to_checkpoint("early")):
        with pytest.raises(TruncatedData, match=r"is before the head .* \(truncated away\); reset to the head instead"):
            plan_reset(group, target)
    after = group.row()
    assert (after.generation, after.version) == (before.generation, before.version)
    assert reset(group, ResetTarget.head()) == 1  # the explicit way to clamp
    assert read_all(group) == names(4, 6)


def test_bad_targets_are_typed_errors_and_change_nothing(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    client.create_stream("rg/other", tk.StreamConfig(segments=1))
    write(client, 0, 4)
    group = client.create_reader_group("two", tk.ReaderGroupConfig(streams=[STREAM, "rg/other"]))
    head, other_head = client.stream(STREAM).head_cut(), client.stream("rg/other").head_cut()
    checks: list[tuple[ResetTarget, type[Exception], str]] = [
        (ResetTarget.to_cuts([head]), InvalidInput, "no cut given for stream rg/other"),
        (ResetTarget.to_cuts([head, head, other_head]), InvalidInput, "two cuts given for stream rg/reset"),
        (ResetTarget.to_cuts([head, other_head, "rg/nope:0.0=0"]), InvalidStreamCut, "does not read"),
        (ResetTarget.to_cuts([f"{STREAM}:0.0=3,0.1=3", other_head]), InvalidStreamCut, "offset 3"),
        (ResetTarget.to_checkpoint("never"), NotFound, "checkpoint 'never' does not exist"),
    ]
    group.reader("holder")  # an online reader that has not passed it: the checkpoint stays pending
    group.initiate_checkpoint("pending")
    checks.append((ResetTarget.to_checkpoint("pending"), InvalidInput, "has not completed yet"))
    version = group.row().version
    for target, error, message in checks:
        with pytest.raises(error, match=message):
            plan_reset(group, target)
    assert group.row().version == version


def test_cli_reset_dry_run_json_force_and_errors(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    with tk.connect(home, settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        write(client, 0, 5)
        group = client.create_reader_group("cli", tk.ReaderGroupConfig(streams=[STREAM]))
        assert read_all(group, limit=2) == names(0, 2)
        tail = str(client.stream(STREAM).tail_cut())
        after_two = list(client.stream(STREAM).read())[2]
        current = str(tk.StreamCut(STREAM, {after_two.segment: after_two.offset},
                                   uid=client.stream(STREAM).head_cut().uid))
    dry = run_cli(home, "rg", "reset", "cli", "--to", "tail", "--dry-run", "--json")
    assert dry.returncode == 0 and dry.stderr == "", dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True and plan["new_generation"] is None and plan["target"] == "tail"
    assert plan["streams"][STREAM]["new"] == tail
    assert plan["streams"][STREAM]["current"] == current
    with tk.connect(home) as client:
        assert client.reader_group("cli").generation == 0  # dry run: nothing changed
        online = client.reader_group("cli").reader("online")
        refused = run_cli(home, "rg", "reset", "cli", "--to", "head")
        assert refused.returncode == 7 and refused.stdout == "", refused
        assert refused.stderr.startswith("error: reader group 'cli' has online readers (online)")
        forced = run_cli(home, "rg", "reset", "cli", "--to", "head", "--force")
        assert forced.returncode == 0, forced.stderr
        assert forced.stdout.splitlines()[0] == "reset reader group cli to head (generation 1)"
        assert STREAM in forced.stdout and "NEW POSITION" in forced.stdout
        online.close()
        assert read_all(client.reader_group("cli")) == names(0, 5)
    for args, code, message in [
        (["--to", "cut"], 2, "--to cut needs the cuts"),
        (["--to", "head", "extra"], 2, "--to head takes no further arguments"),
        (["--to", "checkpoint"], 2, "--to checkpoint needs exactly one checkpoint name"),
        (["--to", "latest"], 2, "invalid --to 'latest': use head, tail, cut CUT... or checkpoint NAME"),
        (["--to", "checkpoint", "nope"], 3, "checkpoint 'nope' does not exist"),
    ]:
        done = run_cli(home, "rg", "reset", "cli", *args)
        assert done.returncode == code and done.stdout == "", (args, done.stderr)
        assert done.stderr.startswith("error: ") and message in done.stderr and done.stderr.count("\n") == 1, args
