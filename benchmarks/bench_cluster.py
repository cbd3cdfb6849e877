"""The Spark jobs of tidekeep on local[2] against a two-worker standalone cluster, in one run, on
the same data: the catalog retention job, archives ingest and a stream batch read.

    .venv/bin/python benchmarks/bench_cluster.py [--records N] [--events N] [--logs SIZE] [--repeat N] [--json FILE]

One workspace, PostgreSQL metadata (TIDEKEEP_TEST_PG_URL, else the tests' default server; a schema
of its own, dropped at the end) and S3 storage (the moto server on loopback, as the tests start
it), holds --records catalog records (three rules), a stream of --events 100-byte events in 4
segments, and --logs (default 64MB) of the archives benchmark's log corpus (benchmarks/gen_logs.py)
uploaded to S3 beside the storage root. The cluster is the tests' (tests/helpers/cluster.py): a
master and two one-core workers on loopback, the second in a mount namespace of its own that
shares no disk with the driver.

Each mode runs in a driver process of its own (tidekeep's own session on `spark.master`); once
its executors are up it times, --repeat times (default 3): the catalog job as a dry run (every
record judged, nothing written, so every turn does the same work), archives ingest of the logs
from their s3:// prefix (the executors open the files; each turn into a dataset of its own) and the
stream read
(`spark.read.format("tidekeep")` of the whole stream into Spark's `noop` sink). Reported: the
median and fastest wall-clock seconds and the ratio cluster / local of the medians; also how long
each driver took to get its executors (not in the ratios). The modes' results must be equal (the
same records judged, the same number of events read). The table goes to stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers.cluster import STEP_PROPERTY, driver_conf, event_log_conf, start_cluster, write_spark_defaults
from helpers.pg_schemas import url_in_schema
from helpers.s3 import environment as s3_environment
from helpers.s3 import moto_server, new_bucket

DAY = 86_400_000
STREAM = "bench/events"
DEFAULT_PG_URL = "postgresql+psycopg://tidekeep:tidekeep@127.0.0.1:5432/tidekeep_test"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def seed(home: Path, records: int, events: int) -> None:
    import tidekeep as tk
    from tidekeep.catalog.ages import Age, TimeUnit
    from tidekeep.catalog.expressions import parse
    from tidekeep.catalog.rules import RetentionRule

    client = tk.connect(home=home, create=True)
    try:
        client.catalog.set_rules([RetentionRule(1, "keep", True, parse('feed = "SPECIAL"'), None),
                                  RetentionRule(2, "logs", True, parse('feed = "LOGS"'), Age(30, TimeUnit.DAYS)),
                                  RetentionRule(3, "rest", True, parse("all"), Age(1, TimeUnit.YEARS))])
        now = client.clock.now_ms()
        feeds = ("SPECIAL", "LOGS", "OTHER")
        for first in range(0, records, 50_000):
            client.catalog.add([{"feed": feeds[i % 3], "type": "Events", "create_time": now - (i % 900) * DAY,
                                 "file_size": i} for i in range(first, min(records, first + 50_000))])
        client.create_stream(STREAM, tk.StreamConfig(segments=4))
        payload = b"x" * 92
        with client.stream(STREAM).writer("bench", batch_size=1 << 20) as writer:
            for i in range(events):
                writer.write(payload + f"{i:08d}".encode(), routing_key=f"k{i % 64}")
    finally:
        client.close()


def logs_uri(storage_uri: str) -> str:
    """Where the logs are uploaded: beside the storage root (`s3://bucket/data` -> `…/data-logs`)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(storage_uri)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "-logs"))


def upload_logs(work: Path, storage_uri: str, size: str) -> None:
    """Generate the corpus (gen_logs.py) and copy its files to logs_uri(storage_uri)."""
    from gen_logs import generate, parse_size

    from tidekeep.store.fileio import FileIO

    generate(work / "corpus", parse_size(size))
    target = FileIO(logs_uri(storage_uri))
    for path in sorted((work / "corpus" / "logs").rglob("*")):
        if path.is_file():
            target.write(str(path.relative_to(work / "corpus" / "logs")), path.read_bytes())


