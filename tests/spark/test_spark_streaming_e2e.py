"""End to end: a tidekeep stream -> a Structured Streaming query -> a tidekeep stream (docs/spark.md).

A query in its own process (tests/helpers/spark_query.py, its own local[2] Spark) reads an input
stream as a MANUAL subscriber with small micro-batches, transforms each event and writes it through
the tidekeep sink. It is SIGKILLed mid-run (its whole process group, JVM and Python workers too) and
restarted from its checkpoint; the output then holds every input exactly once, each key in order,
the subscriber's acknowledgement reached the input's tail, consumption-based retention truncates
the input exactly up to it, and the sink's writer mark is the largest event time written (on
PostgreSQL). A query dying right after the sink's tidekeep commit, before Spark logged the batch,
leaves the input unacknowledged past that batch and replays it once (on SQLite). And
examples/spark_streaming_retention.py runs and shows retention following its query.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers import HELPERS_DIR
from helpers.procs import worker_env
from helpers.spark_query import start_query as define_query
from helpers.storage import referenced_paths, stored_files

QUERY = HELPERS_DIR / "spark_query.py"
EXAMPLE = Path(__file__).parents[2] / "examples" / "spark_streaming_retention.py"
INPUT, OUTPUT, GROUP = "e2e/input", "e2e/output", "upper-case"
KEYS = 5


def event_time(i: int) -> int:
    return 1_700_000_000_000 + 10 * i


def write_input(client: tk.Client, first: int, last: int) -> None:
    """Event i: key k<i % KEYS>, payload "ev<i>@<event time>"; 200-byte writer batches make ~10-event
    chunks, so a 600-byte trigger limit gives many micro-batches."""
    with client.stream(INPUT).writer("gateway", batch_size=200) as writer:
        for i in range(first, last):
            writer.write(f"ev{i}@{event_time(i)}".encode(), routing_key=f"k{i % KEYS}")


def expected(first: int, last: int) -> list[tuple[str, str]]:
    return [(f"k{i % KEYS}", f"EV{i}@{event_time(i)}") for i in range(first, last)]


def output(client: tk.Client) -> list[tuple[str | None, str]]:
    return [(e.routing_key, e.payload.decode()) for e in client.stream(OUTPUT).read()]


def start_query(env: dict[str, str], checkpoint: Path, mode: str, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as handle:
        # a session of its own: the kill takes the JVM and the Python workers Spark started with it
        return subprocess.Popen([sys.executable, str(QUERY), INPUT, OUTPUT, str(checkpoint), GROUP, "600", mode],
                                env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def wait_for_partial_output(client: tk.Client, proc: subprocess.Popen[bytes], total: int, log: Path) -> int:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the query exited early ({proc.returncode}):\n{log.read_text()[-3000:]}"
        written = len(output(client))
        if written:
            assert written < total, "the query wrote everything before it could be killed"
            return written
        time.sleep(0.05)
    raise AssertionError(f"no output within 120 s:\n{log.read_text()[-3000:]}")


def restart_to_the_end(spark, client: tk.Client, checkpoint: Path) -> None:
    """Restart the query from `checkpoint` in this process's Spark session and run it to the input's end
    (availableNow): the batch planned before the kill re-runs with its checkpointed cuts."""
    restarted = define_query(spark, client.spark_options(), INPUT, OUTPUT, str(checkpoint), GROUP, "1MB",
                             "available-now")
    try:
        assert restarted.awaitTermination(180), "the restarted query did not finish within 180 s"
    finally:
        restarted.stop()
    assert restarted.exception() is None, restarted.exception()


@pytest.fixture
def pg_client(tmp_path: Path, pg_url: str) -> Iterator[tk.Client]:
    """PostgreSQL only: two Spark processes per run make this test too slow to repeat on SQLite (the
    fault-point test below and the example run on SQLite)."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=pg_url, storage=str(tmp_path / "data"),
                   settings={"writer.linger": 0}, create=True)
    yield c
    c.close()


def test_query_killed_mid_run_and_restarted_writes_every_input_once(spark, pg_client: tk.Client,
                                                                    tmp_path: Path) -> None:
    client = pg_client
    client.create_stream(INPUT, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(0, "1GB")))
    client.create_stream(OUTPUT, tk.StreamConfig(segments=3))
    write_input(client, 0, 200)
    env = worker_env(client.settings.metadata_url, client.settings.storage_uri, tmp_path / "ws")
    checkpoint, log = tmp_path / "ckpt", tmp_path / "query.log"

    running = start_query(env, checkpoint, "continuous", log)
    try:
        wait_for_partial_output(client, running, 200, log)
    finally:
        kill_group(running)
    assert 0 < len(output(client)) < 200  # killed mid-run
    write_input(client, 200, 260)

    # restarted from the checkpoint the killed process left, in this process's Spark session; the
    # batch planned before the kill is re-run with its checkpointed cuts, the rest in larger batches
    restart_to_the_end(spark, client, checkpoint)

    written = output(client)
    assert Counter(written) == Counter(expected(0, 260))  # every input exactly once
    by_key: dict[str | None, list[str]] = defaultdict(list)
    for key, payload in written:
        by_key[key].append(payload)
    for key, payloads in by_key.items():  # client.read gives each key in stream order
        assert payloads == [p for k, p in expected(0, 260) if k == key], key

    # the sink's writer mark: the largest event time written (one writer, kept across the restart)
    (mark,) = client.stream(OUTPUT).watermarks.marks()
    assert mark.time_ms == event_time(259)
    assert {t.writer_id for t in client.transactions.list(OUTPUT)} == {mark.writer_id}

    # the query acknowledged everything it read; retention (min 0) truncates exactly that far
    (sub,) = client.stream(INPUT).subscribers()
    acknowledged = client.stream(INPUT).tail_cut()
    assert (sub.reader_group, sub.positions) == (GROUP, acknowledged.positions)
    write_input(client, 260, 280)  # not read by the query
    client.stream(INPUT).retention.run()
    assert client.stream(INPUT).head_cut() == acknowledged
    assert sorted(e.payload.decode() for e in client.stream(INPUT).read()) == sorted(
        f"ev{i}@{event_time(i)}" for i in range(260, 280))


