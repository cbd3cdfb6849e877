"""tidekeep on a Spark standalone cluster whose second worker shares no disk with the driver
(the `cluster` fixture, tests/helpers/cluster.py), with PostgreSQL metadata and S3 storage.

The scenarios (tests/helpers/cluster_scenarios.py) run in a driver process on the cluster and in
one on local[2], at the same time, on workspaces of their own; the results must be equal, and the
cluster driver's event log must show the tasks of every step ran on both workers (hosts 127.0.0.1
and 127.0.0.2). The three scenarios without a fault share one pair of drivers (`compared`, once per
module: each driver pays a JVM and two executors' start-up); the killed executor has its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tidekeep as tk
from helpers import HELPERS_DIR
from helpers.cluster import (
    CLUSTER_SINK_GATE,
    ISOLATED_HOST,
    SHARED_HOST,
    StandaloneCluster,
    driver_conf,
    write_spark_defaults,
)
from helpers.cluster_scenarios import ARCHIVE_TARGET_SIZE, BASE_MS, LOG_FILES, LOG_LINES, log_lines
from helpers.pg_schemas import HeadSchemas, url_in_schema
from helpers.procs import worker_env
from helpers.s3 import S3Server, drop_bucket, new_bucket
from helpers.s3 import environment as s3_environment
from helpers.storage import referenced_paths, stored_files
from tidekeep.spark.credentials import PASSWORD_ENV

DRIVER = HELPERS_DIR / "cluster_driver.py"
TESTS_DIR = HELPERS_DIR.parent
BOTH_WORKERS = [SHARED_HOST, ISOLATED_HOST]
MODES = ("cluster", "local")


@dataclass
class Workspaces:
    """The cluster's workspace and local mode's: PostgreSQL schemas and S3 prefixes of their own."""

    tmp_path: Path
    metadata: dict[str, str]  # "cluster" / "local" -> metadata URL
    server: S3Server
    bucket: str

    def home(self, mode: str) -> Path:
        return self.tmp_path / mode / "ws"

    def storage(self, mode: str) -> str:
        return self.server.uri(self.bucket, mode)

    def client(self, mode: str) -> tk.Client:
        return tk.connect(home=self.home(mode), metadata_url=self.metadata[mode], storage=self.storage(mode))


@contextlib.contextmanager
def new_workspaces(tmp_path: Path, head_schemas: HeadSchemas, server: S3Server) -> Iterator[Workspaces]:
    """Two workspaces' places: PostgreSQL schemas at head from the pool, prefixes in a new bucket."""
    schemas = {mode: head_schemas.take() for mode in MODES}
    bucket = new_bucket(server)
    try:
        yield Workspaces(tmp_path, {mode: url_in_schema(head_schemas.base_url, schema)
                                    for mode, schema in schemas.items()}, server, bucket)
    finally:
        drop_bucket(server, bucket)
        for schema in schemas.values():
            head_schemas.give_back(schema)


@pytest.fixture
def workspaces(tmp_path: Path, head_schemas: HeadSchemas, s3_server: S3Server,
               monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspaces]:
    """Two workspaces' places, and the AWS variables in this process to open them here too."""
    for name, value in s3_environment(s3_server).items():
        monkeypatch.setenv(name, value)
    with new_workspaces(tmp_path, head_schemas, s3_server) as places:
        yield places


@dataclass
class Driver:
    """A driver process running one scenario, on the cluster or on local[2]."""

    mode: str
    process: subprocess.Popen[bytes]
    log: Path

    def result(self, timeout: float = 400) -> dict[str, Any]:
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            self.stop()
        output = self.log.read_text(errors="replace")
        assert code == 0, f"the {self.mode} driver failed ({code}):\n{output[-8000:]}"
        lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
        assert lines, f"the {self.mode} driver printed no result:\n{output[-8000:]}"
        return dict(json.loads(lines[-1].removeprefix("RESULT ")))

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


