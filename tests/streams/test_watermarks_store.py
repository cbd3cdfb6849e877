"""Watermarks through the real store (docs/watermarks.md) on SQLite and PostgreSQL, with a
ManualClock: a writer's note records the offsets after its last committed event (read back from the
events themselves), the aggregation timeout drops and readmits a lagging writer, a closed writer never
holds watermarks back, a transaction's timestamp records its mark where it landed (and a time going
backwards refuses the commit, leaving it open), the conditional append lets exactly one of two
controllers append a revision, streams_due, Pravega's worked watermark example on a really scaled
stream, and a database upgraded from revision 0009."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command

import tidekeep as tk
from tidekeep.errors import InvalidInput
from tidekeep.store import schema as t
from tidekeep.store.database import alembic_config
from tidekeep.store.schema_watermarks import watermarks as wm_table
from tidekeep.streams.model import EVENT_HEADER_BYTES, routing_key_position, segment_id
from tidekeep.streams.of_workspace import watermark_store
from tidekeep.streams.watermarks import Watermark, WriterMark, next_watermark

STREAM = "wm/store"
TIMEOUT_MS = 10_000
S0, S1 = segment_id(0, 0), segment_id(0, 1)


def _connect(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> tk.Client:
    return tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                      clock=clock, settings={"writer.linger": 0}, create=True)


@pytest.fixture
def client(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    """conftest's client, but on the test's ManualClock (marks' noted times and the timeout use it)."""
    c = _connect(tmp_path, metadata_url, clock)
    yield c
    c.close()


def key_in(low: float, high: float) -> str:
    """A routing key that lands in [low, high)."""
    return next(k for k in (f"key-{i}" for i in range(100_000)) if low <= routing_key_position(k) < high)


def writer_ends(client: tk.Client, stream: str, writer_id: str) -> dict[int, int]:
    """Per segment, the offset after the writer's last event, as the events read back say."""
    ends: dict[int, int] = {}
    for event in client.stream(stream).read():
        if event.writer_id == writer_id:
            end = event.offset + EVENT_HEADER_BYTES + len(event.payload)
            ends[event.segment] = max(end, ends.get(event.segment, 0))
    return ends


def summary(wm: Watermark | None) -> tuple[int, int, int] | None:
    return None if wm is None else (wm.revision, wm.lower_time_ms, wm.upper_time_ms)


def statuses(client: tk.Client, stream: str = STREAM) -> dict[str, tuple[bool, bool]]:
    """writer -> (active, participating)."""
    return {s.mark.writer_id: (s.active, s.participating) for s in client.stream(stream).watermarks.writers()}


# ---- 1. what a note records --------------------------------------------------------------------------


def test_note_time_records_the_offsets_after_the_writers_own_last_committed_events(
        client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    k0, k1 = key_in(0.0, 0.5), key_in(0.5, 1.0)
    a, b = client.stream(STREAM).writer("a"), client.stream(STREAM).writer("b")
    a.write(b"a-first", k0)
    a.write(b"a-second-longer", k1)
    a.write(b"a-third", k0)
    a.flush()
    # b's events land after a's in both segments: a's position must stop at a's own events
    b.write(b"b-later", k0)
    b.write(b"b-later-too", k1)
    b.flush()
    clock.advance(7)
    a.note_time(1_000)
    ends = writer_ends(client, STREAM, "a")
    assert set(ends) == {S0, S1}
    tail = client.stream(STREAM).state().tail()
    assert all(ends[s] < tail[s] for s in ends)
    assert client.stream(STREAM).watermarks.marks() == [WriterMark("a", 1_000, ends, clock.now_ms())]
    [status] = client.stream(STREAM).watermarks.writers()
    assert (status.source, status.active, status.participating) == ("note", True, True)
    a.close()
    b.close()


def test_a_note_flushes_pending_events_first_and_an_idle_writer_notes_an_empty_position(
        client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    k0, k1 = key_in(0.0, 0.5), key_in(0.5, 1.0)
    writer = client.stream(STREAM).writer("w")  # 4 MiB batches, no linger: these stay pending until a flush
    writer.write(b"pending-0", k0)
    writer.write(b"pending-1", k1)
    assert list(client.stream(STREAM).read()) == []
    writer.note_time(50)
    assert sorted(e.payload for e in client.stream(STREAM).read()) == [b"pending-0", b"pending-1"]
    ends = writer_ends(client, STREAM, "w")
    assert ends == {S0: EVENT_HEADER_BYTES + 9, S1: EVENT_HEADER_BYTES + 9}
    idle = client.stream(STREAM).writer("idle")
    clock.advance(3)
    idle.note_time(40)
    assert client.stream(STREAM).watermarks.marks() == [
        WriterMark("idle", 40, {}, clock.now_ms()), WriterMark("w", 50, ends, clock.now_ms() - 3)]
    # an idle writer bounds the time (lower 40) but not the cut, which is w's position
    wm = client.stream(STREAM).watermarks.compute()
    assert wm == Watermark(0, 40, 50, ends)
    writer.close()
    idle.close()


def test_after_a_scale_the_stored_position_drops_the_predecessors_the_writer_left(
        client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w")
    writer.write(b"before-0", key_in(0.0, 0.5))
    writer.write(b"before-1", key_in(0.5, 1.0))
    writer.flush()
    low, high = client.stream(STREAM).split("0.0")  # 0.0 -> 1.2 [0, .25) and 1.3 [.25, .5)
    writer.write(b"after", key_in(0.0, 0.25))  # re-routed to 1.2 after the writer finds 0.0 sealed
    writer.note_time(10)
    ends = writer_ends(client, STREAM, "w")
    assert set(ends) == {S0, S1, low.id}  # the writer did write to 0.0 ...
    # ... but its mark keeps only the successor: 1.2 is later than 0.0 and overlaps it
    assert client.stream(STREAM).watermarks.marks() == [
        WriterMark("w", 10, {S1: ends[S1], low.id: ends[low.id]}, clock.now_ms())]
    # the watermark cut passes 0.0 entirely and starts 1.3 (unwritten) at 0
    assert client.stream(STREAM).watermarks.compute() == Watermark(0, 10, 10, {S1: ends[S1], low.id: ends[low.id],
                                                                      high.id: 0})
    writer.close()


# ---- 2. the aggregation timeout ---------------------------------------------------------------------------


def test_a_lagging_writer_holds_watermarks_back_until_its_timeout_then_rejoins_and_closing_releases_it(
        client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(timestamp_aggregation_timeout="10s"))
    a, b = client.stream(STREAM).writer("a"), client.stream(STREAM).writer("b")
    marks = watermark_store(client.workspace)
    a.note_time(1_000)
    b.note_time(1_000)
    assert summary(marks.compute(STREAM)) == (0, 1_000, 1_000)

    # b stops noting: nothing is emitted while b is within its timeout, counted from its last note
    b_noted = clock.now_ms()
    clock.advance(2_000)
    a.note_time(2_000)
    assert marks.compute(STREAM) is None
    assert statuses(client) == {"a": (True, True), "b": (True, False)}
    clock.set(b_noted + TIMEOUT_MS - 1)
    assert marks.compute(STREAM) is None
    clock.advance(1)
    assert summary(marks.compute(STREAM)) == (1, 2_000, 2_000)  # on a alone
    # a's time is in the watermark now (not above it), b has timed out
    assert statuses(client) == {"a": (True, False), "b": (False, False)}
    assert summary(marks.compute(STREAM)) is None  # nothing new: the lower time must advance

    # b notes a time below the current watermark's lower (2000): not participating, so it holds
    # watermarks back again until it times out once more
    b.note_time(1_500)
    b_noted = clock.now_ms()
    assert statuses(client) == {"a": (True, False), "b": (True, False)}
    a.note_time(3_000)
    clock.advance(TIMEOUT_MS - 1)
    assert marks.compute(STREAM) is None
    clock.advance(1)
    assert clock.now_ms() == b_noted + TIMEOUT_MS
    assert summary(marks.compute(STREAM)) == (2, 3_000, 3_000)

    # b rejoins with a time above the watermark: it takes part and bounds the lower time
    b.note_time(3_500)
    assert statuses(client) == {"a": (False, False), "b": (True, True)}  # a folded in 10 s ago
    a.note_time(5_000)
    assert statuses(client) == {"a": (True, True), "b": (True, True)}
    assert summary(marks.compute(STREAM)) == (3, 3_500, 5_000)
    a.note_time(6_000)
    assert marks.compute(STREAM) is None  # b, just rejoined, holds them back again
    assert statuses(client) == {"a": (True, True), "b": (True, False)}

    # a closed writer never holds them back: close marks its mark closed, at once; the next watermark
    # covers its last position and the closed mark goes with that append
    b.close()
    assert [(m.writer_id, m.closed) for m in marks.marks(STREAM)] == [("a", False), ("b", True)]
    assert statuses(client) == {"a": (True, True), "b": (False, False)}
    assert summary(marks.compute(STREAM)) == (4, 6_000, 6_000)
    assert [m.writer_id for m in marks.marks(STREAM)] == ["a"]
    a.close()
    assert [(m.writer_id, m.closed) for m in marks.marks(STREAM)] == [("a", True)]
    assert marks.compute(STREAM) is None  # no writer left whose time counts: the closed mark stays
    assert [summary(w) for w in marks.list(STREAM)] == [
        (0, 1_000, 1_000), (1, 2_000, 2_000), (2, 3_000, 3_000), (3, 3_500, 5_000), (4, 6_000, 6_000)]


def test_the_default_timeout_is_sixty_seconds(client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM)
    assert client.stream(STREAM).state().info.config.timestamp_aggregation_timeout_ms == 60_000
    client.stream(STREAM).watermarks.note("a", 10)
    client.stream(STREAM).watermarks.note("b", 10)
    assert summary(client.stream(STREAM).watermarks.compute()) == (0, 10, 10)
    b_noted = clock.now_ms()
    client.stream(STREAM).watermarks.note("a", 20)
    clock.set(b_noted + 59_999)
    assert client.stream(STREAM).watermarks.compute() is None
    clock.advance(1)
    assert summary(client.stream(STREAM).watermarks.compute()) == (1, 20, 20)


def test_timeout_zero_drops_a_lagging_writer_immediately(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(timestamp_aggregation_timeout=0))
    client.stream(STREAM).watermarks.note("a", 10)
    client.stream(STREAM).watermarks.note("b", 10)
    assert summary(client.stream(STREAM).watermarks.compute()) == (0, 10, 10)
    client.stream(STREAM).watermarks.note("a", 20)
    assert statuses(client) == {"a": (True, True), "b": (False, False)}
    assert summary(client.stream(STREAM).watermarks.compute()) == (1, 20, 20)


# ---- 3. transactions ----------------------------------------------------------------------------------------


def test_a_transaction_commit_records_its_writers_mark_where_it_landed(
        client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    k0, k1 = key_in(0.0, 0.5), key_in(0.5, 1.0)
    tw = client.stream(STREAM).transactional_writer("t")
    first = tw.begin()
    first.write(b"first", k0)
    r1 = first.commit(timestamp=1_000)
    assert r1.positions == {S0: EVENT_HEADER_BYTES + 5}
    [status] = client.stream(STREAM).watermarks.writers()
    assert status.source == "txn"
    assert status.mark == WriterMark("t", 1_000, r1.positions, clock.now_ms())

    # someone else's events land first, so the second transaction lands further on
    with client.stream(STREAM).writer("other") as other:
        other.write(b"xx", k0)
        other.write(b"yy", k1)
    clock.advance(10)
    second = tw.begin()
    second.write(b"second", k1)
    r2 = second.commit(timestamp=2_000)
    assert r2.positions == {S1: client.stream(STREAM).state().tail()[S1]}
    # the mark merges: the first transaction's offset in 0.0 stays, the second's in 0.1 joins
    merged = {S0: r1.positions[S0], S1: r2.positions[S1]}
    assert client.stream(STREAM).watermarks.marks() == [WriterMark("t", 2_000, merged, clock.now_ms())]

    # a timestamp below the writer's last mark refuses the commit and changes nothing
    third = tw.begin()
    third.write(b"third", k0)
    tail, marks = client.stream(STREAM).tail_cut(), client.stream(STREAM).watermarks.marks()
    events = list(client.stream(STREAM).read())
    clock.advance(10)
    with pytest.raises(InvalidInput, match=r"time went backwards from 2000 to 1999") as err:
        third.commit(timestamp=1_999)
    assert "\n" not in err.value.args[0]
    assert third.status() == tk.TxnState.OPEN
    assert client.stream(STREAM).tail_cut() == tail
    assert client.stream(STREAM).watermarks.marks() == marks
    assert list(client.stream(STREAM).read()) == events
    # ... and it commits with a proper timestamp (equal to the last one is allowed)
    r3 = third.commit(timestamp=2_000)
    assert third.status() == tk.TxnState.COMMITTED
    assert b"third" in [e.payload for e in client.stream(STREAM).read()]
    assert r3.positions == {S0: client.stream(STREAM).state().tail()[S0]} and r3.positions[S0] > r1.positions[S0]
    after_third = [WriterMark("t", 2_000, {S0: r3.positions[S0], S1: r2.positions[S1]}, clock.now_ms())]
    assert client.stream(STREAM).watermarks.marks() == after_third

    # commit without a timestamp records no mark (and a writer without one has none at all)
    clock.advance(10)
    fourth = tw.begin()
    fourth.write(b"fourth", k1)
    assert fourth.commit().commit_timestamp is None
    quiet = client.stream(STREAM).transactional_writer("quiet").begin()
    quiet.write(b"quiet", k0)
    quiet.commit()
    assert client.stream(STREAM).watermarks.marks() == after_third


# ---- 4. the conditional append ----------------------------------------------------------------------------


def _owners(client: tk.Client) -> list[tuple[int, str | None]]:
    with client.workspace.db.read() as conn:
        return [(r.revision, r.owner) for r in conn.execute(
            sa.select(wm_table.c.revision, wm_table.c.owner).order_by(wm_table.c.revision))]


def test_two_controllers_computing_from_the_same_watermark_append_it_once(
        client: tk.Client, clock: tk.ManualClock, tmp_path: Path, metadata_url: str) -> None:
    client.create_stream(STREAM)
    other = _connect(tmp_path, metadata_url, clock)  # a second controller on the same store
    try:
        client.stream(STREAM).watermarks.note("w", 100)
        first = client.stream(STREAM).watermarks.compute(owner="c1")
        assert summary(first) == (0, 100, 100)
        client.stream(STREAM).watermarks.note("w", 200)
        computed = []
        for store in (watermark_store(client.workspace), watermark_store(other.workspace)):
            state = store.controller.state(STREAM)
            computed.append((state, next_watermark(store.marks(STREAM), store.latest(STREAM), state.segments,
                                                   clock.now_ms(), state.info.config.timestamp_aggregation_timeout_ms)))
        (state1, wm1), (state2, wm2) = computed
        assert wm1 == wm2 and summary(wm1) == (1, 200, 200)
        assert watermark_store(client.workspace).append(state1, wm1, clock.now_ms(), owner="c1") is True
        assert watermark_store(other.workspace).append(state2, wm2, clock.now_ms(), owner="c2") is False
        # neither a revision already there nor one that skips a revision is appended
        assert watermark_store(other.workspace).append(state2, dataclasses.replace(wm2, revision=3, lower_time_ms=300),
                                       clock.now_ms(), owner="c2") is False
        assert watermark_store(other.workspace).append(state2, dataclasses.replace(wm2, revision=0), clock.now_ms(),
                                       owner="c2") is False
        assert _owners(client) == [(0, "c1"), (1, "c1")]
        # the other controller continues from the stored watermark
        client.stream(STREAM).watermarks.note("w", 300)
        third = other.stream(STREAM).watermarks.compute(owner="c2")
        assert summary(third) == (2, 300, 300)
        assert other.stream(STREAM).watermarks.list() == client.stream(STREAM).watermarks.list() == [first, wm1, third]
        assert _owners(client) == [(0, "c1"), (1, "c1"), (2, "c2")]
    finally:
        other.close()


def test_racing_computations_append_each_revision_exactly_once(
        client: tk.Client, clock: tk.ManualClock, tmp_path: Path, metadata_url: str) -> None:
    """Two controllers (own clients, own connection pools) compute after every note at the same moment:
    each round exactly one of them appends, the other gets None, and the stored revisions have no gap."""
    client.create_stream(STREAM)
    others = [_connect(tmp_path, metadata_url, clock) for _ in range(2)]
    rounds = 25
    barrier = threading.Barrier(3, timeout=60)
    results: list[list[Watermark | None]] = [[], []]
    errors: list[BaseException] = []

    def controller(index: int) -> None:
        try:
            for _ in range(rounds):
                barrier.wait()  # the round's note is stored
                results[index].append(others[index].stream(STREAM).watermarks.compute(owner=f"c{index}"))
                barrier.wait()  # both computed
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=controller, args=(i,)) for i in range(2)]
    try:
        for thread in threads:
            thread.start()
        for r in range(rounds):
            client.stream(STREAM).watermarks.note("w", 1_000 + r)
            barrier.wait()
            barrier.wait()
    except threading.BrokenBarrierError as exc:  # a controller failed (in errors) or the round hung
        errors.append(exc)
    finally:
        for thread in threads:
            thread.join(timeout=60)
        for other in others:
            other.close()
    assert not errors, errors
    winners = []
    for r in range(rounds):
        appended = [(i, results[i][r]) for i in range(2) if results[i][r] is not None]
        assert len(appended) == 1, (r, results[0][r], results[1][r])
        winners.append(appended[0])
    stored = client.stream(STREAM).watermarks.list()
    assert [w.revision for w in stored] == list(range(rounds))
    assert [w.lower_time_ms for w in stored] == [1_000 + r for r in range(rounds)]  # strictly increasing
    assert stored == [wm for _, wm in winners]
    assert _owners(client) == [(r, f"c{i}") for r, (i, _) in enumerate(winners)]


# ---- 5. streams_due -----------------------------------------------------------------------------------------


def test_streams_due_are_those_with_a_fresh_mark_or_one_noted_after_their_last_watermark(
        client: tk.Client, clock: tk.ManualClock) -> None:
    config = tk.StreamConfig(timestamp_aggregation_timeout="10s")
    fresh, stale, late, never, quiet = (f"wm/{n}" for n in ("fresh", "stale", "late", "never", "quiet"))
    for name in (fresh, stale, late, never, quiet):
        client.create_stream(name, config)
    marks = watermark_store(client.workspace)
    start = clock.now_ms()
    # stale: its only mark is folded into a watermark at once
    marks.note(stale, "w", 1)
    assert marks.compute(stale) is not None
    # late: a watermark, then a mark noted after it (its writer may have stopped since)
    marks.note(late, "w", 1)
    assert marks.compute(late) is not None
    clock.advance(1)
    marks.note(late, "w", 2)
    # never: a mark, never computed
    marks.note(never, "w", 1)
    # within the timeout every stream with a mark is due; quiet has none
    assert marks.streams_due() == sorted([stale, late, never])
    clock.set(start + TIMEOUT_MS - 1)
    assert stale in marks.streams_due()
    clock.set(start + TIMEOUT_MS)
    marks.note(fresh, "w", 1)
    # stale's marks are older than its timeout and than its last watermark: not due
    assert marks.streams_due() == sorted([fresh, late, never])


# ---- 6. Pravega's worked watermark example on a real stream ------------------------------------------------


def test_pravegas_watermarking_workflow_example_through_the_store(client: tk.Client) -> None:
    """Pravega's WatermarkWorkflowTest.testWatermarkingWorkflow with its exact offsets: segments 0.0,
    0.1, 0.2 scaled into 1.3 [0, .5) and 1.4 [.5, 1); writers at {0:300, 1:400}@302, {1:100, 2:400}@301,
    {3:100}@300 after a watermark at {0:200, 1:300, 2:300} give {3:100, 4:0} with lower 300 and upper
    302. Events of 50 bytes make every one of those offsets an event boundary."""
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    state = client.stream(STREAM).state()
    s0, s1, s2 = (segment_id(0, n) for n in range(3))
    payload = b"p" * (50 - EVENT_HEADER_BYTES)
    with client.stream(STREAM).writer("loader") as loader:
        for seg in (s0, s1, s2):
            key = key_in(state.segments[seg].key_low, state.segments[seg].key_high)
            for _ in range(8):
                loader.write(payload, key)
    assert client.stream(STREAM).state().tail() == {s0: 400, s1: 400, s2: 400}
    marks = watermark_store(client.workspace)
    # the previous watermark, from marks at the old segments (w3 has written nothing yet)
    marks.note(STREAM, "w1", 250, position={s0: 200, s1: 300})
    marks.note(STREAM, "w2", 200, position={s1: 100, s2: 300})
    marks.note(STREAM, "w3", 220)
    assert marks.compute(STREAM) == Watermark(0, 200, 250, {s0: 200, s1: 300, s2: 300})

    s3, s4 = (s.id for s in client.stream(STREAM).scale(["0.0", "0.1", "0.2"], [(0.0, 0.5), (0.5, 1.0)]))
    assert (s3, s4) == (segment_id(1, 3), segment_id(1, 4))
    with client.stream(STREAM).writer("loader") as loader:
        for _ in range(2):
            loader.write(payload, key_in(0.0, 0.5))
        loader.write(payload, key_in(0.5, 1.0))  # 1.4 has data, but no writer reported it: filled at 0
    assert client.stream(STREAM).state().tail() == {s3: 100, s4: 50}
    marks.note(STREAM, "w1", 302, position={s0: 300, s1: 400})
    marks.note(STREAM, "w2", 301, position={s1: 100, s2: 400})
    marks.note(STREAM, "w3", 300, position={s3: 100})
    assert statuses(client) == {"w1": (True, True), "w2": (True, True), "w3": (True, True)}
    # Pravega's expected result (its revision is 8 after a previous 7; ours follows our revision 0)
    wm = marks.compute(STREAM)
    assert wm == Watermark(1, 300, 302, {s3: 100, s4: 0})
    assert wm.to_dict()["cut"] == {"1.3": 100, "1.4": 0}
    assert marks.list(STREAM)[-1] == wm


# ---- 7. a database from before watermarks -----------------------------------------------------------------


def test_a_database_upgraded_from_0009_keeps_working(client: tk.Client, clock: tk.ManualClock) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    k0, k1 = key_in(0.0, 0.5), key_in(0.5, 1.0)
    with client.stream(STREAM).writer("w") as writer:
        writer.write(b"old-0", k0)
        writer.write(b"old-1", k1)
    with client.workspace.db.engine.connect() as conn:  # back to the schema before watermarks
        config = alembic_config()
        config.attributes["connection"] = conn
        command.downgrade(config, "0009")
        conn.commit()
        tables = sa.inspect(conn).get_table_names()
        assert "writer_marks" not in tables and "watermarks" not in tables
        assert "positions" not in {c["name"] for c in sa.inspect(conn).get_columns("writers")}
    client.workspace.db.upgrade()
    with client.workspace.db.read() as conn:
        assert conn.execute(sa.select(t.writers.c.writer_id, t.writers.c.positions)).all() == [("w", None)]
    writer = client.stream(STREAM).writer("w")
    assert writer.last_sequence == 1  # the writer's row survived
    # its committed positions are unknown until its next batch: the note bounds the time only
    writer.note_time(100)
    assert client.stream(STREAM).watermarks.marks() == [WriterMark("w", 100, {}, clock.now_ms())]
    writer.write(b"new-1", k1)
    writer.note_time(200)
    ends = writer_ends(client, STREAM, "w")
    # the next batch sets the positions of the segments it wrote to
    assert client.stream(STREAM).watermarks.marks() == [WriterMark("w", 200, {S1: ends[S1]}, clock.now_ms())]
    assert client.stream(STREAM).watermarks.compute() == Watermark(0, 200, 200, {S0: 0, S1: ends[S1]})
    writer.close()
    closed = WriterMark("w", 200, {S1: ends[S1]}, clock.now_ms(), closed=True)
    assert client.stream(STREAM).watermarks.marks() == [closed]