def drive(repeat: int) -> dict[str, Any]:
    """The driver's side: time the jobs on tidekeep's session (spark.master from the environment)."""
    import tidekeep as tk
    from tidekeep.spark.datasource import load_stream

    started = time.perf_counter()
    client = tk.connect()
    spark = client.spark()
    spark.range(0, 4, numPartitions=2).count()  # executors up, Python workers started
    ready_s = time.perf_counter() - started
    timings: dict[str, list[float]] = {"catalog job (dry run)": [], "archives ingest": [], "stream batch read": []}
    results: dict[str, Any] = {}
    try:
        for turn in range(repeat):
            spark.sparkContext.setLocalProperty(STEP_PROPERTY, "catalog job (dry run)")
            began = time.perf_counter()
            report = client.catalog.run(dry_run=True)
            timings["catalog job (dry run)"].append(time.perf_counter() - began)
            results["catalog"] = [report.rows, report.bytes]
            spark.sparkContext.setLocalProperty(STEP_PROPERTY, "archives ingest")
            began = time.perf_counter()
            ingested = client.archives.ingest(f"bench{turn}", [logs_uri(client.settings.storage_uri)])
            timings["archives ingest"].append(time.perf_counter() - began)
            results["ingest"] = [ingested.files, ingested.messages, ingested.raw_bytes]
            spark.sparkContext.setLocalProperty(STEP_PROPERTY, "stream batch read")
            began = time.perf_counter()
            frame = load_stream(spark, STREAM, **client.spark_options())
            frame.write.format("noop").mode("overwrite").save()
            timings["stream batch read"].append(time.perf_counter() - began)
            spark.sparkContext.setLocalProperty(STEP_PROPERTY, None)  # type: ignore[arg-type]
            results["events"] = frame.count()
    finally:
        client.close()
        spark.stop()
    return {"ready_s": ready_s, "timings": timings, "results": results}


def run_driver(mode: str, master: str, env: dict[str, str], workdir: Path, repeat: int,
               conf: dict[str, str]) -> dict[str, Any]:
    """One mode's driver process; `conf` its Spark configuration (an event log in both modes, so
    the jobs' wall clock can be set against their tasks' time)."""
    env = {**env, "TIDEKEEP_SPARK_MASTER": master, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_CONF_DIR": str(write_spark_defaults(workdir / f"{mode}-conf", conf))}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--driver", "--repeat", str(repeat)], env=env,
                          capture_output=True, text=True, check=False, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"the {mode} driver failed:\n{done.stdout[-3000:]}{done.stderr[-6000:]}")
    outcome = dict(json.loads(done.stdout.strip().splitlines()[-1]))
    outcome["process_s"] = time.perf_counter() - started
    outcome["tasks"] = task_times(Path(conf["spark.eventLog.dir"].removeprefix("file:")))
    return outcome


