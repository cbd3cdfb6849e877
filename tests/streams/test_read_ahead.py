"""Reads with chunks read ahead (streams/reader.py): plan order, the events' fields, and an error of
a chunk read ahead raised only where the caller reaches it."""

from __future__ import annotations

import os
from typing import Any

import pytest

import tidekeep as tk
from helpers.storage import chunk_rows
from tidekeep.streams.reader import READ_AHEAD

STREAM = "s/ahead"


def _write_chunks(client: tk.Client, writers: int, batches: int) -> None:
    """`writers` writers, each committing `batches` small batches over two segments."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    for w in range(writers):
        with client.stream(STREAM).writer(f"w{w}") as writer:
            for b in range(batches):
                writer.write_many([f"w{w}-b{b}-e{i}".encode() for i in range(30)], [f"k{i % 5}" for i in range(30)])


def _chunk_of(rows: list[Any], event: tk.Event) -> Any:
    return next(r for r in rows if r.segment_id == event.segment and r.base_offset <= event.offset
                < r.base_offset + r.length)


def test_events_match_the_batches_field_by_field_in_plan_order(client: tk.Client) -> None:
    _write_chunks(client, writers=3, batches=4)
    handle = client.stream(STREAM)
    rows = [row for batch in handle.read_batches() for row in batch.to_pylist()]
    events = list(handle.read())
    assert len(events) == len(rows) == 3 * 4 * 30
    assert [tuple(e) for e in events] == [
        (r["payload"], r["routing_key"], r["segment"], r["offset"], r["commit_time_ms"], r["writer_id"]) for r in rows]
    assert [type(e) for e in events[:1]] == [tk.Event] and events[0].segment == rows[0]["segment"]
    assert {e.writer_id for e in events} == {"w0", "w1", "w2"}
    for key in {e.routing_key for e in events}:  # each key in write order, writer after writer
        payloads = [e.payload.decode() for e in events if e.routing_key == key]
        assert payloads == sorted(payloads, key=lambda p: [int(part[1:]) for part in p.split("-")])


def test_a_read_stopped_early_leaves_nothing_behind(client: tk.Client) -> None:
    _write_chunks(client, writers=1, batches=6)
    reader = client.stream(STREAM).read()
    first = [next(reader) for _ in range(5)]
    reader.close()  # type: ignore[attr-defined]
    assert list(client.stream(STREAM).read())[:5] == first


def test_a_missing_chunk_read_ahead_fails_only_when_it_is_reached(client: tk.Client) -> None:
    _write_chunks(client, writers=1, batches=6)
    rows = chunk_rows(client, STREAM)
    gone = rows[READ_AHEAD]  # the chunk read ahead while the caller is still in the first one
    os.remove(client.workspace.storage.full_path(gone.path))
    seen = []
    with pytest.raises(tk.ChunkMissing, match=f"chunk file {gone.path} is missing"):
        for event in client.stream(STREAM).read():
            seen.append(event)
    assert len(seen) == sum(r.event_count for r in rows[:READ_AHEAD])  # every event of the chunks before it
    assert {_chunk_of(rows, e).path for e in seen} == {r.path for r in rows[:READ_AHEAD]}  # and none after
    with pytest.raises(tk.ChunkMissing):
        list(client.stream(STREAM).read_batches())
