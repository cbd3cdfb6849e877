"""Ingest: real Spark, real files, real SQLite and PostgreSQL. Tiny inputs."""

from __future__ import annotations

import datetime as dt
import gzip
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import tidekeep as tk
from helpers.archives import archive_rows
from tidekeep.archives.archive_format import CURRENT_FORMAT, format_of, read_messages
from tidekeep.archives.ingest import CorruptLogFile, IngestReport
from tidekeep.archives.model import archive_path
from tidekeep.errors import InvalidInput, NotFound

pytestmark = pytest.mark.spark


def ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC).timestamp() * 1000) if "+" not in text \
        else int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def rows_of(client: tk.Client, archive) -> list[dict]:
    path = client.workspace.storage.full_path(archive.path)
    assert format_of(pq.read_schema(path)) == CURRENT_FORMAT
    return archive_rows(client, archive)


def archive_files(client: tk.Client) -> list[Path]:
    root = Path(client.workspace.storage.full_path("archives"))
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def catalog_rows(client: tk.Client) -> list[dict]:
    import sqlalchemy as sa

    from tidekeep.store.schema_catalog import catalog_records

    with client.workspace.db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(sa.select(catalog_records).order_by(catalog_records.c.id))]


STACK = ("2024-07-01T12:00:00Z ERROR request failed\n"
         "java.lang.IllegalStateException: boom\n"
         "\tat com.example.Handler.handle(Handler.java:42)\n"
         "\tat com.example.Server.run(Server.java:7)\n"
         "2024-07-01T12:00:05Z INFO recovered\n")


def test_a_stack_trace_stays_with_the_line_that_logged_it(client: tk.Client, spark, tmp_path: Path) -> None:
    report = client.archives.ingest("app", [write(tmp_path / "app.log", STACK)])
    assert isinstance(report, IngestReport)
    assert (report.files, report.messages, report.messages_without_timestamp) == (1, 2, 0)
    [archive] = report.archives
    rows = rows_of(client, archive)
    assert [r["message"] for r in rows] == [
        "2024-07-01T12:00:00Z ERROR request failed\njava.lang.IllegalStateException: boom\n"
        "\tat com.example.Handler.handle(Handler.java:42)\n\tat com.example.Server.run(Server.java:7)",
        "2024-07-01T12:00:05Z INFO recovered"]
    assert [r["timestamp"] for r in rows] == [ms("2024-07-01T12:00:00"), ms("2024-07-01T12:00:05")]
    assert {r["source"] for r in rows} == {str((tmp_path / "app.log").resolve())}
    assert (archive.begin_ts, archive.end_ts) == (ms("2024-07-01T12:00:00"), ms("2024-07-01T12:00:05"))
    assert archive.raw_bytes == len(STACK.encode())
    assert archive.message_count == 2
    assert archive.stored_bytes == Path(client.workspace.storage.full_path(archive.path)).stat().st_size
    assert client.archives.list("app") == report.archives
    assert client.archives.datasets() == ["app"]


def test_mixed_formats_in_one_file_are_each_converted_and_sorted(tmp_path: Path, spark) -> None:
    # the syslog line has no year: it takes the year of the ingest's clock
    client = tk.connect(home=tmp_path / "ws", storage=str(tmp_path / "data"), clock=tk.ManualClock(
        ms("2024-08-01T00:00:00")), create=True)
    lines = {
        "2024-07-01 12:00:03,250 iso with comma": ms("2024-07-01T12:00:03.250"),
        "1719835201 epoch seconds": ms("2024-07-01T12:00:01"),
        "[2024-07-01T14:00:04+02:00] iso with offset": ms("2024-07-01T12:00:04"),
        "1719835202500 epoch millis": ms("2024-07-01T12:00:02.500"),
        "<13>Jul  1 12:00:00 host syslog": ms("2024-07-01T12:00:00"),
        "2024-07-01T12:00:05.999999Z micro": ms("2024-07-01T12:00:05.999"),
    }
    calls: list[tuple[int, int]] = []
    report = client.archives.ingest("mixed", [write(tmp_path / "mixed.log", "\n".join(lines) + "\n")],
                                    progress=lambda done, total: calls.append((done, total)))
    size = len(("\n".join(lines) + "\n").encode())
    assert calls[0] == (0, size) and calls[-1] == (size, size)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and {t for _, t in calls} == {size}
    [archive] = report.archives
    rows = rows_of(client, archive)
    assert [(r["message"], r["timestamp"]) for r in rows] == sorted(lines.items(), key=lambda kv: kv[1])
    assert archive.begin_ts == min(lines.values()) and archive.end_ts == max(lines.values())
    assert archive.created_ms == ms("2024-08-01T00:00:00")
    client.close()


