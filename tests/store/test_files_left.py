"""Files that cannot be deleted after a committed deletion (a read-only data directory).

Truncation, a retention run, a stream delete, a transaction abort and the archive collectors all
commit their metadata first and delete files after. When the files cannot go (here: a directory
made really read-only, see helpers/readonly.py), the operation has still happened: it returns its
committed result naming the files left, logs one warning, and the CLI prints the result with a
`warning:` line and exits 0 — never a traceback. Once the directory is writable again the sweep
(or the next collector run) removes exactly those files, and nothing else. The catalog purge deletes
data first and keeps the rows of records whose data stays; its CLI warns about them the same way.

Real SQLite and PostgreSQL (the `metadata_url` fixture), real files, the real CLI in a subprocess.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import make_archive
from helpers.cli import run_cli
from helpers.readonly import read_only
from helpers.storage import chunk_rows, referenced_paths, stored_files
from tidekeep.archives.archive_writer import ArchiveWriter
from tidekeep.archives.gc import collect_all
from tidekeep.archives.model import ARCHIVE_SCHEMA, JobState, results_dir
from tidekeep.archives.store import SearchJobStore
from tidekeep.store.chunks import ChunkStorage
from tidekeep.store.deletion import FileLeft, describe_files_left
from tidekeep.store.fileio import FileIO
from tidekeep.store.schema_archives import archive_gc_journal
from tidekeep.store.schema_catalog import catalog_records

STREAM = "ro/s"
MIN = 60_000
DAY = 24 * 60 * MIN
WARNING_PREFIX = "warning: "
# chattr +i (as root) refuses with EPERM, chmod 0o555 (anyone else) with EACCES
REASON = "PermissionError: " + ("Operation not permitted" if os.geteuid() == 0 else "Permission denied")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def clock() -> tk.ManualClock:
    # the real time, so the files' modification times and the clock agree for the sweep's grace
    return tk.ManualClock(now_ms())


@pytest.fixture
def rclient(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "ws" / "data"),
                   clock=clock, settings={"writer.linger": 0, "retention.frequency": "1m"}, create=True)
    yield c
    c.close()


def write_batches(client: tk.Client, batches: int, events: int = 10, stream: str = STREAM) -> None:
    """`batches` chunk files per segment the keys reach: each write_many is one batch."""
    with client.stream(stream).writer("w") as writer:
        for b in range(batches):
            writer.write_many([b"x" * 92] * events, [f"key{(b * events + i) % 7}" for i in range(events)])
            writer.flush()


def segment_dirs(client: tk.Client, stream: str = STREAM) -> list[Path]:
    root = Path(client.workspace.storage.full_path(client.stream(stream).state().storage_dir()))
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != "txn")


def exists(client: tk.Client, rel: str) -> bool:
    return Path(client.workspace.storage.full_path(rel)).exists()


def audit_actions(client: tk.Client, target: str) -> list[str]:
    return [e["action"] for e in client.audit(target)]


def files_left_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and "could not be deleted" in r.getMessage()]


def one_warning_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(WARNING_PREFIX), stderr
    return lines[0]


def assert_permission_reasons(files: list[FileLeft] | tuple[FileLeft, ...]) -> None:
    assert files and all(f.reason == REASON for f in files), files


# ---- the helper and the storage layer ----------------------------------------------------------------
def test_the_read_only_helper_really_stops_deletion_and_undoes_itself(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir()
    (directory / "f").write_bytes(b"data")
    with read_only(directory):
        with pytest.raises(PermissionError):
            (directory / "f").unlink()
        with pytest.raises(PermissionError):
            (directory / "g").write_bytes(b"")
    (directory / "f").unlink()  # writable again
    (directory / "g").write_bytes(b"")


def test_storage_deletion_goes_on_past_failures_and_names_each_file_left(tmp_path: Path) -> None:
    storage = ChunkStorage(str(tmp_path / "data"), create=True)
    storage.workspace_id = "0" * 32  # as a client sets it once the workspace ids matched
    for rel in ("a/1", "a/2", "b/1", "b/2", "c/1"):
        Path(storage.full_path(rel)).parent.mkdir(parents=True, exist_ok=True)
        Path(storage.full_path(rel)).write_bytes(b"x")
    with read_only(Path(storage.full_path("b"))):
        outcome = storage.delete(["b/1", "a/1", "missing/1", "b/2", "a/2"])
        assert outcome.deleted == 2  # a/1, a/2; a missing file is no failure and no deletion
        assert [f.path for f in outcome.failed] == ["b/1", "b/2"]
        assert_permission_reasons(outcome.failed)
        assert Path(storage.full_path("b/1")).exists() and not Path(storage.full_path("a/1")).exists()
        # a tree: every file that can go goes, those that cannot are named, the tree stays
        Path(storage.full_path("c/sub")).mkdir()
        Path(storage.full_path("c/sub/2")).write_bytes(b"x")
        assert storage.delete_dir("missing").failed == ()
        outcome = storage.delete_dir("c")
        assert outcome.deleted == 2 and outcome.failed == ()
        assert not Path(storage.full_path("c")).exists()
        outcome = storage.delete_dir("b")
        assert outcome.deleted == 0 and sorted(f.path for f in outcome.failed) == ["b/1", "b/2"]
    assert storage.delete_dir("b").deleted == 2 and not Path(storage.full_path("b")).exists()


def test_the_message_names_a_few_files_the_exact_count_and_the_reasons() -> None:
    files = [FileLeft(f"p{i}", "PermissionError: Read-only file system") for i in range(5)]
    assert describe_files_left(files) == ("5 file(s) could not be deleted and are left for the sweep: p0, p1, p2 and "
                                          "2 more (PermissionError: Read-only file system)")
    mixed = [FileLeft("a", "r1"), FileLeft("b", "r2"), FileLeft("c", "r1")]
    assert describe_files_left(mixed, "the next sweep") == ("3 file(s) could not be deleted and are left for the "
                                                            "next sweep: a, b, c (r1; 1 other reason(s))")


@given(st.lists(st.tuples(st.text("abc/", min_size=1, max_size=6), st.sampled_from(["r1", "r2", "r3"])),
                min_size=1, max_size=8))
def test_the_message_names_the_first_paths_the_count_and_the_first_reason(entries: list[tuple[str, str]]) -> None:
    files = [FileLeft(path, reason) for path, reason in entries]
    message = describe_files_left(files, "the sweep")
    head, _, rest = message.partition(": ")
    assert head == f"{len(files)} file(s) could not be deleted and are left for the sweep"
    named, _, why = rest.rpartition(" (")
    shown = ", ".join(f.path for f in files[:3])
    assert named == (shown if len(files) <= 3 else f"{shown} and {len(files) - 3} more")
    others = len({f.reason for f in files}) - 1
    assert why == f"{files[0].reason}" + (f"; {others} other reason(s)" if others else "") + ")"


# ---- truncation -------------------------------------------------------------------------------------
def test_truncation_on_a_read_only_data_directory(rclient: tk.Client, clock: tk.ManualClock,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    client = rclient
    client.create_stream(STREAM)
    write_batches(client, 4)
    rows = chunk_rows(client, STREAM)
    assert len(rows) == 4
    before = stored_files(client)
    cut = client.stream(STREAM).resolve_cut(f"{STREAM}:0.0={rows[2].base_offset}")
    caplog.set_level(logging.WARNING, logger="tidekeep")

    with read_only(*segment_dirs(client)):
        result = client.stream(STREAM).truncate(cut, reason="read-only test")

        assert client.stream(STREAM).head_cut() == cut == result.new_head  # the truncation happened
        assert result.bytes_freed == rows[2].base_offset and result.chunks_deleted == 2
        assert [f.path for f in result.files_left] == [rows[0].path, rows[1].path]
        assert_permission_reasons(result.files_left)
        assert all(exists(client, r.path) for r in rows)  # nothing could be deleted
        assert audit_actions(client, STREAM) == ["truncate"]
        offsets = [e.offset for e in client.stream(STREAM).read()]  # reads start at the head
        assert min(offsets) == rows[2].base_offset and len(offsets) == 20
        warnings = files_left_warnings(caplog)
        assert len(warnings) == 1  # one warning for the operation, naming the files
        assert rows[0].path in warnings[0].getMessage() and rows[1].path in warnings[0].getMessage()

    clock.set(now_ms())  # the files' modification times are behind the clock again
    swept = client.sweep(grace=0)  # writable again: the leftovers are unreferenced orphans
    assert swept.files_deleted == 2 and swept.files_left == ()
    assert stored_files(client) == before - {rows[0].path, rows[1].path} == referenced_paths(client)


def cli_ok(home: Path, url: str, *args: str) -> str:
    """A command that must succeed with nothing on stderr; its stdout."""
    done = run_cli(home, "--metadata-url", url, *args)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return done.stdout


def cli_warns(home: Path, url: str, *args: str) -> tuple[str, str]:
    """A command that must succeed (exit 0) with exactly one `warning:` line on stderr."""
    done = run_cli(home, "--metadata-url", url, *args)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stderr}"
    return done.stdout, one_warning_line(done.stderr)


@pytest.fixture
def workspace(tmp_path: Path, metadata_url: str) -> Iterator[tuple[Path, str, tk.Client]]:
    """A workspace the CLI opens with --metadata-url, and a library client on it for set-up."""
    home = tmp_path / "ws"
    tk.init_workspace(home, {"metadata.url": metadata_url})
    client = tk.connect(home, metadata_url=metadata_url, settings={"writer.linger": 0}, create=True)
    yield home, metadata_url, client
    client.close()


def test_truncation_on_a_read_only_data_directory_through_the_cli(
        workspace: tuple[Path, str, tk.Client]) -> None:
    home, url, client = workspace
    client.create_stream(STREAM)
    write_batches(client, 5)
    rows = chunk_rows(client, STREAM)
    before = stored_files(client)

    with read_only(*segment_dirs(client)):
        stdout, warning = cli_warns(home, url, "stream", "truncate", STREAM, f"{STREAM}:0.0={rows[2].base_offset}")
        assert "truncated" in stdout and f"0.0={rows[2].base_offset}" in stdout
        assert warning == (f"{WARNING_PREFIX}2 file(s) could not be deleted and are left for the sweep: "
                           f"{rows[0].path}, {rows[1].path} ({REASON})")
        stdout, warning = cli_warns(home, url, "stream", "truncate", STREAM, f"{STREAM}:0.0={rows[3].base_offset}",
                                    "--json")
        document = json.loads(stdout)
        uid = client.stream(STREAM).state().info.uid  # cuts name their stream instance (docs/streams.md)
        assert document["new_head"] == f"{STREAM}:0.0={rows[3].base_offset}@{uid}" and document["chunks_deleted"] == 1
        assert [f["path"] for f in document["files_left"]] == [rows[2].path]
        assert document["files_left"][0]["reason"] == REASON
        assert warning.startswith(f"{WARNING_PREFIX}1 file(s) could not be deleted")
        expected = client.stream(STREAM).resolve_cut(f"{STREAM}:0.0={rows[3].base_offset}")
        assert client.stream(STREAM).head_cut() == expected
        assert audit_actions(client, STREAM) == ["truncate", "truncate"]
        # the sweep cannot delete them either while the directory is read-only: it says so, exit 0
        stdout, warning = cli_warns(home, url, "sweep", "--grace", "0s", "--json")
        assert json.loads(stdout)["files_deleted"] == 0
        assert sorted(f["path"] for f in json.loads(stdout)["files_left"]) == sorted(r.path for r in rows[:3])
        assert "left for the next sweep" in warning

    swept = json.loads(cli_ok(home, url, "sweep", "--grace", "0s", "--json"))
    assert swept["files_deleted"] == 3 and swept["files_left"] == []
    assert stored_files(client) == before - {r.path for r in rows[:3]} == referenced_paths(client)


# ---- retention ----------------------------------------------------------------------------------------
def test_retention_run_on_a_read_only_data_directory(rclient: tk.Client, clock: tk.ManualClock,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    client = rclient
    client.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(1_000, 2_500)))
    write_batches(client, 2)  # two chunks, 2,000 bytes
    assert client.stream(STREAM).retention.run().cut is None  # records the tail at 2,000
    clock.advance(2 * MIN)
    write_batches(client, 3)  # 5,000 bytes: above the maximum
    rows = chunk_rows(client, STREAM)
    before = stored_files(client)
    caplog.set_level(logging.WARNING, logger="tidekeep")

    with read_only(*segment_dirs(client)):
        decision = client.stream(STREAM).retention.run()

        assert decision.cut == {0: 2_000} and decision.freed_bytes == 2_000
        assert client.stream(STREAM).head_cut().positions == {0: 2_000}
        assert [f.path for f in decision.files_left] == [rows[0].path, rows[1].path]
        assert_permission_reasons(decision.files_left)
        assert [f["path"] for f in decision.to_dict()["files_left"]] == [rows[0].path, rows[1].path]
        assert [h["reason"].startswith("retention ") for h in client.stream(STREAM).retention.history()] == [True]
        assert len(files_left_warnings(caplog)) == 1

    clock.set(max(clock.now_ms(), now_ms()))
    assert client.sweep(grace=0).files_deleted == 2
    assert stored_files(client) == before - {rows[0].path, rows[1].path} == referenced_paths(client)


def test_retention_run_on_a_read_only_data_directory_through_the_cli(
        workspace: tuple[Path, str, tk.Client]) -> None:
    home, url, client = workspace
    client.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(1_000, 2_500)))
    write_batches(client, 2)
    client.stream(STREAM).retention.run(now=now_ms() - 10 * MIN)  # the tail at 2,000 recorded ten minutes ago
    write_batches(client, 3)
    rows = chunk_rows(client, STREAM)

    with read_only(*segment_dirs(client)):
        stdout, warning = cli_warns(home, url, "--set", "retention.frequency=1m", "retention", "run", STREAM,
                                    "--json")
    document = json.loads(stdout)
    assert document["cut"] == {"0.0": 2_000} and document["freed_bytes"] == 2_000
    assert [f["path"] for f in document["files_left"]] == [rows[0].path, rows[1].path]
    assert warning == (f"{WARNING_PREFIX}2 file(s) could not be deleted and are left for the sweep: "
                       f"{rows[0].path}, {rows[1].path} ({REASON})")
    assert client.stream(STREAM).head_cut().positions == {0: 2_000}
    assert json.loads(cli_ok(home, url, "sweep", "--grace", "0s", "--json"))["files_deleted"] == 2
    assert stored_files(client) == referenced_paths(client)


# ---- stream delete ------------------------------------------------------------------------------------
def test_stream_delete_on_a_read_only_stream_directory(rclient: tk.Client, clock: tk.ManualClock,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    client = rclient
    other = "ro/kept"
    for name in (STREAM, other):
        client.create_stream(name, tk.StreamConfig(segments=2))
        write_batches(client, 3, stream=name)
    doomed = {r.path for r in chunk_rows(client, STREAM)}
    kept = {r.path for r in chunk_rows(client, other)}
    size = client.stream(STREAM).describe()["size_bytes"]
    client.stream(STREAM).seal()
    caplog.set_level(logging.WARNING, logger="tidekeep")

    with read_only(*segment_dirs(client)):
        freed = client.stream(STREAM).delete()

        assert freed.bytes_freed == size and not freed.sealed_first
        assert {f.path for f in freed.files_left} == doomed
        assert_permission_reasons(freed.files_left)
        with pytest.raises(tk.NotFound):
            client.stream(STREAM).state()
        assert audit_actions(client, STREAM) == ["delete_stream"]
        assert stored_files(client) == doomed | kept
        assert len(files_left_warnings(caplog)) == 1

    clock.set(now_ms())
    swept = client.sweep(grace=0)
    assert swept.files_deleted == len(doomed) and stored_files(client) == kept == referenced_paths(client)
    assert len(list(client.stream(other).read())) == 30


def test_stream_delete_on_a_read_only_stream_directory_through_the_cli(
        workspace: tuple[Path, str, tk.Client]) -> None:
    home, url, client = workspace
    client.create_stream(STREAM)
    write_batches(client, 2)
    doomed = {r.path for r in chunk_rows(client, STREAM)}

    with read_only(*segment_dirs(client)):
        stdout, warning = cli_warns(home, url, "stream", "delete", STREAM, "--force", "--json")
    document = json.loads(stdout)
    assert document["deleted"] is True and document["sealed_first"] is True and document["bytes_freed"] == 2_000
    assert {f["path"] for f in document["files_left"]} == doomed
    assert warning.startswith(f"{WARNING_PREFIX}2 file(s) could not be deleted and are left for the sweep: ")
    assert client.list_streams() == []
    assert json.loads(cli_ok(home, url, "sweep", "--grace", "0s", "--json"))["files_deleted"] == 2
    assert stored_files(client) == set()


# ---- transactions -------------------------------------------------------------------------------------
def staged_paths(client: tk.Client, txn: tk.Transaction) -> list[str]:
    directory = f"{client.stream(STREAM).state().storage_dir()}/txn/{txn.id}"
    return sorted(f.path for f in client.workspace.storage.list_files(directory))


def staging_dir(client: tk.Client, txn: tk.Transaction) -> Path:
    return Path(client.workspace.storage.full_path(f"{client.stream(STREAM).state().storage_dir()}/txn/{txn.id}"))


def test_transaction_abort_and_expiry_on_a_read_only_staging_directory(
        rclient: tk.Client, clock: tk.ManualClock, metadata_url: str, caplog: pytest.LogCaptureFixture) -> None:
    client = rclient
    client.create_stream(STREAM)
    writer = client.stream(STREAM).transactional_writer("tw", lease="10m", batch_size=300)
    by_api, by_cli, by_lease = writer.begin(), writer.begin(), writer.begin()
    for txn in (by_api, by_cli, by_lease):
        for i in range(10):
            txn.write(b"y" * 92, f"k{i}")
        txn.flush()
    staged = {txn.id: staged_paths(client, txn) for txn in (by_api, by_cli, by_lease)}
    assert all(len(paths) >= 2 for paths in staged.values())
    caplog.set_level(logging.WARNING, logger="tidekeep")

    with read_only(*(staging_dir(client, txn) for txn in (by_api, by_cli, by_lease))):
        result = client.transactions.abort(by_api.id)
        assert result and result.aborted and sorted(f.path for f in result.files_left) == staged[by_api.id]
        assert_permission_reasons(result.files_left)
        assert by_api.status() == tk.TxnState.ABORTED
        assert not client.transactions.abort(by_api.id)  # already aborted: nothing left to report
        assert len(files_left_warnings(caplog)) == 1

        done = run_cli(Path(client.settings.home), "--metadata-url", metadata_url,
                       "--storage", client.workspace.storage.root, "txn", "abort", by_cli.id, "--json")
        assert done.returncode == 0, done.stderr
        assert sorted(f["path"] for f in json.loads(done.stdout)["files_left"]) == staged[by_cli.id]
        assert json.loads(done.stdout)["aborted"] is True
        assert one_warning_line(done.stderr).startswith(f"{WARNING_PREFIX}{len(staged[by_cli.id])} file(s)")
        assert by_cli.status() == tk.TxnState.ABORTED

        clock.advance(11 * MIN)
        assert client.transactions.expire() == [by_lease.id]  # the ids, as ever; the files go to the log
        assert by_lease.status() == tk.TxnState.ABORTED
        assert len(files_left_warnings(caplog)) == 2
        assert all(exists(client, p) for paths in staged.values() for p in paths)

    clock.set(max(clock.now_ms(), now_ms()))
    swept = client.sweep(grace=0)
    assert swept.files_deleted == sum(len(paths) for paths in staged.values())
    assert stored_files(client) == set() == referenced_paths(client)


# ---- the archive collectors ---------------------------------------------------------------------------
def journal(client: tk.Client) -> list[str]:
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(archive_gc_journal.c.archive_id)).scalars())


def test_archive_collectors_on_a_read_only_archive_directory(tmp_path: Path, metadata_url: str) -> None:
    home = tmp_path / "ws"
    tk.init_workspace(home, {"metadata.url": metadata_url})
    now = now_ms()
    settings = {"archive_output.retention_period": 60, "results_cache.retention_period": 30}
    clock = tk.ManualClock(now - 3 * 60 * MIN)
    client = tk.connect(home, metadata_url=metadata_url, clock=clock, settings=settings, create=True)
    try:
        old = make_archive(client, "web", [(now - 3 * 60 * MIN, "old"), (now - 2 * 60 * MIN, "older than an hour")])
        fresh = make_archive(client, "web", [(now - MIN, "recent")])
        jobs = SearchJobStore(client.workspace)
        job = jobs.create("web", "q", regex=False, ignore_case=False, begin_ts=None, end_ts=None,
                          retention_minutes=None)
        results = Path(client.workspace.storage.full_path(results_dir(job.id)))
        results.mkdir(parents=True)
        (results / ("a" * 32 + ".parquet")).write_bytes(b"results")
        jobs.set_results_path(job.id, results_dir(job.id))
        jobs.finish(job.id, JobState.SUCCEEDED, archives_searched=1, results_count=1)
        archive_dir = Path(client.workspace.storage.full_path(old.path)).parent
        flags = ["--metadata-url", metadata_url]
        for key, value in settings.items():
            flags += ["--set", f"{key}={value}"]

        with read_only(archive_dir, results):
            done = run_cli(home, *flags, "archives", "gc", "--json")
            assert done.returncode == 0, done.stderr
            report = json.loads(done.stdout)
            assert report["archives"]["deleted"] == 1 and report["archives"]["files_deleted"] == 0
            assert [f["path"] for f in report["archives"]["files_left"]] == [old.path]
            assert [e["job_id"] for e in report["results"]["expired"]] == [job.id]
            assert [f["path"] for f in report["results"]["files_left"]] == [f"{results_dir(job.id)}/{'a' * 32}.parquet"]
            warning = one_warning_line(done.stderr)
            assert warning.startswith(f"{WARNING_PREFIX}2 file(s) could not be deleted and are left for the next "
                                      f"collector run: {old.path}, ")
            assert journal(client) == [old.id]  # the deleted archive's file stays journaled for the replay
            # while it stays read-only, a run tries again and reports the same files, exit 0
            done = run_cli(home, *flags, "archives", "gc")
            assert done.returncode == 0 and "2 file(s) could not be deleted" in one_warning_line(done.stderr)

        clock.set(now_ms())
        again = collect_all(client.workspace)
        assert again.archives.replayed == 1 and again.archives.files_left == []
        assert again.results.finished == 1 and again.results.files_left == []
        assert journal(client) == [] and not Path(client.workspace.storage.full_path(old.path)).exists()
        assert not results.exists() and Path(client.workspace.storage.full_path(fresh.path)).exists()
    finally:
        client.close()


# ---- the catalog purge (data first, rows second: a record whose data stays keeps its row) -----------
def test_catalog_purge_on_a_read_only_data_directory_warns_and_keeps_the_rows(
        workspace: tuple[Path, str, tk.Client]) -> None:
    home, url, client = workspace
    now = now_ms()
    with client.workspace.db.write() as conn:
        for i in range(3):
            conn.execute(sa.insert(catalog_records).values(
                feed="F", type="Raw", create_time=now - 90 * DAY, status="DELETED", status_time=now - 10 * DAY - i,
                file_size=10, location=f"catalog/{i}.dat"))
    data = Path(client.workspace.storage.full_path("catalog"))
    data.mkdir(parents=True)
    for i in range(3):
        (data / f"{i}.dat").write_bytes(b"x" * 10)

    with read_only(data):
        stdout, warning = cli_warns(home, url, "catalog", "purge")
    assert "purged 0 record(s)" in stdout and "3 failure(s)" in stdout  # under the threshold: exit 0
    assert warning.startswith(f"{WARNING_PREFIX}3 record(s) could not have their data deleted and keep their rows "
                              "for the next purge (first: catalog/0.dat: PermissionError: ")
    assert len(record_ids(client)) == 3 and all((data / f"{i}.dat").exists() for i in range(3))

    assert json.loads(cli_ok(home, url, "catalog", "purge", "--json"))["purged"] == 3
    assert record_ids(client) == [] and list(data.iterdir()) == []


def record_ids(client: tk.Client) -> list[int]:
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(catalog_records.c.id)).scalars())


# ---- clean-ups of a failing writer's own files -------------------------------------------------------
def test_a_failing_archive_task_never_hides_its_error_behind_its_clean_up(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """An ingest task that fails deletes what it wrote; if that cannot be done, the task's own
    error still surfaces (the clean-up logs a warning and the orphan sweep takes the files)."""
    writer = ArchiveWriter(FileIO(str(tmp_path), fsync=True), "staging/web", 1 << 20,
                           with_timestamps=True)
    writer.write(pa.Table.from_pydict({"timestamp": [1, 2], "message": ["a", "b"], "source": ["s", "s"]},
                                      schema=ARCHIVE_SCHEMA), 4)
    written = writer.close()
    assert len(written) == 1 and (tmp_path / written[0].file).exists()
    caplog.set_level(logging.WARNING, logger="tidekeep")

    with read_only(tmp_path / "staging" / "web"):
        writer.abort()  # raised PermissionError before, in place of the task's error
    assert (tmp_path / written[0].file).exists()
    assert [r.getMessage() for r in files_left_warnings(caplog)] == [
        f"failed archive task: 1 file(s) could not be deleted and are left for the archive orphan sweep: "
        f"{written[0].file} ({REASON})"]
