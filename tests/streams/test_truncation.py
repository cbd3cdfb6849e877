"""Manual truncation: the head moves, chunks wholly below it are deleted while a straddling chunk is
kept, reads start exactly at the head, every truncation is audited, truncation works across a
scale, and the orphan sweep removes only old unreferenced files."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.storage import chunk_rows, referenced_paths, stored_files
from helpers.timeless_fs import timeless_local_filesystem
from tidekeep.store.chunks import ChunkStorage, build_chunk_table
from tidekeep.streams.controller import StreamController
from tidekeep.streams.model import segment_id
from tidekeep.streams.of_workspace import stream_controller

STREAM = "s/t"
S00, S01, S12, S13 = segment_id(0, 0), segment_id(0, 1), segment_id(1, 2), segment_id(1, 3)


@pytest.fixture
def clock() -> tk.ManualClock:
    # starts at the real time so that real file modification times and the clock agree
    return tk.ManualClock(time.time_ns() // 1_000_000)


def _open(tmp_path: Path, metadata_url: str, clock: tk.ManualClock, storage: str) -> tk.Client:
    return tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage, clock=clock,
                      settings={"writer.linger": 0}, create=True)


@pytest.fixture
def tclient(tmp_path: Path, metadata_url: str, clock: tk.ManualClock, storage_uri: str) -> Iterator[tk.Client]:
    """A client on local storage and on S3."""
    c = _open(tmp_path, metadata_url, clock, storage_uri)
    yield c
    c.close()


@pytest.fixture
def local_tclient(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    """A client on local storage, for the tests that set files' modification times by hand."""
    c = _open(tmp_path, metadata_url, clock, str(tmp_path / "data"))
    yield c
    c.close()


def _write(client: tk.Client, first: int, last: int, writer_id: str = "w1") -> None:
    with client.stream(STREAM).writer(writer_id, batch_size="300B") as writer:
        for i in range(first, last):
            writer.write(f"event-{i:04d}".encode(), routing_key=f"key-{i % 9}")


def _exists(client: tk.Client, rel: str) -> bool:
    return client.workspace.storage.exists(rel)


def _positions(events: list[tk.Event]) -> set[tuple[int, int, bytes]]:
    return {(e.segment, e.offset, e.payload) for e in events}


def test_head_moves_chunks_below_are_deleted_and_the_straddler_is_kept(tclient: tk.Client) -> None:
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 120)
    before = list(client.stream(STREAM).read())
    rows = {seg: [r for r in chunk_rows(client, STREAM) if r.segment_id == seg] for seg in (S00, S01)}
    assert len(rows[S00]) >= 3 and len(rows[S01]) >= 3
    # segment 0.0: an offset strictly inside its third chunk; segment 0.1: exactly a chunk boundary
    straddler = rows[S00][2]
    inside = sorted(e.offset for e in before if e.segment == S00
                    and straddler.base_offset < e.offset < straddler.base_offset + straddler.length)[0]
    boundary = rows[S01][1].base_offset
    cut = client.stream(STREAM).resolve_cut(f"{STREAM}:0.0={inside},0.1={boundary}")

    result = client.stream(STREAM).truncate(cut)

    assert client.stream(STREAM).head_cut() == cut
    assert result.new_head == cut and result.old_head == client.stream(STREAM).resolve_cut(f"{STREAM}:0.0=0,0.1=0")
    assert result.bytes_freed == inside + boundary
    assert result.chunks_deleted == 3  # two whole chunks of 0.0, one of 0.1
    for gone in (rows[S00][0], rows[S00][1], rows[S01][0]):
        assert not _exists(client, gone.path)
    assert _exists(client, straddler.path)
    assert _exists(client, rows[S01][1].path)
    assert referenced_paths(client) == stored_files(client)

    after = list(client.stream(STREAM).read())
    expected = [e for e in before if e.offset >= (inside if e.segment == S00 else boundary)]
    assert _positions(after) == _positions(expected)
    assert min(e.offset for e in after if e.segment == S00) == inside
    assert min(e.offset for e in after if e.segment == S01) == boundary
    described = client.stream(STREAM).describe()
    assert described["truncated_bytes"] == result.bytes_freed
    assert described["size_bytes"] == described["written_bytes"] - result.bytes_freed


