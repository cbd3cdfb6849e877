"""Ingest inputs are URIs (store/inputs.py): log files on the S3 test server (tests/helpers/s3.py),
read by the executors through pyarrow's S3 client, give the archives the same files give from
a local directory; a prefix expands to its files at any depth; gzip is told by its bytes on S3
too; credentials in an input URI and missing inputs are refused with nothing written."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.archives import archive_rows
from helpers.s3 import S3Server, admin_filesystem
from tidekeep.archives.ingest import CorruptLogFile
from tidekeep.errors import ConfigError, InvalidInput, NotFound
from tidekeep.store.inputs import list_inputs

pytestmark = pytest.mark.spark

APP = ("2024-07-01T12:00:00Z ERROR request failed\n"
       "\tat com.example.Handler.handle(Handler.java:42)\n"
       "2024-07-01T12:00:05Z INFO recovered\n")
WEB = "2024-07-01T11:59:59Z GET /index 200\n2024-07-01T12:00:07Z GET /health 200\n"
DB = "2024-07-01T12:00:03Z WARN slow query\nno timestamp here\n"
# the files of one input tree: a .log that is gzip inside (told by its bytes, not its name), a
# nested directory, a .gz that is plain text
TREE = {"app.log": gzip.compress(APP.encode()), "nested/deeper/web.log": WEB.encode(), "db.gz": DB.encode()}


def upload(server: S3Server, bucket: str, prefix: str, files: dict[str, bytes]) -> None:
    filesystem = admin_filesystem(server)
    for key, data in files.items():
        with filesystem.open_output_stream(f"{bucket}/{prefix}/{key}") as out:
            out.write(data)


def local_tree(root: Path, files: dict[str, bytes]) -> Path:
    for key, data in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(data)
    return root


def messages(client: tk.Client) -> list[tuple[int | None, str, str]]:
    """(timestamp, message, source file name within the tree) of every archived message."""
    rows = []
    for archive in client.archives.list():
        rows += [(r["timestamp"], r["message"], r["source"].rsplit("/", 1)[-1]) for r in archive_rows(client, archive)]
    return sorted(rows, key=lambda r: (r[0] is None, r[0] or 0, r[1]))


def state(client: tk.Client) -> tuple[list, list, list]:
    return client.archives.list(), client.archives.datasets(), client.audit()


def test_logs_on_s3_ingest_as_the_same_files_from_a_local_directory(sqlite_client: tk.Client, spark,
                                                                      s3_server: S3Server, s3_bucket: str,
                                                                      tmp_path: Path) -> None:
    upload(s3_server, s3_bucket, "logs", TREE)
    local = local_tree(tmp_path / "logs", TREE)
    with tk.connect(tmp_path / "other", storage=str(tmp_path / "other-data"), create=True) as from_local:
        local_report = from_local.archives.ingest("app", [local])
        expected = messages(from_local)
    report = sqlite_client.archives.ingest("app", [s3_server.uri(s3_bucket, "logs")])
    assert (report.files, report.messages, report.messages_without_timestamp) == (3, 5, 0) == (
        local_report.files, local_report.messages, local_report.messages_without_timestamp)
    assert messages(sqlite_client) == expected
    assert ("2024-07-01T12:00:00Z ERROR request failed\n\tat com.example.Handler.handle(Handler.java:42)"
            in [m for _, m, _ in expected])
    sources = {s for a in sqlite_client.archives.list()
               for s in (row["source"] for row in archive_rows(sqlite_client, a))}
    # archives name an object store's file by its URI without the URI's options
    assert sources == {f"s3://{s3_bucket}/logs/{key}" for key in TREE}


def test_a_prefix_expands_to_its_files_sorted_and_each_file_once(s3_server: S3Server, s3_bucket: str) -> None:
    upload(s3_server, s3_bucket, "in", {"b/2.log": b"x", "a.log": b"yy", "b/1/z.log": b"zzz", "c.log": b""})
    root = s3_server.uri(s3_bucket, "in")
    single = s3_server.uri(s3_bucket, "in/a.log")
    files = list_inputs([single, root, s3_server.uri(s3_bucket, "in/b")])
    assert [(f.name, f.size) for f in files] == [
        (f"s3://{s3_bucket}/in/a.log", 2), (f"s3://{s3_bucket}/in/b/1/z.log", 3), (f"s3://{s3_bucket}/in/b/2.log", 1),
        (f"s3://{s3_bucket}/in/c.log", 0)]


def test_a_local_path_and_its_file_uri_are_the_same_input(sqlite_client: tk.Client, spark, tmp_path: Path) -> None:
    log = local_tree(tmp_path / "logs", {"a.log": APP.encode()}) / "a.log"
    files = list_inputs([log, log.resolve().as_uri(), tmp_path / "logs"])
    assert [f.name for f in files] == [str(log.resolve())]
    report = sqlite_client.archives.ingest("app", [log.resolve().as_uri()])
    assert (report.files, report.messages) == (1, 2)


def test_a_truncated_gzip_on_s3_fails_naming_its_uri_and_leaves_nothing(sqlite_client: tk.Client, spark,
                                                                         s3_server: S3Server, s3_bucket: str) -> None:
    upload(s3_server, s3_bucket, "bad", {"cut.log": gzip.compress(APP.encode() * 50)[:-30]})
    before = state(sqlite_client)
    with pytest.raises(CorruptLogFile, match=rf"s3://{s3_bucket}/bad/cut\.log: cannot read the log file: truncated"):
        sqlite_client.archives.ingest("app", [s3_server.uri(s3_bucket, "bad")])
    assert state(sqlite_client) == before


@pytest.mark.parametrize("carrier, part", [
    ("s3://KEY:hunter2@{bucket}/logs?endpoint_override={endpoint}", "a password in its user part"),
    ("s3://{bucket}/logs?endpoint_override={endpoint}&secret_key=hunter2", "the query parameter 'secret_key'"),
])
def test_credentials_in_an_input_uri_are_refused_without_showing_them(sqlite_client: tk.Client, s3_server: S3Server,
                                                                      s3_bucket: str, carrier: str, part: str) -> None:
    uri = carrier.format(bucket=s3_bucket, endpoint=s3_server.endpoint)
    before = state(sqlite_client)
    with pytest.raises(InvalidInput) as refusal:
        sqlite_client.archives.ingest("app", [uri])
    assert f"carries credentials ({part})" in str(refusal.value) and "hunter2" not in str(refusal.value)
    assert state(sqlite_client) == before


def test_a_missing_input_on_s3_is_not_found_with_nothing_written(sqlite_client: tk.Client, spark, s3_server: S3Server,
                                                                 s3_bucket: str) -> None:
    upload(s3_server, s3_bucket, "logs", {"a.log": APP.encode()})
    missing = s3_server.uri(s3_bucket, "logs/none.log")
    before = state(sqlite_client)
    with pytest.raises(NotFound, match="does not exist"):
        sqlite_client.archives.ingest("app", [s3_server.uri(s3_bucket, "logs"), missing])
    assert state(sqlite_client) == before


def test_an_input_uri_pyarrow_cannot_open_is_a_typed_error(sqlite_client: tk.Client) -> None:
    with pytest.raises(InvalidInput, match=r"^input 'nosuch://x/y' cannot be opened: "):
        sqlite_client.archives.ingest("app", ["nosuch://x/y"])
    assert sqlite_client.archives.list() == []


def test_a_local_input_on_a_cluster_is_refused_before_it_is_listed(sqlite_client: tk.Client, tmp_path: Path,
                                                                    s3_server: S3Server, s3_bucket: str) -> None:
    """Python API: a local input, even one that does not exist, is refused on a non-local master
    (the executors would not find it), before anything is listed or written; with the storage on S3
    so that the input is the only reason."""
    settings = {"spark.master": "spark://head:7077", "storage.uri": s3_server.uri(s3_bucket, "data")}
    with tk.connect(tmp_path / "cluster", settings=settings, create=True) as cluster:
        for given in (tmp_path / "missing.log", (tmp_path / "missing.log").as_uri()):
            with pytest.raises(ConfigError, match=r"^input .*missing\.log' is a local path, and the executors"):
                cluster.archives.ingest("app", [s3_server.uri(s3_bucket, "logs"), given])
        assert cluster.archives.list() == [] and cluster.archives.datasets() == []


@pytest.mark.parametrize("given", ["", "logs/\x00app.log", "logs/\udcffapp.log"])
def test_an_input_that_names_no_file_is_refused_before_anything_is_listed(sqlite_client: tk.Client,
                                                                          given: str) -> None:
    # an empty input would stand for the current directory; a NUL or a lone surrogate cannot be a
    # path: each is bad input (one line), never a ValueError or UnicodeError from the filesystem
    with pytest.raises(InvalidInput, match="input"):
        list_inputs([given])
    with pytest.raises(InvalidInput, match="input"):
        sqlite_client.archives.ingest("web", [given])
    assert sqlite_client.archives.datasets() == []