def task_times(event_log_dir: Path) -> dict[str, dict[str, float]]:
    """Per timed job kind, from the event log, summed over all turns: jobs, their wall clock (from
    submission to completion), tasks, the tasks' wall clock (launch to finish) and the executors'
    run time of them (seconds)."""
    kinds: dict[int, str] = {}
    stage_kind: dict[int, str] = {}
    found: dict[str, dict[str, float]] = {}
    submitted: dict[int, int] = {}
    for log_file in (path for path in event_log_dir.rglob("*") if path.is_file()):
        for line in log_file.read_text().splitlines():
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                step = (event.get("Properties") or {}).get(STEP_PROPERTY)
                if step is None:
                    continue
                kinds[event["Job ID"]], submitted[event["Job ID"]] = step, event["Submission Time"]
                for stage in event["Stage IDs"]:
                    stage_kind[stage] = step
                found.setdefault(step, {"jobs": 0, "job_s": 0.0, "tasks": 0, "task_s": 0.0, "run_s": 0.0})
            elif kind == "SparkListenerJobEnd" and event["Job ID"] in kinds:
                entry = found[kinds[event["Job ID"]]]
                entry["jobs"] += 1
                entry["job_s"] += (event["Completion Time"] - submitted[event["Job ID"]]) / 1000
            elif kind == "SparkListenerTaskEnd" and event["Stage ID"] in stage_kind:
                entry, info = found[stage_kind[event["Stage ID"]]], event["Task Info"]
                entry["tasks"] += 1
                entry["task_s"] += (info["Finish Time"] - info["Launch Time"]) / 1000
                entry["run_s"] += (event.get("Task Metrics") or {}).get("Executor Run Time", 0) / 1000
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--logs", default="64MB", help="log corpus size to ingest (gen_logs.py --size)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--driver", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        print(json.dumps(drive(args.repeat)), flush=True)
        return

    import sqlalchemy as sa

    base_url = os.environ.get("TIDEKEEP_TEST_PG_URL", DEFAULT_PG_URL)
    schema = f"bench_cluster_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(base_url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    parsed = sa.make_url(base_url)
    metadata_url = url_in_schema(base_url, schema)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
            work = Path(tmp)
            with moto_server(work / "moto.log") as server:
                aws = s3_environment(server)
                os.environ.update(aws)
                storage = server.uri(new_bucket(server), "data")
                env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
                env.update({"TIDEKEEP_HOME": str(work / "ws"), "TIDEKEEP_METADATA_URL": metadata_url,
                            "TIDEKEEP_STORAGE_URI": storage})
                if parsed.password:
                    env["TIDEKEEP_METADATA_PASSWORD"] = str(parsed.password)
                log(f"seeding {args.records} records and {args.events} events ...")
                began = time.perf_counter()
                os.environ.update({k: v for k, v in env.items() if k.startswith("TIDEKEEP_")})
                seed(work / "ws", args.records, args.events)
                upload_logs(work, storage, args.logs)
                log(f"seeded in {time.perf_counter() - began:.1f} s; starting the cluster ...")
                cluster_env = {**aws, **({"TIDEKEEP_METADATA_PASSWORD": str(parsed.password)}
                                         if parsed.password else {})}
                began = time.perf_counter()
                cluster = start_cluster(work / "cluster", work, cluster_env)
                cluster_start_s = time.perf_counter() - began
                try:
                    log("cluster up; timing on the cluster ...")
                    on_cluster = run_driver("cluster", cluster.master_url, env, work, args.repeat,
                                            driver_conf(cluster, work / "cluster-events"))
                    log("timing on local[2] ...")
                    local = run_driver("local", "local[2]", env, work, args.repeat,
                                       event_log_conf(work / "local-events"))
                finally:
                    cluster.stop()
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()
    if on_cluster["results"] != local["results"]:
        raise SystemExit(f"the modes disagree: cluster {on_cluster['results']} local {local['results']}")
    report(args, on_cluster, local, cluster_start_s)


def report(args: argparse.Namespace, on_cluster: dict[str, Any], local: dict[str, Any],
           cluster_start_s: float) -> None:
    rows = []
    print(f"{args.records} catalog records, {args.events} events of 100 bytes, {args.logs} of logs; "
          f"{args.repeat} turns; seconds")
    print(f"{'job':<24} {'local median':>12} {'local best':>10} {'cluster median':>14} {'cluster best':>12} "
          f"{'cluster/local':>13}")
    for job in local["timings"]:
        here, there = local["timings"][job], on_cluster["timings"][job]
        ratio = statistics.median(there) / statistics.median(here)
        rows.append({"job": job, "local": here, "cluster": there, "ratio": ratio})
        print(f"{job:<24} {statistics.median(here):>12.2f} {min(here):>10.2f} {statistics.median(there):>14.2f} "
              f"{min(there):>12.2f} {ratio:>12.2f}x")
    print(f"{'session ready':<24} {local['ready_s']:>12.2f} {'':>10} {on_cluster['ready_s']:>14.2f}")
    print(f"cluster start-up (master + 2 workers registered): {cluster_start_s:.1f} s")
    print("Spark jobs of the timed work, all turns (event log): jobs, their wall clock, tasks, the tasks' "
          "wall clock and executor run time, seconds")
    for mode, outcome in (("local", local), ("cluster", on_cluster)):
        for job, entry in sorted(outcome["tasks"].items()):
            print(f"  {mode:<8} {job:<24} jobs {entry['jobs']:.0f}  job wall {entry['job_s']:.2f}  "
                  f"tasks {entry['tasks']:.0f}  task wall {entry['task_s']:.2f}  executor run {entry['run_s']:.2f}")
    if args.json:
        tasks = {"local": local["tasks"], "cluster": on_cluster["tasks"]}
        args.json.write_text(json.dumps({"rows": rows, "tasks": tasks, "ready": {"local": local["ready_s"],
                                                                 "cluster": on_cluster["ready_s"]},
                                         "cluster_start_s": cluster_start_s, "results": local["results"]},
                                        indent=2))


if __name__ == "__main__":
    main()
