"""Crash safety: real processes die (exit 77, like kill -9) at each named fault point. Afterwards
no data after the head is lost, reads return exactly the committed events, replays do not
duplicate, and what is left behind is only unreferenced files that a sweep removes."""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.procs import run_worker, worker_env
from helpers.storage import chunk_rows, referenced_paths, stored_files
from helpers.workers import batch_events
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.streams.model import segment_id

STREAM = "s/crash"
PER_BATCH = 30


@pytest.fixture
def client(storage_client: tk.Client) -> tk.Client:
    """Every crash test on local storage and on S3: the killed worker writes to the same root."""
    return storage_client


@pytest.fixture
def env_for(metadata_url: str, tmp_path: Path, client: tk.Client):  # type: ignore[no-untyped-def]
    def make(fault: str | None) -> dict[str, str]:
        return worker_env(metadata_url, client.workspace.storage.location(), tmp_path / "ws", fault=fault)

    return make


def _commit_batches(client: tk.Client, first: int, last: int) -> list[tuple[bytes, str | None]]:
    committed: list[tuple[bytes, str | None]] = []
    with client.stream(STREAM).writer("w1") as writer:
        for sequence in range(first, last + 1):
            events = batch_events("w1", sequence, PER_BATCH)
            assert writer.write_batch(events, sequence=sequence)
            committed.extend(events)
    return committed


def _assert_reads_exactly(client: tk.Client, committed: list[tuple[bytes, str | None]]) -> None:
    events = list(client.stream(STREAM).read())
    assert Counter((e.payload, e.routing_key) for e in events) == Counter(committed)
    per_key: dict[str | None, list[bytes]] = defaultdict(list)
    for event in events:
        per_key[event.routing_key].append(event.payload)
    expected: dict[str | None, list[bytes]] = defaultdict(list)
    for payload, key in committed:
        expected[key].append(payload)
    assert per_key == expected  # and each key in write order


def _crash(args: list[str], env: dict[str, str]) -> None:
    done = run_worker(args, env)
    assert done.returncode == FAULT_EXIT_CODE, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


def _sweep_leaves_exactly_the_referenced_files(client: tk.Client, leftovers: set[str]) -> None:
    assert client.sweep(grace=0).files_deleted == len(leftovers)
    assert stored_files(client) == referenced_paths(client)


def test_crash_before_commit_loses_nothing_and_the_replay_commits_once(client: tk.Client, env_for) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    committed = _commit_batches(client, 1, 3)
    _crash(["write-batches", "--stream", STREAM, "--writer", "w1", "--first-seq", "4",
            "--per-batch", str(PER_BATCH)], env_for("writer.before_commit"))

    _assert_reads_exactly(client, committed)  # batch 4 never committed
    leftovers = stored_files(client) - referenced_paths(client)
    assert leftovers and all("/w1-4-" in path for path in leftovers)
    assert referenced_paths(client) <= stored_files(client)

    replayed = batch_events("w1", 4, PER_BATCH)
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.last_sequence == 3
        client.stream(STREAM).split("0.1", 2)  # the replay is routed to a sealed segment first: it must re-route
        assert writer.write_batch(replayed, sequence=4) is True
        assert writer.write_batch(replayed, sequence=4) is False
    _assert_reads_exactly(client, committed + replayed)
    sealed = segment_id(0, 1)
    assert not [e for e in client.stream(STREAM).read() if e.segment == sealed and e.payload.startswith(b"w1:4:")]
    _sweep_leaves_exactly_the_referenced_files(client, leftovers)
    _assert_reads_exactly(client, committed + replayed)


