"""Spark Connect: the CLI's Spark commands and the stream sources and sink run on a Connect server
started from the pyspark install (the `connect_server` fixture), with the same results as local
mode; a session brought by the caller (`tk.connect(spark=...)`) is used; the decisions of
spark/connect.py against their oracles."""

from __future__ import annotations

import ipaddress
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.errors import ConfigError
from tidekeep.spark.connect import (
    check_remote_url,
    is_loopback_host,
    parallelism_by_query,
    reach_master,
    remote_reach_master,
)
from tidekeep.store.schema_catalog import catalog_records

DAY = 86_400_000
SESSION_SCRIPT = Path(__file__).parents[1] / "helpers" / "connect_session.py"
LOG = ("2024-07-01 12:00:00,000 INFO start\n"
       "2024-07-01 12:00:01,500 ERROR failed\n"
       "\tat a.b.C(C.java:1)\n"
       "2024-07-01 12:00:03,000 WARN slow\n"
       "2024-07-02 08:00:00,000 INFO next day\n")


# ---- decisions ---------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["sc://127.0.0.1:15002", "sc://head", "sc://head:443/;use_ssl=true", " sc://h:1 "])
def test_a_spark_connect_url_is_accepted(url: str) -> None:
    assert check_remote_url(url) == url.strip()


@pytest.mark.parametrize("url", ["", "local[2]", "spark://head:7077", "sc://", "sc://:15002", "sc://h:port",
                                 "sc://h:99999", "http://h:15002"])
def test_anything_else_is_refused_naming_the_setting(url: str) -> None:
    with pytest.raises(ConfigError, match=r"^spark\.remote .* is not a Spark Connect URL: expected sc://host:port$"):
        check_remote_url(url)


def loopback_oracle(host: str) -> bool:
    name = host.strip("[]").lower()
    if name in {"localhost", "localhost.localdomain", "ip6-localhost"}:
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    return (address.version == 4 and address.packed[0] == 127) or address == ipaddress.ip_address("::1")


hosts = st.one_of(st.ip_addresses().map(str), st.sampled_from(["localhost", "LOCALHOST", "head", "spark-0.cluster",
                                                                "127.0.0.1", "[::1]", "::1", "128.0.0.1"]))


@given(hosts)
def test_loopback_hosts_are_this_machine(host: str) -> None:
    assert is_loopback_host(host) == loopback_oracle(host)


@given(st.one_of(st.none(), hosts), st.sampled_from(["local[2]", "local[*]", "spark://head:7077", "yarn"]))
def test_a_server_elsewhere_is_judged_as_a_cluster_whatever_its_master(host: str | None, master: str) -> None:
    expected = master if host is None or loopback_oracle(host) else f"sc://{host}"
    assert reach_master(host, master) == expected


@pytest.mark.parametrize(("url", "master"), [
    ("sc://127.0.0.1:15002", None), ("sc://localhost", None), ("sc://[::1]:15002/;session_id=x", None),
    ("sc://spark.example:15002", "sc://spark.example"), ("sc://192.0.2.1:15002/;token=t", "sc://192.0.2.1"),
])
def test_a_server_elsewhere_is_judged_without_connecting(url: str, master: str | None) -> None:
    """Known from the URL alone (so refused before anything opens); a server here needs its master."""
    assert remote_reach_master(url) == master


def test_the_parallelism_a_query_reads_is_the_spark_contexts(spark) -> None:
    assert parallelism_by_query(spark) == spark.sparkContext.defaultParallelism == 2


# ---- through a Connect server ------------------------------------------------------------------

def seeded_workspace(home: Path) -> None:
    """Rules and records whose expiry is days away from every cutoff, so both runs' clocks decide alike."""
    client = tk.connect(home=home, create=True)
    try:
        client.catalog.set_rules([
            RetentionRule(1, "keep special", True, parse('feed = "SPECIAL"'), None),
            RetentionRule(2, "logs", True, parse('feed = "LOGS"'), Age(30, "days")),
            RetentionRule(3, "rest", True, parse("all"), Age(1, "years")),
        ])
        now = client.clock.now_ms()
        client.catalog.add([{"feed": feed, "type": "Events", "create_time": now - days * DAY - i * 1000,
                             "file_size": 10 * days + i}
                            for feed in ("SPECIAL", "LOGS", "OTHER") for days in (1, 10, 45, 200, 400, 800)
                            for i in range(5)])
    finally:
        client.close()


