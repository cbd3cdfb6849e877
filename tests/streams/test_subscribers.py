"""Subscribers of consumption-based retention on real SQLite and PostgreSQL: registration with the
reader group's create/reset/delete, manual acknowledgements and their bad input (typed error, one
line, the stored cut unchanged), automatic acknowledgement of completed checkpoints, and the
views the retention cycle reads (effective cut, unconsumed bytes) across a split and a truncation."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from hypothesis import given, settings

import tidekeep as tk
from helpers.procs import worker_env
from strategies import ScaledStream, position_in, streams_with_cuts
from tidekeep.errors import InvalidInput, InvalidStreamCut, NotFound, StaleGeneration
from tidekeep.store.database import alembic_config
from tidekeep.store.schema_subscribers import stream_subscribers
from tidekeep.streams.cuts import Topology
from tidekeep.streams.model import segment_id
from tidekeep.streams.of_workspace import stream_controller
from tidekeep.streams.subscriber_store import Subscriber, SubscriberStore, unconsumed_bytes

STREAM, OTHER = "cbr/events", "cbr/other"
MANUAL = tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT
AUTOMATIC = tk.RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT


@pytest.fixture
def clock() -> tk.ManualClock:
    return tk.ManualClock()


@pytest.fixture
def client(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   settings={"writer.linger": 0}, clock=clock, create=True)
    yield c
    c.close()


def write(client: tk.Client, stream: str, count: int, size: int = 20, prefix: str = "e") -> None:
    with client.stream(stream).writer(f"w-{prefix}") as w:
        for i in range(count):
            w.write(f"{prefix}{i:04d}".encode().ljust(size, b"."), routing_key=f"k{i % 7}")
        w.flush()


def rows(client: tk.Client) -> list[tuple[str, int, str | None]]:
    """(reader group, generation, positions JSON) of every subscriber row, straight from the table."""
    with client.workspace.db.read() as conn:
        return [(r.reader_group, r.generation, r.positions) for r in conn.execute(
            sa.select(stream_subscribers).order_by(stream_subscribers.c.reader_group, stream_subscribers.c.stream_id))]


def one(client: tk.Client, stream: str, group: str) -> Subscriber:
    found = [s for s in client.stream(stream).subscribers() if s.reader_group == group]
    assert len(found) == 1
    return found[0]


@pytest.fixture
def two_streams(client: tk.Client) -> tuple[tk.StreamCut, tk.StreamCut]:
    """Two streams with data; returns the tail cut of each after a first batch."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    client.create_stream(OTHER, tk.StreamConfig(segments=1))
    write(client, STREAM, 40)
    write(client, OTHER, 10)
    first = client.stream(STREAM).tail_cut(), client.stream(OTHER).tail_cut()
    write(client, STREAM, 40, prefix="f")
    write(client, OTHER, 10, prefix="f")
    return first


# ---- registration -----------------------------------------------------------------------------------


