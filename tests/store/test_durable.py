"""The durable write (store/durable.py, through store/fileio.py): a file and every directory entry
leading to it are fsynced before the call returns; nothing is synced with fsync off or on an
object store. Real files; the recorder wraps os.fsync (helpers/durability.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.durability import DurabilityRecorder, assert_on_disk
from tidekeep.store.chunks import ChunkStorage, build_chunk_table
from tidekeep.store.durable import sync_directory_entries
from tidekeep.store.fileio import FileIO


def _table() -> pa.Table:
    return build_chunk_table([b"one", b"two", b"three"], ["a", None, "a"])[0]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> DurabilityRecorder:
    return DurabilityRecorder(monkeypatch)


def test_a_durable_write_syncs_the_file_then_each_new_directory_up_to_the_root(
        tmp_path: Path, recorder: DurabilityRecorder) -> None:
    os.makedirs(tmp_path / "data")
    storage = FileIO(str(tmp_path / "data"), fsync=True)
    root = storage.root
    full = f"{root}/streams/s/x-1/0.0/w-1.parquet"
    storage.write_parquet("streams/s/x-1/0.0/w-1.parquet", _table(), compression="zstd")
    assert pq.read_table(full).equals(_table())
    assert_on_disk(recorder.synced, full, full, root)
    # the file first, then its directory, then each parent holding the directory below it
    assert [s.path for s in recorder.synced] == [
        full, f"{root}/streams/s/x-1/0.0", f"{root}/streams/s/x-1", f"{root}/streams/s", f"{root}/streams", root]


def test_a_second_file_in_a_known_directory_costs_two_fsyncs(tmp_path: Path, recorder: DurabilityRecorder) -> None:
    storage = ChunkStorage(str(tmp_path / "data"), create=True)
    storage.write_chunk("streams/s/x-1/0.0/first.parquet", _table())
    before = len(recorder.synced)
    storage.write_chunk("streams/s/x-1/0.0/second.parquet", _table())
    second = storage.full_path("streams/s/x-1/0.0/second.parquet")
    assert [s.path for s in recorder.synced[before:]] == [second, storage.full_path("streams/s/x-1/0.0")]
    assert_on_disk(recorder.synced, second, second, storage.root)
    # a new segment directory beside it: only the way up to the first directory already made durable
    before = len(recorder.synced)
    storage.write_chunk("streams/s/x-1/0.1/third.parquet", _table())
    assert [s.path for s in recorder.synced[before:]] == [
        storage.full_path("streams/s/x-1/0.1/third.parquet"), storage.full_path("streams/s/x-1/0.1"),
        storage.full_path("streams/s/x-1")]


def test_a_directory_another_process_created_is_synced_into_its_parent(
        tmp_path: Path, recorder: DurabilityRecorder) -> None:
    # another process made the directories a moment ago: nothing says it has synced them yet
    storage = ChunkStorage(str(tmp_path / "data"), create=True)
    os.makedirs(storage.full_path("archives/web/_ingest-1"))
    storage.write_chunk("archives/web/_ingest-1/a.parquet", _table())
    full = storage.full_path("archives/web/_ingest-1/a.parquet")
    assert_on_disk(recorder.synced, full, full, storage.root)


def test_a_deleted_and_recreated_directory_is_synced_again(tmp_path: Path, recorder: DurabilityRecorder) -> None:
    storage = ChunkStorage(str(tmp_path / "data"), create=True)
    storage.write_chunk("streams/s/x-1/txn/t1/0.0-a.parquet", _table())
    storage.discard_dir("streams/s/x-1/txn/t1")  # its own staging directory, as an aborting writer does
    before = len(recorder.synced)
    storage.write_chunk("streams/s/x-1/txn/t1/0.0-b.parquet", _table())
    full = storage.full_path("streams/s/x-1/txn/t1/0.0-b.parquet")
    assert_on_disk(recorder.synced[before:], full, full, storage.full_path("streams/s/x-1/txn"))


def test_files_renamed_into_a_directory_are_synced_there(tmp_path: Path, recorder: DurabilityRecorder) -> None:
    os.makedirs(tmp_path / "data")
    storage = FileIO(str(tmp_path / "data"), fsync=True)
    root = storage.root
    staged = f"{root}/archives/web/_ingest-1/a.parquet"
    sink = storage.create("archives/web/_ingest-1/a.parquet")
    pq.write_table(_table(), sink)
    storage.finish_data(sink)
    assert [s.path for s in recorder.synced] == [staged]  # the data only: the name is about to change
    final = f"{root}/archives/web/a.parquet"
    storage.move("archives/web/_ingest-1/a.parquet", "archives/web/a.parquet")
    assert_on_disk(recorder.synced, staged, final, root)


def test_the_storage_root_is_created_durably(tmp_path: Path, recorder: DurabilityRecorder) -> None:
    root = tmp_path / "new" / "deeper" / "data"
    storage = ChunkStorage(str(root), create=True)
    assert root.is_dir()
    for created in (root, root.parent, root.parent.parent):
        assert any(s.path == str(created.parent) and s.names and created.name in s.names for s in recorder.synced)
    assert storage.durable


def test_with_fsync_off_nothing_is_synced_and_the_chunk_is_the_same(
        tmp_path: Path, recorder: DurabilityRecorder) -> None:
    durable = ChunkStorage(str(tmp_path / "on"), create=True, fsync=True)
    fast = ChunkStorage(str(tmp_path / "off"), create=True, fsync=False)
    before = len(recorder.synced)
    fast.write_chunk("streams/s/x-1/0.0/c.parquet", _table())
    assert recorder.synced[before:] == []
    durable.write_chunk("streams/s/x-1/0.0/c.parquet", _table())
    on, off = (Path(s.full_path("streams/s/x-1/0.0/c.parquet")).read_bytes() for s in (durable, fast))
    assert on == off  # the same Parquet bytes either way: only the syncs differ


def test_an_object_store_is_not_synced_by_us() -> None:
    # a completed upload is durable on S3/GCS; there is no descriptor to fsync
    assert not FileIO("s3://bucket/prefix?region=us-east-1", fsync=True).durable
    assert FileIO("/tmp", fsync=True).durable
    assert not FileIO("/tmp", fsync=False).durable


def test_a_directory_outside_the_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(ValueError, match="not under the storage root"):
        sync_directory_entries(str(tmp_path / "elsewhere"), str(tmp_path / "data"))
    with pytest.raises(ValueError, match="not under the storage root"):
        sync_directory_entries(str(tmp_path / "data-2"), str(tmp_path / "data"))
