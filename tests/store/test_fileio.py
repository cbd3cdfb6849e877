"""The storage interface (store/fileio.py) on a real local directory: keys relative to the root,
whole-file and Parquet writes, atomic replacement, listing, moving, and deletions that only a
workspace proven to be itself may make. Durability is recorded with the fsync recorder
(helpers/durability.py); unwritable directories are really read-only (helpers/readonly.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.durability import DurabilityRecorder, assert_on_disk
from helpers.readonly import read_only
from helpers.s3 import S3Server
from tidekeep.errors import ConfigError, WorkspaceMismatch
from tidekeep.store.fileio import PARTIAL_SUFFIX, FileIO

WORKSPACE_ID = "f" * 32


def _owned(root: Path, fsync: bool = True) -> FileIO:
    """A FileIO on `root` as the client leaves it once the workspace stamps matched."""
    root.mkdir(parents=True, exist_ok=True)
    storage = FileIO(str(root), fsync=fsync)
    storage.workspace_id = WORKSPACE_ID
    return storage


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> DurabilityRecorder:
    return DurabilityRecorder(monkeypatch)


# ---- keys and the root ---------------------------------------------------------------------------
def test_keys_are_relative_to_the_root_and_a_relative_root_is_resolved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    storage = _owned(tmp_path / "data")
    relative = FileIO("data")
    assert relative.root == storage.root == str((tmp_path / "data").resolve())
    assert relative.location() == storage.root  # what an executor elsewhere opens again
    assert storage.uri_of("streams/a.parquet") == f"file://{storage.root}/streams/a.parquet"
    storage.write("streams/a.bin", b"abc")
    assert (tmp_path / "data" / "streams" / "a.bin").read_bytes() == b"abc"
    assert [f.path for f in storage.list_files("")] == ["streams/a.bin"]


def test_a_key_of_an_s3_root_goes_into_the_path_before_the_query(s3_server: S3Server, s3_bucket: str) -> None:
    """What executors open (`uri_of`) is the same object FileIO wrote: the key joins the path and the
    URI's options (endpoint, scheme, region) stay options, for the root itself too."""
    import pyarrow.fs as pafs

    storage = FileIO(s3_server.uri(s3_bucket, "data"))
    storage.write("archives/web/a.bin", b"abc")
    uri = storage.uri_of("archives/web/a.bin")
    assert urlsplit(uri).query == urlsplit(storage.uri).query
    fs, path = pafs.FileSystem.from_uri(uri)
    with fs.open_input_stream(path) as stream:
        assert stream.read() == b"abc"
    assert FileIO(storage.uri_of("")).read("archives/web/a.bin") == b"abc"


def test_a_uri_pyarrow_cannot_open_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^bad value for 'storage.uri': 'nosuch://x/y': "):
        FileIO("nosuch://x/y")


def test_a_local_root_answers_as_its_pyarrow_filesystem_does(tmp_path: Path) -> None:
    """A local path opens without pyarrow and answers `is_dir` and `read` itself (opening a
    workspace needs nothing else); the same root opened as a file:// URI goes through
    pyarrow.fs, and the two agree on a file, a directory, a missing key and the root."""
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "a.json").write_bytes(b'{"x": 1}')
    plain, through_arrow = FileIO(str(root)), FileIO(root.as_uri())
    assert plain.is_local and through_arrow.is_local and plain.root == through_arrow.root
    for key in ("", "a.json", "sub", "missing"):
        assert plain.is_dir(key) == through_arrow.is_dir(key), key
    assert plain.read("a.json") == through_arrow.read("a.json") == b'{"x": 1}'
    for storage in (plain, through_arrow):
        with pytest.raises(FileNotFoundError):
            storage.read("missing")
        with pytest.raises(Exception) as failed:  # the type differs by filesystem; both are read failures
            storage.read("sub")
        assert storage.is_read_failure(failed.value)
    assert not FileIO.is_read_failure(ValueError("not a read failure"))


def test_opening_a_local_root_and_reading_a_file_import_no_pyarrow(tmp_path: Path) -> None:
    (tmp_path / "stamp.json").write_text("{}")
    probe = ("import sys; from tidekeep.store.fileio import FileIO; s = FileIO(sys.argv[1]); "
             "assert s.is_dir() and s.read('stamp.json') == b'{}'; print(sorted(m for m in sys.modules "
             "if m.split('.')[0] in ('pyarrow', 'numpy')))")
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_create_root_makes_an_owner_only_directory_and_refuses_a_path_under_a_file(tmp_path: Path) -> None:
    storage = FileIO(str(tmp_path / "a" / "b"))
    assert not storage.is_dir()
    storage.create_root()
    assert storage.is_dir() and stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) & 0o077 == 0
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(ConfigError, match=r"cannot be a directory: .*file is a file"):
        FileIO(str(tmp_path / "file" / "data")).create_root()


