"""The storage root on S3 (a moto server on loopback, pyarrow's own S3 client): credentials only
from the AWS chain, never in storage.uri or tidekeep.yaml; `tidekeep init` stamps the workspace on
S3; a missing bucket is named; chunk writes make no directory marker objects."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.cli_runner import InProcess
from helpers.s3 import S3Server, admin_filesystem, drop_bucket, object_keys, requests_logged
from tidekeep.cli.failures import describe
from tidekeep.errors import EnvironmentFailure
from tidekeep.store.fileio import FileIO
from tidekeep.store.workspace import MARKER_FILE, read_storage_id
from tidekeep.uri_credentials import credentials_in_uri, is_credential_setting

SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
ACCESS = "AKIAIOSFODNN7EXAMPLE"
STREAM = "s/a"


def _with_credentials(server: S3Server, bucket: str) -> dict[str, str]:
    plain = server.uri(bucket, "data")
    return {
        "user part": f"s3://{ACCESS}:{SECRET}@{bucket}/data?endpoint_override={server.endpoint}&scheme=http",
        "access key alone": f"s3://{ACCESS}@{bucket}/data?endpoint_override={server.endpoint}&scheme=http",
        "query keys": f"{plain}&access_key={ACCESS}&secret_key={SECRET}",
        "session token": f"{plain}&session_token={SECRET}",
    }


@pytest.mark.parametrize("shape", ["user part", "access key alone", "query keys", "session token"])
def test_a_storage_uri_carrying_credentials_is_refused_without_showing_them(
        tmp_path: Path, s3_server: S3Server, s3_bucket: str, in_process: InProcess, shape: str) -> None:
    uri = _with_credentials(s3_server, s3_bucket)[shape]
    with pytest.raises(tk.ConfigError) as refused:
        tk.connect(home=tmp_path / "ws", storage=uri, create=True)
    message = str(refused.value)
    assert message.startswith("bad value for 'storage.uri' in flags: it carries credentials")
    assert "AWS_ACCESS_KEY_ID" in message and SECRET not in message and ACCESS not in message
    with pytest.raises(tk.ConfigError, match="it carries credentials") as direct:
        FileIO(uri)
    assert SECRET not in str(direct.value) and ACCESS not in str(direct.value)
    done = in_process("--storage", uri, "init")
    assert done.code == tk.ConfigError.exit_code
    assert done.stderr.count("\n") == 1 and "carries credentials" in done.stderr
    assert SECRET not in done.stderr + done.stdout and ACCESS not in done.stderr + done.stdout
    assert not (tmp_path / "ws").exists()  # refused before anything was created
    assert object_keys(s3_server, s3_bucket) == []


@pytest.mark.parametrize("key", ["secret_key", "access_key", "session_token", "aws_secret_access_key"])
def test_credentials_in_tidekeep_yaml_are_refused_by_name(tmp_path: Path, key: str) -> None:
    home = tmp_path / "ws"
    home.mkdir()
    (home / "tidekeep.yaml").write_text(f"storage:\n  {key}: {SECRET}\n")
    with pytest.raises(tk.ConfigError) as refused:
        tk.connect(home=home, create=True)
    message = str(refused.value)
    assert message.startswith(f"setting 'storage.{key}' in {home / 'tidekeep.yaml'} is refused: object-store "
                              "credentials come from the store's standard chain")
    assert SECRET not in message
    assert sorted(p.name for p in home.iterdir()) == ["tidekeep.yaml"]


def test_init_on_s3_stamps_the_workspace_and_the_workspace_opens_again(
        tmp_path: Path, s3_server: S3Server, s3_bucket: str, in_process: InProcess) -> None:
    uri = s3_server.uri(s3_bucket, "data")
    done = in_process("--storage", uri, "init", "--json")
    assert done.code == 0, done.stderr
    workspace_id = json.loads(done.stdout)["workspace_id"]
    assert f"data/{MARKER_FILE}" in object_keys(s3_server, s3_bucket)
    assert read_storage_id(FileIO(uri)) == workspace_id
    with tk.connect(home=in_process.home, settings={"writer.linger": 0}) as client:  # tidekeep.yaml names the URI
        assert client.workspace_id == workspace_id
        assert client.workspace.storage.uri == uri
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        with client.stream(STREAM).writer("w") as writer:
            writer.write_many([b"e%d" % i for i in range(10)], [f"k{i}" for i in range(10)])
    again = in_process("init", "--json")
    assert again.code == 0 and json.loads(again.stdout)["workspace_id"] == workspace_id
    with tk.connect(home=in_process.home) as client:
        assert sorted(e.payload for e in client.stream(STREAM).read()) == sorted(b"e%d" % i for i in range(10))


def test_init_refuses_another_workspaces_s3_root(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    uri = s3_server.uri(s3_bucket, "data")
    first = tk.connect(home=tmp_path / "a", storage=uri, create=True)
    with pytest.raises(tk.WorkspaceMismatch, match=f"belongs to workspace {first.workspace_id}"):
        tk.connect(home=tmp_path / "b", storage=uri, create=True)
    assert not (tmp_path / "b").exists()
    first.close()


def test_another_workspaces_store_deletes_nothing_in_an_s3_root(tmp_path: Path, s3_server: S3Server,
                                                                s3_bucket: str) -> None:
    """Workspace B's metadata store pointed at workspace A's S3 root: every object of A's would be an
    orphan to B. The stamps do not match, so B cannot open the root, and no object goes."""
    uri = s3_server.uri(s3_bucket, "data")
    with tk.connect(home=tmp_path / "a", storage=uri, settings={"writer.linger": 0}, create=True) as a:
        a.create_stream(STREAM, tk.StreamConfig(segments=2))
        with a.stream(STREAM).writer("w") as writer:
            writer.write_many([b"e%d" % i for i in range(20)], [f"k{i}" for i in range(20)])
        a.workspace.storage.write("streams/s/orphan.parquet", b"a crashed writer's file")
        a_id = a.workspace_id
    before = object_keys(s3_server, s3_bucket)
    b = tk.connect(home=tmp_path / "b", storage=str(tmp_path / "b-data"), create=True)
    b.close()
    with pytest.raises(tk.WorkspaceMismatch, match=f"workspace {a_id}"):
        tk.connect(home=tmp_path / "b", storage=uri)
    assert object_keys(s3_server, s3_bucket) == before


def test_a_stamp_left_half_moved_on_s3_is_not_data(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    """On S3 the stamp is uploaded as <name>.<random>.partial and copied into place: a crash between
    the copy and the delete leaves the .partial object, which is not the workspace's data."""
    uri = s3_server.uri(s3_bucket, "data")
    FileIO(uri).write(f"{MARKER_FILE}.{'0' * 32}.partial", b'{"workspace')
    with tk.connect(home=tmp_path / "ws", storage=uri, create=True) as client:
        assert read_storage_id(FileIO(uri)) == client.workspace_id


