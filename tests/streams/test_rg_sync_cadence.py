"""When reader-group readers write to the group row (issue 22): on a clock, not every N events; not
at all when a sync has nothing new to store; and at once, between two slices of events, when the
group needs it (a reader joined, a checkpoint waits). Counted through the group row's version in a
real store (SQLite and PostgreSQL), which every stored transition moves; time is a ManualClock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from tidekeep.errors import InvalidInput
from tidekeep.streams import rg_state as core
from tidekeep.streams.model import Segment
from tidekeep.streams.readergroup import SEEN_REFRESH_MS, SLICE_MAX, WATCH_INTERVAL_MS, Reader, ReaderGroup

STREAM = "rg/cadence"
EVENTS = 3000


@pytest.fixture
def client(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   settings={"writer.linger": 0}, clock=clock, create=True)
    c.workspace.db.ensure_schema()
    c.create_stream(STREAM, tk.StreamConfig(segments=4))
    with c.stream(STREAM).writer("w", batch_size="16KiB") as writer:
        writer.write_many([f"e{i}".encode() for i in range(EVENTS)], [f"k{i % 40}" for i in range(EVENTS)])
    yield c
    c.close()


def version(group: ReaderGroup) -> int:
    return group.row().version


def stored_offsets(group: ReaderGroup) -> dict[int, int]:
    return {seg: g.offset for seg, g in group.row().state.streams[STREAM].segments.items()}


def read_events(reader: Reader, count: int) -> list[tk.EventRead]:
    events = [reader.read_next_event(0) for _ in range(count)]
    assert all(e.is_event for e in events)
    return events


def every_event(client: tk.Client) -> set[tuple[int, int]]:
    return {(e.segment, e.offset) for e in client.stream(STREAM).read()}


def test_reading_without_pause_stores_positions_on_the_clock_not_per_event(
        client: tk.Client, clock: tk.ManualClock) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    reader = group.reader("r")
    read_events(reader, 1)  # the first read syncs: the reader acquires every segment
    before = version(group)
    read_events(reader, EVENTS - 1200)  # the clock stands still: no sync, however many events
    assert version(group) == before
    assert set(stored_offsets(group).values()) == {0}
    clock.advance(100)  # sync_interval_ms: the reader syncs before its next slice of events
    for _ in range(SLICE_MAX + 1):
        event = read_events(reader, 1)[0]
        if version(group) != before:
            break
    assert version(group) == before + 1
    assert event.position is not None  # stored: the positions before this event, the first after the sync
    expected = {int(seg): off for seg, off in reader.positions()[STREAM].items()}
    expected[int(event.position.segment)] = event.position.offset
    assert stored_offsets(group) == expected


def test_sync_every_events_still_syncs_on_the_count(client: tk.Client) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    reader = group.reader("r", sync_every_events=100)
    read_events(reader, 1)
    before = version(group)
    read_events(reader, 299)
    after_300 = {int(seg): off for seg, off in reader.positions()[STREAM].items()}
    read_events(reader, 50)  # the sync before event 301 stores the positions after event 300
    assert version(group) == before + 3
    assert stored_offsets(group) == after_300


def test_an_idle_reader_writes_only_to_refresh_its_last_seen_time(client: tk.Client, clock: tk.ManualClock) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    reader = group.reader("r")
    read_events(reader, EVENTS)
    assert reader.read_next_event(0).is_empty  # this sync stores the final positions
    before, seen = version(group), group.describe()["readers"][0]["last_seen_ms"]
    for _ in range(4):  # 800 ms in all: below SEEN_REFRESH_MS
        clock.advance(200)  # past sync_interval_ms each time: every call syncs, none has news
        assert reader.read_next_event(0).is_empty
    assert version(group) == before and group.describe()["readers"][0]["last_seen_ms"] == seen
    clock.advance(SEEN_REFRESH_MS)
    assert reader.read_next_event(0).is_empty
    assert version(group) == before + 1
    assert group.describe()["readers"][0]["last_seen_ms"] == clock.now_ms()


def test_a_busy_reader_hands_segments_to_a_new_reader_within_a_slice(client: tk.Client,
                                                                      clock: tk.ManualClock) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    r1 = group.reader("r1")
    got = read_events(r1, 10)
    assert len(r1.segments()) == 4
    r2 = group.reader("r2")
    assert r2.read_next_event(0).is_empty and r2.segments() == []  # nothing unassigned yet
    clock.advance(WATCH_INTERVAL_MS)  # well before r1's next sync (sync_interval_ms 100)
    for _ in range(SLICE_MAX + 1):
        got += read_events(r1, 1)
        if len(r1.segments()) == 2:  # r1 saw the join between two slices and released its surplus
            break
    assert len(r1.segments()) == 2
    while True:
        one, two = r1.read_next_event(0), r2.read_next_event(0)
        got += [e for e in (one, two) if e.is_event]
        if one.is_empty and two.is_empty:
            break
    assert len(r2.segments()) == 2
    read = [(e.position.segment, e.position.offset) for e in got if e.position is not None]
    assert len(read) == len(set(read)) and set(read) == every_event(client)


def test_a_checkpoint_reaches_a_busy_reader_within_a_slice(client: tk.Client, clock: tk.ManualClock) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    reader = group.reader("r")
    read_events(reader, 10)
    handle = group.initiate_checkpoint("c1")
    clock.advance(WATCH_INTERVAL_MS)
    for _ in range(SLICE_MAX + 1):  # the reader looks at the group before its next slice
        event = reader.read_next_event(0)
        if not event.is_event:
            break
    assert event.checkpoint_name == "c1"
    at_marker = {int(seg): off for seg, off in reader.positions()[STREAM].items()}
    assert handle.done()
    assert handle.wait(0).cuts[STREAM].positions == at_marker


def test_positions_and_close_mid_slice_hand_on_exactly_after_the_last_event(client: tk.Client) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    r1 = group.reader("r1")
    first = read_events(r1, 10)  # within the first slice: most of it not handed out yet
    last = first[-1]
    assert last.position is not None
    assert r1.positions()[STREAM][last.position.segment] == last.next_offset
    r1.close()
    assert stored_offsets(group)[int(last.position.segment)] == last.next_offset
    r2 = group.reader("r2")
    rest = []
    while not (event := r2.read_next_event(0)).is_empty:
        rest.append(event)
    read = [(e.position.segment, e.position.offset) for e in first + rest if e.position is not None]
    assert len(read) == len(set(read)) == EVENTS and set(read) == every_event(client)


@pytest.mark.parametrize("options", [
    {"sync_every_events": 0}, {"sync_every_events": -5}, {"sync_every_events": True},
    {"sync_every_events": "10"}, {"sync_every_events": 2.5},
    {"sync_interval_ms": -1}, {"sync_interval_ms": "100"}, {"sync_interval_ms": None}, {"sync_interval_ms": False},
])
def test_bad_sync_settings_are_a_typed_one_line_error_and_nobody_joins(client: tk.Client,
                                                                       options: dict[str, object]) -> None:
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    before = version(group)
    with pytest.raises(InvalidInput, match="invalid sync_") as exc:
        group.reader("r", **options)  # type: ignore[arg-type]
    assert "\n" not in str(exc.value)
    assert group.online_readers() == [] and version(group) == before


def test_wants_sync_names_what_the_group_needs_from_a_reader() -> None:
    topology = {i: Segment(i, i * 0.25, (i + 1) * 0.25) for i in range(4)}
    state = core.initial_state({"s": dict.fromkeys(range(4), 0)}, {"s": None}, {"s": topology}, 0)
    state = core.join(state, "a", 0)
    assert core.wants_sync(state, "a")  # four segments wait for a reader
    state = core.sync_reader(state, {"s": topology}, "a", {}, 0)
    assert not core.wants_sync(state, "a")  # it holds them all, its fair share
    state = core.join(state, "b", 0)
    assert core.wants_sync(state, "a") and not core.wants_sync(state, "b")  # a holds 4 of a share of 2
    state = core.sync_reader(state, {"s": topology}, "a", {}, 0)
    assert core.wants_sync(state, "b") and not core.wants_sync(state, "a")  # two wait for b now
    pending = core.initiate_checkpoint(state, {"s": topology}, "c", 0, 3)
    assert core.wants_sync(pending, "a") and core.wants_sync(pending, "b")  # both must pass it
    passed = core.pass_checkpoint(pending, "a", "c", {}, 0)
    assert not core.wants_sync(passed, "a")  # no rebalancing while a checkpoint is pending
    assert core.wants_sync(core.release_reader(state, {"s": topology}, "a", None, 0), "a")  # offline: told at sync
    settled = core.sync_reader(state, {"s": topology}, "b", {}, 0)
    assert core.only_seen_differs(settled, core.sync_reader(settled, {"s": topology}, "b", {}, 5), "b")
    (_, seg), _ = core.owned(settled, "b")
    moved = core.sync_reader(settled, {"s": topology}, "b", {"s": {seg: 8}}, 5)
    assert not core.only_seen_differs(settled, moved, "b")  # a position to store
