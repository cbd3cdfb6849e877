"""Import inputs are URIs (store/inputs.py): record files on the S3 test server (tests/helpers/s3.py)
are read by the executors through pyarrow's S3 client and import as the same files do from a local
directory; a directory or prefix expands at any depth, skipping hidden and "_" names; lines end
as Spark's text reader ends them; credentials in an input URI and missing inputs are refused with
nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.s3 import S3Server, admin_filesystem
from tidekeep.catalog.importer import text_lines
from tidekeep.errors import ConfigError, InvalidInput, NotFound

pytestmark = pytest.mark.spark

HEADER = "id,feed,type,create_time,file_size"
TREE = {
    "2024/01/a.csv": f"{HEADER}\n1,A,T,2024-01-01T00:00:00Z,10\n2,A,T,2024-01-02T00:00:00Z,20\n",
    "2024/02/b.csv": f"{HEADER}\r\n3,B,T,2024-02-01T00:00:00Z,30\r\n\r\n4,B,T,1706745600000,40",  # CRLF, no last break
    "c.csv": f"{HEADER}\r5,C,T,2024-03-01,50\r",  # old Mac line ends
    "_SUCCESS": "",
    ".partial/d.csv": f"{HEADER}\n6,D,T,2024-04-01,60\n",
    "2024/_temporary/e.csv": "not even csv",
}


def upload(server: S3Server, bucket: str, prefix: str, files: dict[str, str | bytes]) -> None:
    filesystem = admin_filesystem(server)
    for key, text in files.items():
        with filesystem.open_output_stream(f"{bucket}/{prefix}/{key}") as out:
            out.write(text.encode() if isinstance(text, str) else text)


def local_tree(root: Path, files: dict[str, str]) -> Path:
    for key, text in files.items():
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        (root / key).write_bytes(text.encode())
    return root


def records(client: tk.Client) -> list[tuple]:
    return sorted((r.id, r.feed, r.create_time, r.file_size) for r in client.catalog.records(limit=100))


def test_record_files_on_s3_import_as_the_same_files_from_a_local_directory(sqlite_client: tk.Client, spark,
                                                                            s3_server: S3Server, s3_bucket: str,
                                                                            tmp_path: Path) -> None:
    upload(s3_server, s3_bucket, "records", TREE)  # type: ignore[arg-type]
    with tk.connect(tmp_path / "other", create=True) as local:
        local_report = local.catalog.import_path(local_tree(tmp_path / "records", TREE))
        expected = records(local)
    report = sqlite_client.catalog.import_path(s3_server.uri(s3_bucket, "records"))
    assert (report.rows, report.files, report.inserted) == (5, 3, 5) == (
        local_report.rows, local_report.files, local_report.inserted)
    assert records(sqlite_client) == expected
    assert [r[0] for r in expected] == [1, 2, 3, 4, 5] and expected[4][3] == 50


def test_a_bad_row_on_s3_is_named_by_its_uri_and_line_with_nothing_written(sqlite_client: tk.Client, spark,
                                                                          s3_server: S3Server, s3_bucket: str) -> None:
    upload(s3_server, s3_bucket, "bad", {"ok.jsonl": '{"feed":"A","type":"T","create_time":1}\n',
                                         "z.jsonl": '{"feed":"A","type":"T","create_time":1}\n\n[1]\n',
                                         "y.jsonl": b'{"feed":"A","type":"T","create_time":1}\n{"feed":"\xff"}\n'})
    with pytest.raises(InvalidInput) as caught:
        sqlite_client.catalog.import_path(s3_server.uri(s3_bucket, "bad"))
    assert str(caught.value) == (f"s3://{s3_bucket}/bad/y.jsonl line 2: not UTF-8 text (byte 0xff at column 10); "
                                 "save the file as UTF-8 (1 more bad rows)")
    assert sqlite_client.catalog.count() == 0


@pytest.mark.parametrize("uri, part", [
    ("s3://AKIAEXAMPLE:hunter2@bucket/records", "a password in its user part"),
    ("s3://bucket/records?session_token=hunter2", "the query parameter 'session_token'"),
])
def test_credentials_in_an_import_uri_are_refused_without_showing_them(sqlite_client: tk.Client, uri: str,
                                                                       part: str) -> None:
    with pytest.raises(InvalidInput) as refusal:
        sqlite_client.catalog.import_path(uri)
    assert f"carries credentials ({part})" in str(refusal.value) and "hunter2" not in str(refusal.value)
    assert sqlite_client.catalog.count() == 0


def test_a_missing_prefix_is_not_found_and_an_empty_one_holds_no_files(sqlite_client: tk.Client, spark,
                                                                         s3_server: S3Server, s3_bucket: str) -> None:
    upload(s3_server, s3_bucket, "only-markers", {"_SUCCESS": "", ".keep": ""})
    with pytest.raises(NotFound, match=r"^input path 's3://.*/nothing-here\?.*' does not exist$"):
        sqlite_client.catalog.import_path(s3_server.uri(s3_bucket, "nothing-here"))
    with pytest.raises(InvalidInput, match="holds no files"):
        sqlite_client.catalog.import_path(s3_server.uri(s3_bucket, "only-markers"))
    assert sqlite_client.catalog.count() == 0


def test_a_local_input_on_a_cluster_is_refused_before_it_is_listed(pg_url: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import sqlalchemy as sa

    from tidekeep.spark.credentials import PASSWORD_ENV

    monkeypatch.setenv(PASSWORD_ENV, str(sa.make_url(pg_url).password))
    with tk.connect(tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path / "data"),
                    settings={"spark.master": "spark://head:7077"}, create=True) as cluster:
        for given in (tmp_path / "missing.csv", (tmp_path / "missing.csv").as_uri()):
            with pytest.raises(ConfigError, match=r"^input .*missing\.csv' is a local path, and the executors"):
                cluster.catalog.import_path(given)
        assert cluster.catalog.count() == 0


def lines_oracle(data: bytes) -> list[bytes]:
    """Every line break made \\n, split, and the empty piece after a final break dropped."""
    pieces = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    return pieces[:-1] if pieces[-1] == b"" else pieces


@given(st.lists(st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b"\xff", b" "]), max_size=30),
       st.integers(1, 7))
def test_text_lines_split_as_spark_splits_in_any_blocks(parts: list[bytes], block: int) -> None:
    data = b"".join(parts)
    blocks = [data[i:i + block] for i in range(0, len(data), block)]
    assert list(text_lines(blocks)) == lines_oracle(data)


def test_the_oracle_agrees_with_sparks_text_reader(spark, tmp_path: Path) -> None:
    data = b"a\r\nb\rc\n\nd\r\r\ne"
    path = tmp_path / "lines.txt"
    path.write_bytes(data)
    spark_lines = [r.value.encode() for r in spark.read.text(str(path)).collect()]
    assert spark_lines == lines_oracle(data) == list(text_lines([data])) == [b"a", b"b", b"c", b"", b"d", b"", b"e"]
