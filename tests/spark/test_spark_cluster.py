"""Files Spark executors cannot reach are refused before any Spark work (spark/cluster.py).

The decision is pure and checked against an oracle on labelled masters, URLs and paths; every job
entry (archive ingest and search, catalog import, job and impact, the sources and the sink) is
then shown to refuse a SQLite metadata store, a local storage path or local inputs on a master
that is not local, naming the setting and the master, with nothing changed — and to accept them
when spark.shared_filesystem declares the filesystem shared. No cluster is needed: a refusal
happens before Spark starts, and an accepted job runs on the test session (local[2]), which Spark
returns whatever master the settings name.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from pyspark.errors import AnalysisException

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.config import env_name, load_settings
from tidekeep.errors import ConfigError
from tidekeep.spark.cluster import (
    check_cluster_reach,
    check_settings_reach,
    cluster_refusal,
    is_local_master,
    is_local_path,
    is_sqlite_url,
)
from tidekeep.spark.credentials import PASSWORD_ENV
from tidekeep.spark.datasource import TidekeepDataSource, load_stream
from tidekeep.spark.sink import save_to_stream

CLUSTER = "spark://host:7077"
STREAM = "iot/data"

# ---- the pure decision -------------------------------------------------------------------------------

LOCAL_MASTERS = ["local", "local[1]", "local[4]", "local[*]", "local[4,2]", "local[*,3]", "local-cluster[2,1,1024]"]
OTHER_MASTERS = [CLUSTER, "spark://a:7077,b:7077", "yarn", "k8s://https://h:6443", "mesos://h:5050", "sc://h:15002",
                 "local[2", "locally", "LOCAL", " local", "local-cluster", "local[2]x", ""]


@pytest.mark.parametrize("master", LOCAL_MASTERS)
def test_local_masters_run_executors_on_this_machine(master: str) -> None:
    assert is_local_master(master)


@pytest.mark.parametrize("master", OTHER_MASTERS)
def test_other_masters_may_run_executors_elsewhere(master: str) -> None:
    assert not is_local_master(master)


segment = st.text("abcxyz019_-", min_size=1, max_size=6)
path = st.lists(segment, min_size=1, max_size=3).map("/".join)


@st.composite
def masters(draw: st.DrawFn) -> tuple[str, bool]:
    """A master and whether it is local (labelled by construction)."""
    n = st.integers(1, 64).map(str)
    local = st.one_of(st.just("local"), st.just("local[*]"), n.map(lambda c: f"local[{c}]"),
                      st.tuples(st.sampled_from(["*", "2", "16"]), n).map(lambda t: f"local[{t[0]},{t[1]}]"),
                      st.tuples(n, n, n).map(lambda t: f"local-cluster[{t[0]},{t[1]},{t[2]}]"))
    other = st.one_of(st.sampled_from(OTHER_MASTERS), segment.map(lambda h: f"spark://{h}:7077"),
                      segment.map(lambda h: f"k8s://https://{h}:443"), segment.map(lambda h: f"sc://{h}"))
    is_local = draw(st.booleans())
    return draw(local if is_local else other), is_local


@st.composite
def metadata_urls(draw: st.DrawFn) -> tuple[str | None, bool]:
    """A metadata URL executors open (None: they do not) and whether it is SQLite."""
    sqlite = st.one_of(path.map(lambda p: f"sqlite:////{p}.db"), path.map(lambda p: f"sqlite+pysqlite:///{p}.db"),
                       st.just("sqlite://"), st.just("SQLite:///x.db"))
    other = st.one_of(segment.map(lambda h: f"postgresql+psycopg://u:p@{h}/db"),
                      segment.map(lambda h: f"postgresql://{h}/sqlite"))
    kind = draw(st.sampled_from(["none", "sqlite", "other"]))
    if kind == "none":
        return None, False
    return draw(sqlite if kind == "sqlite" else other), kind == "sqlite"


@st.composite
def locations(draw: st.DrawFn) -> tuple[str, bool]:
    """A storage URI or input path and whether it is on this machine."""
    local = st.one_of(path.map(lambda p: f"/{p}"), path, path.map(lambda p: f"file:///{p}"),
                      path.map(lambda p: f"FILE:///{p}"))
    other = st.one_of(path.map(lambda p: f"s3://{p}"), path.map(lambda p: f"gs://{p}"),
                      path.map(lambda p: f"hdfs://nn:8020/{p}"), path.map(lambda p: f"abfs://c@a.dfs/{p}"))
    is_local = draw(st.booleans())
    return draw(local if is_local else other), is_local


@given(masters(), metadata_urls(), st.one_of(st.none(), locations()), st.lists(locations(), max_size=3),
       st.booleans())
def test_refused_exactly_when_a_cluster_would_open_files_of_this_machine(
        master: tuple[str, bool], metadata: tuple[str | None, bool], storage: tuple[str, bool] | None,
        inputs: list[tuple[str, bool]], shared: bool) -> None:
    """Oracle: refused iff the filesystem is not declared shared, the master is not local, and the
    executors open a SQLite metadata file, a local storage path or a local input; the reason names
    the first of those (metadata, storage, inputs) and the master."""
    url, is_sqlite = metadata
    uri, storage_local = storage if storage is not None else (None, False)
    reason = cluster_refusal(master[0], shared_filesystem=shared, metadata_url=url, storage_uri=uri,
                             inputs=[p for p, _ in inputs])
    first_local_input = next((p for p, local in inputs if local), None)
    refused = not shared and not master[1] and (is_sqlite or storage_local or first_local_input is not None)
    assert (reason is not None) == refused
    if reason is None:
        check_cluster_reach(master[0], shared_filesystem=shared, metadata_url=url, storage_uri=uri,
                            inputs=[p for p, _ in inputs])
        return
    expected = (f"metadata.url {url!r}" if is_sqlite else f"storage.uri {uri!r}" if storage_local
                else f"input {first_local_input!r}")
    assert reason.startswith(expected) and f"Spark master {master[0]!r}" in reason
    assert "spark.shared_filesystem: true" in reason and "\n" not in reason
    with pytest.raises(ConfigError) as refusal:
        check_cluster_reach(master[0], shared_filesystem=shared, metadata_url=url, storage_uri=uri,
                            inputs=[p for p, _ in inputs])
    assert str(refusal.value) == reason and refusal.value.exit_code == 2


@pytest.mark.parametrize(("url", "sqlite"), [
    ("sqlite:///m.db", True), ("sqlite+pysqlite:////a/m.db", True), ("sqlite://", True),
    ("postgresql+psycopg://u@h/db", False), ("postgresql://h/sqlite", False), ("mysql://h/db", False)])
def test_sqlite_urls(url: str, sqlite: bool) -> None:
    assert is_sqlite_url(url) is sqlite


@pytest.mark.parametrize(("uri", "local"), [
    ("/data", True), ("data", True), ("file:///data", True), ("s3://b/p", False), ("hdfs://nn/p", False)])
def test_local_paths(uri: str, local: bool) -> None:
    assert is_local_path(uri) is local


# ---- the job entries ---------------------------------------------------------------------------------


def on_cluster(client: tk.Client, **settings: object) -> tk.Client:
    """The same workspace, configured for a Spark cluster."""
    return tk.connect(client.settings.home, metadata_url=client.settings.metadata_url,
                      storage=client.settings.storage_uri, settings={"spark.master": CLUSTER, **settings}, create=True)


def refused(call, setting: str) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError) as refusal:
        call()
    message = str(refusal.value)
    assert message.startswith(setting) and f"Spark master {CLUSTER!r}" in message
    return message


def write_log(tmp_path: Path) -> Path:
    log = tmp_path / "logs" / "app.log"
    log.parent.mkdir(exist_ok=True)
    log.write_text("2024-07-01T12:00:00Z INFO started\n2024-07-01T12:00:05Z ERROR failed\n", encoding="utf-8")
    return log


def test_archive_ingest_and_search_refuse_local_storage_on_a_cluster(spark, client: tk.Client,
                                                                      tmp_path: Path) -> None:
    log = write_log(tmp_path)
    with on_cluster(client) as cluster:
        refused(lambda: cluster.archives.ingest("app", [log]), "storage.uri")
        assert cluster.archives.list() == [] and cluster.archives.datasets() == []
    client.archives.ingest("app", [log])  # the workspace itself is fine on the local master
    with on_cluster(client) as cluster:
        refused(lambda: cluster.archives.search("app", "ERROR"), "storage.uri")
        assert cluster.archives.jobs() == []  # refused before the search job exists


def test_local_inputs_are_refused_on_a_cluster_even_with_object_storage(tmp_path: Path) -> None:
    """Executors of the ingest and the import read the input files: a local one is refused where
    the storage is no problem. (Settings only: this machine has no object store to open.)"""
    object_store = load_settings(tmp_path / "ws", {"spark.master": CLUSTER, "storage.uri": "s3://bucket/tk"}, env={})
    refused(lambda: check_settings_reach(object_store, storage=True, inputs=[str(tmp_path / "a.log")]), "input")
    check_settings_reach(object_store, storage=True)  # object storage alone is reachable
    local = load_settings(tmp_path / "ws", {"spark.master": CLUSTER}, env={})
    refused(lambda: check_settings_reach(local, storage=True), "storage.uri")


def test_catalog_import_refuses_sqlite_on_a_cluster_and_the_job_runs_in_the_driver(
        spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """Import's executors would open the SQLite file: refused. The job and impact on SQLite run their
    slices in the driver, which has the file: no executor opens it, so a cluster master is no
    obstacle."""
    client = sqlite_client
    csv = tmp_path / "records.csv"
    csv.write_text("feed,type,create_time\nF,Raw,2024-01-01T00:00:00Z\n", encoding="utf-8")
    client.catalog.set_rules([RetentionRule(1, "old", True, parse("all"), Age(1, "days"))])
    with on_cluster(client) as cluster:
        refused(lambda: cluster.catalog.import_path(csv), "metadata.url")
        assert cluster.catalog.count() == 0 and cluster.catalog.runs() == []  # nothing recorded
        cluster.catalog.add([{"feed": "F", "type": "Raw", "create_time": 1_000}])
        assert cluster.catalog.impact().total_rows == 1
        assert cluster.catalog.run().rows == 1


def test_catalog_import_on_postgresql_refuses_only_the_local_input_files(spark, pg_url: str, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # the deployment gives every node the metadata password (docs/security.md)
    monkeypatch.setenv(PASSWORD_ENV, str(sa.make_url(pg_url).password))
    csv = tmp_path / "records.csv"
    csv.write_text("feed,type,create_time\nF,Raw,2024-01-01T00:00:00Z\n", encoding="utf-8")
    with tk.connect(tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path / "data"),
                    settings={"spark.master": CLUSTER}, create=True) as cluster:
        message = refused(lambda: cluster.catalog.import_path(csv), "input")
        assert repr(str(csv.resolve())) in message
        assert cluster.catalog.count() == 0
        check_settings_reach(cluster.settings, metadata=True)  # PostgreSQL is reachable from anywhere


def test_a_metadata_password_the_executors_have_no_reference_to_is_refused_before_any_work(
        spark, pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a cluster the executors can read the metadata password only from TIDEKEEP_METADATA_PASSWORD:
    unset (or another password) on the driver, the jobs that open the store on executors are refused
    before Spark starts, even on a shared filesystem, and the message never holds the password."""
    password = str(sa.make_url(pg_url).password)
    csv = tmp_path / "records.csv"
    csv.write_text("feed,type,create_time\nF,Raw,2024-01-01T00:00:00Z\n", encoding="utf-8")
    for driver_value, shared in ((None, False), ("not the password", False), (None, True)):
        if driver_value is None:
            monkeypatch.delenv(PASSWORD_ENV, raising=False)
        else:
            monkeypatch.setenv(PASSWORD_ENV, driver_value)
        with tk.connect(tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path / "data"),
                        settings={"spark.master": CLUSTER, "spark.shared_filesystem": shared}, create=True) as cluster:
            cluster.catalog.set_rules([RetentionRule(1, "old", True, parse("all"), Age(1, "days"))])
            for job in (lambda: cluster.catalog.import_path(csv), cluster.catalog.run, cluster.catalog.impact,
                        cluster.spark_options):
                message = refused(job, "metadata.url")
                assert PASSWORD_ENV in message and f":{password}@" not in message
            assert cluster.catalog.count() == 0 and cluster.catalog.runs() == []  # nothing recorded