def test_crash_after_commit_keeps_the_batch_and_the_replay_is_a_duplicate(client: tk.Client, env_for) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    committed = _commit_batches(client, 1, 2)
    _crash(["write-batches", "--stream", STREAM, "--writer", "w1", "--first-seq", "3",
            "--per-batch", str(PER_BATCH)], env_for("writer.after_commit"))

    batch3 = batch_events("w1", 3, PER_BATCH)
    _assert_reads_exactly(client, committed + batch3)  # committed before the crash: kept
    assert stored_files(client) == referenced_paths(client)

    client.stream(STREAM).merge(["0.0", "0.1"])
    # the restarted writer does not know whether batch 3 landed and replays it, in a new process
    replay = run_worker(["write-batches", "--stream", STREAM, "--writer", "w1", "--first-seq", "3",
                         "--batches", "2", "--per-batch", str(PER_BATCH)], env_for(None))
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.splitlines() == ["batch 3: duplicate", "batch 4: appended"]
    _assert_reads_exactly(client, committed + batch3 + batch_events("w1", 4, PER_BATCH))
    batch3_chunks = [r.segment_id for r in chunk_rows(client, STREAM) if r.sequence == 3]
    assert len(batch3_chunks) == len(set(batch3_chunks))  # one chunk per segment: batch 3 committed once
    _sweep_leaves_exactly_the_referenced_files(client, set())


def _cut_in_the_middle(client: tk.Client) -> str:
    events = list(client.stream(STREAM).read())
    positions = []
    for seg in sorted({e.segment for e in events}):
        offsets = sorted(e.offset for e in events if e.segment == seg)
        positions.append(f"{seg}={offsets[len(offsets) // 2]}")  # a segment prints as epoch.number
    return f"{STREAM}:{','.join(positions)}"


def test_crash_after_truncate_commit_leaves_only_unreferenced_files(client: tk.Client, env_for) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer("w1", batch_size="512B") as writer:
        for i in range(200):
            writer.write(f"event-{i:04d}".encode(), routing_key=f"k{i % 6}")
    before = list(client.stream(STREAM).read())
    cut = client.stream(STREAM).resolve_cut(_cut_in_the_middle(client))
    files_before = stored_files(client)

    _crash(["truncate", "--stream", STREAM, "--cut", str(cut)], env_for("truncate.after_commit"))

    assert client.stream(STREAM).head_cut() == cut  # the head moved: it was committed
    expected = [(e.payload, e.routing_key) for e in before if e.offset >= cut.positions[e.segment]]
    _assert_reads_exactly(client, expected)
    leftovers = stored_files(client) - referenced_paths(client)
    assert leftovers  # the doomed chunks' files were not deleted yet ...
    assert stored_files(client) == files_before  # ... nor anything else
    (entry,) = client.audit(STREAM)
    assert entry["action"] == "truncate" and entry["reason"] == "crash test"
    assert entry["bytes_freed"] == sum(cut.positions.values())
    _sweep_leaves_exactly_the_referenced_files(client, leftovers)
    _assert_reads_exactly(client, expected)


def test_crash_after_delete_commit_leaves_files_the_sweep_removes(client: tk.Client, env_for) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    old = _commit_batches(client, 1, 3)
    client.create_stream("s/bystander", tk.StreamConfig(segments=1))
    with client.stream("s/bystander").writer("w9") as writer:
        writer.write(b"keep me", routing_key="k")
    bystander_files = {p for p in referenced_paths(client) if "/bystander-" in p}
    client.stream(STREAM).seal()

    _crash(["delete", "--stream", STREAM], env_for("delete.after_commit"))

    with pytest.raises(tk.NotFound, match=f"stream '{STREAM}' does not exist"):
        client.stream(STREAM).state()
    assert [s.name for s in client.list_streams()] == ["s/bystander"]
    leftovers = stored_files(client) - referenced_paths(client)
    assert leftovers and not leftovers & bystander_files
    assert referenced_paths(client) == bystander_files
    assert client.audit(STREAM)[0]["action"] == "delete_stream"
    _sweep_leaves_exactly_the_referenced_files(client, leftovers)
    assert stored_files(client) == bystander_files
    assert [e.payload for e in client.stream("s/bystander").read()] == [b"keep me"]

    # a stream with the same name starts empty and never sees the old data
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    assert list(client.stream(STREAM).read()) == []
    assert set(client.stream(STREAM).tail_cut().positions.values()) == {0}
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.last_sequence == 0  # the old writer's sequence went with the old stream
        assert writer.write_batch(batch_events("w1", 1, PER_BATCH), sequence=1) is True
    new = batch_events("w1", 1, PER_BATCH)
    assert set(new) & set(old)  # the same payloads as the old stream's first batch ...
    _assert_reads_exactly(client, new)  # ... yet only the new stream's copy is read