def start_driver(cluster: StandaloneCluster, workspaces: Workspaces, mode: str, *scenarios: str) -> Driver:
    """A driver process (its own session: stopping it takes its JVM along) running `scenarios` in
    turn on a workspace of its own, with tidekeep's session on the cluster's master or on local[2]."""
    workdir = workspaces.tmp_path / mode
    workdir.mkdir(parents=True, exist_ok=True)
    env = worker_env(workspaces.metadata[mode], workspaces.storage(mode), workspaces.home(mode))
    # the executors have the metadata password by reference: the driver needs it in the same variable
    env.update({k: v for k, v in cluster.env.items() if k == PASSWORD_ENV})
    env.update(s3_environment(workspaces.server))
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        env.pop(name, None)  # a developer's own AWS set-up must not redirect the drivers
    # the catalog job's periods are several slices, so its Spark tasks run on both workers
    env["TIDEKEEP_CATALOG_SLICE_ROWS"] = "10"
    # an ingest of ~100 KB writes several archives, so a search has a task per worker
    env["TIDEKEEP_ARCHIVES_TARGET_SIZE"] = str(ARCHIVE_TARGET_SIZE)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS_DIR), os.environ.get("PYTHONPATH")]))
    if mode == "cluster":
        conf_dir = write_spark_defaults(workdir / "conf", driver_conf(cluster, workdir / "events"))
        env.update({"TIDEKEEP_SPARK_MASTER": cluster.master_url, "SPARK_CONF_DIR": str(conf_dir),
                    "SPARK_LOCAL_IP": SHARED_HOST})
    else:
        env["TIDEKEEP_SPARK_MASTER"] = "local[2]"
    log = workdir / "driver.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen([sys.executable, str(DRIVER), str(workdir), *scenarios], env=env, stdout=handle,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return Driver(mode, process, log)


