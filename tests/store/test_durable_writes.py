"""Durable on return (storage.fsync, on by default): every chunk, staged chunk, archive and search
result file, and each directory entry leading to it, is fsynced BEFORE the metadata commit that
makes it visible; SQLite commits with synchronous=FULL. With storage.fsync off nothing is synced.

Real writers, real SQLite and PostgreSQL, real Spark. os.fsync is wrapped by a recorder (in Spark's
Python workers through their environment) and every commit records what it is about to make
visible, with the fsyncs seen so far (helpers/durability.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.archives import make_archive
from helpers.durability import DurabilityRecorder, assert_on_disk, executor_fsyncs_recorded
from helpers.storage import chunk_rows

STREAM = "s/durable"
CHUNK_PATHS = "SELECT path FROM chunks"
STAGED_PATHS = "SELECT path FROM transaction_chunks"
ARCHIVE_PATHS = "SELECT path FROM archives"
SUCCEEDED_JOBS = "SELECT id FROM archive_search_jobs WHERE state = 'SUCCEEDED'"
LOGS = {"a.log": "2024-07-01T12:00:00Z INFO started\n2024-07-01T12:00:01Z ERROR failed once\n"
                "2024-07-01T12:00:02Z INFO recovered\n",
        "b.log": "a line without a timestamp\nanother one\n"}


def _events(count: int) -> tuple[list[bytes], list[str]]:
    return [f"event-{i:04d}".encode() * 3 for i in range(count)], [f"k{i % 11}" for i in range(count)]


def _ready(client: tk.Client) -> tk.Client:
    client.workspace.db.ensure_schema()  # the commit recorder queries tables that must exist
    return client


@pytest.fixture
def client_without_fsync(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws-off", metadata_url=metadata_url, storage=str(tmp_path / "data-off"),
                   settings={"writer.linger": 0, "storage.fsync": "false"}, create=True)
    yield c
    c.close()


# ---- streams -------------------------------------------------------------------------------------


def test_writer_chunks_are_on_disk_before_the_commit_that_shows_them(
        client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _ready(client)
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    recorder = DurabilityRecorder(monkeypatch)
    payloads, keys = _events(300)
    with recorder.commits_of(client.workspace.db.engine, CHUNK_PATHS), \
            client.stream(STREAM).writer("w1", batch_size="2KiB") as writer:
        writer.write_many(payloads, keys)
        writer.flush()
    rows = chunk_rows(client, STREAM)
    assert len(rows) > 3  # several flushes, into every segment
    for row in rows:
        full = client.workspace.storage.full_path(row.path)
        assert_on_disk(recorder.first_commit_showing(row.path).synced_before, full, full, client.workspace.storage.root)
    assert sorted(e.payload for e in client.stream(STREAM).read()) == sorted(payloads)


def test_staged_transaction_chunks_are_on_disk_before_the_staging_commit(
        client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _ready(client)
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    recorder = DurabilityRecorder(monkeypatch)
    payloads, keys = _events(120)
    with recorder.commits_of(client.workspace.db.engine, STAGED_PATHS):
        txn = client.stream(STREAM).transactional_writer("tw").begin()
        for payload, key in zip(payloads, keys, strict=True):
            txn.write(payload, key)
        txn.flush()
        assert list(client.stream(STREAM).read()) == []  # staged: invisible until the commit
        txn.commit()
    rows = chunk_rows(client, STREAM)
    assert rows and all(f"/txn/{txn.id}/" in row.path for row in rows)
    for row in rows:  # the first commit naming the file is the staging one; the append reuses the file
        full = client.workspace.storage.full_path(row.path)
        assert_on_disk(recorder.first_commit_showing(row.path).synced_before, full, full, client.workspace.storage.root)
    assert sorted(e.payload for e in client.stream(STREAM).read()) == sorted(payloads)


def test_with_fsync_off_writers_and_transactions_sync_nothing(
        client_without_fsync: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client = client_without_fsync
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    recorder = DurabilityRecorder(monkeypatch)
    payloads, keys = _events(100)
    with client.stream(STREAM).writer("w1", batch_size="1KiB") as writer:
        writer.write_many(payloads, keys)
    txn = client.stream(STREAM).transactional_writer("tw").begin()
    txn.write(b"in a transaction", "k")
    txn.commit()
    assert len(list(client.stream(STREAM).read())) == len(payloads) + 1
    assert recorder.synced == []


def test_sqlite_commits_with_synchronous_full(sqlite_client: tk.Client) -> None:
    # PRAGMA synchronous: 1 = NORMAL (the WAL is synced at checkpoints), 2 = FULL (at every commit)
    with sqlite_client.workspace.db.write() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 2
    with sqlite_client.workspace.db.read() as conn:
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 2


def test_sqlite_without_fsync_commits_with_synchronous_normal(tmp_path: Path) -> None:
    client = tk.connect(home=tmp_path / "ws", settings={"storage.fsync": False}, create=True)
    try:
        with client.workspace.db.write() as conn:
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 1
    finally:
        client.close()


# ---- Spark: archive ingest, the sink, search results ------------------------------------------------


def _log_files(tmp_path: Path) -> list[Path]:
    files = []
    for name, text in LOGS.items():
        path = tmp_path / "logs" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        files.append(path)
    return files


@pytest.mark.spark
def test_ingested_archives_are_on_disk_before_they_are_registered(
        spark, sqlite_client: tk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _ready(sqlite_client)
    recorder = DurabilityRecorder(monkeypatch, executor_log=tmp_path / "executor-fsyncs.jsonl")
    with executor_fsyncs_recorded(spark, recorder.executor_log), \
            recorder.commits_of(client.workspace.db.engine, ARCHIVE_PATHS):
        report = client.archives.ingest("web", _log_files(tmp_path))
    assert (report.messages, len(report.archives)) == (5, 2)  # timestamped messages, and those without
    root = client.workspace.storage.root
    for archive in report.archives:
        final = client.workspace.storage.full_path(archive.path)
        # written by an executor in the ingest's staging directory, then moved by the driver
        written = client.workspace.storage.full_path(f"archives/web/_ingest-{report.ingest_id}/{archive.id}.parquet")
        synced = recorder.first_commit_showing(archive.path).synced_before
        assert_on_disk(synced, written, final, root)
        assert any(s.path == written and s.pid != os.getpid() for s in synced)  # synced on the executor
    # the driver's sync
    assert any(s.path == client.workspace.storage.full_path("archives/web") for s in recorder.synced)


@pytest.mark.spark
def test_ingest_with_fsync_off_syncs_nothing_anywhere(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = tk.connect(home=tmp_path / "ws", settings={"storage.fsync": False}, create=True)
    try:
        recorder = DurabilityRecorder(monkeypatch, executor_log=tmp_path / "executor-fsyncs.jsonl")
        with executor_fsyncs_recorded(spark, recorder.executor_log):
            report = client.archives.ingest("web", _log_files(tmp_path))
        assert (report.messages, len(report.archives)) == (5, 2)
        assert recorder.all_synced() == []
    finally:
        client.close()


@pytest.mark.spark
@pytest.mark.parametrize("fsync", [None, "false"])
def test_sink_chunks_are_on_disk_before_the_driver_commits_them(
        spark, sqlite_client: tk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: str | None) -> None:
    from tidekeep.spark.sink import save_to_stream

    client = _ready(sqlite_client)
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    options = {**client.spark_options(), "routing_key_column": "key"}
    assert options["fsync"] == "true"  # the workspace's setting travels with the options ...
    if fsync is not None:
        options["fsync"] = fsync  # ... and an option overrides it
    frame = spark.createDataFrame([(f"row-{i}".encode(), f"k{i % 5}") for i in range(40)], "payload binary, key string")
    recorder = DurabilityRecorder(monkeypatch, executor_log=tmp_path / "executor-fsyncs.jsonl")
    # the sink's driver side (plan, commit) runs in Python workers of Spark's driver: they record
    # their commits in the same log, after the executors' fsyncs that came before them
    with executor_fsyncs_recorded(spark, recorder.executor_log, commit_query=STAGED_PATHS):
        save_to_stream(frame.repartition(2), STREAM, **options)
    rows = chunk_rows(client, STREAM)
    assert sum(r.event_count for r in rows) == 40
    if fsync == "false":
        assert recorder.all_synced() == []
        return
    for row in rows:
        full = client.workspace.storage.full_path(row.path)
        synced = recorder.first_commit_showing(row.path, in_executors=True).synced_before
        assert_on_disk(synced, full, full, client.workspace.storage.root)
        assert any(s.path == full and s.pid != os.getpid() for s in synced)  # synced on the executor


@pytest.mark.spark
def test_search_results_are_on_disk_before_the_job_succeeds(
        spark, sqlite_client: tk.Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = _ready(sqlite_client)
    archives = [make_archive(client, "app", [(1_000 + i, f"hit {i}"), (2_000 + i, "miss")]) for i in range(2)]
    recorder = DurabilityRecorder(monkeypatch, executor_log=tmp_path / "executor-fsyncs.jsonl")
    with executor_fsyncs_recorded(spark, recorder.executor_log), \
            recorder.commits_of(client.workspace.db.engine, SUCCEEDED_JOBS):
        job = client.archives.search("app", "hit")
    assert job.results_count == 2
    synced = recorder.first_commit_showing(job.id).synced_before
    for archive in archives:
        final = client.workspace.storage.full_path(f"{job.results_path}/{archive.id}.parquet")
        written = client.workspace.storage.full_path(f"{job.results_path}/.{archive.id}.parquet.partial")
        assert_on_disk(synced, written, final, client.workspace.storage.root)


# ---- the setting reaches Spark's side through the options -------------------------------------------


def test_sink_tasks_get_the_workspace_setting_or_the_option(sqlite_client: tk.Client,
                                                            client_without_fsync: tk.Client) -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from tidekeep.spark.sink import plan_sink

    schema = StructType([StructField("payload", BinaryType())])
    for client, expected in ((sqlite_client, True), (client_without_fsync, False)):
        client.create_stream(STREAM)
        options = {"stream": STREAM, **client.spark_options()}
        assert options["fsync"] == ("true" if expected else "false")
        assert plan_sink(options, schema, overwrite=False, streaming=False).target.location.fsync is expected
        flipped = {**options, "fsync": "no" if expected else "yes"}
        assert plan_sink(flipped, schema, overwrite=False, streaming=False).target.location.fsync is not expected


def test_a_bad_fsync_option_is_refused_naming_the_setting(sqlite_client: tk.Client) -> None:
    from pyspark.sql.types import BinaryType, StructField, StructType

    from tidekeep.errors import ConfigError
    from tidekeep.spark.options import parse_read_options
    from tidekeep.spark.partitions import check_read
    from tidekeep.spark.sink import plan_sink

    sqlite_client.create_stream(STREAM)
    options = {"stream": STREAM, **sqlite_client.spark_options(), "fsync": "maybe"}
    schema = StructType([StructField("payload", BinaryType())])
    with pytest.raises(ConfigError, match=r"bad value for 'storage.fsync'.*'maybe'"):
        plan_sink(options, schema, overwrite=False, streaming=False)
    with pytest.raises(ConfigError, match=r"bad value for 'storage.fsync'.*'maybe'"):
        check_read(parse_read_options(options))
