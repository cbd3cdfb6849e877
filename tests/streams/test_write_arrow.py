"""Writer.write_arrow: events handed over as Arrow arrays, committed like write_many."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pytest

import tidekeep as tk
from helpers.storage import chunk_rows, referenced_paths, stored_files
from tidekeep.config import MAX_EVENT_SIZE

STREAM = "s/arrow"


@pytest.fixture
def client(storage_client: tk.Client) -> tk.Client:
    """On local storage and on S3, as the other writer tests."""
    return storage_client


def _by_key(events: list[tuple[bytes, str | None]]) -> dict[str | None, list[bytes]]:
    grouped: dict[str | None, list[bytes]] = defaultdict(list)
    for payload, key in events:
        grouped[key].append(payload)
    return grouped


def _read(client: tk.Client) -> list[tk.Event]:
    return list(client.stream(STREAM).read())


def test_write_arrow_lands_what_write_many_would(client: tk.Client) -> None:
    """Chunked, large_binary and dictionary-encoded input: every event once, each key in write
    order and in the segment write() routes it to, keyless events spread, earlier events first."""
    client.create_stream(STREAM, tk.StreamConfig(segments=4))
    first = [(b"early-0", "k1"), (b"early-1", "k2")]
    bulk = [(f"bulk-{i}".encode(), None if i % 10 == 0 else f"k{i % 7}") for i in range(3000)]
    payloads = pa.chunked_array([pa.array([p for p, _ in bulk[:1000]], pa.large_binary()),
                                 pa.array([p for p, _ in bulk[1000:]], pa.large_binary())])
    keys = pa.array([k for _, k in bulk], pa.string()).dictionary_encode()
    with client.stream(STREAM).writer("w1", batch_size="8KiB") as writer:
        for payload, key in first:
            writer.write(payload, key)
        assert writer.write_arrow(payloads, keys) == len(bulk)
        assert writer.last_sequence > 5  # committed in several batches of about batch_size
    events = _read(client)
    written = first + bulk
    assert sorted(e.payload for e in events) == sorted(p for p, _ in written)  # each exactly once
    got, expected = _by_key([(e.payload, e.routing_key) for e in events]), _by_key(written)
    assert {k: v for k, v in got.items() if k is not None} == {k: v for k, v in expected.items() if k is not None}
    assert sorted(got[None]) == sorted(expected[None])
    assert len({e.segment for e in events if e.routing_key is None}) > 1
    with client.stream(STREAM).writer("probe") as probe:
        assert all(probe._segment_for(e.routing_key) == e.segment for e in events if e.routing_key is not None)


def test_write_arrow_without_keys_and_with_null_keys(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.write_arrow(pa.array([b"a", b"b"])) == 2
        assert writer.write_arrow(pa.array([b"c", b"d"]), pa.array([None, "k"])) == 2
        assert writer.write_arrow(pa.array([], pa.binary())) == 0
    assert sorted((e.payload, e.routing_key) for e in _read(client)) == [
        (b"a", None), (b"b", None), (b"c", None), (b"d", "k")]


def test_write_arrow_retried_commits_land_exactly_once(client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit's acknowledgement is lost: each batch is retried with its sequence and files and
    recognised as landed, so nothing is written twice and no file is left over."""
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    payloads = [f"e{i}".encode() * 20 for i in range(400)]
    keys = [f"k{i % 13}" for i in range(400)]
    monkeypatch.setenv("TIDEKEEP_FAULT_RAISE", "commit.lost_ack")
    with client.stream(STREAM).writer("w1", batch_size="4KiB") as writer:
        assert writer.write_arrow(pa.array(payloads), pa.array(keys)) == 400
        last = writer.last_sequence
    monkeypatch.delenv("TIDEKEEP_FAULT_RAISE")
    events = _read(client)
    assert sorted(e.payload for e in events) == sorted(payloads)
    assert _by_key([(e.payload, e.routing_key) for e in events]) == _by_key(list(zip(payloads, keys, strict=True)))
    assert last > 5 and {r.sequence for r in chunk_rows(client, STREAM)} == set(range(1, last + 1))
    assert stored_files(client) == referenced_paths(client)


@pytest.mark.parametrize(("payloads", "keys", "error", "fragment"), [
    (pa.array(["a", "b"]), None, tk.InvalidInput, "payloads must be a binary Arrow array, got string"),
    (pa.array([1, 2]), None, tk.InvalidInput, "payloads must be a binary Arrow array, got int64"),
    (pa.array([b"a", None]), None, tk.InvalidInput, "payloads hold 1 nulls: every event needs a payload"),
    ([b"a", b"b"], None, tk.InvalidInput, "payloads must be a pyarrow Array or ChunkedArray, got list"),
    (pa.array([b"a", b"b"]), ["k", "k"], tk.InvalidInput, "routing_keys must be a pyarrow Array or ChunkedArray"),
    (pa.array([b"a", b"b"]), pa.array(["k"]), tk.InvalidInput, "got 2 payloads but 1 routing keys"),
    (pa.array([b"a", b"b"]), pa.array([1, 2]), tk.InvalidInput, "routing_keys must be a string Arrow array"),
    (pa.array([b"a", b"x" * (MAX_EVENT_SIZE + 1)]), None, tk.EventTooLarge, f"event of {MAX_EVENT_SIZE + 1} bytes"),
])
def test_write_arrow_refuses_bad_input_and_writes_nothing(client: tk.Client, payloads: object, keys: object,
                                                          error: type[Exception], fragment: str) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1") as writer:
        writer.write(b"pending", "k")
        with pytest.raises(error) as exc:
            writer.write_arrow(payloads, keys)  # type: ignore[arg-type]
        assert fragment in str(exc.value) and "\n" not in str(exc.value)
        assert writer.last_sequence == 0  # the pending event was not flushed either
        assert writer.unflushed() == [(b"pending", "k")]
    assert [e.payload for e in _read(client)] == [b"pending"]
    assert stored_files(client) == referenced_paths(client)