def test_a_file_without_timestamps_gets_its_own_archive_that_never_expires(client: tk.Client, spark,
                                                                            tmp_path: Path) -> None:
    plain = write(tmp_path / "in" / "a-plain.txt", "first line\n\nsecond line\r\nthird")
    stamped = write(tmp_path / "in" / "b-stamped.log", "2024-07-01T12:00:00Z hello\n")
    report = client.archives.ingest("mix", [tmp_path / "in"])
    assert (report.files, report.messages, report.messages_without_timestamp) == (2, 4, 3)
    by_kind = {a.end_ts is None: a for a in report.archives}
    assert len(report.archives) == 2
    untimed = by_kind[True]
    assert (untimed.begin_ts, untimed.end_ts, untimed.message_count) == (None, None, 3)
    assert [(r["timestamp"], r["message"], r["source"]) for r in rows_of(client, untimed)] == [
        (None, "first line", str(plain.resolve())), (None, "second line", str(plain.resolve())),
        (None, "third", str(plain.resolve()))]
    assert [r["message"] for r in rows_of(client, by_kind[False])] == ["2024-07-01T12:00:00Z hello"]
    assert by_kind[False].end_ts == ms("2024-07-01T12:00:00")
    assert stamped.exists()


def test_an_empty_file_is_no_error_and_an_ingest_without_messages_registers_nothing(client: tk.Client, spark,
                                                                                   tmp_path: Path) -> None:
    empty = write(tmp_path / "empty.log", "")
    report = client.archives.ingest("quiet", [empty])
    assert (report.files, report.messages, report.archives) == (1, 0, [])
    assert client.archives.list() == [] and client.archives.datasets() == []
    assert archive_files(client) == [] and catalog_rows(client) == []
    both = client.archives.ingest("quiet", [empty, write(tmp_path / "one.log", "2024-07-01T12:00:00Z x\n")])
    assert (both.files, both.messages, len(both.archives)) == (2, 1, 1)


def test_gzip_is_detected_by_its_bytes_and_read_like_plain_text(client: tk.Client, spark, tmp_path: Path) -> None:
    plain = client.archives.ingest("plain", [write(tmp_path / "p.log", STACK)])
    zipped = client.archives.ingest("zipped", [write(tmp_path / "z.txt", gzip.compress(STACK.encode()))])
    named_gz = client.archives.ingest("named", [write(tmp_path / "n.gz", STACK)])  # a .gz name, plain bytes
    contents = [[(r["timestamp"], r["message"]) for r in rows_of(client, rep.archives[0])]
                for rep in (plain, zipped, named_gz)]
    assert contents[0] == contents[1] == contents[2]
    assert plain.raw_bytes == zipped.raw_bytes == named_gz.raw_bytes == len(STACK.encode())