def test_reading_before_the_head_raises_truncated_data(tclient: tk.Client) -> None:
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 60)
    old_head = client.stream(STREAM).head_cut()
    middle = [e for e in client.stream(STREAM).read() if e.segment == S01][5].offset
    client.stream(STREAM).truncate(f"{STREAM}:0.0=0,0.1={middle}")
    with pytest.raises(tk.TruncatedData, match=rf"cannot read {STREAM} from .*has been truncated"):
        list(client.stream(STREAM).read(start=old_head))
    from_head = list(client.stream(STREAM).read(start=client.stream(STREAM).head_cut()))
    assert len(from_head) == len(list(client.stream(STREAM).read()))


def test_truncating_at_the_current_head_is_a_noop(tclient: tk.Client) -> None:
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 60)
    initial = client.stream(STREAM).head_cut()
    files = stored_files(client)
    result = client.stream(STREAM).truncate(initial)
    assert (result.bytes_freed, result.chunks_deleted) == (0, 0)
    assert result.new_head == result.old_head == initial
    assert stored_files(client) == files
    assert client.audit(STREAM) == []

    offset = [e for e in client.stream(STREAM).read() if e.segment == S00][3].offset
    moved = client.stream(STREAM).truncate(f"{STREAM}:0.0={offset},0.1=0")
    assert moved.bytes_freed == offset
    again = client.stream(STREAM).truncate(moved.new_head)
    assert again.bytes_freed == 0 and again.new_head == moved.new_head
    assert len(client.audit(STREAM)) == 1
    # and a cut behind the head is refused without changing anything
    with pytest.raises(tk.InvalidStreamCut, match="behind the head"):
        client.stream(STREAM).truncate(initial)
    assert client.stream(STREAM).head_cut() == moved.new_head
    assert len(client.audit(STREAM)) == 1


def test_every_truncation_is_audited(tclient: tk.Client, clock: tk.ManualClock) -> None:
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 60)
    events = list(client.stream(STREAM).read())
    first = next(e.offset for e in events if e.segment == S00 and e.offset > 0)
    second = next(e.offset for e in events if e.segment == S01 and e.offset > 0)
    clock.advance(5_000)
    r1 = client.stream(STREAM).truncate(f"{STREAM}:0.0={first},0.1=0", reason="make room")
    clock.advance(7_000)
    r2 = client.stream(STREAM).truncate(f"{STREAM}:0.0={first},0.1={second}")
    newest, oldest = client.audit(STREAM)
    assert oldest["action"] == newest["action"] == "truncate"
    assert oldest["target"] == newest["target"] == STREAM
    assert json.loads(oldest["old_head"]) == {str(S00): 0, str(S01): 0}
    assert json.loads(oldest["new_head"]) == {str(S00): first, str(S01): 0}
    assert json.loads(newest["old_head"]) == json.loads(oldest["new_head"])
    assert json.loads(newest["new_head"]) == {str(S00): first, str(S01): second}
    assert (oldest["bytes_freed"], newest["bytes_freed"]) == (r1.bytes_freed, r2.bytes_freed) == (first, second)
    assert (oldest["reason"], newest["reason"]) == ("make room", "manual truncation")
    assert oldest["actor"] == stream_controller(client.workspace).actor and ":" in oldest["actor"]
    assert newest["time_ms"] - oldest["time_ms"] == 7_000
    assert newest["time_ms"] == clock.now_ms()
    assert client.audit() == [newest, oldest]  # the whole trail, newest first
    assert client.audit("s/other") == []


@pytest.mark.parametrize("reason", ["retention no-max: trust me", "retention above-max: ", "retention x-y: z"])
def test_a_manual_reason_may_not_begin_like_a_retention_cycles(sqlite_client: tk.Client, reason: str) -> None:
    sqlite_client.create_stream(STREAM)
    with sqlite_client.stream(STREAM).writer("w") as writer:
        writer.write(b"event")
    tail = sqlite_client.stream(STREAM).tail_cut()
    with pytest.raises(tk.InvalidInput, match=r"^invalid reason .*: a reason beginning 'retention RULE: ' is kept"):
        sqlite_client.stream(STREAM).truncate(tail, reason=reason)
    assert sqlite_client.audit(STREAM) == [] and sqlite_client.stream(STREAM).head_cut() != tail  # nothing done
    sqlite_client.stream(STREAM).truncate(tail, reason="retention, by hand: ticket 7")  # not the cycles' form
    assert sqlite_client.audit(STREAM)[0]["reason"] == "retention, by hand: ticket 7"


