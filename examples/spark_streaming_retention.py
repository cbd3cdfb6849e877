"""Spark Structured Streaming over tidekeep streams, with retention that follows the query.

    python examples/spark_streaming_retention.py [--home DIR]

Sensor gateways write JSON readings to "demo/sensor-events" (routing key = sensor id), a stream whose
size policy keeps at least 0 bytes: it may keep nothing that every subscriber has acknowledged. A
streaming query reads it with the tidekeep source as the subscriber reader group
"minute-aggregator" (a MANUAL_RELEASE_AT_USER_STREAMCUT group the source creates), parses the
JSON, aggregates per sensor and 1-minute event-time window (withWatermark on the parsed event time),
and writes each closed window to "demo/sensor-minutes" with the tidekeep sink (exactly once per
micro-batch; the sink notes the largest window end as its writer's time mark).

Each micro-batch the query commits becomes the group's acknowledged stream cut, so
`client.stream(name).retention.run()` deletes the input up to what the query has committed, and never data it has
not read yet. The script runs two rounds of "write, retention, query, retention" and prints what
happens. Without --home it works in a temporary workspace, deleted at the end. Exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

EVENTS, MINUTES, GROUP = "demo/sensor-events", "demo/sensor-minutes", "minute-aggregator"
SENSORS = 6
STEP_MS = 10_000  # one reading per sensor every 10 s of event time
START_MS = int(datetime(2024, 5, 1, 12, 0, tzinfo=UTC).timestamp() * 1000)


def clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%H:%M:%S")


def write_readings(client, first_ms: int, minutes: int) -> int:  # type: ignore[no-untyped-def]
    """Readings for `minutes` minutes of event time from `first_ms`; the gateway notes the last time."""
    count, last = 0, first_ms
    # a small writer batch makes several chunks, so the query's byte limit gives several micro-batches
    with client.stream(EVENTS).writer("gateway-1", batch_size="1KB") as writer:
        for t in range(first_ms, first_ms + minutes * 60_000, STEP_MS):
            for s in range(SENSORS):
                sensor = f"sensor-{s}"
                value = round(20 + ((t // STEP_MS) * 7 + s * 3) % 50 / 10, 1)
                writer.write(json.dumps({"sensor": sensor, "time_ms": t, "value": value}).encode(), routing_key=sensor)
                count += 1
            last = t
        writer.note_time(last)  # "gateway-1 has reached this event time" (watermarks)
    print(f"wrote {count} readings to {EVENTS} ({clock(first_ms)}-{clock(last)}), gateway-1 noted {clock(last)}")
    return count


def input_size(client) -> str:  # type: ignore[no-untyped-def]
    from tidekeep.units import human_size

    stream = client.stream(EVENTS)
    return human_size(stream.size_between(stream.head_cut(), stream.tail_cut()))


def run_retention(client, label: str) -> None:  # type: ignore[no-untyped-def]
    before = input_size(client)
    decision = client.stream(EVENTS).retention.run()
    print(f"retention.run ({label}): input {before} -> {input_size(client)}; "
          f"head {client.stream(EVENTS).head_cut()} ({decision.reason})")


def run_query(spark, client, checkpoint: Path) -> int:  # type: ignore[no-untyped-def]
    """One availableNow run of the aggregation from its checkpoint; returns the micro-batches that read data."""
    from pyspark.sql import functions as F

    readings = (spark.readStream.format("tidekeep").option("stream", EVENTS).option("reader_group", GROUP)
                .option("max_bytes_per_trigger", "2KB").options(**client.spark_options()).load())
    parsed = readings.select(F.from_json(F.col("payload").cast("string"),
                                         "sensor string, time_ms long, value double").alias("r")).select("r.*")
    minutes = (parsed.withColumn("event_time", F.timestamp_millis("time_ms"))
               .withWatermark("event_time", "30 seconds")
               .groupBy("sensor", F.window("event_time", "1 minute"))
               .agg(F.count("*").alias("readings"), F.round(F.avg("value"), 2).alias("avg"),
                    F.min("value").alias("min"), F.max("value").alias("max")))
    out = minutes.select(
        F.col("sensor"), F.col("window.end").alias("window_end"),
        F.to_json(F.struct("sensor", F.date_format("window.start", "HH:mm").alias("minute"), "readings", "avg",
                           "min", "max")).alias("body"))
    query = (out.writeStream.format("tidekeep").outputMode("append").option("stream", MINUTES)
             .option("payload_column", "body").option("routing_key_column", "sensor")
             .option("event_time_column", "window_end").options(**client.spark_options())
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    if not query.awaitTermination(300):
        query.stop()
        raise SystemExit("the query did not finish within 300 s")
    if query.exception() is not None:
        raise SystemExit(f"the query failed: {query.exception()}")
    return sum(1 for p in query.recentProgress if p["numInputRows"] > 0)


def show_round(client, batches: int, shown: set[tuple[str, str]]) -> None:  # type: ignore[no-untyped-def]
    (sub,) = client.stream(EVENTS).subscribers()
    print(f"query: {batches} micro-batches with input; subscriber {sub.reader_group} "
          f"({sub.retention_type}) acknowledged {sub.to_dict()['acknowledged']}")
    rows = [json.loads(e.payload) for e in client.stream(MINUTES).read()]
    new = sorted((r for r in rows if (r["sensor"], r["minute"]) not in shown), key=lambda r: (r["minute"], r["sensor"]))
    shown.update((r["sensor"], r["minute"]) for r in new)
    minutes = sorted({r["minute"] for r in new})
    print(f"{MINUTES}: {len(rows)} window aggregates, {len(new)} new for minutes {', '.join(minutes)} "
          "(a window is written once the event-time watermark, 30 s behind the latest reading, passes its end)")
    for row in new[:3]:
        print(f"  {row}")
    (mark,) = client.stream(MINUTES).watermarks.marks()
    print(f"sink writer {mark.writer_id} noted {clock(mark.time_ms)} (the last window end written)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", help="workspace directory (default: a temporary one, deleted at the end)")
    args = parser.parse_args(argv)
    # only this example's workspace counts: no TIDEKEEP_* settings from the caller's environment
    for name in [n for n in os.environ if n.startswith("TIDEKEEP_")]:
        del os.environ[name]
    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="tidekeep-spark-example-"))
    try:
        return run(home.resolve())
    finally:
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)


def run(home: Path) -> int:
    import tidekeep as tk

    client = tk.connect(home=home, create=True)
    print(f"workspace {home}")
    client.create_stream(EVENTS, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(0, "10MB")))
    client.create_stream(MINUTES, tk.StreamConfig(segments=2))
    print(f"created {EVENTS} (retention: {client.stream(EVENTS).state().info.config.retention.describe()}) "
          f"and {MINUTES}")
    spark = client.spark()
    spark.sparkContext.setLogLevel("ERROR")  # keep the output to what this example prints
    spark.conf.set("spark.sql.shuffle.partitions", "2")  # the aggregation's state: small data, two partitions
    checkpoint = home / "checkpoints" / "sensor-minutes"

    shown: set[tuple[str, str]] = set()
    for round_no, minutes in [(1, 3), (2, 3)]:
        print(f"\n== round {round_no}")
        write_readings(client, START_MS + (round_no - 1) * minutes * 60_000, minutes)
        if round_no > 1:  # the query has not read the new readings: retention must keep them
            run_retention(client, "before the query")
        batches = run_query(spark, client, checkpoint)
        show_round(client, batches, shown)
        run_retention(client, "after the query committed")
    print("\ndone: retention deleted the input only up to what the query had committed")
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