def test_a_subscribing_group_is_registered_on_each_stream_at_its_start_cut(client: tk.Client, two_streams) -> None:
    client.create_reader_group("plain", tk.ReaderGroupConfig(streams=[STREAM]))
    client.create_reader_group("manual", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    start = client.stream(STREAM).tail_cut()
    client.create_reader_group("auto", tk.ReaderGroupConfig(streams={STREAM: (start, None)}, retention_type=AUTOMATIC))
    subs = client.stream(STREAM).subscribers()
    assert [(s.reader_group, s.retention_type, s.generation) for s in subs] == [
        ("auto", AUTOMATIC.value, 0), ("manual", MANUAL.value, 0)]
    manual, auto = one(client, STREAM, "manual"), one(client, STREAM, "auto")
    assert manual.positions is None and manual.updated_ms is None and not manual.acknowledged
    assert manual.start_positions == dict(client.stream(STREAM).head_cut().positions)
    assert manual.effective == manual.start_positions
    assert auto.start_positions == dict(start.positions)
    state = client.stream(STREAM).state()
    assert manual.unconsumed_bytes == state.topology().size_between(state.head, state.tail()) == 80 * 28
    assert auto.unconsumed_bytes == 0
    assert [s.reader_group for s in client.stream(OTHER).subscribers()] == ["manual"]
    assert manual.to_dict()["acknowledged"] is None and manual.to_dict()["start"].startswith(STREAM + ":")


def test_reset_follows_the_type_and_streams_and_keeps_an_acknowledgement_only_at_or_before_the_new_start(
        client: tk.Client, two_streams) -> None:
    first, _ = two_streams
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    group.update_retention_stream_cut({STREAM: first})
    # the new start is at the acknowledgement: it stays true (nothing before it is needed)
    group.reset(tk.ReaderGroupConfig(streams={STREAM: (first, None)}, retention_type=AUTOMATIC))
    sub = one(client, STREAM, "g")
    assert (sub.generation, sub.retention_type, sub.positions) == (1, AUTOMATIC.value, dict(first.positions))
    assert client.stream(OTHER).subscribers() == []  # OTHER left the config: no longer held
    # back to the head: the group re-reads data behind its acknowledgement, which is dropped
    group.reset(tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    sub = one(client, STREAM, "g")
    assert (sub.generation, sub.positions, sub.updated_ms) == (2, None, None)
    assert sub.start_positions == dict(client.stream(STREAM).head_cut().positions)
    # subscriber -> non-subscriber -> subscriber
    group.reset(tk.ReaderGroupConfig(streams=[STREAM, OTHER]))
    assert rows(client) == []
    group.reset(tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=AUTOMATIC))
    assert [(g, gen, pos) for g, gen, pos in rows(client)] == [("g", 4, None), ("g", 4, None)]


def test_deleting_the_group_or_the_stream_removes_its_subscriptions(client: tk.Client, two_streams) -> None:
    client.create_reader_group("a", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    client.create_reader_group("b", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=AUTOMATIC))
    assert len(rows(client)) == 4
    client.delete_reader_group("a")
    assert [g for g, _, _ in rows(client)] == ["b", "b"]
    client.stream(OTHER).seal()
    client.stream(OTHER).delete()
    assert [g for g, _, _ in rows(client)] == ["b"]
    assert [s.reader_group for s in client.stream(STREAM).subscribers()] == ["b"]


def test_a_recreated_group_is_a_new_subscriber_and_an_old_handle_is_stale(client: tk.Client, two_streams) -> None:
    first, _ = two_streams
    old = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    client.delete_reader_group("g")
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    with pytest.raises(StaleGeneration, match="re-created"):
        old.update_retention_stream_cut({STREAM: first})
    assert one(client, STREAM, "g").positions is None


def test_upgrading_registers_subscribing_groups_created_before_subscribers_existed(
        client: tk.Client, two_streams) -> None:
    first, _ = two_streams
    client.create_reader_group("old", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    client.reader_group("old").reset(tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    client.create_reader_group("plain", tk.ReaderGroupConfig(streams=[STREAM]))
    with client.workspace.db.engine.connect() as conn:  # back to the schema before subscribers
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0008")
        conn.commit()
        assert "stream_subscribers" not in sa.inspect(conn).get_table_names()
    client.workspace.db.upgrade()
    subs = client.stream(STREAM).subscribers()
    assert [(s.reader_group, s.generation, s.positions) for s in subs] == [("old", 1, None)]
    assert subs[0].start_positions == dict(client.stream(STREAM).head_cut().positions)
    assert [s.reader_group for s in client.stream(OTHER).subscribers()] == ["old"]
    client.reader_group("old").update_retention_stream_cut({STREAM: first})
    assert one(client, STREAM, "old").positions == dict(first.positions)


# ---- manual acknowledgements ------------------------------------------------------------------------


def test_manual_acknowledgement_is_stored_with_its_time_and_may_repeat_or_advance(
        client: tk.Client, clock: tk.ManualClock, two_streams) -> None:
    first, other_first = two_streams
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    clock.advance(1000)
    result = group.update_retention_stream_cut({STREAM: str(first), OTHER: other_first.to_json()})
    assert result == {STREAM: first, OTHER: other_first}
    sub = one(client, STREAM, "g")
    assert sub.positions == dict(first.positions) and sub.updated_ms == clock.now_ms() and sub.acknowledged
    state = client.stream(STREAM).state()
    assert sub.unconsumed_bytes == state.topology().size_between(first.positions, state.tail()) == 40 * 28
    clock.advance(500)
    group.update_retention_stream_cut({STREAM: first})  # the same cut again: allowed, newer time
    assert one(client, STREAM, "g").updated_ms == clock.now_ms()
    tail = client.stream(STREAM).tail_cut()
    group.update_retention_stream_cut({STREAM: tail})
    assert one(client, STREAM, "g").positions == dict(tail.positions)
    assert one(client, OTHER, "g").positions == dict(other_first.positions)  # untouched by the last call


def test_bad_manual_acknowledgements_are_typed_one_line_errors_and_change_nothing(
        client: tk.Client, clock: tk.ManualClock, two_streams) -> None:
    first, other_first = two_streams
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM, OTHER], retention_type=MANUAL))
    client.create_reader_group("auto", tk.ReaderGroupConfig(streams=[STREAM], retention_type=AUTOMATIC))
    client.create_reader_group("none", tk.ReaderGroupConfig(streams=[STREAM]))
    group.update_retention_stream_cut({STREAM: first, OTHER: other_first})
    stored = rows(client)
    s0, s1 = segment_id(0, 0), segment_id(0, 1)
    head, tail = client.stream(STREAM).head_cut(), client.stream(STREAM).tail_cut()
    cases: list[tuple[object, type[Exception], str]] = [
        (lambda: group.update_retention_stream_cut({STREAM: head}), InvalidStreamCut,
         r"moves backwards: it is before its previous acknowledgement"),
        (lambda: group.update_retention_stream_cut(
            {STREAM: f"{STREAM}:0.0={tail.positions[s0]},0.1=0"}), InvalidStreamCut,
         r"moves backwards: it is partly before"),
        (lambda: group.update_retention_stream_cut({STREAM: f"{STREAM}:0.0={first.positions[s0]}"}),
         InvalidStreamCut, r"key range \[0\.5, 1\.0\) is not covered"),
        (lambda: group.update_retention_stream_cut({STREAM: other_first}), InvalidStreamCut,
         rf"stream cut is for '{OTHER}', not '{STREAM}'"),
        (lambda: group.update_retention_stream_cut({STREAM: f"{STREAM}:0.0={first.positions[s0] + 3},0.1="
                                                            f"{first.positions[s1]}"}),
         InvalidStreamCut, "not at an event boundary"),
        (lambda: group.update_retention_stream_cut({"cbr/nope": first}), NotFound, "stream 'cbr/nope' does not exist"),
        (lambda: client.reader_group("auto").update_retention_stream_cut({STREAM: first}), InvalidInput,
         "has retention type AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT: only MANUAL_RELEASE_AT_USER_STREAMCUT"),
        (lambda: client.reader_group("none").update_retention_stream_cut({STREAM: first}), InvalidInput,
         "has retention type NONE"),
        (lambda: group.update_retention_stream_cut({}), InvalidInput, "non-empty"),
        # all or nothing: OTHER's cut is fine and moves forward, STREAM's moves backwards
        (lambda: group.update_retention_stream_cut({OTHER: client.stream(OTHER).tail_cut(), STREAM: head}),
         InvalidStreamCut, "moves backwards"),
    ]
    for call, error, message in cases:
        clock.advance(10)
        with pytest.raises(error, match=message) as info:
            call()  # type: ignore[operator]
        assert "\n" not in str(info.value)
        assert rows(client) == stored, f"{message!r} changed the stored cuts"
    # a group not subscribed to the stream it names
    client.create_stream("cbr/third", tk.StreamConfig(segments=1))
    with pytest.raises(NotFound, match="reader group 'g' is not a subscriber of stream 'cbr/third'"):
        group.update_retention_stream_cut({"cbr/third": client.stream("cbr/third").tail_cut()})
    assert rows(client) == stored


