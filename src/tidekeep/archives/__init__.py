"""Log archives (CLP's model): Spark ingestion into Parquet archives, searches into a results
cache, and the garbage collectors that expire both by TTL without deleting what a running search
may read."""
