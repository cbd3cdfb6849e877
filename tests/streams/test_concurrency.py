"""Two writer processes and a reader process on one stream, on SQLite and PostgreSQL, while this
process scales the stream (a split, later a merge) or truncates it in the middle of writing:
nothing lost, nothing duplicated, per-key order per writer in every read."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.procs import start_worker, worker_env
from helpers.storage import event_count, referenced_paths, stored_files
from helpers.workers import check_per_key_runs, keyed_payload, parse_keyed_payload
from tidekeep.streams.model import EVENT_HEADER_BYTES, segment_id

STREAM = "s/busy"
WRITERS = ("wa", "wb")
DEADLINE_S = 90


class Workload:
    """Two concurrent-writer processes and one reader process; stop() ends them in order."""

    def __init__(self, metadata_url: str, tmp_path: Path, truncating: bool) -> None:
        env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
        self.stop_file, self.done_file = tmp_path / "stop", tmp_path / "done"
        self.logs = [tmp_path / f"{name}.log" for name in (*WRITERS, "reader")]
        self.reports = [tmp_path / f"{name}.json" for name in (*WRITERS, "reader")]
        self.workers = [
            start_worker(["concurrent-writer", "--stream", STREAM, "--writer", name, "--keys", "8",
                          "--stop-file", str(self.stop_file), "--report", str(report)], env, log)
            for name, report, log in zip(WRITERS, self.reports, self.logs, strict=False)
        ]
        reader_args = ["reader", "--stream", STREAM, "--done-file", str(self.done_file),
                       "--report", str(self.reports[2])]
        self.workers.append(start_worker(reader_args + (["--truncating"] if truncating else []), env, self.logs[2]))

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            for worker, log in zip(self.workers, self.logs, strict=True):
                if worker.poll() is not None:
                    pytest.fail(f"a worker exited with {worker.returncode} while waiting for {what}:\n"
                                f"{log.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}")
            time.sleep(0.02)

    def _finish(self, index: int) -> None:
        try:
            code = self.workers[index].wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"worker did not finish:\n{self.logs[index].read_text()}")
        assert code == 0, f"worker exited with {code}:\n{self.logs[index].read_text()}"

    def stop(self) -> None:
        self.stop_file.touch()
        self._finish(0)
        self._finish(1)
        self.done_file.touch()  # the reader makes one more pass after the writers are done
        self._finish(2)

    def kill(self) -> None:
        for worker in self.workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()

    def committed(self) -> Counter[bytes]:
        """What the writers committed, by their own account."""
        expected: Counter[bytes] = Counter()
        for name, report in zip(WRITERS, self.reports, strict=False):
            for key, count in json.loads(report.read_text())["counts"].items():
                expected.update(keyed_payload(name, key, n) for n in range(count))
        return expected

    def reader_report(self) -> dict[str, object]:
        return json.loads(self.reports[2].read_text())


@contextmanager
def workload(metadata_url: str, tmp_path: Path, truncating: bool = False) -> Iterator[Workload]:
    running = Workload(metadata_url, tmp_path, truncating)
    try:
        yield running
    finally:
        running.kill()


def test_two_writers_a_reader_and_scaling(client: tk.Client, metadata_url: str, tmp_path: Path) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with workload(metadata_url, tmp_path) as work:
        work.wait_for(lambda: event_count(client) >= 500, "500 events")
        client.stream(STREAM).split("0.0", 2)  # -> 1.2 and 1.3
        work.wait_for(lambda: event_count(client) >= 1000, "1000 events")
        client.stream(STREAM).merge(["1.3", "0.1"])  # -> 2.4
        work.wait_for(lambda: event_count(client) >= 1500, "1500 events")
        work.stop()

    expected = work.committed()
    events = list(client.stream(STREAM).read())
    assert Counter(e.payload for e in events) == expected  # nothing lost, nothing duplicated
    runs = check_per_key_runs(events)  # per-key order within each writer
    assert sum(end for _, end in runs.values()) == sum(expected.values())

    sizes = work.reader_report()["sizes"]
    assert isinstance(sizes, list) and sizes[-1] == len(events)
    assert any(0 < size < len(events) for size in sizes), f"the reader never ran during writing: {sizes}"

    # the scaling really happened in the middle of writing: both writers wrote to every epoch
    epoch_of = {segment_id(0, 0): 0, segment_id(0, 1): 0, segment_id(1, 2): 1, segment_id(1, 3): 1,
                segment_id(2, 4): 2}
    for name in WRITERS:
        epochs = {epoch_of[e.segment] for e in events if parse_keyed_payload(e.payload)[0] == name}
        assert epochs == {0, 1, 2}, f"writer {name} wrote to epochs {epochs}"
    assert stored_files(client) == referenced_paths(client)


def test_two_writers_a_reader_and_truncation(client: tk.Client, metadata_url: str, tmp_path: Path) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    truncated: Counter[bytes] = Counter()
    with workload(metadata_url, tmp_path, truncating=True) as work:
        for round_number, threshold in enumerate((300, 600, 900, 1200)):
            work.wait_for(lambda threshold=threshold: event_count(client) >= threshold, f"{threshold} events")
            if round_number == 2:
                client.stream(STREAM).split("0.1", 2)  # truncations before and after a scale
            tail = client.stream(STREAM).tail_cut()
            freed = list(client.stream(STREAM).read(start=client.stream(STREAM).head_cut(), end=tail))
            result = client.stream(STREAM).truncate(tail, reason=f"round {round_number}")
            assert result.bytes_freed == sum(EVENT_HEADER_BYTES + len(e.payload) for e in freed)
            truncated.update(e.payload for e in freed)
        work.wait_for(lambda: event_count(client) >= 1500, "1500 events")
        work.stop()

    expected = work.committed()
    events = list(client.stream(STREAM).read())
    remaining = Counter(e.payload for e in events)
    assert not remaining & truncated
    assert remaining + truncated == expected  # every event either truncated or still there, once
    runs = check_per_key_runs(events, from_zero=False)
    # what remains of each (writer, key) is a run of consecutive numbers up to the last one written
    counts = {(name, key): count for name, report in zip(WRITERS, work.reports, strict=False)
              for key, count in json.loads(report.read_text())["counts"].items()}
    assert {wk: end for wk, (_, end) in runs.items()} == counts
    assert len(client.audit(STREAM)) == 4
    assert stored_files(client) == referenced_paths(client)  # truncated chunks deleted, nothing leaked
    sizes = work.reader_report()["sizes"]
    assert isinstance(sizes, list) and sizes[-1] == len(events)

