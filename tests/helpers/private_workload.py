"""Run every kind of tidekeep write against one workspace, under a given umask, in one process (so
one Spark session serves every Spark job): `python private_workload.py UMASK HOME WORK [ROOT FLAG ...]`.

The umask is set first, so the Spark JVM and the Python workers it starts inherit it too: whatever
tidekeep or its executors create is made under it. Commands run through the CLI's main(); a
failing one exits non-zero with its output. The Spark sink (stream writes from executors) runs
through the Python API. Used by tests/test_private_files.py.
"""

from __future__ import annotations

import itertools
import os
import sys


def main() -> None:
    umask, home, work, *root_flags = sys.argv[1:]
    os.umask(int(umask, 8))
    from tidekeep.cli.main import main as cli

    flags = ["--home", home, "--set", "spark.master=local[2]", *root_flags]

    def run(*args: str) -> None:
        try:
            cli([*flags, *args])
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise SystemExit(f"tidekeep {' '.join(args)} exited {exc.code}") from None

    os.makedirs(work, exist_ok=True)
    events = os.path.join(work, "events.txt")
    with open(events, "w", encoding="utf-8") as out:
        out.write("".join(f"event {i}\n" for i in range(50)))
    records = os.path.join(work, "records.csv")
    with open(records, "w", encoding="utf-8") as out:
        out.write("feed,type,create_time\n" + "".join(f"FEED_{i % 3},Raw,2020-01-0{i % 9 + 1}\n" for i in range(30)))
    rules = os.path.join(work, "rules.yaml")
    with open(rules, "w", encoding="utf-8") as out:
        out.write("rules:\n  - {number: 1, name: Old, expression: 'feed = \"FEED_1\"', age: 1 day}\n")
    log = os.path.join(work, "app.log")
    with open(log, "w", encoding="utf-8") as out:
        out.write("2024-07-01 12:00:00,000 INFO start\n2024-07-01 12:00:01,500 ERROR payment failed\n")

    run("init")
    run("stream", "create", "s/plain", "--segments", "2")
    run("stream", "write", "s/plain", events)
    run("catalog", "import", records)
    run("catalog", "generate", "--rows", "20", "--with-files")
    run("catalog", "rules", "set", rules)
    os.environ["TIDEKEEP_CATALOG_SLICE_ROWS"] = "2"  # several slices: on PostgreSQL they are Spark tasks
    run("catalog", "run")
    del os.environ["TIDEKEEP_CATALOG_SLICE_ROWS"]
    run("archives", "ingest", "web", log)
    run("archives", "search", "web", "payment")

    import tidekeep as tk
    from tidekeep.config import load_settings

    settings = load_settings(home, {"spark.master": "local[2]", **dict(_pairs(root_flags))})
    with tk.Client(settings) as client:
        client.create_stream("s/spark", tk.StreamConfig(segments=2))
        spark = client.spark()
        frame = spark.createDataFrame([(f"row {i}", f"k{i % 3}") for i in range(40)], "body string, key string")
        (frame.write.format("tidekeep").mode("append")
         .options(stream="s/spark", payload_column="body", routing_key_column="key", **client.spark_options())
         .save())
        assert len(list(client.stream("s/spark").read())) == 40
        spark.stop()


def _pairs(flags: list[str]) -> list[tuple[str, str]]:
    """The settings named by root flags (--metadata-url, --storage) as config keys."""
    names = {"--metadata-url": "metadata.url", "--storage": "storage.uri"}
    return [(names[flag], value) for flag, value in itertools.pairwise(flags) if flag in names]


if __name__ == "__main__":
    main()
