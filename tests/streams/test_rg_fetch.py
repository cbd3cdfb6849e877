"""Reader-group fetches (streams/rg_fetch.py): one scan of several chunk files read ahead, checked
against the metadata; the same events as reading the chunks one by one, the same errors, and a
fetch read ahead of a truncation never reported as a lost file."""

from __future__ import annotations

import time
from concurrent.futures import Future, wait
from pathlib import Path

import pyarrow as pa
import pytest

import tidekeep as tk
from helpers.storage import chunk_rows
from tidekeep.store.chunks import build_chunk_table
from tidekeep.store.fileio import FileIO
from tidekeep.streams.controller import ReadTask
from tidekeep.streams.model import EVENT_HEADER_BYTES
from tidekeep.streams.of_workspace import stream_controller
from tidekeep.streams.reader import read_task
from tidekeep.streams.readergroup import FILL_BYTES
from tidekeep.streams.rg_fetch import Fetch, MissingRead, fetched_events, start_fetch

STREAM = "s/fetch"


def _write_uneven_chunks(client: tk.Client) -> list[ReadTask]:
    """One segment of chunks of 1 to 9 events of varying sizes, some of them merged by compaction
    (a compacted file has two more columns); the read plan's tasks, in offset order."""
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    with client.stream(STREAM).writer("w") as writer:
        for batch in range(14):
            if batch == 7:  # the chunks so far are merged: compacted and written chunks side by side
                client.stream(STREAM).compact(target_size="1MiB")
            writer.write_many([f"b{batch}-e{i}".encode() * (1 + (batch + i) % 4) for i in range(1 + batch % 9)],
                              [None if i % 5 == 4 else f"k{i % 3}" for i in range(1 + batch % 9)])
    tasks = stream_controller(client.workspace).plan_read(STREAM).tasks
    assert any(task.chunk.compacted for task in tasks) and not all(task.chunk.compacted for task in tasks)
    return tasks


def _one_by_one(storage: FileIO, stream: str, tasks: list[ReadTask]) -> list[tuple[bytes, str | None, int, int]]:
    rows = []
    for task in tasks:
        batch = read_task(storage, stream, task)
        for payload, key, offset in zip(batch.column("payload").to_pylist(), batch.column("routing_key").to_pylist(),
                                        batch.column("offset").to_pylist(), strict=True):
            rows.append((payload, key, offset, offset + EVENT_HEADER_BYTES + len(payload)))
    return rows


def _fetched(storage: FileIO, tasks: list[ReadTask], started: bool = True) -> list[tuple[bytes, str | None, int, int]]:
    """The fetch's events: read on the pool (`started`, waited for here), or read in this thread
    because the pool had not started it (a future nobody runs)."""
    fetch = start_fetch(storage, tasks)
    if started:
        wait([fetch.scan])
    else:
        fetch.cancel()
        fetch = Fetch(fetch.start, fetch.end, fetch.tasks, fetch.read, Future())
    events = fetched_events(storage, STREAM, fetch)
    return list(zip(events.payloads.to_pylist(), events.keys.to_pylist(), events.offsets.tolist(),
                    events.nexts.tolist(), strict=True))


def _event_starts(client: tk.Client, task: ReadTask) -> list[int]:
    batch = read_task(client.workspace.storage, STREAM, task)
    return batch.column("offset").to_pylist()


