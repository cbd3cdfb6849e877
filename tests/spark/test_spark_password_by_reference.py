"""The metadata password never leaves the driver in clear (docs/security.md): the options tidekeep
hands Spark and everything Spark ships to its Python workers and executors (the readers, the
writers, the catalog source's reader — pickled as Spark pickles them) hold the metadata URL without
its password and a reference to where the password is; a `metadata_url` option that holds a
password is refused. Real PostgreSQL with the test role's password, real Spark."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql.types import StringType, StructField, StructType

import tidekeep as tk
from tidekeep.catalog.source import CatalogDataSource
from tidekeep.spark.datasource import TidekeepBatchReader, load_stream
from tidekeep.spark.options import parse_read_options
from tidekeep.spark.sink import make_batch_writer, save_to_stream

STREAM = "s/x"


def with_query_password(url: str) -> str:
    """The same URL with its password as a `password` query parameter, which libpq also takes."""
    parsed = sa.make_url(url)
    return parsed.set(password=None).update_query_dict({"password": parsed.password}).render_as_string(
        hide_password=False)


def leaks(data: str | bytes, password: str) -> list[str]:
    """The shapes in which a password shows in a text or a pickle: a URL's user info, a parameter."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    return [shape for shape in (f":{password}@", f"password={password}") if shape in text]


@pytest.fixture(params=["user-info", "query"])
def secret_url(request: pytest.FixtureRequest, pg_url: str) -> str:
    """A PostgreSQL URL holding the password in its user info, or as a query parameter."""
    return pg_url if request.param == "user-info" else with_query_password(pg_url)


@pytest.fixture
def workspace(tmp_path: Path, secret_url: str) -> Iterator[tk.Client]:
    """A workspace on that URL (in its tidekeep.yaml) with a one-segment stream of three events."""
    home = tmp_path / "ws"
    tk.init_workspace(home, {"metadata.url": secret_url, "storage.uri": str(tmp_path / "data")})
    with tk.connect(home) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        with client.stream(STREAM).writer("w") as writer:
            for i in range(3):
                writer.write(f"ev{i}".encode())
        yield client


def password_of(client: tk.Client) -> str:
    url = sa.make_url(client.settings.metadata_url)
    password = url.password or url.query.get("password")
    assert isinstance(password, str) and password
    return password


def test_the_spark_options_of_a_client_hold_no_password(workspace: tk.Client) -> None:
    options = workspace.spark_options()
    assert leaks(repr(options), password_of(workspace)) == []
    public = sa.make_url(options["metadata_url"])
    assert public.password is None and "password" not in public.query
    assert public.host == "127.0.0.1" and public.database == sa.make_url(workspace.settings.metadata_url).database


def test_what_spark_ships_to_executors_holds_no_password(workspace: tk.Client) -> None:
    password = password_of(workspace)
    options = {"stream": STREAM, **workspace.spark_options()}
    reader = TidekeepBatchReader(parse_read_options(options))
    schema = StructType([StructField("body", StringType())])
    writer = make_batch_writer({**options, "payload_column": "body"}, schema, overwrite=False)
    catalog_source = CatalogDataSource({key: options[key] for key in options if key.startswith("metadata_")})
    catalog_reader = catalog_source.reader(catalog_source.schema())
    for shipped in (reader, writer, catalog_reader):
        assert leaks(pickle.dumps(shipped), password) == [], type(shipped).__name__


def test_a_metadata_url_option_holding_a_password_is_refused(spark, workspace: tk.Client) -> None:  # type: ignore[no-untyped-def]
    url = workspace.settings.metadata_url
    storage = workspace.settings.storage_uri
    with pytest.raises((AnalysisException, PythonException)) as raised:
        (spark.read.format("tidekeep").option("stream", STREAM).option("metadata_url", url)
         .option("storage", storage).load())
    assert "metadata_password_file" in str(raised.value)
    assert leaks(str(raised.value), password_of(workspace)) == []
    with pytest.raises((AnalysisException, PythonException)) as raised:
        spark.read.format("tidekeep_catalog").option("metadata_url", url).load()
    assert "metadata_password_file" in str(raised.value)
    # with only the workspace's home, a Spark worker reads the URL from tidekeep.yaml: it cannot make
    # a private file for the executors there, so it needs the deployment's variable
    with pytest.raises((AnalysisException, PythonException)) as raised:
        spark.read.format("tidekeep_catalog").option("home", str(workspace.settings.home)).load()
    assert "TIDEKEEP_METADATA_PASSWORD" in str(raised.value)
    assert leaks(str(raised.value), password_of(workspace)) == []


def test_the_python_helpers_pass_the_password_by_reference_and_still_work(spark, workspace: tk.Client) -> None:  # type: ignore[no-untyped-def]
    url, storage = workspace.settings.metadata_url, workspace.settings.storage_uri
    frame = spark.createDataFrame([(f"row {i}",) for i in range(4)], "body string")
    save_to_stream(frame, STREAM, payload_column="body", metadata_url=url, storage=storage)
    rows = load_stream(spark, STREAM, metadata_url=url, storage=storage).collect()
    assert sorted(bytes(r["payload"]) for r in rows) == sorted([b"ev0", b"ev1", b"ev2"] +
                                                               [f"row {i}".encode() for i in range(4)])
    via_options = spark.read.format("tidekeep").options(stream=STREAM, **workspace.spark_options()).load()
    assert via_options.count() == 7
