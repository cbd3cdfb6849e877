"""What the multi-node tests run, once on the standalone cluster (in a driver process of its own,
tests/helpers/cluster_driver.py) and once in local mode (in the test process): each scenario takes a
client on a fresh workspace and a Spark session, does its work in named steps, and returns a
JSON-able result that must be the same on both.

Steps are Spark local properties (cluster.STEP_PROPERTY) on the jobs they start, so the driver's
event log tells which workers ran the tasks of each step. Nothing here is shipped to executors:
the scenarios use tidekeep's sources and sink and Spark's own column functions only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tidekeep as tk
from helpers.cluster import STEP_PROPERTY
from helpers.spark_query import start_query
from tidekeep.spark.datasource import load_stream
from tidekeep.spark.sink import save_to_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

BASE_MS = 1_700_000_000_000
EVENTS, INPUT, OUTPUT, GROUP = "cluster/events", "cluster/input", "cluster/output", "cluster-group"


@contextlib.contextmanager
def step(spark: SparkSession, name: str) -> Iterator[None]:
    """The Spark jobs started inside belong to step `name` (and streaming queries started inside)."""
    spark.sparkContext.setLocalProperty(STEP_PROPERTY, name)
    try:
        yield
    finally:
        spark.sparkContext.setLocalProperty(STEP_PROPERTY, None)  # type: ignore[arg-type]


def events_frame(spark: SparkSession, count: int) -> DataFrame:
    """`count` events in two partitions: payload "ev<i>", key "k<i % 7>", event time BASE_MS + 10 i."""
    from pyspark.sql import functions as F

    ids = spark.range(0, count, numPartitions=2)
    return ids.select(F.concat(F.lit("ev"), ids.id.cast("string")).alias("body"),
                      F.concat(F.lit("k"), (ids.id % 7).cast("string")).alias("key"),
                      (F.lit(BASE_MS) + ids.id * 10).alias("event_ms"))


def stream_events(client: tk.Client, stream: str) -> list[list[str | None]]:
    """Every event of `stream` as [routing key, payload], sorted (read by the client, not by Spark)."""
    return sorted([e.routing_key, e.payload.decode()] for e in client.stream(stream).read())


def write_events(client: tk.Client, spark: SparkSession, count: int) -> None:
    client.create_stream(EVENTS, tk.StreamConfig(segments=2))
    save_to_stream(events_frame(spark, count), EVENTS, payload_column="body", routing_key_column="key",
                   event_time_column="event_ms", **client.spark_options())


def write_and_read(client: tk.Client, spark: SparkSession, workdir: Path) -> dict[str, Any]:
    """A batch write through the sink (one transaction), then a Spark batch read of the stream."""
    with step(spark, "write"):
        write_events(client, spark, 400)
    with step(spark, "read"):
        rows = load_stream(spark, EVENTS, **client.spark_options()).select("routing_key", "payload").collect()
    committed = [t for t in client.transactions.list(EVENTS) if t.state == tk.TxnState.COMMITTED]
    (mark,) = client.stream(EVENTS).watermarks.marks()
    return {"spark_read": sorted([r.routing_key, bytes(r.payload).decode()] for r in rows),
            "client_read": stream_events(client, EVENTS), "transactions": len(committed), "mark": mark.time_ms}


def killed_sink_task(client: tk.Client, spark: SparkSession, workdir: Path) -> dict[str, Any]:
    """A batch write through the sink (on the cluster, the test kills an executor mid-task)."""
    with step(spark, "write"):
        write_events(client, spark, 300)
    committed = [t for t in client.transactions.list(EVENTS) if t.state == tk.TxnState.COMMITTED]
    return {"client_read": stream_events(client, EVENTS), "transactions": len(committed)}


def stream_to_stream(client: tk.Client, spark: SparkSession, workdir: Path) -> dict[str, Any]:
    """A Structured Streaming query, input stream -> upper-case -> output stream, as the MANUAL
    subscriber GROUP of the input; retention (by size, minimum 0) then truncates the input exactly
    up to what the query acknowledged."""
    client.create_stream(INPUT, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(0, "1GB")))
    client.create_stream(OUTPUT, tk.StreamConfig(segments=2))
    write_input(client, 0, 160)
    with step(spark, "query"):
        query = start_query(spark, client.spark_options(), INPUT, OUTPUT, str(workdir / "checkpoint"), GROUP,
                            "2KB", "available-now")
        try:
            finished = query.awaitTermination(300)
        finally:
            query.stop()
    if not finished or query.exception() is not None:
        raise RuntimeError(f"the query did not finish: {query.exception()}")
    (subscriber,) = client.stream(INPUT).subscribers()
    acknowledged_tail = subscriber.positions == client.stream(INPUT).tail_cut().positions
    acknowledged = client.stream(INPUT).tail_cut()
    write_input(client, 160, 180)  # not read by the query
    client.stream(INPUT).retention.run()
    head_is_acknowledged = client.stream(INPUT).head_cut() == acknowledged
    return {"output": stream_events(client, OUTPUT), "group": subscriber.reader_group,
            "acknowledged_tail": acknowledged_tail, "head_is_acknowledged": head_is_acknowledged,
            "input_left": stream_events(client, INPUT),
            "marks": [m.time_ms for m in client.stream(OUTPUT).watermarks.marks()]}


def write_input(client: tk.Client, first: int, last: int) -> None:
    """Event i: key "k<i % 5>", payload "ev<i>@<event time>", in ~10-event chunks."""
    with client.stream(INPUT).writer("gateway", batch_size=200) as writer:
        for i in range(first, last):
            writer.write(f"ev{i}@{BASE_MS + 10 * i}".encode(), routing_key=f"k{i % 5}")


CATALOG_NOW = 1_711_843_200_000  # 2024-03-31T00:00Z
DAY_MS = 86_400_000


def catalog_run_and_purge(client: tk.Client, spark: SparkSession, workspace: Path) -> dict[str, Any]:
    """The catalog's retention job (Spark tasks read the records from PostgreSQL), then the purge
    of what it deleted: records whose data are objects under the storage root (S3)."""
    from tidekeep.catalog.ages import Age, TimeUnit
    from tidekeep.catalog.expressions import parse
    from tidekeep.catalog.rules import RetentionRule

    client.catalog.set_rules([RetentionRule(1, "feed A: 30 days", True, parse('feed = "A"'), Age(30, TimeUnit.DAYS)),
                              RetentionRule(2, "others: 90 days", True, parse("all"), Age(90, TimeUnit.DAYS))])
    records = []
    for i in range(60):
        key, data = f"catalog-data/r{i:02d}.bin", f"record {i}".encode()
        client.workspace.storage.write(key, data)
        records.append({"feed": "A" if i % 2 == 0 else "B", "type": "Raw Events", "location": key,
                        "create_time": CATALOG_NOW - 3 * i * DAY_MS, "file_size": len(data)})
    ids = client.catalog.add(records)
    with step(spark, "job"):
        report = client.catalog.run(now_ms=CATALOG_NOW)
    index: dict[int | None, int] = {record_id: i for i, record_id in enumerate(ids)}
    deleted = sorted(index[r.id] for r in client.catalog.records(limit=1000) if r.status == "DELETED")
    purge = client.catalog.purge(now_ms=CATALOG_NOW + client.settings["catalog.purge_age"] + 1)
    return {"deleted": deleted, "job_rows": report.rows, "job_bytes": report.bytes, "state": report.state,
            "purged": purge.purged, "purge_failures": purge.failures,
            "records_left": sorted(index[r.id] for r in client.catalog.records(limit=1000)),
            "files_left": sorted(f.path for f in client.workspace.storage.list_files("catalog-data"))}


SCENARIOS: dict[str, Callable[[tk.Client, SparkSession, Path], dict[str, Any]]] = {
    "write_and_read": write_and_read,
    "killed_sink_task": killed_sink_task,
    "stream_to_stream": stream_to_stream,
    "catalog_run_and_purge": catalog_run_and_purge,
}