def test_query_dying_after_a_sink_commit_replays_that_batch_once(spark, sqlite_client: tk.Client,
                                                                 tmp_path: Path) -> None:
    """The query process dies (TIDEKEEP_FAULT=txn.after_commit) right after tidekeep committed its
    first micro-batch, before Spark logged it: the input is not acknowledged past the batch's start,
    so retention keeps it; the restart re-reads the same cuts, the sink aborts the replay as a
    duplicate batch, and every input is in the output once."""
    client = sqlite_client
    client.create_stream(INPUT, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(0, "1GB")))
    client.create_stream(OUTPUT, tk.StreamConfig(segments=3))
    write_input(client, 0, 120)
    head = client.stream(INPUT).head_cut()
    env = worker_env(client.settings.metadata_url, client.settings.storage_uri, tmp_path / "ws",
                     fault="txn.after_commit")
    checkpoint, log = tmp_path / "ckpt", tmp_path / "query.log"

    crashed = start_query(env, checkpoint, "available-now", log)
    try:
        assert crashed.wait(180) != 0, log.read_text()[-3000:]
    finally:
        kill_group(crashed)
    first = len(output(client))
    assert 0 < first < 120  # tidekeep committed batch 0 ...
    assert not (checkpoint / "commits" / "0").exists()  # ... Spark never logged it
    client.stream(INPUT).retention.run()
    assert client.stream(INPUT).head_cut() == head  # nothing acknowledged past the uncommitted batch's start

    restart_to_the_end(spark, client, checkpoint)
    assert Counter(output(client)) == Counter(expected(0, 120))
    assert [t.end_reason for t in client.transactions.list(OUTPUT)].count("duplicate batch") == 1
    (sub,) = client.stream(INPUT).subscribers()
    assert sub.positions == client.stream(INPUT).tail_cut().positions
    client.stream(INPUT).retention.run()
    assert client.stream(INPUT).head_cut() == client.stream(INPUT).tail_cut()
    assert list(client.stream(INPUT).read()) == []
    assert stored_files(client) == referenced_paths(client)  # no staged or replayed file left behind


def test_example_runs_and_retention_follows_the_query(tmp_path: Path) -> None:
    """examples/spark_streaming_retention.py exits 0 and shows the input deleted only up to what its
    query committed; its workspace (--home) agrees with what it printed."""
    home = tmp_path / "example"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    run = subprocess.run([sys.executable, str(EXAMPLE), "--home", str(home)], env=env, capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = run.stdout.splitlines()

    def line(prefix: str) -> list[str]:
        return [x for x in lines if x.startswith(prefix)]

    assert len(line("wrote 108 readings to demo/sensor-events")) == 2
    queried = line("query: ")
    assert len(queried) == 2 and all("subscriber minute-aggregator (MANUAL_RELEASE_AT_USER_STREAMCUT)" in x
                                     for x in queried)
    assert all(int(x.split()[1]) >= 2 for x in queried)  # several micro-batches per run
    assert [x.split(":")[1].split(",")[0].strip() for x in line("demo/sensor-minutes: ")] == [
        "12 window aggregates", "30 window aggregates"]
    retention = line("retention.run")
    assert len(retention) == 3
    assert "(after the query committed): input 7.5 KiB -> 0 B" in retention[0]
    assert "(before the query): input 7.5 KiB -> 7.5 KiB" in retention[1]  # nothing unread is deleted
    assert "(after the query committed): input 7.5 KiB -> 0 B" in retention[2]
    assert line("sink writer spark-")[-1].endswith("noted 12:05:00 (the last window end written)")

    client = tk.connect(home=home, create=True)
    try:
        (sub,) = client.stream("demo/sensor-events").subscribers()
        tail = client.stream("demo/sensor-events").tail_cut()
        assert sub.positions == tail.positions and client.stream("demo/sensor-events").head_cut() == tail
        assert f"acknowledged {tail}" in queried[-1]
        rows = [e.payload for e in client.stream("demo/sensor-minutes").read()]
        assert len(rows) == len(set(rows)) == 30  # 6 sensors x minutes 12:00-12:04, each window once
    finally:
        client.close()