def run_both(cluster: StandaloneCluster, workspaces: Workspaces,
             *scenarios: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """`scenarios` on the cluster and on local[2], at the same time (their JVMs start together)."""
    drivers = [start_driver(cluster, workspaces, mode, *scenarios) for mode in MODES]
    try:
        on_cluster, local = (driver.result() for driver in drivers)
    finally:
        for driver in drivers:
            driver.stop()
    return on_cluster, local


@pytest.fixture(scope="module")
def compared(cluster: StandaloneCluster, tmp_path_factory: pytest.TempPathFactory, head_schemas: HeadSchemas,
             s3_server: S3Server) -> Iterator[tuple[dict[str, Any], dict[str, Any], Workspaces]]:
    """The four fault-free scenarios on the cluster and on local[2]: (cluster driver's output,
    local driver's output, the workspaces)."""
    with new_workspaces(tmp_path_factory.mktemp("compared"), head_schemas, s3_server) as places:
        on_cluster, local = run_both(cluster, places, "write_and_read", "stream_to_stream", "catalog_run_and_purge",
                                       "archives_ingest_search_gc")
        yield on_cluster, local, places


def test_write_and_batch_read_equal_local_mode_and_run_on_both_workers(
        cluster: StandaloneCluster, compared: tuple[dict[str, Any], dict[str, Any], Workspaces]) -> None:
    """A sink batch write (one transaction) and a Spark batch read of a two-segment stream; worker 2
    does not see the test's directory, which the driver's workspace is in."""
    on_cluster, local_run, workspaces = compared
    assert workspaces.tmp_path.is_dir() and not cluster.isolated_path(workspaces.tmp_path).exists()
    assert cluster.isolated_path("/tmp").is_dir()  # its own /tmp, empty of ours
    local = local_run["results"]["write_and_read"]
    assert on_cluster["results"]["write_and_read"] == local
    assert local["spark_read"] == local["client_read"] == sorted([f"k{i % 7}", f"ev{i}"] for i in range(400))
    assert local["mark"] == BASE_MS + 10 * 399
    assert local["transactions"] == 1
    assert on_cluster["hosts"]["write"] == on_cluster["hosts"]["read"] == BOTH_WORKERS
    assert on_cluster["failed"] == []


def test_streaming_query_with_a_reader_group_and_retention_equals_local_mode(
        compared: tuple[dict[str, Any], dict[str, Any], Workspaces]) -> None:
    """A Structured Streaming query stream -> stream as a subscriber reader group; retention then
    truncates the input exactly to what the query acknowledged."""
    on_cluster, local_run, _ = compared
    local = local_run["results"]["stream_to_stream"]
    assert on_cluster["results"]["stream_to_stream"] == local
    assert local["output"] == sorted([f"k{i % 5}", f"EV{i}@{BASE_MS + 10 * i}"] for i in range(160))
    assert local["acknowledged_tail"] and local["head_is_acknowledged"] and local["group"] == "cluster-group"
    assert local["input_left"] == sorted([f"k{i % 5}", f"ev{i}@{BASE_MS + 10 * i}"] for i in range(160, 180))
    assert local["marks"] == [BASE_MS + 10 * 159]
    assert on_cluster["hosts"]["query"] == BOTH_WORKERS


def test_catalog_run_and_purge_of_data_on_s3_equal_local_mode(
        compared: tuple[dict[str, Any], dict[str, Any], Workspaces]) -> None:
    """The retention job reads the records on both workers (the metadata password by reference);
    the purge then deletes exactly the deleted records' objects on S3, and their rows."""
    on_cluster, local_run, _ = compared
    local = local_run["results"]["catalog_run_and_purge"]
    assert on_cluster["results"]["catalog_run_and_purge"] == local
    # feed A (even i) older than 30 days, B (odd i) older than 90 days; created 3 i days ago
    doomed = [i for i in range(60) if 3 * i > (30 if i % 2 == 0 else 90)]
    assert local["deleted"] == doomed and local["job_rows"] == len(doomed) and local["state"] == "SUCCEEDED"
    assert local["purged"] == len(doomed) and local["purge_failures"] == 0
    kept = [i for i in range(60) if i not in doomed]
    assert local["records_left"] == kept
    assert local["files_left"] == [f"catalog-data/r{i:02d}.bin" for i in kept]
    assert on_cluster["hosts"]["job"] == BOTH_WORKERS


def test_archives_ingest_of_logs_on_s3_search_and_gc_equal_local_mode(
        compared: tuple[dict[str, Any], dict[str, Any], Workspaces]) -> None:
    """The executors open the logs on S3 themselves (worker 2 has no driver file to open), write
    archives there; a search's tasks read them; the collectors delete what expired."""
    on_cluster, local_run, _ = compared
    local = local_run["results"]["archives_ingest_search_gc"]
    assert on_cluster["results"]["archives_ingest_search_gc"] == local
    lines = [line for file in range(LOG_FILES) for line in log_lines(file).splitlines()]
    assert local["messages"] == len(lines) == LOG_FILES * (LOG_LINES + 1) and local["timeless"] == LOG_FILES
    assert local["sources"] == [f"app/{file}.log" for file in range(LOG_FILES)]
    # each ingest task writes the lines without a timestamp of its files into an archive of its own
    timeless = local["archives"] - local["timed_archives"]
    assert local["timed_archives"] >= 2 and 1 <= timeless <= LOG_FILES
    assert sorted(message for _, message in local["found"]) == sorted(line for line in lines if "failed" in line)
    assert local["search_state"] == "SUCCEEDED"
    assert local["gc_deleted"] == local["timed_archives"]
    assert len(local["left"]) == timeless and all(untimed for _, untimed in local["left"])
    assert sum(count for count, _ in local["left"]) == LOG_FILES and local["stored_left"]
    assert on_cluster["hosts"]["ingest"] == on_cluster["hosts"]["search"] == BOTH_WORKERS


def wait_for(condition: Any, process: subprocess.Popen[bytes], what: str) -> None:
    """Wait until `condition()` holds; fail when the driver ended first."""
    while not condition():
        if process.poll() is not None:
            raise AssertionError(f"the driver ended ({process.returncode}) before {what}")
        time.sleep(0.05)


def test_a_sink_task_whose_executor_is_killed_is_retried_and_writes_every_event_once(
        cluster: StandaloneCluster, workspaces: Workspaces) -> None:
    """Worker 2's sink task has written its chunk files and waits at sink.task_written (its gate
    exists only in worker 2's /tmp); its executor JVM is SIGKILLed there. Spark retries the task,
    the driver commits the batch with the retry's files only: every event exactly once, as in local
    mode, and the killed attempt's files are in no chunk row."""
    gate = cluster.isolated_path(CLUSTER_SINK_GATE)
    reached = gate.with_name(gate.name + ".reached")
    reached.unlink(missing_ok=True)
    gate.write_text("closed")
    try:
        driver = start_driver(cluster, workspaces, "cluster", "killed_sink_task")
        local_driver = start_driver(cluster, workspaces, "local", "killed_sink_task")
        try:
            wait_for(reached.exists, driver.process, "worker 2's sink task reached its gate")
            (executor,) = cluster.executor_pids(ISOLATED_HOST)
            os.kill(executor, signal.SIGKILL)
            wait_for(lambda: not Path(f"/proc/{executor}").exists(), driver.process, "its executor died")
            gate.unlink()  # the retried task goes on, wherever it runs
            on_cluster = driver.result()
            local = local_driver.result()["results"]["killed_sink_task"]
        finally:
            driver.stop()
            local_driver.stop()
    finally:
        gate.unlink(missing_ok=True)
    assert on_cluster["results"]["killed_sink_task"] == local
    assert local["client_read"] == sorted([f"k{i % 7}", f"ev{i}"] for i in range(300))
    assert local["transactions"] == 1
    assert on_cluster["failed"] == [{"host": ISOLATED_HOST, "reason": "ExecutorLostFailure"}]
    with contextlib.closing(workspaces.client("cluster")) as client:
        orphans = stored_files(client) - referenced_paths(client)
    assert orphans, "the killed task had written no file: it was not killed after writing"
    assert all("/txn/spark-" in path for path in orphans), orphans
