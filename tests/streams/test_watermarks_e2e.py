"""Watermarks end to end (docs/watermarks.md): real writers noting time (automatically, explicitly, and through
transaction commits), the controller computing watermarks, and a reader group reading concurrently
with its time windows — on real SQLite and PostgreSQL.

The invariant checked for every event E (the idea of Pravega's WatermarkingTest): "the time E's
writer noted just before writing E is >= the lower bound of the window the reader saw at or before
E". Why it must hold: a reader's lower bound is the lower time of a watermark W whose cut its
position has passed; a reader positioned at E has passed W only if E lies at or after W's
cut; W's cut is at or after the position of every writer mark in W; so E was committed after its
writer's mark in W, hence written after that note, and the time noted just before E is >= that
mark's time >= min over W's writers = W.lower.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tidekeep as tk
from tidekeep.errors import InvalidInput
from tidekeep.streams.cuts import CutOrder, check_cut
from tidekeep.streams.model import routing_key_position
from tidekeep.streams.watermarks import TimeWindow, Watermark

STREAM = "wm/e2e"
DEADLINE_S = 30.0  # generous: the machine is shared; nothing here is a timing assertion


@pytest.fixture
def clock() -> tk.ManualClock:
    return tk.ManualClock()


@pytest.fixture
def mclient(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    """Like the `client` fixture (SQLite and PostgreSQL) but on a ManualClock: the auto-noting
    writer notes the client clock's time, so with the test moving the clock by hand the time that
    writer noted before each event is known exactly (see test 1)."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   settings={"writer.linger": 0}, clock=clock, create=True)
    yield c
    c.close()


def _wait_for(condition: Callable[[], bool], what: str, logs: Callable[[], str] = lambda: "") -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{logs()}")
        time.sleep(0.005)


def _payload(writer: str, index: int, noted: int | None) -> bytes:
    return json.dumps({"w": writer, "i": index, "noted": noted}).encode()


@dataclass
class Seen:
    """What one reader observed: per event (window taken just before reading it, event), and every
    window it was shown in order."""

    events: list[tuple[TimeWindow, dict, tk.EventRead]] = field(default_factory=list)
    windows: list[TimeWindow] = field(default_factory=list)


def _check_event_invariant(seen: Seen) -> None:
    for window, event, read in seen.events:
        if window.lower_ms is None:
            continue
        # noted None would mean "written before its writer ever noted": no watermark may claim it
        assert event["noted"] is not None and event["noted"] >= window.lower_ms, (
            f"event {event} at {read.position} was noted at {event['noted']} but the reader's window "
            f"before it was {window}")


def _check_windows_forward(windows: list[TimeWindow]) -> None:
    """What `watermarks.advance` promises: lower never decreases and, once known, never goes back to
    None; upper never decreases among the values shown (it may be None at the tail, when no
    watermark lies ahead of the reader, and come back later as newer watermarks are emitted —
    those have upper times >= every earlier one, so the non-None uppers never decrease either)."""
    lowers = [w.lower_ms for w in windows]
    first_known = next((i for i, lower in enumerate(lowers) if lower is not None), len(lowers))
    assert all(lower is not None for lower in lowers[first_known:]), lowers
    known = [lower for lower in lowers if lower is not None]
    assert known == sorted(known), known
    uppers = [w.upper_ms for w in windows if w.upper_ms is not None]
    assert uppers == sorted(uppers), uppers


def _check_stored_watermarks(client: tk.Client, stream: str) -> list[Watermark]:
    """Consecutive revisions from 0, strictly increasing lower times, non-decreasing upper times,
    every cut a valid complete cut of the stream at or after the previous one."""
    marks = client.stream(stream).watermarks.list()
    state = client.stream(stream).state()
    topology = state.topology()
    assert [m.revision for m in marks] == list(range(len(marks)))
    for before, after in itertools.pairwise(marks):
        assert after.lower_time_ms > before.lower_time_ms, (before, after)
        assert after.upper_time_ms >= before.upper_time_ms, (before, after)
        assert topology.compare(before.cut, after.cut) in (CutOrder.BEFORE, CutOrder.EQUAL), (before, after)
    for mark in marks:
        check_cut(mark.cut, state.segments, stream)
        assert mark.lower_time_ms <= mark.upper_time_ms
    return marks


