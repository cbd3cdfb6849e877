"""Two writer processes and a reader process on one stream, with a split and a merge in the middle
of writing, on SQLite and PostgreSQL: nothing lost, nothing duplicated, per-key order per writer in
every read."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from subprocess import Popen

import pytest

import tidekeep as tk
from helpers.procs import start_worker, worker_env
from helpers.storage import event_count
from helpers.workers import check_per_key_prefix, keyed_payload, parse_keyed_payload
from tidekeep.streams.model import segment_id

STREAM = "s/busy"
WRITERS = ("wa", "wb")
DEADLINE_S = 90


def _wait_for(condition: Callable[[], bool], what: str, workers: list[Popen[bytes]], logs: list[Path]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        for worker, log in zip(workers, logs, strict=True):
            if worker.poll() is not None:
                pytest.fail(f"a worker exited with {worker.returncode} while waiting for {what}:\n{log.read_text()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _finish(worker: Popen[bytes], log: Path) -> None:
    try:
        code = worker.wait(timeout=DEADLINE_S)
    except TimeoutError:
        worker.kill()
        raise
    assert code == 0, f"worker exited with {code}:\n{log.read_text()}"


def test_two_writers_a_reader_and_scaling(client: tk.Client, metadata_url: str, tmp_path: Path) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    stop, done = tmp_path / "stop", tmp_path / "done"
    logs = [tmp_path / f"{name}.log" for name in (*WRITERS, "reader")]
    reports = [tmp_path / f"{name}.json" for name in (*WRITERS, "reader")]
    workers = [
        start_worker(["concurrent-writer", "--stream", STREAM, "--writer", name, "--keys", "8",
                      "--stop-file", str(stop), "--report", str(report)], env, log)
        for name, report, log in zip(WRITERS, reports, logs, strict=False)
    ]
    workers.append(start_worker(["reader", "--stream", STREAM, "--done-file", str(done), "--report",
                                 str(reports[2])], env, logs[2]))
    try:
        _wait_for(lambda: event_count(client) >= 500, "500 events", workers, logs)
        client.split(STREAM, "0.0", 2)  # -> 1.2 and 1.3
        _wait_for(lambda: event_count(client) >= 1000, "1000 events", workers, logs)
        client.merge(STREAM, ["1.3", "0.1"])  # -> 2.4
        _wait_for(lambda: event_count(client) >= 1500, "1500 events", workers, logs)
        stop.touch()
        for worker, log in zip(workers[:2], logs, strict=False):
            _finish(worker, log)
        done.touch()
        _finish(workers[2], logs[2])
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    # what the writers committed, by their own account
    expected: Counter[bytes] = Counter()
    for name, report in zip(WRITERS, reports, strict=False):
        counts = json.loads(report.read_text())["counts"]
        for key, count in counts.items():
            expected.update(keyed_payload(name, key, n) for n in range(count))
    events = list(client.read(STREAM))
    assert Counter(e.payload for e in events) == expected  # nothing lost, nothing duplicated
    final = check_per_key_prefix(events)  # per-key order within each writer
    assert sum(final.values()) == sum(expected.values())

    sizes = json.loads(reports[2].read_text())["sizes"]
    assert sizes[-1] == len(events)
    assert sizes == sorted(sizes)  # every reader pass saw at least what the one before saw
    assert any(0 < size < len(events) for size in sizes), f"the reader never ran during writing: {sizes}"

    # the scaling really happened in the middle of writing: both writers wrote to every epoch
    epoch_of = {segment_id(0, 0): 0, segment_id(0, 1): 0, segment_id(1, 2): 1, segment_id(1, 3): 1,
                segment_id(2, 4): 2}
    for name in WRITERS:
        epochs = {epoch_of[e.segment] for e in events if parse_keyed_payload(e.payload)[0] == name}
        assert epochs == {0, 1, 2}, f"writer {name} wrote to epochs {epochs}"
