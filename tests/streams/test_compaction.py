"""Compaction (streams/compaction_store.py): adjacent small chunks merged into larger files with every
event, offset, cut, writer, commit time, transaction landing and watermark as before; replaced files
kept for the sweep's grace period; retries of commits whose files were compacted still recognised."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.procs import run_worker, start_worker, worker_env
from helpers.storage import chunk_rows, referenced_paths, stored_files
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.names import chunk_file_name
from tidekeep.service.server import ServeOptions, build_service
from tidekeep.store import schema as t
from tidekeep.store.chunks import build_chunk_table
from tidekeep.streams.controller import PendingChunk
from tidekeep.streams.cuts import StreamCut
from tidekeep.streams.of_workspace import stream_controller

STREAM = "s/small"


def small_flushes(client: tk.Client, writer_id: str, count: int, keys: int = 5, start: int = 0) -> None:
    """`count` events, one flush (one chunk per commit) each."""
    with client.stream(STREAM).writer(writer_id) as writer:
        for i in range(start, start + count):
            writer.write(f"{writer_id}:{i}".encode() * (1 + i % 3), f"k{i % keys}")
            writer.flush()


def everything(handle: tk.Stream, start: object = None, end: object = None) -> list[tk.Event]:
    return list(handle.read(start, end))  # type: ignore[arg-type]


def origins(client: tk.Client) -> list[str]:
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(t.chunk_origins.c.path).order_by(t.chunk_origins.c.path)).scalars())


def test_compaction_keeps_every_event_offset_cut_and_landing(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    handle = client.stream(STREAM)
    small_flushes(client, "w1", 40)
    middle = handle.tail_cut()
    txn = handle.transactional_writer("tx").begin()
    for i in range(12):
        txn.write(f"txn:{i}".encode(), f"k{i % 4}")
    txn.commit()
    small_flushes(client, "w2", 40)
    before, head, tail = everything(handle), handle.head_cut(), handle.tail_cut()
    first_half, second_half = everything(handle, end=middle), everything(handle, start=middle)
    arrow_before = [b for b in handle.read_batches()]
    chunks_before = len(chunk_rows(client, STREAM))

    result = handle.compact("1MiB")

    assert result.chunks_before == chunks_before
    assert result.chunks_after == len(chunk_rows(client, STREAM)) == 3  # one chunk per segment
    assert result.groups_merged == 3 and result.groups_skipped == 0
    assert everything(handle) == before  # payload, key, segment, offset, commit time, writer
    assert everything(handle, end=middle) == first_half
    assert everything(handle, start=middle) == second_half
    assert str(handle.head_cut()) == str(head) and str(handle.tail_cut()) == str(tail)
    assert handle.size_between(head, tail) == sum(8 + len(e.payload) for e in before)
    import pyarrow as pa

    assert pa.Table.from_batches(list(handle.read_batches())).equals(pa.Table.from_batches(arrow_before))
    assert {e.writer_id for e in before} >= {"w1", "w2"}  # each event kept its own writer

    described = handle.describe()["chunks"]
    assert described["count"] == 3 and described["compacted"] == 3
    assert sum(s["bytes"] for s in described["segments"].values()) == handle.size_between(head, tail)
    assert client.audit(STREAM) == []  # nothing was deleted

    # compacting again changes nothing, and the stream keeps taking writes after compaction
    assert handle.compact("1MiB").groups_merged == 0
    small_flushes(client, "w1", 5, start=40)
    assert everything(handle, end=tail) == before
    assert len(everything(handle)) == len(before) + 5


def test_watermarks_and_reader_group_positions_mean_the_same_after_compaction(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    handle = client.stream(STREAM)
    writer = handle.writer("w")
    for i in range(30):
        writer.write(f"e{i}".encode(), f"k{i % 3}")
        writer.flush()
        if i == 14:
            writer.note_time(1_000)
            mark = handle.watermarks.compute()
    writer.note_time(2_000)
    assert mark is not None and handle.watermarks.compute() is not None
    up_to_mark = everything(handle, end=StreamCut(STREAM, mark.cut))
    assert len(up_to_mark) == 15
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    with group.reader("r") as reader:
        read = [reader.read_next_event(100) for _ in range(10)]
    assert all(r.is_event for r in read)

    handle.compact("1MiB")

    assert everything(handle, end=StreamCut(STREAM, mark.cut)) == up_to_mark  # the mark's cut holds the same events
    assert handle.watermarks.list()[0].cut == mark.cut
    writer.close()
    with group.reader("r") as reader:  # goes on from the stored positions, inside compacted chunks
        rest = []
        while (event := reader.read_next_event(100)).is_event or event.is_checkpoint:
            if event.is_event:
                rest.append(event.payload)
    assert Counter([r.payload for r in read] + rest) == Counter(e.payload for e in everything(handle))


def test_a_retry_of_a_commit_whose_files_were_compacted_is_recognised(client: tk.Client) -> None:
    """A commit lands but its answer is lost; compaction merges its chunk before the writer retries.
    The retry (same sequence, same files) must find that it landed — not take it for another
    writer's batch (which fences the writer), nor, once fenced by a newer epoch, report its events
    as not written."""
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    controller = stream_controller(client.workspace)
    state, epoch, _ = controller.open_writer(STREAM, "w")
    table, length = build_chunk_table([b"in doubt"], ["k"])
    path = f"{state.storage_dir()}/0.0/{chunk_file_name('w', 1)}"
    client.workspace.storage.write_chunk(path, table)
    chunk = PendingChunk(0, path, length, 1)
    small_flushes(client, "w0", 2)
    assert not controller.commit_batch(STREAM, state.info.uid, "w", 1, [chunk], epoch=epoch).duplicate
    small_flushes(client, "w0", 2, start=2)  # neighbours on both sides
    assert client.stream(STREAM).compact("1MiB").chunks_after == 1
    assert path not in referenced_paths(client)

    retried = controller.commit_batch(STREAM, state.info.uid, "w", 1, [chunk], epoch=epoch)
    assert retried.duplicate and retried.landed_before
    controller.open_writer(STREAM, "w")  # a newer epoch: the old writer is fenced, but its batch landed
    fenced_retry = controller.commit_batch(STREAM, state.info.uid, "w", 1, [chunk], epoch=epoch)
    assert fenced_retry.duplicate and fenced_retry.landed_before
    assert [e.payload for e in everything(client.stream(STREAM))].count(b"in doubt") == 1


def test_replaced_files_stay_for_the_grace_period(tmp_path: Path, metadata_url: str) -> None:
    clock = tk.ManualClock(int(time.time() * 1000))  # file times are real: the clock starts at them
    with tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        small_flushes(client, "w", 20)
        handle = client.stream(STREAM)
        expected = everything(handle)
        replaced = referenced_paths(client)
        reading = handle.read()  # planned now, before the swap
        first = next(reading)

        handle.compact("1MiB")
        assert set(origins(client)) == replaced
        assert client.sweep(grace="1h").files_deleted == 0  # replaced a moment ago: kept
        assert [first, *reading] == expected  # the read planned before the swap finishes

        clock.advance(2 * 3_600_000)  # past the grace of the replacement and of the files' own times
        swept = client.sweep(grace="1h")
        assert swept.files_deleted == len(replaced)
        assert stored_files(client) == referenced_paths(client)
        assert everything(handle) == expected
        assert set(origins(client)) == replaced  # still known as landed commits


def test_truncation_in_and_past_a_compacted_chunk(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    handle = client.stream(STREAM)
    small_flushes(client, "w", 10)
    middle = handle.tail_cut()
    small_flushes(client, "w", 10, start=10)
    expected = everything(handle)
    handle.compact("1MiB")
    assert len(chunk_rows(client, STREAM)) == 1

    result = handle.truncate(middle)  # inside the one compacted chunk
    assert result.bytes_freed == sum(8 + len(e.payload) for e in expected[:10])
    assert everything(handle) == expected[10:]
    assert len(chunk_rows(client, STREAM)) == 1  # the chunk holds readable data still
    assert len(origins(client)) == 10  # the replaced files of the data below the head are forgotten

    small_flushes(client, "w", 3, start=20)
    handle.truncate(handle.tail_cut())
    assert chunk_rows(client, STREAM) == [] and origins(client) == []
    client.sweep(grace=0)
    assert stored_files(client) == referenced_paths(client) == set()


def test_deleting_a_compacted_stream_forgets_its_replaced_files(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    small_flushes(client, "w", 6)
    client.stream(STREAM).compact("1MiB")
    assert origins(client)
    client.stream(STREAM).delete(force=True)
    assert origins(client) == []
    client.sweep(grace=0)
    assert stored_files(client) == set()


def test_bad_target_size_is_refused_with_nothing_changed(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    small_flushes(client, "w", 4)
    rows = chunk_rows(client, STREAM)
    for bad in (0, "0B", "lots", -1, "2GiB", 1024**3 + 1):
        with pytest.raises(tk.InvalidInput):
            client.stream(STREAM).compact(bad)
    assert chunk_rows(client, STREAM) == rows
    with pytest.raises(tk.NotFound):
        client.stream("s/missing").compact()


def test_the_target_size_setting_is_bounded(tmp_path: Path) -> None:
    """A merge holds its group in memory: a target above 1 GiB is refused when the settings load."""
    with pytest.raises(tk.ConfigError, match=r"chunks\.target_size.*at most 1GiB"):
        tk.connect(home=tmp_path / "ws", create=True, settings={"chunks.target_size": "2GiB"})
    with tk.connect(home=tmp_path / "ws", create=True, settings={"chunks.target_size": "1GiB"}) as client:
        assert client.settings["chunks.target_size"] == 1024**3


def test_a_committed_file_that_is_gone_is_reported_not_skipped(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    small_flushes(client, "w", 4)
    rows = chunk_rows(client, STREAM)
    client.workspace.storage.delete([rows[1].path])
    with pytest.raises(tk.ChunkMissing, match=rows[1].path):
        client.stream(STREAM).compact("1MiB")
    assert chunk_rows(client, STREAM) == rows
    assert stored_files(client) == referenced_paths(client) - {rows[1].path}  # its merged file was not written


@pytest.mark.parametrize("interval", ["10m", "0"])
def test_the_service_compacts_every_stream_on_its_interval(tmp_path: Path, interval: str) -> None:
    with tk.connect(home=tmp_path / "ws", storage=str(tmp_path / "data"), create=True,
                    settings={"writer.linger": 0, "chunks.compaction_interval": interval,
                              "chunks.target_size": "64KiB"}) as client:
        for name in (STREAM, "s/other"):
            client.create_stream(name, tk.StreamConfig(segments=1))
            with client.stream(name).writer("w") as writer:
                for i in range(5):
                    writer.write(b"x" * i, "k")
                    writer.flush()
        service = build_service(client.workspace, ServeOptions(frequency_ms=3_600_000, lease_ttl_ms=30_000,
                                                               sweep_every_ms=3_600_000, watermark_every_ms=None),
                                owner="A")
        service.run_pass()
        counts = [len(chunk_rows(client, name)) for name in (STREAM, "s/other")]
        assert counts == ([1, 1] if interval != "0" else [5, 5])


# ---- real processes: a truncation between plan and swap, and crashes at each fault point ---------------
@pytest.fixture
def env_for(metadata_url: str, tmp_path: Path, client: tk.Client):  # type: ignore[no-untyped-def]
    def make(fault: str | None = None, **extra: str) -> dict[str, str]:
        env = worker_env(metadata_url, client.workspace.storage.location(), tmp_path / "ws", fault=fault)
        env.update(extra)
        return env

    return make


def test_a_truncation_between_plan_and_swap_skips_the_group(client: tk.Client, env_for, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    small_flushes(client, "w", 8)
    gate = tmp_path / "gate"
    gate.touch()
    report = tmp_path / "report.json"
    worker = start_worker(["compact", "--stream", STREAM, "--report", str(report)],
                          env_for(TIDEKEEP_PAUSE=f"compaction.before_swap=@{gate}"), tmp_path / "compact.log")
    try:
        deadline = time.monotonic() + 120
        while not Path(f"{gate}.reached").exists():
            assert worker.poll() is None, (tmp_path / "compact.log").read_text()
            assert time.monotonic() < deadline, "the compaction never reached its swap"
            time.sleep(0.01)
        client.stream(STREAM).truncate(client.stream(STREAM).tail_cut())  # takes the planned chunks away
        gate.unlink()
        assert worker.wait(timeout=120) == 0, (tmp_path / "compact.log").read_text()
    finally:
        if worker.poll() is None:
            worker.kill()
    import json

    (result,) = json.loads(report.read_text())
    assert result["groups_skipped"] == 1 and result["groups_merged"] == 0
    assert everything(client.stream(STREAM)) == []
    assert stored_files(client) == referenced_paths(client) == set()  # its merged file was discarded


@pytest.mark.parametrize("fault", ["compaction.after_write", "compaction.after_commit"])
def test_a_crash_at_each_fault_point_loses_nothing_and_leaves_only_what_the_sweep_removes(
        client: tk.Client, env_for, fault: str) -> None:  # type: ignore[no-untyped-def]
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    small_flushes(client, "w", 16)
    handle = client.stream(STREAM)
    expected, rows = everything(handle), chunk_rows(client, STREAM)

    done = run_worker(["compact", "--stream", STREAM], env_for(fault))
    assert done.returncode == FAULT_EXIT_CODE, done.stdout + done.stderr

    assert everything(handle) == expected
    if fault == "compaction.after_write":
        assert chunk_rows(client, STREAM) == rows  # nothing swapped
        assert len(stored_files(client) - referenced_paths(client)) == 1  # the merged file, unreferenced
    else:
        first_segment = sum(1 for r in rows if r.segment_id == rows[0].segment_id)
        assert first_segment > 1
        # the first segment's group was swapped, the other segment's not yet
        assert len(chunk_rows(client, STREAM)) == len(rows) - first_segment + 1
    # the next run finishes the work; the sweep removes exactly what is unreferenced
    handle.compact("1MiB")
    assert len(chunk_rows(client, STREAM)) == 2
    client.sweep(grace=0)
    assert stored_files(client) == referenced_paths(client)
    assert everything(handle) == expected