def test_truncation_across_a_scale_frees_whole_predecessors(tclient: tk.Client) -> None:
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 90)
    client.stream(STREAM).split("0.0", 2)
    _write(client, 90, 240)
    before = list(client.stream(STREAM).read())
    predecessor = client.stream(STREAM).state().segments[S00]
    predecessor_files = [r.path for r in chunk_rows(client, STREAM) if r.segment_id == S00]
    assert predecessor.sealed and predecessor_files
    in_12 = sorted(e.offset for e in before if e.segment == S12)[4]
    in_01 = sorted(e.offset for e in before if e.segment == S01)[7]
    cut = client.stream(STREAM).resolve_cut(f"{STREAM}:1.2={in_12},1.3=0,0.1={in_01}")

    result = client.stream(STREAM).truncate(cut)

    assert result.bytes_freed == predecessor.tail + in_12 + in_01
    assert client.stream(STREAM).head_cut() == cut
    assert S00 not in client.stream(STREAM).head_cut().positions
    assert not any(_exists(client, path) for path in predecessor_files)
    assert not [r for r in chunk_rows(client, STREAM) if r.segment_id == S00]
    assert referenced_paths(client) == stored_files(client)
    offsets = {S00: predecessor.tail, S12: in_12, S13: 0, S01: in_01}
    expected = [e for e in before if e.offset >= offsets[e.segment]]
    assert _positions(client.stream(STREAM).read()) == _positions(expected)
    with pytest.raises(tk.TruncatedData):
        list(client.stream(STREAM).read(start=f"{STREAM}:0.0={predecessor.tail},0.1=0"))


def test_sweep_deletes_only_old_unreferenced_files(local_tclient: tk.Client, clock: tk.ManualClock) -> None:
    client = local_tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 40)
    referenced = referenced_paths(client)
    directory = client.stream(STREAM).state().storage_dir()
    table, _ = build_chunk_table([b"orphan"], ["k"])
    client.workspace.storage.write_chunk(f"{directory}/0.0/crashed-1-aaaa.parquet", table)
    client.workspace.storage.write_chunk(f"{directory}/0.1/crashed-2-bbbb.parquet", table)
    assert stored_files(client) == referenced | {f"{directory}/0.0/crashed-1-aaaa.parquet",
                                                 f"{directory}/0.1/crashed-2-bbbb.parquet"}

    young = client.sweep(grace="1h")  # every file is younger than an hour
    assert young.files_deleted == 0
    assert young.files_seen == len(referenced) + 2

    # one orphan from two hours ago, one just written: only the old one goes
    two_hours_ago = (clock.now_ms() - 2 * 3_600_000) / 1000
    os.utime(client.workspace.storage.full_path(f"{directory}/0.0/crashed-1-aaaa.parquet"),
             (two_hours_ago, two_hours_ago))
    for path in referenced:  # old referenced files stay, however old
        os.utime(client.workspace.storage.full_path(path), (two_hours_ago, two_hours_ago))
    assert client.sweep(grace="1h").files_deleted == 1
    assert stored_files(client) == referenced | {f"{directory}/0.1/crashed-2-bbbb.parquet"}

    clock.advance(30 * 60_000)
    assert client.sweep(grace="1h").files_deleted == 0
    clock.advance(31 * 60_000)  # now the second orphan is older than the grace period too
    assert client.sweep(grace="1h").files_deleted == 1
    assert stored_files(client) == referenced
    assert sorted(e.payload for e in client.stream(STREAM).read()) == sorted(
        f"event-{i:04d}".encode() for i in range(40))
    assert client.sweep(grace=0).files_deleted == 0


def test_the_sweep_ages_a_file_by_its_modification_time_in_storage(tclient: tk.Client,
                                                                  clock: tk.ManualClock) -> None:
    """On local storage the file's mtime, on S3 the object's last-modified time: an orphan goes
    exactly when it is older than the grace period by the workspace clock, a referenced file never."""
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 10)
    referenced = referenced_paths(client)
    orphan = f"{client.stream(STREAM).state().storage_dir()}/0.0/crashed-1-aaaa.parquet"
    client.workspace.storage.write_chunk(orphan, build_chunk_table([b"orphan"], ["k"])[0])
    (stored,) = [f for f in client.workspace.storage.list_files("streams") if f.path == orphan]
    assert stored.mtime_ms is not None and stored.mtime_ms > 0
    grace_ms = 3_600_000
    clock.advance(stored.mtime_ms + grace_ms - 1 - clock.now_ms())
    assert client.sweep(grace=grace_ms).files_deleted == 0
    clock.advance(1)
    assert client.sweep(grace=grace_ms).files_deleted == 1
    assert stored_files(client) == referenced
    assert sorted(e.payload for e in client.stream(STREAM).read()) == sorted(
        f"event-{i:04d}".encode() for i in range(10))


