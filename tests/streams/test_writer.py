"""Writers: batching by size and linger, flush, context manager, per-key order across a scale,
spreading keyless events, idempotent batch retries, restart with the same id, the 8 MiB limit."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable

import pytest

import tidekeep as tk
from helpers.storage import chunk_rows, referenced_paths, stored_files
from helpers.workers import batch_events
from tidekeep.config import MAX_EVENT_SIZE
from tidekeep.errors import InvalidInput
from tidekeep.streams.model import segment_id

STREAM = "s/w"
EVENT = 100  # payload bytes; 108 logical bytes with the header


@pytest.fixture
def client(storage_client: tk.Client) -> tk.Client:
    """Every writer test on local storage and on S3."""
    return storage_client


def _payloads(client: tk.Client) -> list[bytes]:
    return [e.payload for e in client.stream(STREAM).read()]


def _by_key(events: list[tk.Event]) -> dict[str | None, list[bytes]]:
    grouped: dict[str | None, list[bytes]] = defaultdict(list)
    for event in events:
        grouped[event.routing_key].append(event.payload)
    return grouped


def _wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_batches_by_size(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    payloads = [bytes([i]) * EVENT for i in range(53)]
    with client.stream(STREAM).writer("w1", batch_size="1KiB") as writer:
        for payload in payloads:
            writer.write(payload)
    rows = chunk_rows(client, STREAM)
    assert len(rows) == 6  # five full batches of ten events (1080 bytes >= 1 KiB), then three on close
    for row in rows[:-1]:
        assert 1024 <= row.length < 1024 + EVENT + 8
    assert [r.event_count for r in rows] == [10, 10, 10, 10, 10, 3]
    assert [r.sequence for r in rows] == [1, 2, 3, 4, 5, 6]
    assert _payloads(client) == payloads


def test_nothing_is_visible_before_flush_and_everything_after(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w1")  # linger 0 and a 4 MiB batch: only flush commits
    for i in range(20):
        writer.write(b"e%d" % i, routing_key=f"k{i % 3}")
    assert _payloads(client) == []
    assert stored_files(client) == set()  # not even a file yet
    writer.flush()
    assert sorted(_payloads(client)) == sorted(b"e%d" % i for i in range(20))
    writer.flush()  # nothing pending: no empty chunk, no new batch
    assert len({r.sequence for r in chunk_rows(client, STREAM)}) == 1
    writer.close()


def test_linger_commits_pending_events_without_a_flush(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w1", linger="50ms")
    try:
        for i in range(5):
            writer.write(b"lingering-%d" % i, routing_key="k")
        assert _wait_until(lambda: len(_payloads(client)) == 5, seconds=3.0)
        assert _payloads(client) == [b"lingering-%d" % i for i in range(5)]
        writer.write(b"later", routing_key="k")
        assert _wait_until(lambda: len(_payloads(client)) == 6, seconds=3.0)
    finally:
        writer.close()


def test_context_manager_flushes_and_closes(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1") as writer:
        writer.write(b"one", routing_key="a")
        writer.write(b"two", routing_key="b")
    assert sorted(_payloads(client)) == [b"one", b"two"]
    with pytest.raises(tk.InvalidInput, match="writer w1 is closed"):
        writer.write(b"three")
    assert sorted(_payloads(client)) == [b"one", b"two"]


def test_same_key_order_holds_across_a_scale_with_pending_events(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    keys = [f"key-{i}" for i in range(12)]
    written: dict[str, list[bytes]] = defaultdict(list)

    def write_round(writer, tag: str) -> None:  # type: ignore[no-untyped-def]
        for n in range(10):
            for key in keys:
                payload = f"{key}/{tag}/{n}".encode()
                writer.write(payload, routing_key=key)
                written[key].append(payload)

    with client.stream(STREAM).writer("w1") as writer:
        write_round(writer, "a")
        writer.flush()
        write_round(writer, "b")  # pending, routed to epoch-0 segments
        client.stream(STREAM).split("0.0", 2)  # the writer still routes to the sealed 0.0
        write_round(writer, "c")
        writer.flush()  # must re-route the pending events, not fail
        client.stream(STREAM).merge(["1.2", "1.3"])
        write_round(writer, "d")
    state = client.stream(STREAM).state()
    assert state.info.current_epoch == 2
    events = list(client.stream(STREAM).read())
    assert _by_key(events) == written
    sealed_first = state.segments[segment_id(0, 0)]
    assert sealed_first.sealed
    # the sealed segment kept what was committed before the scale: only round "a"
    assert {e.payload.split(b"/")[1] for e in events if e.segment == sealed_first.id} == {b"a"}
    # events pending at the scale landed in the successors
    successors = {segment_id(1, 2), segment_id(1, 3)}
    assert {e.payload.split(b"/")[1] for e in events if e.segment in successors} == {b"b", b"c"}
    assert {e.payload.split(b"/")[1] for e in events if e.segment == segment_id(2, 4)} == {b"d"}
    assert referenced_paths(client) == stored_files(client)  # re-routed attempts left no files behind


def test_events_without_a_routing_key_spread_over_segments(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=4))
    with client.stream(STREAM).writer("w1") as writer:
        for i in range(400):
            writer.write(b"free-%d" % i)
    events = list(client.stream(STREAM).read())
    assert sorted(e.payload for e in events) == sorted(b"free-%d" % i for i in range(400))
    per_segment = defaultdict(int)
    for event in events:
        per_segment[event.segment] += 1
    # 400 uniform picks among 4 segments: each gets ~100; fewer than 40 has probability < 1e-12
    assert set(per_segment) == {segment_id(0, n) for n in range(4)}
    assert min(per_segment.values()) >= 40


def test_retried_batch_with_the_same_sequence_is_not_duplicated(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    first = batch_events("w1", 1, 10)
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.write_batch(first, sequence=1) is True
        assert writer.write_batch(first, sequence=1) is False
        assert writer.last_sequence == 1
    assert sorted(_payloads(client)) == sorted(p for p, _ in first)

    # a writer object opened before a newer one with the same id is fenced: its commit is refused,
    # nothing of it lands, and its chunk files are removed again
    stale = client.stream(STREAM).writer("w1")
    fresh_files_before = stored_files(client)
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.epoch == stale.epoch + 1
        assert writer.write_batch(batch_events("w1", 2, 10), sequence=2) is True
    assert stale.last_sequence == 1
    with pytest.raises(tk.WriterFenced, match="a newer writer opened with the same id"):
        stale.write_batch(batch_events("w1", 3, 10), sequence=3)
    with pytest.raises(tk.WriterFenced):
        stale.close()
    assert len(_payloads(client)) == 20
    assert stored_files(client) == referenced_paths(client)
    assert fresh_files_before < stored_files(client)


def test_lost_commit_acknowledgement_is_retried_without_duplicates_or_lost_files(
    client: tk.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit lands but its acknowledgement is lost (the fault point raises StoreUnavailable after
    the transaction): the writer retries with the same sequence and files, the store recognises
    that these files landed, and the writer keeps them."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    events = batch_events("w1", 1, 50)
    monkeypatch.setenv("TIDEKEEP_FAULT_RAISE", "commit.lost_ack")
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.write_batch(events, sequence=1) is True  # appended: the retry saw its own landed commit
        assert writer.last_sequence == 1
    monkeypatch.delenv("TIDEKEEP_FAULT_RAISE")
    assert sorted(_payloads(client)) == sorted(p for p, _ in events)  # readable: no ChunkMissing
    assert stored_files(client) == referenced_paths(client)


def test_reopened_writer_continues_from_its_last_sequence(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.last_sequence == 0
        writer.write(b"a", routing_key="k")
        writer.flush()
        writer.write_batch([(b"b", "k")], sequence=5)
        assert writer.last_sequence == 5
    with client.stream(STREAM).writer("w2") as other:
        assert other.last_sequence == 0  # sequences are per writer id
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.last_sequence == 5
        assert writer.write_batch([(b"b", "k")], sequence=5) is False  # the replay after a restart
        assert writer.write_batch([(b"b-older", "k")], sequence=3) is False
        writer.write(b"c", routing_key="k")
        writer.flush()
        assert writer.last_sequence == 6
    assert _payloads(client) == [b"a", b"b", b"c"]
    assert [r.sequence for r in chunk_rows(client, STREAM)] == [1, 5, 6]


def test_events_above_8_mib_are_refused_and_change_nothing(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    with client.stream(STREAM).writer("w1") as writer:
        writer.write(b"small", routing_key="k")
        with pytest.raises(tk.EventTooLarge, match=rf"event of {MAX_EVENT_SIZE + 1} bytes is above the "
                                                   rf"{MAX_EVENT_SIZE}-byte limit"):
            writer.write(b"x" * (MAX_EVENT_SIZE + 1), routing_key="k")
        with pytest.raises(tk.EventTooLarge):
            writer.write_batch([(b"fine", "k"), (b"x" * (MAX_EVENT_SIZE + 1), "k")], sequence=7)
        assert writer.last_sequence == 0  # the refused batch committed nothing, not even its valid event
        assert _payloads(client) == []  # and the earlier pending event is still just pending
        writer.write(b"y" * MAX_EVENT_SIZE, routing_key="k")  # exactly 8 MiB is allowed
    assert [len(p) for p in _payloads(client)] == [5, MAX_EVENT_SIZE]


def test_non_bytes_payloads_are_refused(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    with client.stream(STREAM).writer("w1") as writer:
        for bad in ("text", 42, None):
            with pytest.raises(tk.InvalidInput, match="event payload must be bytes"):
                writer.write(bad)  # type: ignore[arg-type]
        writer.write(bytearray(b"ok"))
    assert _payloads(client) == [b"ok"]


def test_writing_to_a_sealed_or_deleted_stream_fails_with_a_typed_error(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    writer = client.stream(STREAM).writer("w1")
    writer.write(b"before", routing_key="k")
    writer.flush()
    client.stream(STREAM).seal()
    writer.write(b"after", routing_key="k")
    with pytest.raises(tk.StreamSealed, match=f"stream '{STREAM}' is sealed"):
        writer.flush()
    assert _payloads(client) == [b"before"]
    assert stored_files(client) == referenced_paths(client)  # the refused batch's file is gone
    with pytest.raises(tk.StreamSealed):
        client.stream(STREAM).writer("w2").write_batch([(b"x", None)])
    client.stream(STREAM).delete()
    with pytest.raises(tk.NotFound, match=f"stream '{STREAM}' does not exist"):
        client.stream(STREAM).writer("w3")


# ---- write_many: the column-wise bulk path --------------------------------------------------------


def test_write_many_matches_write_per_event(client: tk.Client) -> None:
    """write_many routes every key to the segment write() would, keeps per-key order, and spreads
    keyless events; events written before it come first."""
    client.create_stream(STREAM, tk.StreamConfig(segments=4))
    first = [(f"early-{i}".encode(), f"k{i % 7}") for i in range(20)]
    bulk = [(f"bulk-{i}".encode(), None if i % 10 == 0 else f"k{i % 7}") for i in range(2000)]
    with client.stream(STREAM).writer("w1") as writer:
        for payload, key in first:
            writer.write(payload, key)
        assert writer.write_many([p for p, _ in bulk], [k for _, k in bulk]) == len(bulk)
    events = list(client.stream(STREAM).read())
    assert sorted(e.payload for e in events) == sorted(p for p, _ in first + bulk)
    expected = _by_key([tk.Event(p, k, 0, 0, 0, "w1") for p, k in first + bulk])
    got = _by_key(events)
    for key in expected:
        if key is None:
            assert sorted(got[None]) == sorted(expected[None])
        else:
            assert got[key] == expected[key]  # same key: write order
    with client.stream(STREAM).writer("probe") as probe:  # keyed events sit in the segment write() would use
        for event in events:
            if event.routing_key is not None:
                assert probe._segment_for(event.routing_key) == event.segment
    assert len({e.segment for e in events if e.routing_key is None}) > 1


def test_write_many_commits_batches_of_the_batch_size(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    payloads = [bytes([i]) * EVENT for i in range(53)]
    with client.stream(STREAM).writer("w1", batch_size="1KiB") as writer:
        writer.write_many(payloads)
        assert writer.last_sequence == 6
    rows = chunk_rows(client, STREAM)
    assert [r.event_count for r in rows] == [10, 10, 10, 10, 10, 3]
    assert [r.sequence for r in rows] == [1, 2, 3, 4, 5, 6]
    assert _payloads(client) == payloads


def test_write_many_reroutes_after_a_scale_it_did_not_see(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w1")  # its router knows only epoch 0
    client.stream(STREAM).split("0.0", 2)
    payloads = [f"e{i}".encode() for i in range(300)]
    keys = [f"k{i % 11}" for i in range(300)]
    writer.write_many(payloads, keys)
    writer.close()
    events = list(client.stream(STREAM).read())
    assert {e.segment for e in events} <= {segment_id(0, 1), segment_id(1, 2), segment_id(1, 3)}
    assert segment_id(0, 0) not in {e.segment for e in events}
    for key, got in _by_key(events).items():
        assert got == [p for p, k in zip(payloads, keys, strict=True) if k == key]


@pytest.mark.parametrize(("payloads", "keys", "error", "fragment"), [
    ([b"a", "b"], None, tk.InvalidInput, "event payload must be bytes, got str"),
    ([b"a", None], None, tk.InvalidInput, "event payload must be bytes, got NoneType"),
    ([b"a", 5], None, tk.InvalidInput, "event payload must be bytes, got int"),
    (b"abc", None, tk.InvalidInput, "write_many takes a sequence of bytes payloads"),
    ([b"a", b"b"], ["k"], tk.InvalidInput, "got 2 payloads but 1 routing keys"),
    ([b"a", b"b"], ["k", 7], tk.InvalidInput, "routing key must be a string or None, got int"),
    ([b"a", b"b"], ["k", b"k"], tk.InvalidInput, "routing key must be a string or None, got bytes"),
    ([b"a", b"x" * (MAX_EVENT_SIZE + 1)], None, tk.EventTooLarge, f"event of {MAX_EVENT_SIZE + 1} bytes"),
])
def test_write_many_refuses_bad_input_and_writes_nothing(client: tk.Client, payloads: object, keys: object,
                                                         error: type[Exception], fragment: str) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1") as writer:
        with pytest.raises(error) as exc:
            writer.write_many(payloads, keys)  # type: ignore[arg-type]
        assert fragment in str(exc.value) and "\n" not in str(exc.value)
        assert writer.last_sequence == 0
    assert _payloads(client) == []
    assert stored_files(client) == set()


def test_a_writer_past_the_last_sequence_is_refused_and_keeps_its_events(client: tk.Client) -> None:
    client.create_stream("s/last")
    last = 2**63 - 1  # the largest sequence the store keeps
    writer = client.stream("s/last").writer("w1")
    assert writer.write_batch([(b"at-the-end", None)], sequence=last)
    files_before = stored_files(client)
    writer.write(b"one-too-many")
    with pytest.raises(InvalidInput, match="has used every batch sequence"):
        writer.flush()
    assert [e.payload for e in client.stream("s/last").read()] == [b"at-the-end"]
    assert stored_files(client) == files_before  # no chunk file written for the refused batch
    assert [payload for payload, _ in writer.unflushed()] == [b"one-too-many"]