def test_a_truncated_gzip_fails_naming_the_file_and_leaves_nothing(client: tk.Client, spark, tmp_path: Path) -> None:
    good = write(tmp_path / "good.log", STACK)
    data = gzip.compress(("2024-07-01T12:00:00Z line\n" * 2000).encode())
    bad = write(tmp_path / "bad.log.gz", data[: len(data) // 2])
    with pytest.raises(CorruptLogFile, match=r"bad\.log\.gz.*truncated gzip") as caught:
        client.archives.ingest("broken", [good, bad])
    assert isinstance(caught.value, InvalidInput)
    assert client.archives.list() == [] and client.archives.datasets() == []
    assert catalog_rows(client) == [] and archive_files(client) == []
    corrupt = write(tmp_path / "corrupt.gz", data[:20] + b"\x00" * 50 + data[70:])
    with pytest.raises(CorruptLogFile, match=r"corrupt\.gz"):
        client.archives.ingest("broken", [corrupt])
    assert client.archives.list() == [] and archive_files(client) == []


def test_zone_less_times_are_read_in_the_ingest_zone(client: tk.Client, spark, tmp_path: Path) -> None:
    log = write(tmp_path / "ny.log", "2024-07-01 12:00:00 local noon\n2024-07-01T12:00:00Z utc noon\n")
    report = client.archives.ingest("ny", [log], timezone="America/New_York")
    rows = rows_of(client, report.archives[0])
    assert [(r["message"], r["timestamp"]) for r in rows] == [
        ("2024-07-01T12:00:00Z utc noon", ms("2024-07-01T12:00:00")),
        ("2024-07-01 12:00:00 local noon", ms("2024-07-01T16:00:00"))]
    assert report.archives[0].end_ts == ms("2024-07-01T16:00:00")


def test_a_user_format_replaces_the_built_in_forms(client: tk.Client, spark, tmp_path: Path) -> None:
    log = write(tmp_path / "access.log", '10/Oct/2000:13:55:36 -0700 "GET /"\n1719835200 not a time here\n')
    report = client.archives.ingest("web", [log], timestamp_format="%d/%b/%Y:%H:%M:%S %z")
    [row] = rows_of(client, report.archives[0])
    assert row["timestamp"] == ms("2000-10-10T20:55:36")
    assert row["message"] == '10/Oct/2000:13:55:36 -0700 "GET /"\n1719835200 not a time here'


def test_a_small_target_size_rolls_archives_that_hold_every_message_once(tmp_path: Path, metadata_url: str,
                                                                         spark) -> None:
    target = 6000
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        settings={"archives.target_size": target}, create=True)
    try:
        base = ms("2024-07-01T00:00:00")
        lines_a = [f"{dt.datetime.fromtimestamp((base + i * 7919 % 600_000) / 1000, dt.UTC).isoformat()} "
                   f"a-{i} {'x' * (i % 50)} {i * 2654435761 % 1000003}" for i in range(1500)]
        lines_b = [f"{base + i * 397:013d} b-{i} payload {i ** 3 % 99991}" for i in range(1500)]
        files = [write(tmp_path / "a.log", "\n".join(lines_a) + "\n"), write(tmp_path / "b.log", "\n".join(lines_b))]
        report = client.archives.ingest("big", files)
        assert len(report.archives) >= 3
        seen: list[str] = []
        for archive in report.archives:
            path = Path(client.workspace.storage.full_path(archive.path))
            meta = pq.ParquetFile(path).metadata
            groups = [sum(meta.row_group(i).column(c).total_compressed_size for c in range(meta.num_columns))
                      for i in range(meta.num_row_groups)]
            # the writer rolls once the file reaches the target: every row group but the last fits under it
            assert sum(groups[:-1]) < target
            assert archive.stored_bytes == path.stat().st_size
            rows = rows_of(client, archive)
            timestamps = [r["timestamp"] for r in rows]
            for group in range(meta.num_row_groups):  # format 2: by source, then timestamp, per row group
                in_group = read_messages(pq.ParquetFile(path), row_groups=[group]).to_pylist()
                order = [(r["source"], r["timestamp"]) for r in in_group]
                assert order == sorted(order)
            assert (archive.begin_ts, archive.end_ts, archive.message_count) == (min(timestamps), max(timestamps),
                                                                                 len(rows))
            seen += [r["message"] for r in rows]
        assert sorted(seen) == sorted(lines_a + lines_b)
        assert report.messages == 3000
        # the two files (one task each) overlap in time, and so do their archives; one file's
        # archives follow each other in the file's order
        for source in ("a.log", "b.log"):
            named = str((tmp_path / source).resolve())
            own = [a for a in report.archives if {r["source"] for r in rows_of(client, a)} == {named}]
            assert len(own) >= 2
    finally:
        client.close()


def test_each_archive_is_a_locked_catalog_record(client: tk.Client, spark, tmp_path: Path) -> None:
    report = client.archives.ingest("feedx", [write(tmp_path / "a.log", STACK), write(tmp_path / "b.txt", "plain\n")])
    records = {r["id"]: r for r in catalog_rows(client)}
    assert len(records) == len(report.archives) == 2
    for archive in report.archives:
        record = records[archive.catalog_record_id]
        assert (record["feed"], record["type"], record["status"], record["location"]) == (
            "feedx", "Archive", "LOCKED", archive_path("feedx", archive.id))
        assert record["file_size"] == archive.stored_bytes and record["raw_size"] == archive.raw_bytes
        assert record["create_time"] == archive.created_ms == report.archives[0].created_ms
    audit = [e for e in client.audit() if e["action"] == "archive_ingest"]
    assert len(audit) == 1 and audit[0]["target"] == "archives/feedx"


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"dataset": "bad/name"}, InvalidInput, "dataset name"),
    ({"timezone": "Mars/Olympus"}, InvalidInput, "Mars/Olympus"),
    ({"timestamp_format": "%Y-%m-%d"}, InvalidInput, "not enough fields"),
    ({"timestamp_format": "%H:%M %Q"}, InvalidInput, "%Q"),
    ({"paths": ["missing.log"]}, NotFound, "missing.log"),
    ({"paths": []}, InvalidInput, "no input paths"),
])
def test_bad_input_is_a_typed_error_and_leaves_no_state(client: tk.Client, spark, tmp_path: Path, kwargs, error,
                                                        pattern) -> None:
    good = write(tmp_path / "a.log", STACK)
    args = {"dataset": "ok", "paths": [good], "timezone": "UTC", "timestamp_format": None} | kwargs
    if args["paths"] and args["paths"][0] == "missing.log":
        args["paths"] = [good, tmp_path / "missing.log"]
    with pytest.raises(error, match=pattern):
        client.archives.ingest(args["dataset"], args["paths"], timezone=args["timezone"],
                               timestamp_format=args["timestamp_format"])
    assert client.archives.list() == [] and client.archives.datasets() == []
    assert catalog_rows(client) == [] and archive_files(client) == []