# ---- reading and writing ---------------------------------------------------------------------------
def test_write_read_exists_size_and_owner_only_files(tmp_path: Path) -> None:
    storage = _owned(tmp_path / "data")
    assert not storage.exists("x/y.bin")
    with pytest.raises(FileNotFoundError):
        storage.size("x/y.bin")
    with pytest.raises(FileNotFoundError):
        storage.read("x/y.bin")
    storage.write("x/y.bin", b"hello")
    assert storage.exists("x/y.bin") and storage.exists("x") and storage.is_dir("x")
    assert storage.size("x/y.bin") == 5 and storage.read("x/y.bin") == b"hello"
    storage.write("x/y.bin", b"hi")  # replaced
    assert storage.read("x/y.bin") == b"hi"
    assert stat.S_IMODE((tmp_path / "data" / "x" / "y.bin").stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE((tmp_path / "data" / "x").stat().st_mode) & 0o077 == 0


def test_parquet_round_trip_and_random_access(tmp_path: Path) -> None:
    storage = _owned(tmp_path / "data", fsync=False)
    table = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    storage.write_parquet("t/one.parquet", table, compression="zstd")
    assert storage.read_parquet("t/one.parquet").equals(table)
    assert storage.read_parquet("t/one.parquet", columns=["b"]).column_names == ["b"]
    with storage.open_input("t/one.parquet") as handle:
        assert pq.ParquetFile(handle).metadata.num_rows == 3
    sink = storage.create("t/two.parquet")
    pq.write_table(table, sink)
    storage.finish(sink, "t/two.parquet")
    assert storage.read_parquet("t/two.parquet").equals(table)
    assert stat.S_IMODE((tmp_path / "data" / "t" / "one.parquet").stat().st_mode) & 0o077 == 0


def test_write_atomic_is_never_seen_partial_and_leaves_no_temporary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = _owned(tmp_path / "data")
    storage.write_atomic("marker.json", b"old")
    seen: list[bytes | None] = []
    real_create = FileIO.create

    def create_then_look(self: FileIO, key: str) -> object:
        sink = real_create(self, key)
        assert key.startswith("marker.json.") and key.endswith(PARTIAL_SUFFIX)  # a name of its own
        seen.append(storage.read("marker.json"))
        return sink

    monkeypatch.setattr(FileIO, "create", create_then_look)
    storage.write_atomic("marker.json", b"new contents")
    assert seen == [b"old"]  # the old whole file while the new one is written
    assert storage.read("marker.json") == b"new contents"
    assert _files(tmp_path / "data") == {"marker.json"}


def test_durable_writes_and_moves_are_on_disk_on_return(tmp_path: Path, recorder: DurabilityRecorder) -> None:
    storage = _owned(tmp_path / "data")
    storage.write("a/b/one.bin", b"1")
    full = storage.full_path("a/b/one.bin")
    assert_on_disk(recorder.synced, full, full, storage.root)
    storage.write_atomic("a/marker", b"m")
    assert_on_disk(recorder.synced, next(s.path for s in recorder.synced if s.path.endswith(PARTIAL_SUFFIX)),
                   storage.full_path("a/marker"), storage.root)
    storage.write("staged/two.bin", b"22")
    storage.move("staged/two.bin", "c/two.bin")
    assert_on_disk(recorder.synced, storage.full_path("staged/two.bin"), storage.full_path("c/two.bin"),
                   storage.root)


def test_with_fsync_off_nothing_is_synced(tmp_path: Path, recorder: DurabilityRecorder) -> None:
    storage = _owned(tmp_path / "data", fsync=False)
    storage.write("a/one.bin", b"1")
    storage.write_atomic("a/marker", b"m")
    storage.move("a/one.bin", "b/one.bin")
    assert recorder.synced == [] and not storage.durable
    assert storage.read("b/one.bin") == b"1" and storage.read("a/marker") == b"m"


# ---- listing and moving ----------------------------------------------------------------------------
def test_list_gives_keys_sizes_and_directories(tmp_path: Path) -> None:
    storage = _owned(tmp_path / "data")
    storage.write("d/one.bin", b"1")
    storage.write("d/sub/two.bin", b"22")
    assert storage.list_files("missing") == [] and storage.list("missing") == []
    everything = {(e.path, e.is_dir, e.size if not e.is_dir else None) for e in storage.list("d")}
    assert everything == {("d/one.bin", False, 1), ("d/sub", True, None), ("d/sub/two.bin", False, 2)}
    assert {f.path for f in storage.list_files("d", recursive=False)} == {"d/one.bin"}
    assert all(f.mtime_ms > 0 for f in storage.list_files("d"))
    assert {e.path for e in storage.list("", recursive=False)} == {"d"}


def test_move_renames_within_the_root(tmp_path: Path) -> None:
    storage = _owned(tmp_path / "data")
    storage.write("staging/x.bin", b"x")
    storage.move("staging/x.bin", "final/x.bin", sync=False)
    storage.sync_names("final")
    assert _files(tmp_path / "data") == {"final/x.bin"}
    with pytest.raises(FileNotFoundError):
        storage.move("staging/x.bin", "final/y.bin")


# ---- deleting ----------------------------------------------------------------------------------------
def test_deletions_need_the_workspace_proven_and_discard_does_not(tmp_path: Path) -> None:
    root = tmp_path / "data"
    storage = _owned(root)
    for key in ("a/1", "a/2", "b/1", "c/1"):
        storage.write(key, b"x")
    storage.workspace_id = None  # not stamped, or the stamps did not match
    for attempt in (lambda: storage.delete(["a/1"]), lambda: storage.delete_dir("b"),
                    lambda: storage.remove_file("c/1")):
        with pytest.raises(WorkspaceMismatch, match="refusing to delete files under storage root"):
            attempt()
    assert _files(root) == {"a/1", "a/2", "b/1", "c/1"}  # nothing deleted
    assert storage.discard(["a/1", "a/missing"]).deleted == 1  # its own files: no proof needed
    assert storage.discard_dir("b").deleted == 1 and not (root / "b").exists()
    storage.workspace_id = WORKSPACE_ID
    outcome = storage.delete(["a/2", "a/gone"])
    assert (outcome.deleted, outcome.failed) == (1, ())  # a missing file is no failure
    assert storage.remove_file("c/1") == 1 and storage.remove_file("c/1") is None
    assert _files(root) == set()


def test_a_file_that_cannot_be_deleted_is_named_never_raised(tmp_path: Path) -> None:
    storage = _owned(tmp_path / "data")
    for key in ("ro/1", "ro/2", "rw/1"):
        storage.write(key, b"x")
    with read_only(tmp_path / "data" / "ro"):
        outcome = storage.delete(["ro/1", "rw/1", "ro/2"])
        tree = storage.delete_dir("ro")
    assert outcome.deleted == 1 and [f.path for f in outcome.failed] == ["ro/1", "ro/2"]
    assert all(f.reason.startswith(("PermissionError", "OSError")) for f in outcome.failed)
    assert tree.deleted == 0 and sorted(f.path for f in tree.failed) == ["ro/1", "ro/2"]  # in listing order
    assert _files(tmp_path / "data") == {"ro/1", "ro/2"}


def test_remove_file_never_deletes_a_directory(tmp_path: Path) -> None:
    storage = _owned(tmp_path / "data")
    storage.write("dir/inside.bin", b"x")
    with pytest.raises(IsADirectoryError):
        storage.remove_file("dir")
    assert _files(tmp_path / "data") == {"dir/inside.bin"}


def test_a_root_outside_the_workspace_deletes_on_its_callers_rules(tmp_path: Path) -> None:
    (tmp_path / "feeds").mkdir()
    (tmp_path / "feeds" / "a.dat").write_bytes(b"abc")
    top = FileIO.outside("/")
    assert top.remove_file(str(tmp_path / "feeds" / "a.dat").lstrip("/")) == 3
    assert not (tmp_path / "feeds" / "a.dat").exists()
    checkpoint = FileIO.outside(str(tmp_path / "feeds"))
    (tmp_path / "feeds" / "metadata").write_text('{"id": "q"}\n')
    assert checkpoint.read("metadata") == b'{"id": "q"}\n' and not checkpoint.durable
    with pytest.raises(pa.ArrowInvalid):
        FileIO.outside("nosuch://x/y")  # pyarrow's own error, for the caller to report


# ---- a model: any sequence of writes, moves, deletions and reads, on local storage and on S3 ---------------
KEYS = st.sampled_from(["a", "d/b", "d/c", "d/e/f", "g/h"])  # never a directory: see `exists` below
DIRECTORIES = st.sampled_from(["d", "d/e", "g", "x"])
OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("write"), KEYS, st.binary(max_size=16)),
    st.tuples(st.just("atomic"), KEYS, st.binary(max_size=16)),
    st.tuples(st.just("move"), KEYS, KEYS),
    st.tuples(st.just("delete"), KEYS, st.just(b"")),
    st.tuples(st.just("delete_dir"), DIRECTORIES, st.just(b"")),
    st.tuples(st.just("read"), KEYS, st.just(b"")),
    st.tuples(st.just("exists"), KEYS, st.just(b"")),
    st.tuples(st.just("list"), st.sampled_from(["", "d", "d/e", "x"]), st.just(b"")),
), max_size=12)
EXAMPLES = {"local": 40, "s3": 40}  # ~50 ms a sequence on the loopback S3 server: a few seconds