def ok(home: Path, env: dict[str, str], *args: str) -> Any:
    done = run_cli(home, *args, "--json", env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def deleted_ids(home: Path) -> list[int]:
    client = tk.connect(home=home)
    try:
        with client.workspace.db.read() as conn:
            return sorted(conn.execute(sa.select(catalog_records.c.id)
                                       .where(catalog_records.c.status == "DELETED")).scalars())
    finally:
        client.close()


def comparable(command: str, result: Any) -> Any:
    if command == "impact":
        return {k: result[k] for k in ("total_rows", "total_bytes", "held_rows", "rows")}
    if command == "run":
        return [(p["from_ms"] is None, p.get("deleted"), p["candidates"]) for p in result["periods"]]
    return {"messages": result["messages"], "raw_bytes": result["raw_bytes"],
            "archives": [(a["begin_ts"], a["end_ts"], a["message_count"], a["raw_bytes"])
                         for a in result["archives"]]}


def test_the_clis_spark_commands_run_through_connect_as_in_local_mode(tmp_path: Path, connect_server: str) -> None:
    log = tmp_path / "app.log"
    log.write_text(LOG)
    homes = {"local": tmp_path / "local", "connect": tmp_path / "connect"}
    envs = {"local": {"TIDEKEEP_SPARK_MASTER": "local[2]"}, "connect": {"TIDEKEEP_SPARK_REMOTE": connect_server}}
    results: dict[str, dict[str, Any]] = {}
    for mode, home in homes.items():
        seeded_workspace(home)
        results[mode] = {
            "impact": comparable("impact", ok(home, envs[mode], "catalog", "impact")),
            "run": comparable("run", ok(home, envs[mode], "catalog", "run")),
            "ingest": comparable("ingest", ok(home, envs[mode], "archives", "ingest", "app", str(log))),
        }
    assert results["connect"] == results["local"]
    assert results["local"]["impact"]["total_rows"] > 0 and results["local"]["ingest"]["messages"] == 4
    assert deleted_ids(homes["connect"]) == deleted_ids(homes["local"]) != []


def test_spark_remote_comes_from_spark_remote_and_a_bad_one_is_one_line(tmp_path: Path, connect_server: str) -> None:
    home = tmp_path / "ws"
    seeded_workspace(home)
    ingested = ok(home, {"SPARK_REMOTE": connect_server}, "archives", "ingest", "app", str(_log(tmp_path)))
    assert ingested["messages"] == 4
    # two commands reattach to one server session (its data sources registered already)
    shared = {"TIDEKEEP_SPARK_REMOTE": f"{connect_server}/;session_id=6a1c3e2f-0b7d-4c55-9e1a-2f4b8d0c7e91"}
    impacts = [ok(home, shared, "catalog", "impact") for _ in range(2)]
    assert impacts[0]["rows"] == impacts[1]["rows"] != []
    for env, source in (({"TIDEKEEP_SPARK_REMOTE": "spark://head:7077"}, "spark.remote"),
                        ({"SPARK_REMOTE": "head:15002"}, "SPARK_REMOTE")):
        done = run_cli(home, "catalog", "impact", env=env)
        assert done.returncode != 0 and "Traceback" not in done.stderr
        assert done.stderr.strip().splitlines() == [
            f"error: {source} {env[next(iter(env))]!r} is not a Spark Connect URL: expected sc://host:port"]


RECORDS = ("id,feed,type,create_time,file_size\n"
           "1007,A,Events,2024-01-01T00:00:00Z,10\n"
           ",B,Events,2024-01-02T00:00:00Z,20\n"
           "1009,C,Events,1704240000000,30\n")


def test_archives_search_and_catalog_import_run_through_connect_as_in_local_mode(tmp_path: Path,
                                                                                  connect_server: str) -> None:
    """No SparkContext on a Connect session: the search and the import run on DataFrames, their
    results the same as in local mode."""
    log, records = _log(tmp_path), tmp_path / "records" / "part-0.csv"
    records.parent.mkdir()
    records.write_text(RECORDS)
    envs = {"local": {"TIDEKEEP_SPARK_MASTER": "local[2]"}, "connect": {"TIDEKEEP_SPARK_REMOTE": connect_server}}
    results: dict[str, Any] = {}
    for mode, env in envs.items():
        home = tmp_path / mode
        seeded_workspace(home)
        before = _record_count(home)
        imported = ok(home, env, "catalog", "import", str(records.parent))
        added = _record_count(home) - before
        ok(home, env, "archives", "ingest", "app", str(log))
        searched = ok(home, env, "archives", "search", "app", "failed")
        results[mode] = {
            "import": {k: imported[k] for k in ("rows", "files", "inserted", "skipped")},
            "records": added,
            "search": {k: searched["job"][k] for k in ("state", "archives_searched", "results_count", "error")},
            "rows": sorted((r["timestamp"], r["message"]) for r in searched["rows"]),
        }
    assert results["connect"] == results["local"]
    assert results["local"]["import"] == {"rows": 3, "files": 1, "inserted": 3, "skipped": 0}
    assert results["local"]["records"] == 3
    assert results["local"]["search"] == {"state": "SUCCEEDED", "archives_searched": 1, "results_count": 1,
                                          "error": None}
    assert [m for _, m in results["local"]["rows"]] == ["2024-07-01 12:00:01,500 ERROR failed\n\tat a.b.C(C.java:1)"]


def test_a_connect_session_brought_to_tk_connect_writes_reads_and_streams(tmp_path: Path,
                                                                          connect_server: str) -> None:
    done = subprocess.run([sys.executable, str(SESSION_SCRIPT), str(tmp_path / "ws"), connect_server],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = sorted([f"event-{i}", f"key-{i % 3}"] for i in range(40))
    assert result["same_session"] and result["connect"]
    assert result["read"] == expected
    assert result["direct"] == sorted(body for body, _ in expected)
    assert result["parallelism"] == 2  # the server's local[2]
    assert result["last_fraction"] == 1.0  # progress from the server's reports
    assert result["streamed"] == sorted([body.upper(), key] for body, key in expected)
    assert result["acknowledged_tail"]  # the query's commits reached its reader group


def test_a_classic_session_brought_to_tk_connect_is_the_one_jobs_use(tmp_path: Path, spark) -> None:
    from tidekeep.spark.session import use_session

    client = tk.connect(home=tmp_path / "ws", create=True, spark=spark)
    try:
        assert client.spark() is spark
        client.create_stream("s/e")
        (spark.createDataFrame([("a",), ("b",)], "payload string").write.format("tidekeep").mode("append")
         .option("stream", "s/e").options(**client.spark_options()).save())
        assert sorted(e.payload for e in client.stream("s/e").read()) == [b"a", b"b"]
    finally:
        use_session(None)
        client.close()


def _record_count(home: Path) -> int:
    client = tk.connect(home=home)
    try:
        return len(client.catalog.records(limit=10_000))
    finally:
        client.close()


def _log(tmp_path: Path) -> Path:
    log = tmp_path / "app.log"
    log.write_text(LOG)
    return log


def test_ctrl_c_interrupts_a_search_on_the_connect_server(tmp_path: Path) -> None:
    """SIGINT to a CLI process whose search waits on a Connect server (its task held at a gate in the
    server's Python worker): the server interrupts the operation and kills the task, the CLI prints
    one `interrupted` line and exits 130, and no result was written. A server of its own: the gate
    is armed in the server's environment, which its workers inherit."""
    import os
    import signal
    import time

    from helpers.connect_server import start_connect_server
    from tidekeep.archives.model import JobState
    from tidekeep.cli.main import INTERRUPTED_EXIT

    gate = tmp_path / "gate"
    gate.touch()
    log = tmp_path / "server.log"
    server = start_connect_server(log, extra_env={"TIDEKEEP_PAUSE": f"search_archive=@{gate}"})
    try:
        home = tmp_path / "ws"
        env = {"TIDEKEEP_SPARK_REMOTE": server.url}
        assert run_cli(home, "init").returncode == 0
        assert ok(home, env, "archives", "ingest", "app", str(_log(tmp_path)))["messages"] == 4
        environment = {k: v for k, v in os.environ.items()
                       if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
        search = subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", "archives", "search", "app", "failed"],
                                  env={**environment, **env, "TIDEKEEP_HOME": str(home)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 180
            while not Path(f"{gate}.reached").exists() and search.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert Path(f"{gate}.reached").exists(), search.communicate(timeout=60)
            search.send_signal(signal.SIGINT)
            out, err = search.communicate(timeout=120)
        finally:
            if search.poll() is None:
                search.kill()
        assert search.returncode == INTERRUPTED_EXIT, err
        assert out == "" and err.strip().splitlines()[-1] == "interrupted", err
        # the server stopped the task that held the gate: its executor reports it killed
        deadline = time.monotonic() + 120
        while b"Executor killed task" not in log.read_bytes() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert b"Executor killed task" in log.read_bytes(), log.read_text(errors="replace")[-3000:]
        with tk.connect(home=home) as client:
            [job] = client.archives.jobs()
            assert job.state is not JobState.SUCCEEDED  # RUNNING until its heartbeat lapses (docs/spark.md)
            assert client.workspace.storage.list_files(job.results_path or "results-of-nothing") == []
    finally:
        gate.unlink(missing_ok=True)
        server.stop()