def test_a_utc_minus_4_log_expires_at_the_right_instant(tmp_path: Path, metadata_url: str, spark) -> None:
    """CLP's time-zone pitfall (docs/design/archives.md#time-zones): a log written at 16:00 in UTC-4
    with zone-less timestamps, TTL 1 hour.
    Ingested with --timezone America/New_York it is kept until 17:00 local (21:00 UTC) and expired
    just after; read as UTC (what CLP does) the same file would already be expired at 16:30 local."""
    clock = tk.ManualClock(ms("2024-07-01T20:00:00"))
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=clock, settings={"archive_output.retention_period": 60}, create=True)
    try:
        log = write(tmp_path / "est.log", "2024-07-01 15:00:00 starting\n2024-07-01 16:00:00 last line\n")
        [local] = client.archives.ingest("local", [log], timezone="America/New_York").archives
        [as_utc] = client.archives.ingest("naive", [log]).archives
        assert local.end_ts == ms("2024-07-01T20:00:00") and as_utc.end_ts == ms("2024-07-01T16:00:00")

        clock.set(ms("2024-07-01T20:30:00"))  # 16:30 in New York
        client.archives.gc()
        assert [a.id for a in client.archives.list()] == [local.id]  # the UTC reading lost its archive early
        clock.set(ms("2024-07-01T21:00:00"))  # 17:00 in New York: exactly one hour, not more
        client.archives.gc()
        assert [a.id for a in client.archives.list()] == [local.id]
        clock.set(ms("2024-07-01T21:00:00") + 1)
        client.archives.gc()
        assert client.archives.list() == []
        assert archive_files(client) == []
    finally:
        client.close()