def test_an_update_from_a_handle_older_than_a_reset_is_stale(client: tk.Client, two_streams) -> None:
    first, _ = two_streams
    mine = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    theirs = client.reader_group("g")
    theirs.reset(tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    before = rows(client)
    with pytest.raises(StaleGeneration, match="at generation 1, this handle knows generation 0"):
        mine.update_retention_stream_cut({STREAM: first})
    assert rows(client) == before and one(client, STREAM, "g").positions is None
    assert isinstance(StaleGeneration("x"), tk.ConflictError)
    theirs.update_retention_stream_cut({STREAM: first})  # the resetting handle knows the new generation
    assert client.reader_group("g").known_generation == 1
    assert one(client, STREAM, "g").positions == dict(first.positions)


def test_a_reset_between_the_checks_and_the_write_makes_another_process_update_stale(
        tmp_path: Path, metadata_url: str, client: tk.Client, two_streams) -> None:
    first, _ = two_streams
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    gate = tmp_path / "publish-paused"  # the other process waits before its write until the reset is done
    gate.touch()
    env["TIDEKEEP_PAUSE"] = f"subscribers.publish.before_write=@{gate}"
    proc = subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", "-v", "--set", "log.level=DEBUG",
                             "rg", "retention-cut", "g", str(first)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:  # the other process has loaded its handle and passed every check
        seen.append(line)
        if "acknowledgements checked" in line:
            break
    else:
        raise AssertionError(f"the publishing process never reached its write: {''.join(seen)}")
    client.reader_group("g").reset(tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    gate.unlink()
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == StaleGeneration.exit_code, err
    assert "error: reader group 'g' is at generation 1, this handle knows generation 0" in err
    assert one(client, STREAM, "g").positions is None and rows(client) == [("g", 1, None)]


# ---- automatic acknowledgements ---------------------------------------------------------------------


def read_until_checkpoint(reader: tk.Reader, name: str, limit: int = 10_000) -> int:
    events = 0
    for _ in range(limit):
        e = reader.read_next_event(0)
        if e.is_checkpoint:
            assert e.checkpoint_name == name
            return events
        events += e.is_event
    raise AssertionError(f"checkpoint {name} never reached")


def test_a_completed_checkpoint_is_published_once_and_a_later_one_replaces_it(
        client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    write(client, STREAM, 30)
    group = client.create_reader_group("auto", tk.ReaderGroupConfig(streams=[STREAM], retention_type=AUTOMATIC))
    reader = group.reader("r1", sync_every_events=5)
    for _ in range(12):
        assert reader.read_next_event(0).is_event
    group.initiate_checkpoint("c1")
    assert one(client, STREAM, "auto").positions is None  # pending: nothing published yet
    clock.advance(100)
    read_until_checkpoint(reader, "c1")
    done = group.checkpoint("c1")
    assert done is not None
    sub = one(client, STREAM, "auto")
    assert sub.positions == dict(done.cuts[STREAM].positions) and sub.updated_ms == done.completed_ms
    published_at = sub.updated_ms
    for _ in range(10):  # later syncs publish nothing again
        clock.advance(100)
        reader.read_next_event(0)
    assert one(client, STREAM, "auto").updated_ms == published_at
    write(client, STREAM, 20, prefix="f")
    group.initiate_checkpoint("c2")
    read_until_checkpoint(reader, "c2")
    second = group.checkpoint("c2")
    assert second is not None and second.cuts[STREAM] >= done.cuts[STREAM] and second.cuts[STREAM] != done.cuts[STREAM]
    assert one(client, STREAM, "auto").positions == dict(second.cuts[STREAM].positions)
    reader.close()


def test_two_readers_passing_two_checkpoints_end_with_the_second_cut(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    write(client, STREAM, 60)
    group = client.create_reader_group("auto", tk.ReaderGroupConfig(streams=[STREAM], retention_type=AUTOMATIC))
    r1, r2 = group.reader("r1", sync_every_events=4), group.reader("r2", sync_every_events=4)
    for _ in range(5):
        r1.read_next_event(0)
        r2.read_next_event(0)
    group.initiate_checkpoint("c1")
    group.initiate_checkpoint("c2")
    for name in ("c1", "c2"):
        for r in (r1, r2):
            read_until_checkpoint(r, name)
    c1, c2 = group.checkpoint("c1"), group.checkpoint("c2")
    assert c1 is not None and c2 is not None and c1.cuts[STREAM] <= c2.cuts[STREAM]
    assert one(client, STREAM, "auto").positions == dict(c2.cuts[STREAM].positions)
    r1.close()
    r2.close()


def test_a_manual_group_publishes_nothing_automatically(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    write(client, STREAM, 10)
    group = client.create_reader_group("m", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    reader = group.reader("r1")
    reader.read_next_event(0)
    group.initiate_checkpoint("c1")
    read_until_checkpoint(reader, "c1")
    assert group.checkpoint("c1") is not None
    assert one(client, STREAM, "m").positions is None
    reader.close()


# ---- views ------------------------------------------------------------------------------------------


def test_views_across_a_split_and_a_truncation_past_the_cut(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    write(client, STREAM, 20)  # 20 events x 28 bytes in 0.0
    early = client.stream(STREAM).tail_cut()
    write(client, STREAM, 10, prefix="f")
    before_split = client.stream(STREAM).tail_cut()
    client.stream(STREAM).split(segment_id(0, 0), 2)
    write(client, STREAM, 30, prefix="g")
    slow = client.create_reader_group("slow", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    client.create_reader_group("fast", tk.ReaderGroupConfig(streams=[STREAM], retention_type=MANUAL))
    client.create_reader_group("idle", tk.ReaderGroupConfig(streams=[STREAM], retention_type=AUTOMATIC))
    slow.update_retention_stream_cut({STREAM: early})
    after_split = client.stream(STREAM).tail_cut()
    assert set(after_split.positions) == {segment_id(1, 1), segment_id(1, 2)}
    client.reader_group("fast").update_retention_stream_cut({STREAM: after_split})

    def views() -> dict[str, Any]:
        with client.workspace.db.read() as conn:
            controller = stream_controller(client.workspace)
            state = controller.repository.load(conn, STREAM)
            return {v.reader_group: v for v in SubscriberStore(controller).views(conn, state)}

    v = views()
    assert list(v) == ["fast", "idle", "slow"]
    assert v["slow"].positions == dict(early.positions) and v["slow"].acknowledged
    assert v["slow"].unconsumed_bytes == 40 * 28  # 10 before the split, 30 after it in the two new segments
    assert v["fast"].positions == dict(after_split.positions) and v["fast"].unconsumed_bytes == 0
    assert not v["idle"].acknowledged and v["idle"].updated_ms is None
    assert v["idle"].positions == dict(client.stream(STREAM).head_cut().positions)
    assert v["idle"].unconsumed_bytes == 60 * 28
    # retention (here by hand) passes the slow subscriber: only what is left counts as unconsumed
    client.stream(STREAM).truncate(before_split)
    v = views()
    assert v["slow"].positions == dict(early.positions)  # its acknowledgement is what it is
    assert v["slow"].unconsumed_bytes == v["idle"].unconsumed_bytes == 30 * 28
    assert one(client, STREAM, "slow").unconsumed_bytes == 30 * 28


# ---- unconsumed bytes (pure) ------------------------------------------------------------------------


def brute_unconsumed(stream: ScaledStream, cut: dict[int, int], head: dict[int, int]) -> int:
    """Count byte by byte: a byte is unconsumed when it still exists (at or after the head) and lies
    at or after the subscriber's cut, each position judged key cell by key cell (strategies.position_in)."""
    count = 0
    for seg, segment in stream.segments.items():
        since = max(position_in(stream, cut, seg), position_in(stream, head, seg))
        count += sum(1 for offset in range(segment.tail) if offset >= since)
    return count


@settings(max_examples=150, deadline=None)
@given(streams_with_cuts(count=2))
def test_unconsumed_bytes_counts_what_is_after_both_the_cut_and_the_head(drawn) -> None:
    stream, (cut, head) = drawn
    tail = {s: stream.segments[s].tail for s in stream.active}
    topology = Topology(stream.segments)
    got = unconsumed_bytes(cut, head, tail, topology)
    assert got == brute_unconsumed(stream, cut, head)
    assert got <= topology.size_between(head, tail)
    assert got <= topology.size_between(cut, tail)
