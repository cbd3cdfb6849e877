"""Two writer processes and a reader process on one stream, on SQLite and PostgreSQL, while this
process scales the stream (a split, later a merge) or truncates it in the middle of writing, and
(for compaction) a process compacts it again and again while a reader group reads it: nothing lost,
nothing duplicated, per-key order per writer in every read."""

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
from helpers.procs import start_worker, start_worker_script, worker_env
from helpers.rg_workers import RG_WORKERS
from helpers.storage import event_count, referenced_paths, stored_files
from helpers.workers import check_per_key_runs, keyed_payload, parse_keyed_payload
from tidekeep.streams.model import EVENT_HEADER_BYTES, segment_id

STREAM = "s/busy"
WRITERS = ("wa", "wb")
DEADLINE_S = 90


class Workload:
    """Two concurrent-writer processes and one reader process; stop() ends them in order."""

    def __init__(self, metadata_url: str, tmp_path: Path, truncating: bool, compacting: bool = False) -> None:
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
        if compacting:  # small targets, so merged chunks are merged again as they grow
            self.logs.append(tmp_path / "compactor.log")
            self.reports.append(tmp_path / "compactor.json")
            self.workers.append(start_worker(["compact", "--stream", STREAM, "--target-size", "6KiB", "--stop-file",
                                              str(self.stop_file), "--report", str(self.reports[3])], env,
                                             self.logs[3]))

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
        if len(self.workers) > 3:
            self._finish(3)  # the compactor's last run starts after the writers' last commits
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


    def compactions(self) -> list[dict[str, int]]:
        return list(json.loads(self.reports[3].read_text()))


@contextmanager
def workload(metadata_url: str, tmp_path: Path, truncating: bool = False,
             compacting: bool = False) -> Iterator[Workload]:
    running = Workload(metadata_url, tmp_path, truncating, compacting)
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


@pytest.mark.parametrize("compacting", [False, True], ids=["", "compacting"])
def test_two_writers_a_reader_and_truncation(client: tk.Client, metadata_url: str, tmp_path: Path,
                                             compacting: bool) -> None:
    """With `compacting`, a process compacts the stream again and again all the while."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    truncated: Counter[bytes] = Counter()
    with workload(metadata_url, tmp_path, truncating=True, compacting=compacting) as work:
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
    if compacting:
        assert sum(r["groups_merged"] for r in work.compactions()) >= 3, work.compactions()
        client.sweep(grace=0)  # the files compaction replaced
    assert stored_files(client) == referenced_paths(client)  # truncated chunks deleted, nothing leaked
    sizes = work.reader_report()["sizes"]
    assert isinstance(sizes, list) and sizes[-1] == len(events)



def test_two_writers_a_reader_a_reader_group_and_compaction(client: tk.Client, metadata_url: str,
                                                           tmp_path: Path) -> None:
    """A process compacts the stream again and again while two processes write it, one reads it
    whole again and again, and one reads it through a reader group (after a split, too)."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    group_out, group_stop = tmp_path / "group.jsonl", tmp_path / "group-stop"
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    group_reader = start_worker_script(RG_WORKERS, ["read", "--group", "g", "--reader", "r1", "--out",
                                                    str(group_out), "--stop-file", str(group_stop)], env,
                                       tmp_path / "group.log")
    try:
        with workload(metadata_url, tmp_path, compacting=True) as work:
            work.wait_for(lambda: event_count(client) >= 700, "700 events")
            client.stream(STREAM).split("0.0", 2)
            work.wait_for(lambda: event_count(client) >= 1500, "1500 events")
            work.stop()
        group_stop.touch()
        assert group_reader.wait(timeout=DEADLINE_S) == 0, (tmp_path / "group.log").read_text()
    finally:
        if group_reader.poll() is None:
            group_reader.kill()

    expected = work.committed()
    events = list(client.stream(STREAM).read())
    assert Counter(e.payload for e in events) == expected  # nothing lost, nothing duplicated
    check_per_key_runs(events)
    sizes = work.reader_report()["sizes"]
    assert isinstance(sizes, list) and sizes[-1] == len(events)
    merged = sum(r["groups_merged"] for r in work.compactions())
    assert merged >= 3, f"the compactor hardly ran: {work.compactions()}"
    assert client.stream(STREAM).describe()["chunks"]["compacted"] > 0

    lines = [json.loads(line) for line in group_out.read_text().splitlines()]
    group_events = [line for line in lines if line[0] != "checkpoint"]
    assert Counter(line[3].encode() for line in group_events) == expected  # the group read each event once
    client.sweep(grace=0)
    assert stored_files(client) == referenced_paths(client)  # replaced files went, nothing leaked