def _under(directory: str, key: str) -> bool:
    return not directory or key.startswith(directory + "/")


def _agrees_with_a_dictionary(storage: FileIO, run: str, operations: list[tuple[str, str, object]]) -> None:
    """Replays `operations` on storage under the fresh directory `run` and on a dict, checking every
    answer against the dict's."""
    model: dict[str, bytes] = {}

    def listed(directory: str) -> dict[str, int]:
        prefix = f"{run}/{directory}".rstrip("/")
        return {f.path.removeprefix(run + "/"): f.size for f in storage.list_files(prefix)}

    for name, key, arg in operations:
        # a key cannot be both a file and a directory: skip what the model says would collide
        others = [k for k in model if k != key]
        if name in ("write", "atomic", "move") and any(
                k.startswith(key + "/") or key.startswith(k + "/") for k in others):
            continue
        full = f"{run}/{key}"
        if name in ("write", "atomic"):
            assert isinstance(arg, bytes)
            (storage.write if name == "write" else storage.write_atomic)(full, arg)
            model[key] = arg
        elif name == "move":
            assert isinstance(arg, str)
            if key not in model:  # on every store: moving nothing is FileNotFoundError, and changes nothing
                with pytest.raises(FileNotFoundError):
                    storage.move(full, f"{run}/{arg}")
                continue
            if key == arg or any(k.startswith(arg + "/") or arg.startswith(k + "/") for k in model if k != key):
                continue
            storage.move(full, f"{run}/{arg}")
            model[arg] = model.pop(key)
        elif name == "delete":
            assert storage.delete([full]).deleted == (1 if key in model else 0)
            model.pop(key, None)
        elif name == "delete_dir":
            gone = [k for k in model if _under(key, k)]
            outcome = storage.delete_dir(full)
            assert (outcome.deleted, outcome.failed) == (len(gone), ())
            for k in gone:
                del model[k]
        elif name == "read":
            if key in model:
                assert storage.read(full) == model[key]
            else:
                with pytest.raises(FileNotFoundError):
                    storage.read(full)
        elif name == "exists":  # no key is ever a directory, so it exists exactly when it is a file
            assert storage.exists(full) == (key in model)
        else:
            assert listed(key) == {k: len(v) for k, v in model.items() if _under(key, k)}
    assert listed("") == {k: len(v) for k, v in model.items()}
    assert all(storage.read(f"{run}/{k}") == v and storage.exists(f"{run}/{k}") for k, v in model.items())
    assert not any(f.path.endswith(PARTIAL_SUFFIX) for f in storage.list_files(run))


def test_storage_agrees_with_a_dictionary(storage_uri: str) -> None:
    storage = FileIO(storage_uri, fsync=False)
    storage.create_root()
    storage.workspace_id = WORKSPACE_ID
    kind = "s3" if storage.is_object_store else "local"

    # the storage is the test's own; each example works in a directory of its own under it
    @settings(max_examples=EXAMPLES[kind], deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(OPERATIONS)
    def agrees(operations: list[tuple[str, str, object]]) -> None:
        _agrees_with_a_dictionary(storage, f"run-{uuid.uuid4().hex}", operations)

    agrees()
    if storage.is_local:
        assert os.path.isdir(storage.root)
