"""A stream's watermark history: pruning before the head, a reader that starts after a long history
(binary-searched start, paged reads), and `rg read --time-window`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.streams import reader_window
from tidekeep.streams.of_workspace import watermark_store
from tidekeep.streams.watermarks import time_window

STREAM = "wm/history"


def write_and_note(client: tk.Client, writer: tk.Writer, rounds: int, start: int = 0) -> None:
    """Each round: one event per segment key, a note at time 10 * round, a watermark computed."""
    for rnd in range(start, start + rounds):
        writer.write(f"a{rnd}".encode(), routing_key="a")
        writer.write(f"b{rnd}".encode(), routing_key="b")
        writer.note_time(10 * (rnd + 1))
        assert client.stream(STREAM).watermarks.compute() is not None


def read_all(reader: tk.streams.readergroup.Reader) -> list[tk.EventRead]:
    events = []
    while True:
        event = reader.read_next_event(timeout_ms=50)
        if event.is_empty:
            return events
        if event.is_event:
            events.append(event)


def test_prune_keeps_the_newest_watermark_at_or_before_the_head(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w")
    write_and_note(client, writer, 6)
    marks = client.stream(STREAM).watermarks.list()
    assert [m.revision for m in marks] == list(range(6))
    assert client.stream(STREAM).watermarks.prune() == 0  # the head is at the start: every watermark may be needed
    client.stream(STREAM).truncate(client.stream(STREAM).resolve_cut(tk.StreamCut(STREAM, marks[3].cut)))
    assert client.stream(STREAM).watermarks.prune() == 3
    assert [m.revision for m in client.stream(STREAM).watermarks.list()] == [3, 4, 5]
    assert client.stream(STREAM).watermarks.prune() == 0  # idempotent
    # a reader at the head has passed revision 3, which alone gives its lower bound
    reader = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM])).reader("r")
    assert reader.time_window(STREAM) == tk.TimeWindow(marks[3].lower_time_ms, marks[4].upper_time_ms)
    read_all(reader)
    assert reader.time_window(STREAM) == tk.TimeWindow(marks[5].lower_time_ms, None)
    # pruning everything the head has passed works through prune_all (the service's sweep)
    client.stream(STREAM).truncate(client.stream(STREAM).tail_cut())
    assert watermark_store(client.workspace).prune_all() == 2
    assert [m.revision for m in client.stream(STREAM).watermarks.list()] == [5]


def test_a_reader_after_a_long_history_sees_the_full_scan_window(
        client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """More watermarks than a page: the reader's window at every step equals the window computed from
    the whole history, and its first call does not read the history from revision 0."""
    monkeypatch.setattr(reader_window, "PAGE", 4)
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w")
    write_and_note(client, writer, 30)
    segments = client.stream(STREAM).state().segments
    history = client.stream(STREAM).watermarks.list()
    # a group starting at watermark 20's cut
    middle = client.stream(STREAM).resolve_cut(tk.StreamCut(STREAM, history[20].cut))
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams={STREAM: (middle, None)}))

    fetched: list[int | None] = []  # after_revision of every page the reader fetched
    real_list = tk.WatermarkStore.list

    def spying_list(self: tk.WatermarkStore, stream: str, after_revision: int | None = None,
                    limit: int | None = None) -> list[tk.Watermark]:
        fetched.append(after_revision)
        return real_list(self, stream, after_revision, limit)

    monkeypatch.setattr(tk.WatermarkStore, "list", spying_list)
    reader = group.reader("r")
    expected = time_window(history[20].cut, history, segments)
    assert expected.lower_ms == history[20].lower_time_ms
    assert reader.time_window(STREAM) == expected
    assert fetched and None not in fetched and min(fetched) >= 19, fetched  # started at the passed one

    seen = [expected]
    for event in read_all_steps(reader):
        window = reader.time_window(STREAM)
        position = dict(event)
        full = time_window(position, history, segments)
        # one reader holds both segments, so the group's position is its own: exactly the full scan's window
        assert window == full, (position, window, full)
        assert window.lower_ms is None or seen[-1].lower_ms is None or window.lower_ms >= seen[-1].lower_ms
        seen.append(window)
    assert seen[-1] == tk.TimeWindow(history[-1].lower_time_ms, None)


def read_all_steps(reader: tk.streams.readergroup.Reader) -> Iterator[dict[int, int]]:
    """Read to the end, yielding after each event the reader's own position in STREAM (next offsets)."""
    while True:
        event = reader.read_next_event(timeout_ms=50)
        if event.is_empty:
            return
        if event.is_event:
            yield dict(reader.positions().get(STREAM, {}))