def _read_all(reader: tk.Reader, stream: str, total: int, seen_ids: set, lock: threading.Lock, seen: Seen,
              stop: threading.Event | None = None) -> None:
    """Read until the group as a whole has read `total` events, recording the window before each read."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        with lock:
            if len(seen_ids) >= total:
                return
        if stop is not None and stop.is_set():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"reader {reader.reader_id} timed out: {len(seen_ids)} of {total} events read")
        window = reader.time_window(stream)
        seen.windows.append(window)
        read = reader.read_next_event(timeout_ms=50)
        if not read.is_event:
            continue
        event = json.loads(read.payload)
        with lock:
            key = (event["w"], event["i"])
            assert key not in seen_ids, f"event {key} read twice"
            seen_ids.add(key)
        seen.events.append((window, event, read))


# ---- 1. three kinds of writers, a controller and two readers, concurrently ------------------------------

AUTO_ROUNDS, EXPLICIT_ROUNDS, TXNS, PER_ROUND = 25, 25, 12, 4


def test_concurrent_writers_controller_and_readers(mclient: tk.Client, clock: tk.ManualClock) -> None:
    client = mclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2, timestamp_aggregation_timeout="2s"))
    base = clock.now_ms()
    errors: list[BaseException] = []
    log: list[str] = []

    def logs() -> str:
        return "\n".join([*log[-30:], *map(repr, errors),
                          *(repr(s.to_dict()) for s in client.stream(STREAM).watermarks.writers())])

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # surfaced by the main thread after joining
                errors.append(exc)
        return run

    auto = client.stream(STREAM).writer("auto", config=tk.WriterConfig(automatically_note_time=True,
                                                                 note_time_interval="50ms"))
    explicit = client.stream(STREAM).writer("explicit")
    txn_writer = client.stream(STREAM).transactional_writer("txn")

    def auto_mark() -> int | None:
        return next((m.time_ms for m in client.stream(STREAM).watermarks.marks() if m.writer_id == "auto"), None)

    # Every writer notes before its first event, so every watermark (computed only once the threads
    # start) covers all three and every event has a "time noted just before it".
    _wait_for(lambda: auto_mark() == base, "the auto writer's first note", logs)
    explicit.note_time(base)
    txn_writer.begin().commit(timestamp=base)  # an empty transaction: a mark with no position

    def run_auto() -> None:
        # The auto writer notes the client clock's time; only this thread moves the clock. After
        # moving it to `now` we wait until a note of `now` is stored: every note before our writes
        # then has time <= now and at least one has time == now, so the time noted just before
        # each of these events is exactly `now` (with a wall clock it could only be bracketed).
        # A note flushes first, so events written after a note land after that note's position.
        index = 0
        for _ in range(AUTO_ROUNDS):
            now = clock.advance(7)
            _wait_for(lambda now=now: auto_mark() == now, f"an automatic note of {now}", logs)
            for _ in range(PER_ROUND):
                auto.write(_payload("auto", index, now))
                index += 1
        # a final note after the last events, so every event lies before the writer's last mark
        now = clock.advance(7)
        _wait_for(lambda: auto_mark() == now, "the auto writer's last note", logs)
        auto.close()  # while the controller computes and the readers read

    def run_explicit() -> None:
        noted, index = base, 0
        for round_ in range(EXPLICIT_ROUNDS):
            for _ in range(PER_ROUND):
                explicit.write(_payload("explicit", index, noted))
                index += 1
            noted = base + 9 * (round_ + 1)
            explicit.note_time(noted)  # flushes first: the mark lies after the events above
            time.sleep(0.01)
        # events after the last note, then close (which flushes them): the closed writer no longer
        # holds watermarks back, but its closed mark stands after these events, so no watermark whose
        # lower time comes from the other writers can be passed before they are read
        for _ in range(PER_ROUND):
            explicit.write(_payload("explicit", index, noted))
            index += 1
        explicit.close()

    def run_txn() -> None:
        # A transaction's mark is recorded at its commit, at the offsets where it landed, i.e.
        # AFTER its own events. So the commit's timestamp does not bound the transaction's own
        # events: a watermark containing it has a cut past them. What bounds them is the previous
        # commit's timestamp: a watermark a reader can have passed at one of these events was
        # computed before this commit landed, so it holds this writer's previous mark (or an older
        # one) and its lower time is <= the previous commit's timestamp. That is the "time noted
        # just before writing" for transactional events.
        previous, index = base, 0
        for k in range(TXNS):
            txn = txn_writer.begin()
            for _ in range(PER_ROUND):
                txn.write(_payload("txn", index, previous))
                index += 1
            previous = base + 15 * (k + 1)
            txn.commit(timestamp=previous)
            time.sleep(0.02)

    stop = threading.Event()
    computed: list[Watermark] = []

    def run_compute() -> None:
        while not stop.is_set():
            watermark = client.stream(STREAM).watermarks.compute()
            if watermark is not None:
                computed.append(watermark)
                log.append(f"watermark {watermark.to_dict()}")
            time.sleep(0.02)

    total = (AUTO_ROUNDS + EXPLICIT_ROUNDS + 1 + TXNS) * PER_ROUND
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    readers = [group.reader("r1", sync_every_events=20), group.reader("r2", sync_every_events=20)]
    seen_ids: set = set()
    lock = threading.Lock()
    seens = [Seen(), Seen()]

    writers = [threading.Thread(target=guarded(f)) for f in (run_auto, run_explicit, run_txn)]
    others = [threading.Thread(target=guarded(run_compute))] + [
        threading.Thread(target=guarded(lambda r=r, s=s: _read_all(r, STREAM, total, seen_ids, lock, s, stop)))
        for r, s in zip(readers, seens, strict=True)]
    for thread in writers + others:
        thread.start()
    for thread in writers:
        thread.join(DEADLINE_S * 2)
    if errors:
        stop.set()
    for thread in others[1:]:
        thread.join(DEADLINE_S * 2)
    stop.set()
    others[0].join(DEADLINE_S)
    assert not errors, logs()
    assert not any(t.is_alive() for t in writers + others), logs()

    # every event read exactly once (duplicates were refused as they were read)
    assert len(seen_ids) == total
    expected = {("auto", i) for i in range(AUTO_ROUNDS * PER_ROUND)} | {
        ("explicit", i) for i in range((EXPLICIT_ROUNDS + 1) * PER_ROUND)} | {
        ("txn", i) for i in range(TXNS * PER_ROUND)}
    assert seen_ids == expected
    for seen in seens:
        _check_event_invariant(seen)
        _check_windows_forward(seen.windows)
    # the invariant was checked against a known lower bound for events of every kind of writer
    for name in ("auto", "explicit", "txn"):
        assert any(e["w"] == name and w.lower_ms is not None for s in seens for w, e, _ in s.events), name
    # watermarks really were emitted and the readers really passed some
    stored = _check_stored_watermarks(client, STREAM)
    assert [w.revision for w in computed] == [w.revision for w in stored]
    assert len(stored) >= 2, logs()
    assert any(w.lower_ms is not None for s in seens for w in s.windows), logs()
    # the lower bounds the readers saw are stored watermarks' lower times, each writer's time bounds
    # them from above: lower = min over the three writers, so it never passes the slowest one
    lowers = {w.lower_time_ms for w in stored}
    assert {w.lower_ms for s in seens for w in s.windows if w.lower_ms is not None} <= lowers
    for window, _, _ in (e for s in seens for e in s.events):
        assert window.upper_ms is None or window.lower_ms is None or window.lower_ms <= window.upper_ms
    # the closed writers left the time aggregation: their marks are closed, or gone once a watermark
    # covered them; the transactional writer's mark is left
    left = {s.mark.writer_id: s for s in client.stream(STREAM).watermarks.writers()}
    assert "txn" in left and not left["txn"].mark.closed
    assert all(s.mark.closed and not s.active for w, s in left.items() if w != "txn"), left


# ---- 2. a scale in the middle of writing -----------------------------------------------------------------


def _read_to_end(group: tk.ReaderGroup, reader_id: str, stream: str, total: int) -> tuple[Seen, tk.Reader]:
    reader = group.reader(reader_id)
    seen_ids: set = set()
    seen = Seen()
    _read_all(reader, stream, total, seen_ids, threading.Lock(), seen)
    return seen, reader


def test_scale_in_the_middle_of_writing(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2, timestamp_aggregation_timeout="2s"))
    writers = {name: client.stream(STREAM).writer(name) for name in ("a", "b")}
    t = 1_000
    for writer in writers.values():
        writer.note_time(t)  # before any event: every event has a time noted before it
    noted: dict[str, int | None] = {name: t for name in writers}
    counts = {name: 0 for name in writers}
    keys = [f"k{i}" for i in range(12)]
    emitted: list[Watermark] = []
    for round_ in range(9):
        if round_ == 3:
            client.stream(STREAM).split("0.0")  # 0.0 -> 1.2, 1.3 while the writers are mid-stream
        if round_ == 6:
            client.stream(STREAM).scale(["1.3", "0.1"], [(0.25, 0.75), (0.75, 1.0)])  # a many-to-many scale
        for name, writer in writers.items():
            for key in keys[round_ % 3::3]:
                writer.write(_payload(name, counts[name], noted[name]), routing_key=key)
                counts[name] += 1
            t += 5
            writer.note_time(t)
            noted[name] = t
            watermark = client.stream(STREAM).watermarks.compute()
            if watermark is not None:
                emitted.append(watermark)
    for writer in writers.values():
        writer.close()

    stored = _check_stored_watermarks(client, STREAM)  # valid, complete cuts of the scaled stream
    assert stored == emitted and len(stored) >= 10
    state = client.stream(STREAM).state()
    active = {s.id for s in state.active_segments()}
    # the last watermarks were computed after the second scale: their cuts are on its segments
    assert set(stored[-1].cut) == active
    total = sum(counts.values())
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    seen, reader = _read_to_end(group, "r", STREAM, total)
    _check_event_invariant(seen)
    _check_windows_forward(seen.windows)
    # at the end the reader has passed every watermark: lower is the last one's, and nothing lies ahead
    assert reader.time_window(STREAM) == TimeWindow(stored[-1].lower_time_ms, None)
    # and it passed through the intermediate ones on the way (windows moved across the scales)
    assert len({w.lower_ms for w in seen.windows if w.lower_ms is not None}) >= 3


# ---- 3. the reader's window through the real reader --------------------------------------------------------


def _write_and_note(client: tk.Client, writer: tk.Writer, start: int, count: int, t: int) -> Watermark:
    for i in range(start, start + count):
        writer.write(_payload(writer.writer_id, i, None))
    writer.note_time(t)
    watermark = client.stream(STREAM).watermarks.compute()
    assert watermark is not None
    return watermark


def test_reader_window_basics(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    client.create_stream("wm/other", tk.StreamConfig(segments=1))
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    reader = group.reader("r", sync_every_events=1)  # syncs before every read: sees the reset at once
    off = group.reader("off", config=tk.ReaderConfig(disable_time_windows=True))
    # nothing written, no watermark: nothing known at either end
    assert reader.time_window(STREAM) == TimeWindow(None, None)

    writer = client.stream(STREAM).writer("w")
    first = _write_and_note(client, writer, 0, 5, 100)
    second = _write_and_note(client, writer, 5, 5, 200)
    assert (first.lower_time_ms, second.lower_time_ms) == (100, 200)
    # at the head, before the first watermark's cut (5 events in): lower unknown, upper from the
    # first watermark ahead (as in Pravega's WatermarkReaderImpl, the tracker stops loading at the first
    # mark the reader has not passed)
    assert reader.time_window(STREAM) == TimeWindow(None, first.upper_time_ms)
    assert off.time_window(STREAM) == TimeWindow(None, None)  # watermarks exist, but windows are off

    read = [reader.read_next_event(timeout_ms=2000) for _ in range(10)]
    assert all(r.is_event for r in read)
    # read past the last watermark: lower is its lower time, no watermark ahead
    assert reader.time_window(STREAM) == TimeWindow(second.lower_time_ms, None)
    assert off.time_window(STREAM) == TimeWindow(None, None)

    # a later watermark ahead of the reader: the upper bound comes back, the lower stays
    third = _write_and_note(client, writer, 10, 5, 300)
    assert reader.time_window(STREAM) == TimeWindow(second.lower_time_ms, third.upper_time_ms)

    with pytest.raises(InvalidInput, match="does not read stream"):
        reader.time_window("wm/other")
    with pytest.raises(InvalidInput, match="does not read stream"):
        off.time_window("wm/other")

    # a reset to the head moves the reader back before every watermark: the window starts afresh.
    # Keeping the old lower bound would be wrong: the events read again were noted below it.
    group.reset(tk.ReaderGroupConfig(streams=[STREAM]))
    again = reader.read_next_event(timeout_ms=2000)  # the reader learns of the reset when it syncs
    assert again.is_event and json.loads(again.payload)["i"] == 0
    assert reader.time_window(STREAM) == TimeWindow(None, first.upper_time_ms)
    for _ in range(4):
        assert reader.read_next_event(timeout_ms=2000).is_event
    # at the first watermark's cut exactly: being at a mark counts as past it
    assert reader.time_window(STREAM) == TimeWindow(first.lower_time_ms, second.upper_time_ms)

    writer.close()
    reader.close()
    with pytest.raises(InvalidInput, match="closed"):
        reader.time_window(STREAM)
    off.close()
    with pytest.raises(InvalidInput, match="closed"):
        off.time_window(STREAM)


# ---- 4. a segment no writer ever wrote to (Pravega #6510) ---------------------------------------------------


def test_unwritten_segment_does_not_hide_the_lower_bound(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    state = client.stream(STREAM).state()
    untouched = max(state.active_segments(), key=lambda s: s.key_low)  # [2/3, 1)
    # routing keys that only ever hit the two lower segments
    keys = [k for k in (f"key-{i}" for i in range(200)) if routing_key_position(k) < untouched.key_low][:8]
    assert len(keys) == 8
    writers = [client.stream(STREAM).writer("w1"), client.stream(STREAM).writer("w2")]
    noted: dict[str, int | None] = {"w1": None, "w2": None}
    count = 0
    last: Watermark | None = None
    for t in (100, 200, 300):
        for n, writer in enumerate(writers):
            name = writer.writer_id
            for key in keys:
                writer.write(_payload(name, count, noted[name]), routing_key=key)
                count += 1
            writer.note_time(t + n)
            noted[name] = t + n
        last = client.stream(STREAM).watermarks.compute() or last
    assert last is not None and last.lower_time_ms == 300
    assert client.stream(STREAM).state().segments[untouched.id].tail == 0  # really never written
    assert last.cut[untouched.id] == 0  # filled at its start, not at "beyond everything"

    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    seen, reader = _read_to_end(group, "r", STREAM, count)
    _check_event_invariant(seen)
    _check_windows_forward(seen.windows)
    assert reader.time_window(STREAM) == TimeWindow(300, None)
    for writer in writers:
        writer.close()