def test_a_missing_bucket_is_a_config_error_and_nothing_is_created(tmp_path: Path, s3_server: S3Server,
                                                                   s3_bucket: str) -> None:
    uri = s3_server.uri("no-such-bucket", "data")
    with pytest.raises(tk.ConfigError, match=r"^bad value for 'storage\.uri': bucket 'no-such-bucket' does not exist"):
        tk.connect(home=tmp_path / "ws", storage=uri, create=True)
    assert not (tmp_path / "ws").exists()
    tk.connect(home=tmp_path / "real", storage=s3_server.uri(s3_bucket, "data"), create=True).close()
    with pytest.raises(tk.ConfigError, match="bucket 'no-such-bucket' does not exist"):
        tk.connect(home=tmp_path / "real", storage=uri)  # opening names it too, before any work


def test_chunk_writes_create_no_directory_marker_objects(tmp_path: Path, s3_server: S3Server,
                                                         s3_bucket: str) -> None:
    """An object store has no directories: every chunk is one PUT, with no empty "a/b/" objects
    written beside it (pyarrow's create_dir would write one per level, on every write)."""
    with tk.connect(home=tmp_path / "ws", storage=s3_server.uri(s3_bucket, "data"),
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        with client.stream(STREAM).writer("w", batch_size="200B") as writer:
            for i in range(30):
                writer.write(b"event-%02d" % i, routing_key=f"k{i % 5}")
        stored = [key for key in object_keys(s3_server, s3_bucket) if key.startswith("data/streams/")]
        assert len(stored) > 2
        assert stored == sorted(f"data/{f.path}" for f in client.workspace.storage.list_files("streams"))
        assert not [key for key in stored if key.endswith("/")], stored


def test_a_chunk_write_is_one_put_request(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    """A chunk is far smaller than an upload part: it goes up in one PUT, not a multipart upload's
    three requests (initiate, upload the part, complete)."""
    with tk.connect(home=tmp_path / "ws", storage=s3_server.uri(s3_bucket, "data"),
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        before = len(requests_logged(s3_server))
        with client.stream(STREAM).writer("w") as writer:
            writer.write_many([b"e%d" % i for i in range(40)], [f"k{i}" for i in range(40)])
        during = requests_logged(s3_server)[before:]
        chunks = [f.path for f in client.workspace.storage.list_files("streams")]
    assert len(chunks) == 2  # one batch over two segments
    writes = [request for request in during if not request.startswith(("GET", "HEAD"))]
    assert sorted(writes) == sorted(f"PUT /{s3_bucket}/data/{path}" for path in chunks), during


def test_reading_a_chunk_is_one_head_and_two_gets(tmp_path: Path, s3_server: S3Server, s3_bucket: str) -> None:
    """Reading a chunk opens its object once (one HEAD for its size) and reads the footer and the
    data (two ranged GETs); handing pyarrow the path instead made its dataset discovery ask about
    the object twice more."""
    with tk.connect(home=tmp_path / "ws", storage=s3_server.uri(s3_bucket, "data"),
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        with client.stream(STREAM).writer("w") as writer:
            writer.write_many([b"e%d" % i for i in range(40)], [f"k{i}" for i in range(40)])
        (chunk,) = [f.path for f in client.workspace.storage.list_files("streams")]
        before = len(requests_logged(s3_server))
        assert [e.payload for e in client.stream(STREAM).read()] == [b"e%d" % i for i in range(40)]
        during = [request for request in requests_logged(s3_server)[before:] if chunk in request]
    assert sorted(during) == [f"GET /{s3_bucket}/data/{chunk}"] * 2 + [f"HEAD /{s3_bucket}/data/{chunk}"], during


# ---- the pure decision ---------------------------------------------------------------------------
@pytest.mark.parametrize(("uri", "expected"), [
    ("/var/lib/tidekeep/data", None),
    ("s3://bucket/prefix?endpoint_override=127.0.0.1:9000&scheme=http&region=us-east-1", None),
    ("s3://bucket", None),
    ("file:///data", None),
    ("hdfs://namenode:8020/data", None),
    ("hdfs://hadoop@namenode:8020/data", None),  # an HDFS user name is no secret
    ("hdfs://hadoop:pw@namenode:8020/data", "a password in its user part"),
    ("s3://AK:SE/CR+ET@bucket/p", "a password in its user part"),  # S3 secrets hold "/" and "+"
    ("s3://AK@bucket/p", "an access key in its user part"),
    ("gs://AK@bucket/p", "an access key in its user part"),
    ("s3://bucket/p?region=x&secret_key=y", "the query parameter 'secret_key'"),
    ("s3://bucket/p?Access_Key=y", "the query parameter 'Access_Key'"),
    ("s3://bucket/p?session_token=", "the query parameter 'session_token'"),
])
def test_credentials_in_uri(uri: str, expected: str | None) -> None:
    assert credentials_in_uri(uri) == expected


_SAFE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=12)
_OPTIONS = st.lists(st.sampled_from(["region", "scheme", "endpoint_override", "allow_bucket_creation"]), max_size=3)


@given(bucket=_SAFE, prefix=_SAFE, options=_OPTIONS, value=_SAFE,
       secret=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/+=", min_size=1,
                      max_size=40),
       where=st.sampled_from(["user", "query"]), name=st.sampled_from(["access_key", "secret_key", "session_token"]))
def test_a_credential_is_found_wherever_it_is_put_and_a_uri_without_one_passes(
        bucket: str, prefix: str, options: list[str], value: str, secret: str, where: str, name: str) -> None:
    query = "&".join(f"{option}={value}" for option in options)
    clean = f"s3://{bucket}/{prefix}" + (f"?{query}" if query else "")
    assert credentials_in_uri(clean) is None
    if where == "user":
        carrying = f"s3://AKIA:{secret}@{bucket}/{prefix}" + (f"?{query}" if query else "")
    else:
        carrying = clean + ("&" if query else "?") + f"{name}={secret}"
    assert credentials_in_uri(carrying) is not None


@pytest.mark.parametrize(("key", "expected"), [
    ("storage.secret_key", True), ("storage.access_key", True), ("storage.session_token", True),
    ("storage.aws_region", True), ("metadata.password", True), ("storage.uri", False), ("storage.fsync", False),
    ("writr.linger", False)])
def test_is_credential_setting(key: str, expected: bool) -> None:
    assert is_credential_setting(key) is expected


# ---- the store failing under a running workspace -------------------------------------------------
def test_a_failing_object_store_is_an_environment_failure_and_the_writer_keeps_its_events(
        tmp_path: Path, s3_server: S3Server, s3_bucket: str, in_process: InProcess) -> None:
    """The bucket vanishes under a workspace: the store's refusal (pyarrow's OSError, which has no
    errno) is reported in one line as an environment failure, not an internal error; a command
    opening the workspace then names the missing bucket; the writer keeps its unflushed events and
    writes them once when the store is back."""
    uri = s3_server.uri(s3_bucket, "data")
    assert in_process("--storage", uri, "init").code == 0
    with tk.connect(home=in_process.home, settings={"writer.linger": 0}) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        writer = client.stream(STREAM).writer("w")
        drop_bucket(s3_server, s3_bucket)
        writer.write(b"kept", routing_key="k")
        with pytest.raises(OSError, match="bucket does not exist") as failed:
            writer.flush()
        message, code = describe(failed.value)
        assert code == EnvironmentFailure.exit_code, message
        assert "The specified bucket does not exist" in message and "\n" not in message
        done = in_process("stream", "write", STREAM, stdin=b"never\n")
        assert done.code == tk.ConfigError.exit_code and done.stderr.count("\n") == 1
        assert f"bucket '{s3_bucket}' does not exist" in done.stderr
        admin_filesystem(s3_server).create_dir(s3_bucket)
        writer.flush()
        writer.close()
        assert [e.payload for e in client.stream(STREAM).read()] == [b"kept"]