def test_a_declared_shared_filesystem_is_accepted(spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """With spark.shared_filesystem the same jobs pass the check and run (on the test session,
    which Spark returns whatever master the settings name)."""
    client = sqlite_client
    log = write_log(tmp_path)
    client.catalog.set_rules([RetentionRule(1, "old", True, parse("all"), Age(1, "days"))])
    client.catalog.add([{"feed": "F", "type": "Raw", "create_time": 1_000}])
    with on_cluster(client, **{"spark.shared_filesystem": True}) as shared:
        check_settings_reach(shared.settings, metadata=True, storage=True, inputs=[str(log)])
        assert shared.archives.ingest("app", [log]).messages == 2
        assert shared.archives.search("app", "ERROR").results_count == 1
        report = shared.catalog.run()
        assert report.state == "SUCCEEDED" and report.rows == 1


# ---- the sources and the sink -------------------------------------------------------------------------


def test_the_source_and_sink_helpers_refuse_local_storage_on_a_cluster_master(
        spark, sqlite_client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The helpers check in the caller, as the planning worker does: its spark.master setting is the
    session's master (register_data_sources puts it in the workers' environment)."""
    client = sqlite_client
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    df = spark.createDataFrame([("a",)], "payload string")
    monkeypatch.setenv(env_name("spark.master"), CLUSTER)
    refused(lambda: load_stream(spark, STREAM, **client.spark_options()), "storage.uri")
    refused(lambda: save_to_stream(df, STREAM, **client.spark_options()), "storage.uri")
    assert list(client.stream(STREAM).read()) == []
    shared = {**client.spark_options(), "shared_filesystem": "true"}
    save_to_stream(df, STREAM, **shared)
    assert load_stream(spark, STREAM, **shared).count() == 1


def test_registration_tells_the_planning_workers_the_sessions_master(spark, sqlite_client: tk.Client) -> None:
    """The sources plan in Python workers that only know the environment PySpark gives them: the
    session's master is there as the spark.master setting, and a cluster master there makes the
    source and the sink refuse local storage at load()/save()."""
    client = sqlite_client
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    environment = spark.sparkContext.environment
    assert environment[env_name("spark.master")] == spark.sparkContext.master == "local[2]"
    df = spark.createDataFrame([("a",)], "payload string")
    try:
        environment[env_name("spark.master")] = CLUSTER
        spark.dataSource.register(TidekeepDataSource)  # wrapped again, with this environment
        with pytest.raises(AnalysisException, match=r"tidekeep\.errors\.ConfigError: storage\.uri .* Spark master"):
            spark.read.format("tidekeep").option("stream", STREAM).options(**client.spark_options()).load()
        with pytest.raises(Exception, match=r"tidekeep\.errors\.ConfigError: storage\.uri .* Spark master"):
            df.write.format("tidekeep").mode("append").option("stream", STREAM) \
                .options(**client.spark_options()).save()
    finally:
        environment[env_name("spark.master")] = spark.sparkContext.master
        spark.dataSource.register(TidekeepDataSource)
    assert list(client.stream(STREAM).read()) == []
    df.write.format("tidekeep").mode("append").option("stream", STREAM).options(**client.spark_options()).save()
    assert [e.payload for e in client.stream(STREAM).read()] == [b"a"]


def test_jobs_are_judged_by_the_running_masters_not_by_what_a_later_builder_asked_for(spark) -> None:
    """`getOrCreate()` copies a builder's master into an existing session's conf without moving the
    session: the jobs still run on the SparkContext's master, and are judged by it."""
    from pyspark.sql import SparkSession

    from tidekeep.spark.connect import job_master

    running = spark.sparkContext.master
    try:
        assert SparkSession.builder.master(CLUSTER).getOrCreate() is spark
        assert spark.conf.get("spark.master") == CLUSTER  # what the builder left behind
        assert job_master(spark) == running == "local[2]"
    finally:
        spark.conf.set("spark.master", running)


# ---- refused before the workspace is touched -------------------------------------------------------

NOWHERE = "spark://nowhere:7077"


def older_workspace(home: Path, metadata_url: str, storage: Path) -> None:
    """A workspace whose store is at the revision before the workspace ids (0012) and whose storage
    root carries no id: one an older tidekeep left, which the next opening migrates to head."""
    from importlib import resources

    from alembic import command
    from alembic.config import Config

    from tidekeep.workspace_areas import MARKER_FILE

    with tk.connect(home, metadata_url=metadata_url, storage=str(storage), create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
    engine = sa.create_engine(metadata_url)
    with engine.connect() as conn:
        config = Config()
        config.set_main_option("script_location", str(resources.files("tidekeep.store") / "migrations"))
        config.attributes["connection"] = conn
        command.downgrade(config, "0012")
        conn.commit()
    engine.dispose()
    (storage / MARKER_FILE).unlink()


def store_state(metadata_url: str, storage: Path) -> tuple[object, ...]:
    """Everything a job could change: every table with its rows, and every file of the storage root."""
    engine = sa.create_engine(metadata_url)
    with engine.connect() as conn:
        tables = {name: sorted(map(repr, conn.execute(sa.text(f'SELECT * FROM "{name}"')).all()))
                  for name in sorted(sa.inspect(conn).get_table_names())}
    engine.dispose()
    return tables, sorted(str(p.relative_to(storage)) for p in storage.rglob("*"))


def test_a_refused_command_leaves_an_older_store_unmigrated(spark, in_process, new_store_url: str, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a workspace migrates its store to head: every Spark command refuses a job its
    executors could not reach before it opens the workspace, so the refused command leaves the
    store at its revision, with no audit row, run or search job — as every bad input does."""
    monkeypatch.delenv(PASSWORD_ENV, raising=False)  # on PostgreSQL the metadata jobs are refused for it
    storage = tmp_path / "data"
    older_workspace(in_process.home, new_store_url, storage)
    log = write_log(tmp_path)
    csv = tmp_path / "records.csv"
    csv.write_text("feed,type,create_time\nF,Raw,2024-01-01T00:00:00Z\n", encoding="utf-8")
    before = store_state(new_store_url, storage)
    assert before[0]["alembic_version"] == [repr(("0012",))]
    for command in (["archives", "ingest", "app", str(log)], ["archives", "search", "app", "ERROR"],
                    ["catalog", "import", str(csv)], ["catalog", "run"], ["catalog", "impact"]):
        result = in_process("--set", f"spark.master={NOWHERE}", *command)
        assert result.code == 2 and f"Spark master {NOWHERE!r}" in result.stderr, (command, result.stderr)
        assert store_state(new_store_url, storage) == before, command


def test_the_source_and_sink_refuse_before_they_open_an_older_store(spark, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The driver of the stream source and sink refuses storage its executors could not reach
    before it opens the workspace (which would migrate the store)."""
    sqlite_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    storage = tmp_path / "data"
    older_workspace(tmp_path / "ws", sqlite_url, storage)
    options = {"home": str(tmp_path / "ws"), "metadata_url": sqlite_url, "storage": str(storage)}
    before = store_state(sqlite_url, storage)
    monkeypatch.setenv(env_name("spark.master"), CLUSTER)
    df = spark.createDataFrame([("a",)], "payload string")
    refused(lambda: load_stream(spark, STREAM, **options), "storage.uri")
    refused(lambda: save_to_stream(df, STREAM, **options), "storage.uri")
    assert store_state(sqlite_url, storage) == before


def test_a_connect_server_elsewhere_is_refused_before_the_store_is_opened(tmp_path: Path) -> None:
    """A Connect server on another host is judged as a cluster whatever its own master
    (spark/connect.py): its executors cannot open a SQLite file or a local path of this machine.
    Knowing that needs no connection, so the command refuses before it opens the workspace — which
    would migrate an older store — and without trying to reach the server (192.0.2.1 is an address
    reserved for documentation: nothing answers there)."""
    sqlite_url = f"sqlite:///{tmp_path / 'metadata.db'}"
    storage = tmp_path / "data"
    older_workspace(tmp_path / "ws", sqlite_url, storage)
    log = write_log(tmp_path)
    before = store_state(sqlite_url, storage)
    for command in (["archives", "ingest", "app", str(log)], ["archives", "search", "app", "ERROR"],
                    ["catalog", "run"], ["catalog", "impact"]):
        # a CLI process of its own: a Connect session made in a process makes every later one Connect
        done = run_cli(tmp_path / "ws", "--set", "spark.remote=sc://192.0.2.1:15002", *command, timeout=90)
        assert done.returncode == 2 and "Spark master 'sc://192.0.2.1'" in done.stderr, (command, done.stderr)
        assert store_state(sqlite_url, storage) == before, command
