"""The archives family on each kind of storage root, local and S3 (a moto server on loopback,
through pyarrow's own S3 client): ingest writes its archives into the storage, search reads them and
writes its results there, both collectors delete there, and the orphan sweep never takes a file of
an ingest still running — on an object store, which has no directory times and whose move is a
copy (docs/archives-retention.md#orphan-sweep-on-an-object-store), as on a local root."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tidekeep as tk
from helpers.procs import worker_env
from helpers.s3 import S3Server
from tidekeep.archives.archive_writer import ArchiveWriter
from tidekeep.archives.gc import collect_archives
from tidekeep.archives.model import ARCHIVE_SCHEMA
from tidekeep.faults import FAULT_EXIT_CODE

MINUTE = 60_000
HOUR = 60 * MINUTE
GRACE = HOUR


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000)


LOG = ("2024-07-01T12:00:00Z ERROR request failed\n"
       "2024-07-01T12:00:05Z INFO recovered\n"
       "2024-07-01T12:01:00Z ERROR disk failed\n")
TIMELESS = "no time here: failed once\nnor here\n"


def connect(tmp_path: Path, metadata_url: str, storage_uri: str, clock: tk.ManualClock,
            retention: str = "60") -> tk.Client:
    return tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri, clock=clock,
                      settings={"archive_output.retention_period": retention, "results_cache.retention_period": 30,
                                "sweep.grace": "1h"}, create=True)


def stored(client: tk.Client, prefix: str) -> set[str]:
    return {f.path for f in client.workspace.storage.list_files(prefix)}


def test_ingest_search_and_both_collectors_work_in_the_storage(tmp_path: Path, metadata_url: str,
                                                              storage_uri: str, spark) -> None:
    """One dataset's life: its archives are in the storage (nothing left staged), a search finds
    exactly the matching messages and keeps its results there, the result collector removes them
    TTL after the job, the archive collector removes the expired archive and keeps the timeless one."""
    clock = tk.ManualClock(ms("2024-07-01T12:10:00"))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "app.log").write_text(LOG)
    (tmp_path / "logs" / "plain.log").write_text(TIMELESS)
    client = connect(tmp_path, metadata_url, storage_uri, clock)
    try:
        report = client.archives.ingest("app", [tmp_path / "logs" / "app.log", tmp_path / "logs" / "plain.log"])
        assert report.messages == 5 and len(report.archives) == 2
        assert stored(client, "archives") == {a.path for a in client.archives.list()}  # no staging left

        job = client.archives.search("app", "failed")
        rows = client.archives.results(job.id, page_size=100).rows
        assert [(r["timestamp"], r["message"]) for r in rows] == [
            (ms("2024-07-01T12:01:00"), "2024-07-01T12:01:00Z ERROR disk failed"),
            (ms("2024-07-01T12:00:00"), "2024-07-01T12:00:00Z ERROR request failed"),
            (None, "no time here: failed once")]
        assert stored(client, f"search-results/{job.id}")

        assert job.completed_ms is not None
        clock.set(job.completed_ms + 30 * MINUTE + 1)
        client.archives.gc()
        assert stored(client, f"search-results/{job.id}") == set()
        assert client.archives.job(job.id).results_expired_ms == clock.now_ms()

        [timed] = [a for a in client.archives.list() if a.end_ts is not None]
        [timeless] = [a for a in client.archives.list() if a.end_ts is None]
        clock.set(timed.end_ts + HOUR + 1)
        assert client.archives.gc().archives.deleted == 1
        assert client.archives.list() == [timeless] and stored(client, "archives") == {timeless.path}
    finally:
        client.close()


def staged_archive(client: tk.Client, staging: str, text: str) -> str:
    """A file of an ingest's write task, written as the task writes it (ArchiveWriter)."""
    writer = ArchiveWriter(client.workspace.storage, staging, 1 << 20, with_timestamps=True)
    writer.write(pa.Table.from_pydict({"timestamp": [1], "message": [text], "source": ["a.log"]},
                                      schema=ARCHIVE_SCHEMA), len(text))
    [written] = writer.close()
    return written.file