@pytest.mark.parametrize("fault", ["archive_ingest.before_register", "archive_ingest.after_register"])
def test_a_killed_ingest_never_leaves_a_registered_archive_without_its_file(fault: str, tmp_path: Path,
                                                                           spark) -> None:
    """A real `tidekeep archives ingest` process dies (exit 77, like kill -9) just before or just
    after the one registering transaction: either nothing is registered (the written files are
    unregistered leftovers, never searched) or everything is, each archive with its file."""
    from helpers.procs import worker_env
    from tidekeep.faults import FAULT_EXIT_CODE

    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    env = worker_env(url, tmp_path / "data", tmp_path / "ws", fault=fault)
    env["TIDEKEEP_SPARK_MASTER"] = "local[1]"
    tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True).close()
    log = write(tmp_path / "app.log", STACK)
    done = subprocess.run([sys.executable, "-m", "tidekeep.cli.main", "archives", "ingest", "app", str(log)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == FAULT_EXIT_CODE, done.stderr[-2000:]
    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True)
    try:
        registered = client.archives.list()
        files = archive_files(client)
        on_disk = {p.name for p in files}
        # the staging directory's marker (ingest.LIVE_MARKER) is left too, for the orphan sweep
        assert [p.relative_to(client.workspace.storage.full_path("archives/app")).parts[1:] for p in files
                if p.name == "_live"] == [("_live",)]
        on_disk.discard("_live")
        if fault == "archive_ingest.before_register":
            assert registered == [] and client.archives.datasets() == [] and catalog_rows(client) == []
            assert len(on_disk) == 1  # the moved file: an unregistered leftover
        else:
            [archive] = registered
            assert archive.message_count == 2 and on_disk == {f"{archive.id}.parquet"}
            assert [r["location"] for r in catalog_rows(client)] == [archive.path]
        rerun = client.archives.ingest("app", [log])
        assert {a.id for a in client.archives.list()} == {a.id for a in registered} | {a.id for a in rerun.archives}
        for archive in client.archives.list():
            assert Path(client.workspace.storage.full_path(archive.path)).is_file()
    finally:
        client.close()


def test_an_archive_written_where_the_driver_cannot_see_fails_the_ingest_and_registers_nothing(
        tmp_path: Path, spark) -> None:
    """A real `tidekeep archives ingest` whose write tasks put their archives in a directory private
    to their worker (the fault seam archive_ingest.private_storage, read by the executors) fails with
    StagedFileMissing naming the file, the task and the storage root (exit 14, one line), and
    registers nothing; without the fault the same ingest registers every message once."""
    from helpers.procs import worker_env

    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    env = worker_env(url, tmp_path / "data", tmp_path / "ws", fault="archive_ingest.private_storage")
    env["TIDEKEEP_SPARK_MASTER"] = "local[1]"
    tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True).close()
    private = tmp_path / "private"  # the executors' temporary directory: where their "own disks" are
    private.mkdir()
    env["TMPDIR"] = str(private)
    log = write(tmp_path / "app.log", STACK)
    done = subprocess.run([sys.executable, "-m", "tidekeep.cli.main", "archives", "ingest", "app", str(log)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == tk.StagedFileMissing.exit_code == 14, done.stderr[-2000:]
    [line] = [x for x in done.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: staged file archives/app/_ingest-") and "Traceback" not in done.stderr
    assert f"is missing from storage {(tmp_path / 'data').resolve()} (written by partition 0" in line
    assert list(private.rglob("*.parquet"))  # the task did write: on its private disk

    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True)
    try:
        assert client.archives.list() == [] and client.archives.datasets() == [] and catalog_rows(client) == []
        assert archive_files(client) == []
        report = client.archives.ingest("app", [log])
        assert [a.message_count for a in client.archives.list()] == [2] == [a.message_count for a in report.archives]
        assert [p.name for p in archive_files(client)] == [f"{report.archives[0].id}.parquet"]
    finally:
        client.close()