def test_a_fetch_reads_what_reading_its_chunks_one_by_one_reads(storage_client: tk.Client) -> None:
    client = storage_client
    """Every run of consecutive chunks, starting at the first event or inside the first chunk and
    ending at the last chunk's end or inside it: the same events, keys, offsets and next offsets."""
    tasks = _write_uneven_chunks(client)
    storage = client.workspace.storage
    compared = 0
    for first in range(len(tasks)):
        for last in range(first, len(tasks)):
            starts = _event_starts(client, tasks[first])
            ends = [*_event_starts(client, tasks[last])[1:], tasks[last].end]
            for start in {starts[0], starts[len(starts) // 2]}:
                for end in {ends[-1], ends[len(ends) // 2]}:
                    if first == last and end <= start:
                        continue
                    run = [ReadTask(t.chunk, t.start, t.end) for t in tasks[first:last + 1]]
                    run[0] = ReadTask(run[0].chunk, start, run[0].end)
                    run[-1] = ReadTask(run[-1].chunk, run[-1].start, end)
                    expected = _one_by_one(storage, STREAM, run)
                    assert _fetched(storage, run) == expected, (first, last, start, end)
                    assert _fetched(storage, run, started=False) == expected, (first, last, start, end)
                    assert expected and expected[0][2] == start and expected[-1][3] == end
                    compared += 1
    assert compared > 100


def test_a_missing_file_is_named_with_its_read(storage_client: tk.Client) -> None:
    client = storage_client
    tasks = _write_uneven_chunks(client)
    storage = client.workspace.storage
    gone = tasks[3]
    assert not storage.discard([gone.chunk.path]).failed
    for started in (True, False):
        with pytest.raises(MissingRead) as missing:
            _fetched(storage, tasks, started)
        assert missing.value.task == gone
        assert f"chunk file {gone.chunk.path} is missing" in str(missing.value.error)


def test_a_file_that_does_not_match_its_metadata_is_reported_corrupt(storage_client: tk.Client) -> None:
    client = storage_client
    """The scan reads it fine; the check against the metadata sends the fetch chunk by chunk, which
    names the file."""
    tasks = _write_uneven_chunks(client)
    storage = client.workspace.storage
    damaged = next(task for task in tasks if not task.chunk.compacted and task.chunk.event_count > 2)
    table, _ = build_chunk_table(pa.array([b"x"], pa.binary()), pa.array(["k"], pa.string()))
    storage.write_parquet(damaged.chunk.path, table)  # one event where the metadata says more
    for started in (True, False):
        with pytest.raises(tk.CorruptChunk, match=f"chunk file {damaged.chunk.path} is corrupt"):
            _fetched(storage, tasks, started)


def test_a_truncation_and_a_sweep_under_fetches_read_ahead(tmp_path: Path, metadata_url: str, storage_uri: str) -> None:
    """A reader that has fetched ahead (its segment holds four fills) while the stream is truncated
    past those fetches and the sweep deletes their files. What was read ahead before the truncation
    may still be handed out, in order, as a read that raced the truncation; then the reader is told
    (TruncatedData) and reads on from the head, exactly what is left. The clock stands still, so the
    reader learns of the truncation from its fetches, not from a sync."""
    clock = tk.ManualClock(int(time.time() * 1000) + 3_600_000)  # files written now are an hour old to it
    with tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri, clock=clock,
                    create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        payloads = [f"{i:07d}".encode() * 14 for i in range(4 * FILL_BYTES // 100)]  # 98-byte events, 4 fills
        with client.stream(STREAM).writer("w", batch_size="64KiB") as writer:
            writer.write_many(payloads, [f"k{i % 7}" for i in range(len(payloads))])
        group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
        reader = group.reader("r")
        first = reader.read_next_event(0)
        assert first.is_event and first.payload == payloads[0]
        rows = chunk_rows(client, STREAM)
        gone = rows[:len(rows) * 7 // 8]
        cut = client.stream(STREAM).state().cut({rows[0].segment_id: rows[len(gone)].base_offset})
        client.stream(STREAM).truncate(cut)
        client.sweep(grace=0)
        assert not any(client.workspace.storage.exists(r.path) for r in gone)
        read = [first.payload]
        with pytest.raises(tk.TruncatedData, match="has been truncated"):
            while True:
                event = reader.read_next_event(0)
                assert event.is_event
                read.append(event.payload)
        left = [e.payload for e in client.stream(STREAM).read()]
        assert read == payloads[:len(read)] and len(read) < len(payloads) - len(left)  # fetched before, in order
        rest = []
        while (event := reader.read_next_event(0)).is_event:
            rest.append(event.payload)
        assert rest == left and left == payloads[len(payloads) - len(left):]
        reader.close()