def test_the_orphan_sweep_never_takes_the_files_of_an_ingest_moving_them_in(tmp_path: Path, metadata_url: str,
                                                                           storage_uri: str) -> None:
    """An ingest running longer than the grace has staged two archives long ago and moved one of
    them in. Its remaining staged file is as old as ever — on S3 there is no staging directory whose
    time the move changed, only the moved copy's new time — and must stay until the ingest is over;
    an ingest dead for longer than the grace is collected whole."""
    clock = tk.ManualClock(0)
    client = connect(tmp_path, metadata_url, storage_uri, clock)
    try:
        storage = client.workspace.storage
        staging = "archives/web/_ingest-" + "1" * 32
        first, second = staged_archive(client, staging, "one"), staged_archive(client, staging, "two")
        written_ms = max(f.mtime_ms or 0 for f in storage.list_files(staging))
        while time.time() * 1000 < written_ms + 1000:  # the stores' times are in whole seconds
            time.sleep(0.05)
        moved = "archives/web/" + first.rsplit("/", 1)[1]
        storage.move(first, moved)
        moved_ms = max(e.mtime_ms or 0 for e in storage.list("archives/web"))
        assert moved_ms > written_ms  # the move left a newer time: the copy (S3) or the staging directory (local)

        clock.set(moved_ms + GRACE)  # the move is within the grace, the writes are not
        report = collect_archives(client.workspace)
        assert report.orphans == 0 and stored(client, "archives") == {second, moved}

        clock.set(moved_ms + GRACE + 1)  # the ingest died: nothing changed for longer than the grace
        report = collect_archives(client.workspace)
        assert report.orphans == 2 and stored(client, "archives") == set()
    finally:
        client.close()


@pytest.mark.parametrize("fault", ["archive_ingest.before_register", "archive_ingest.after_register"])
def test_a_killed_ingest_on_s3_leaves_no_archive_without_its_file_and_the_orphan_sweep_cleans_up(
        fault: str, tmp_path: Path, s3_server: S3Server, s3_bucket: str, spark) -> None:
    """A real `tidekeep archives ingest` writing to S3 dies (exit 77) just before or just after its
    registering transaction: nothing is registered and the moved file is an orphan, collected once
    past the grace; or everything is, each archive with its file in the bucket, and the sweep keeps
    it. (tests/archives/test_archives_ingest.py kills it on local storage.)"""
    storage_uri = s3_server.uri(s3_bucket, "data")
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    env = {**worker_env(url, storage_uri, tmp_path / "ws", fault=fault), "TIDEKEEP_SPARK_MASTER": "local[1]"}
    clock = tk.ManualClock(0)
    # the archive's messages are from 2024: a retention longer than that keeps it registered
    client = connect(tmp_path, url, storage_uri, clock, retention="36500d")
    try:
        (tmp_path / "app.log").write_text(LOG)
        done = subprocess.run([sys.executable, "-m", "tidekeep.cli.main", "archives", "ingest", "app",
                               str(tmp_path / "app.log")], env=env, capture_output=True, text=True, timeout=300,
                              check=False)
        assert done.returncode == FAULT_EXIT_CODE, done.stderr[-2000:]
        registered = client.archives.list()
        # the staging directory's marker (ingest.LIVE_MARKER) is left as well
        [marker] = [key for key in stored(client, "archives") if key.endswith("/_live")]
        [leftover] = stored(client, "archives") - {marker}
        if fault == "archive_ingest.before_register":
            assert registered == []
        else:
            assert [a.path for a in registered] == [leftover]
        # the last change it made: its move (a local staging directory's time, an S3 copy's)
        written_ms = max(e.mtime_ms or 0 for e in client.workspace.storage.list("archives"))
        clock.set(written_ms + GRACE)
        # before registering, the moved file is not older than the grace: the dataset may still be
        # ingesting, nothing goes; after, the registered file is named and the marker, written
        # first, is past the grace
        first = collect_archives(client.workspace).orphans
        assert first == (0 if fault == "archive_ingest.before_register" else 1)
        clock.set(written_ms + GRACE + 1)
        report = collect_archives(client.workspace)
        assert report.orphans == (2 if fault == "archive_ingest.before_register" else 0)
        assert stored(client, "archives") == {a.path for a in registered}
    finally:
        client.close()
