"""The end-to-end test's streaming query: tidekeep stream -> upper-case -> tidekeep stream.

    python spark_query.py INPUT OUTPUT CHECKPOINT GROUP MAX_BYTES (continuous | available-now)

Reads INPUT with the tidekeep source as the MANUAL subscriber GROUP, at most MAX_BYTES per
micro-batch; upper-cases each payload "evN@T" (kept as a string), keeps the routing key, takes the
event time T (ms) from the payload; writes the result to OUTPUT with the tidekeep sink, checkpointed
in CHECKPOINT. Run as a script it has its own local[2] Spark: `continuous` runs with a short
processing-time trigger until killed (the test SIGKILLs the process group, JVM included);
`available-now` reads what is there and exits 0, or 3 when the query failed. The workspace comes
from the TIDEKEEP_* environment (procs.worker_env). The test restarts the query in its own session
with `start_query`, the same definition.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery


def start_query(spark: SparkSession, workspace: Mapping[str, str], input_stream: str, output_stream: str,
                checkpoint: str, group: str, max_bytes: str, mode: str) -> StreamingQuery:
    """Start the query; `workspace` is client.spark_options() (metadata_url, storage)."""
    from pyspark.sql import functions as F

    events = (spark.readStream.format("tidekeep").option("stream", input_stream).option("reader_group", group)
              .option("max_bytes_per_trigger", max_bytes).options(**workspace).load())
    text = F.col("payload").cast("string")
    out = events.select(F.col("routing_key").alias("key"), F.upper(text).alias("body"),
                        F.split(text, "@").getItem(1).cast("long").alias("event_ms"))
    writer = (out.writeStream.format("tidekeep").option("stream", output_stream)
              .option("payload_column", "body").option("routing_key_column", "key")
              .option("event_time_column", "event_ms").options(**workspace)
              .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="100 milliseconds")
    return writer.start()


def main(argv: list[str]) -> int:
    input_stream, output_stream, checkpoint, group, max_bytes, mode = argv
    import tidekeep as tk
    from tidekeep.spark.session import build_spark

    client = tk.connect(create=True)
    spark = build_spark("local[2]", "tidekeep-e2e-query")
    query = start_query(spark, client.spark_options(), input_stream, output_stream, checkpoint, group, max_bytes,
                        mode)
    print(f"query {query.id} started ({mode})", flush=True)
    query.awaitTermination()
    if query.exception() is not None:
        print(f"query failed: {query.exception()}", flush=True)
        return 3
    print("query finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
