"""Run as a script: open a workspace with `tidekeep.connect(spark=<a Spark Connect session>)`, write
events through the tidekeep sink, read them back through the source, and run a Structured Streaming
query stream -> upper-case -> stream as a reader group, all on the Connect server argv[2] names,
and print what the test compares as one JSON line. A process of its own: once a
process made a Connect session, PySpark makes every later session in it a Connect one too.

usage: connect_session.py HOME sc://host:port
"""

from __future__ import annotations

import json
import sys


def main(home: str, url: str) -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import tidekeep as tk
    from tidekeep.spark.connect import default_parallelism, is_connect_session
    from tidekeep.spark.progress import track_tasks

    session = SparkSession.builder.remote(url).getOrCreate()
    client = tk.connect(home=home, create=True, settings={"writer.linger": 0}, spark=session)
    client.create_stream("s/events")
    events = session.createDataFrame([(f"event-{i}", f"key-{i % 3}") for i in range(40)], "body string, key string")
    (events.write.format("tidekeep").mode("append").option("stream", "s/events").option("payload_column", "body")
     .option("routing_key_column", "key").options(**client.spark_options()).save())
    tail = str(client.stream("s/events").tail_cut())
    read = (client.spark().read.format("tidekeep").option("stream", "s/events").option("start", "head")
            .option("end", tail).options(**client.spark_options()).load())
    fractions: list[float] = []
    with track_tasks(client.spark(), "connect-read", fractions.append):
        rows = read.select(F.col("payload").cast("string").alias("body"), "routing_key").collect()
    client.create_stream("s/upper")
    streamed = (session.readStream.format("tidekeep").option("stream", "s/events")
                .option("reader_group", "connect-group").options(**client.spark_options()).load()
                .select(F.upper(F.col("payload").cast("string")).alias("body"), F.col("routing_key").alias("key")))
    query = (streamed.writeStream.format("tidekeep").option("stream", "s/upper").option("payload_column", "body")
             .option("routing_key_column", "key").options(**client.spark_options())
             .option("checkpointLocation", f"{home}/checkpoint").trigger(availableNow=True).start())
    query.awaitTermination(240)
    query.stop()
    (subscriber,) = client.stream("s/events").subscribers()
    print(json.dumps({
        "streamed": sorted([e.payload.decode(), e.routing_key] for e in client.stream("s/upper").read()),
        "acknowledged_tail": subscriber.positions == client.stream("s/events").tail_cut().positions,
        "same_session": client.spark() is session,
        "connect": is_connect_session(client.spark()),
        "parallelism": default_parallelism(client.spark()),
        "read": sorted([row["body"], row["routing_key"]] for row in rows),
        "direct": sorted(e.payload.decode() for e in client.stream("s/events").read(None, tail)),
        "last_fraction": fractions[-1] if fractions else None,
    }))
    client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