def test_rg_read_shows_the_time_window(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    assert run_cli(home, "init").returncode == 0
    client = tk.connect(home=home, settings={"writer.linger": 0}, create=True)
    try:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        with client.stream(STREAM).writer("w") as writer:
            for rnd in range(3):
                writer.write(b"x")
                writer.note_time(100 * (rnd + 1))
                client.stream(STREAM).watermarks.compute()
            writer.write(b"after the last note")
            writer.flush()
        client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    finally:
        client.close()
    done = run_cli(home, "rg", "read", "g", "--reader", "r", "--time-window")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"# time window of {STREAM}: lower 300, upper -"
    again = run_cli(home, "rg", "read", "g", "--reader", "r2", "--time-window", "--json")
    assert again.returncode == 0 and again.stdout == "", again.stderr  # nothing left to read


def test_a_writer_closed_before_a_watermark_covered_its_last_events_still_bounds_the_cut(client: tk.Client) -> None:
    """The hole a deleted mark leaves: w1 writes e1 after noting 100, notes 150 and closes before any
    watermark covered e1; w2 notes 200. The next watermark's lower time is 200 (w1 no longer counts),
    so its cut must lie after e1, or a reader would pass it and read e1 (noted at 100) with lower 200."""
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    w1, w2 = client.stream(STREAM).writer("w1"), client.stream(STREAM).writer("w2")
    w1.note_time(100)
    w2.note_time(100)
    assert client.stream(STREAM).watermarks.compute() is not None
    w1.write(b"e1, noted at 100")
    w1.note_time(150)
    w1.write(b"e2, noted at 150, flushed by close")
    w2.note_time(200)
    w1.close()
    [closed] = [m for m in client.stream(STREAM).watermarks.marks() if m.writer_id == "w1"]
    assert closed.closed and closed.positions == {0: client.stream(STREAM).state().tail()[0]}  # after e2
    statuses = client.stream(STREAM).watermarks.writers()
    assert [(s.mark.writer_id, s.active) for s in statuses] == [("w1", False), ("w2", True)]
    watermark = client.stream(STREAM).watermarks.compute()
    assert watermark is not None and watermark.lower_time_ms == 200
    assert watermark.cut == closed.positions
    assert [m.writer_id for m in client.stream(STREAM).watermarks.marks()] == ["w2"]  # covered: the closed mark went
    reader = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM])).reader("r")
    for noted in (100, 150):
        window = reader.time_window(STREAM)
        event = reader.read_next_event(timeout_ms=1000)
        assert event.payload.startswith(b"e") and window.lower_ms is not None and window.lower_ms <= noted
    w2.close()


def test_a_note_after_transaction_commits_keeps_where_they_landed(client: tk.Client) -> None:
    """A writer id that committed transactions with timestamps, then notes without a position: plain
    transaction commits do not update the writer's committed positions, so the note must keep the
    landings its mark already has, or the next cut could lie before the transaction's events."""
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    txn = client.stream(STREAM).transactional_writer("batch").begin()
    txn.write(b"in the transaction, noted at 100")
    landed = txn.commit(timestamp=100).positions
    client.stream(STREAM).watermarks.note("other", 100)
    assert client.stream(STREAM).watermarks.compute() is not None
    client.stream(STREAM).watermarks.note("batch", 200)  # no position: its committed positions, merged with its mark
    assert {m.writer_id: m.positions for m in client.stream(STREAM).watermarks.marks()}["batch"] == landed
    client.stream(STREAM).watermarks.note("other", 300)
    watermark = client.stream(STREAM).watermarks.compute()
    assert watermark is not None and watermark.lower_time_ms == 200 and watermark.cut == landed
