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
from helpers.archives import archive_rows
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
    """The catalog's retention job (its slices are Spark tasks, each an UPDATE in PostgreSQL), then the purge
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


LOG_FILES = 4
LOG_LINES = 300  # per file: ~100 KB of text in all, so an ingest at ARCHIVE_TARGET_SIZE writes several archives
ARCHIVE_TARGET_SIZE = 4000  # bytes; the drivers run with it (archives.target_size)
LOG_BASE = "2024-07-01T12:00:00"


def log_lines(file: int) -> str:
    """Log file `file`: one line without a timestamp (a message of its own, as it starts the file;
    further on it would continue the message before it), then LOG_LINES timestamped lines (one a
    second, interleaved across files, every 7th an ERROR that "failed")."""
    import datetime as dt

    base = dt.datetime.fromisoformat(LOG_BASE)
    lines = [f"no timestamp in file {file}: failed early\n"]
    for i in range(LOG_LINES):
        second = i * LOG_FILES + file
        level, what = ("ERROR", "request failed") if second % 7 == 0 else ("INFO", "request served")
        stamp = (base + dt.timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%SZ")
        lines.append(f"{stamp} {level} {what} id={second:05d} file={file}\n")
    return "".join(lines)


def inputs_uri(client: tk.Client) -> str:
    """Where the scenario's logs are uploaded: beside the workspace's storage root in its bucket
    (`s3://bucket/<mode>` -> `s3://bucket/<mode>-logs`, the same options)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(client.settings.storage_uri)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "-logs"))


def archives_ingest_search_gc(client: tk.Client, spark: SparkSession, workdir: Path) -> dict[str, Any]:
    """Logs on S3 ingested by the executors (`archives ingest s3://…`: each task opens its file
    through pyarrow.fs, no driver path), a search over the archives (one task per archive), then
    both collectors under a retention every timestamped archive is past: the timeless one stays."""
    from tidekeep.store.fileio import FileIO

    logs = FileIO(inputs_uri(client))
    for file in range(LOG_FILES):
        logs.write(f"app/{file}.log", log_lines(file).encode())
    with step(spark, "ingest"):
        report = client.archives.ingest("app", [logs.uri_of("app")])
    archives = client.archives.list("app")
    sources = {str(source).split("-logs/", 1)[1] for a in archives
               for source in (row["source"] for row in archive_rows(client, a))}
    with step(spark, "search"):
        job = client.archives.search("app", "failed")
    rows = client.archives.results(job.id, page_size=10_000).rows
    # then a retention of an hour: every timestamped archive (2024) has expired (a search skips
    # expired archives, so the search above ran without one)
    with tk.connect(settings={"archive_output.retention_period": 60}) as collecting:
        gc = collecting.archives.gc()
    return {"messages": report.messages, "timeless": report.messages_without_timestamp,
            "archives": len(archives), "timed_archives": sum(a.end_ts is not None for a in archives),
            "sources": sorted(sources), "search_state": str(getattr(job.state, "value", job.state)),
            "found": sorted([r["timestamp"] or 0, r["message"]] for r in rows), "gc_deleted": gc.archives.deleted,
            "left": sorted([a.message_count, a.end_ts is None] for a in client.archives.list("app")),
            "stored_left": sorted(f.path for f in client.workspace.storage.list_files("archives"))
            == sorted(a.path for a in client.archives.list("app"))}


SCENARIOS: dict[str, Callable[[tk.Client, SparkSession, Path], dict[str, Any]]] = {
    "write_and_read": write_and_read,
    "killed_sink_task": killed_sink_task,
    "stream_to_stream": stream_to_stream,
    "catalog_run_and_purge": catalog_run_and_purge,
    "archives_ingest_search_gc": archives_ingest_search_gc,
}