def test_an_orphan_whose_store_gives_no_modification_time_is_never_swept(local_tclient: tk.Client,
                                                                          clock: tk.ManualClock) -> None:
    """A store that lists a file without a modification time says nothing about its age: it may be
    a writer's upload not yet committed. The sweep keeps it, however long the grace has passed,
    and counts it as kept for that reason; orphans with a time still go by the grace rule."""
    client = local_tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 10)
    referenced = referenced_paths(client)
    orphan = f"{client.stream(STREAM).state().storage_dir()}/0.0/uploading-1-aaaa.parquet"
    client.workspace.storage.write_chunk(orphan, build_chunk_table([b"orphan"], ["k"])[0])
    timeless = ChunkStorage(client.workspace.storage.root, fsync=False, filesystem=timeless_local_filesystem())
    timeless.workspace_id = client.workspace.storage.workspace_id
    assert {f.path: f.mtime_ms for f in timeless.list_files("streams")} == {
        p: None for p in referenced | {orphan}}
    sweeper = StreamController(client.workspace.db, timeless, clock)
    clock.advance(10 * 365 * 86_400_000)  # ten years on: any file with a time would be long past the grace

    swept = sweeper.sweep(grace_ms=3_600_000)
    assert (swept.files_seen, swept.files_deleted, swept.files_unknown_age) == (len(referenced) + 1, 0, 1)
    assert stored_files(client) == referenced | {orphan}
    assert [e for e in client.audit() if e["action"] == "sweep"] == []  # nothing deleted, nothing audited

    # the same orphan seen with its time, through the ordinary storage, goes
    assert client.sweep(grace="1h").files_deleted == 1
    assert stored_files(client) == referenced


def test_a_cut_from_a_deleted_stream_is_refused_by_the_recreated_stream(tclient: tk.Client) -> None:
    """A stream re-created under the same name, with the same segments and the same writes, has
    the same offsets: only the uid a cut carries tells its cuts from the deleted stream's."""
    client = tclient
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 60)
    old_uid = client.stream(STREAM).state().info.uid
    old_tail = client.stream(STREAM).tail_cut()
    forms = [old_tail, old_tail.to_json(), str(old_tail)]
    client.stream(STREAM).seal()
    client.stream(STREAM).delete()
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, 0, 60)
    new = client.stream(STREAM).state()
    assert new.info.uid != old_uid and client.stream(STREAM).tail_cut().positions == old_tail.positions
    message = (f"cut of an earlier incarnation of stream {STREAM} (uid {old_uid}), the stream now has uid "
               f"{new.info.uid}")
    for form in forms:
        for use in (lambda c: client.stream(STREAM).truncate(c),
                    lambda c: client.stream(STREAM).resolve_cut(c),
                    lambda c: list(client.stream(STREAM).read(start=c)),
                    lambda c: list(client.stream(STREAM).read(end=c)),
                    lambda c: client.stream(STREAM).size_between(c, client.stream(STREAM).tail_cut()),
                    lambda c: client.create_reader_group("g", tk.ReaderGroupConfig({STREAM: (c, None)})),
                    lambda c: client.stream(STREAM).watermarks.note("w", 1_000, position=c)):
            with pytest.raises(tk.InvalidStreamCut) as caught:
                use(form)
            assert str(caught.value) == message
    after = client.stream(STREAM).state()
    assert after.head == new.head and after.truncated_bytes == 0 and len(list(client.stream(STREAM).read())) == 60
    assert client.list_reader_groups() == [] and client.stream(STREAM).watermarks.writers() == []
    # without its uid the compact form is checked against the stream's segments only
    # (docs/streams.md): here they cannot tell the incarnations apart, so it is accepted
    assert client.stream(STREAM).resolve_cut(old_tail.display()) == client.stream(STREAM).tail_cut()
    assert client.stream(STREAM).truncate(client.stream(STREAM).tail_cut()).bytes_freed > 0
