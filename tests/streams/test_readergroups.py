"""Reader groups on real SQLite/PostgreSQL, real chunk files and real reader processes: exactly-once
reading across splits and merges, hand-over after SIGKILL, checkpoints and resuming from them,
rebalancing, end cuts, truncation, and bad input (typed error, one line, nothing changed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import tidekeep as tk
from helpers.procs import worker_env
from helpers.rg_workers import RG_WORKERS
from tidekeep.streams.model import segment_id
from tidekeep.streams.readergroup import CheckpointTimeout
from tidekeep.streams.rg_state import TooManyCheckpoints

STREAM = "rg/events"
DEADLINE_S = 120


def _connect(tmp_path: Path, metadata_url: str, storage: str, clock: tk.Clock | None = None) -> tk.Client:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage,
                        settings={"writer.linger": 0}, clock=clock, create=True)
    client.workspace.db.ensure_schema()
    return client


@pytest.fixture
def client(tmp_path: Path, metadata_url: str, storage_uri: str) -> Iterator[tk.Client]:
    """A client on both metadata backends and both storages (local, S3); reader processes get the same."""
    c = _connect(tmp_path, metadata_url, storage_uri)
    yield c
    c.close()


class KeyedWriter:
    """Writes `key:n` payloads, n counting per key from 0, so order and completeness are checkable."""

    def __init__(self, client: tk.Client, stream: str, keys: int, batch_size: str = "16KiB") -> None:
        self.writer = client.stream(stream).writer("kw", batch_size=batch_size)
        self.keys = keys
        self.next_number: dict[str, int] = defaultdict(int)
        self.cursor = 0

    def write(self, count: int) -> None:
        payloads, keys = [], []
        for _ in range(count):
            key = f"k{self.cursor % self.keys}"
            self.cursor += 1
            payloads.append(f"{key}:{self.next_number[key]}".encode())
            keys.append(key)
            self.next_number[key] += 1
        self.writer.write_many(payloads, keys)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def all_events(client: tk.Client, stream: str = STREAM) -> set[tuple[int, int]]:
    return {(e.segment, e.offset) for e in client.stream(stream).read()}


def drain(readers: list[Any], rounds: int = 10_000) -> list[tuple[str, tk.EventRead]]:
    """Round-robin over in-process readers until every one of them comes back empty twice."""
    out: list[tuple[str, tk.EventRead]] = []
    empty_streak = 0
    for _ in range(rounds):
        got = False
        for r in readers:
            e = r.read_next_event(0)
            if not e.is_empty:
                out.append((r.reader_id, e))
                got = True
        empty_streak = 0 if got else empty_streak + 1
        if empty_streak >= 3:
            return out
    raise AssertionError("readers never ran dry")


# ---- reader processes ------------------------------------------------------------------------------


class ReaderProcesses:
    def __init__(self, tmp_path: Path, metadata_url: str, storage: str, group: str, names: list[str],
                 pace: float = 0.0) -> None:
        self.env = worker_env(metadata_url, storage, tmp_path / "ws")
        self.stop_file = tmp_path / f"stop-{group}"
        self.outs = {n: tmp_path / f"{group}-{n}.jsonl" for n in names}
        self.logs = {n: tmp_path / f"{group}-{n}.log" for n in names}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        for n in names:
            with open(self.logs[n], "wb") as log:
                self.procs[n] = subprocess.Popen(
                    [sys.executable, str(RG_WORKERS), "read", "--group", group, "--reader", n,
                     "--out", str(self.outs[n]), "--stop-file", str(self.stop_file), "--pace", str(pace)],
                    env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.wait_for(lambda: all(Path(str(o) + ".joined").exists() for o in self.outs.values()), "readers to join")

    def wait_for(self, condition: Callable[[], bool], what: str, alive: set[str] | None = None) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while not condition():
            for n, p in self.procs.items():
                if (alive is None or n in alive) and p.poll() is not None:
                    pytest.fail(f"reader {n} exited with {p.returncode} while waiting for {what}:\n"
                                f"{self.logs[n].read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"timed out waiting for {what}")
            time.sleep(0.05)

    def stop(self, names: list[str]) -> None:
        self.stop_file.touch()
        for n in names:
            try:
                code = self.procs[n].wait(timeout=DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.procs[n].kill()
                pytest.fail(f"reader {n} did not stop:\n{self.logs[n].read_text()}")
            assert code == 0, self.logs[n].read_text()

    def kill_all(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    def records(self, name: str) -> list[list[Any]]:
        lines = self.outs[name].read_text().splitlines()
        result = []
        for line in lines:
            try:
                result.append(json.loads(line))
            except json.JSONDecodeError:  # the last line of a killed reader may be cut short
                assert line is lines[-1]
        return result

    def events(self, name: str) -> list[list[Any]]:
        return [r for r in self.records(name) if r[0] != "checkpoint"]


def caught_up(group: Any) -> bool:
    """Every stream's stored group position is at its tail: every event has been returned."""
    return all(s["unread_bytes"] == 0 for s in group.describe()["streams"].values())


def check_per_key_order(events: list[list[Any]], from_zero: bool = True) -> dict[str, int]:
    """Across all readers, by the (system-wide monotonic) time each event was returned: each key's
    numbers run 0, 1, 2, ... (or from any first number) with no gap, repeat or reordering."""
    by_key: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for _seg, _off, key, payload, returned_ns in events:
        k, n = payload.split(":")
        assert k == key
        by_key[key].append((returned_ns, int(n)))
    for key, seq in by_key.items():
        numbers = [n for _, n in sorted(seq)]
        first = 0 if from_zero else numbers[0]
        assert numbers == list(range(first, first + len(numbers))), f"key {key}: returned as {numbers[:20]}..."
    return {k: len(v) for k, v in by_key.items()}


def test_three_reader_processes_read_every_event_exactly_once_while_the_stream_splits_and_merges(
        tmp_path: Path, client: tk.Client, metadata_url: str) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = KeyedWriter(client, STREAM, keys=10_000)
    writer.write(4000)
    client.create_reader_group("three", tk.ReaderGroupConfig(streams=[STREAM]))
    procs = ReaderProcesses(tmp_path, metadata_url, client.workspace.storage.location(), "three",
                            ["ra", "rb", "rc"], pace=0.0005)
    try:
        writer.write(3000)
        client.stream(STREAM).split("0.0", 2)  # -> 1.2, 1.3
        writer.write(3000)
        client.stream(STREAM).split("0.1", 3)  # -> 2.4, 2.5, 2.6
        writer.write(3000)
        client.stream(STREAM).merge(["1.3", "2.4"])  # adjacent: [0.25, 0.5) + [0.5, 0.667) -> 3.7
        writer.write(3000)
        writer.close()
        group = client.reader_group("three")
        procs.wait_for(lambda: caught_up(group), "the readers to catch up")
        procs.stop(["ra", "rb", "rc"])
    finally:
        procs.kill_all()
    read = [e for n in ("ra", "rb", "rc") for e in procs.events(n)]
    positions = [(seg, off) for seg, off, *_ in read]
    assert len(positions) == len(set(positions)), "an event was read twice"
    assert set(positions) == all_events(client), "an event was never read"
    assert len(read) == 16_000
    counts = check_per_key_order(read)
    assert len(counts) == 10_000
    assert sum(1 for n in ("ra", "rb", "rc") if procs.events(n)) == 3, "a reader got nothing to read"
    segments_read = {seg for seg, *_ in read}
    assert {segment_id(3, 7), segment_id(2, 5), segment_id(0, 0)} <= segments_read
    assert group.online_readers() == []


def stored_positions(group: Any, reader_id: str) -> dict[int, int]:
    """The offsets the group's shared state holds for a reader's segments (what it last stored)."""
    state = group.row().state
    return {seg: g.offset for slot in state.streams.values() for seg, g in slot.segments.items()
            if g.owner == reader_id}


def test_sigkilled_reader_handed_on_with_reader_offline_loses_nothing(
        tmp_path: Path, client: tk.Client, metadata_url: str) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=4))
    writer = KeyedWriter(client, STREAM, keys=500, batch_size="2KiB")
    writer.write(6000)
    writer.close()
    group = client.create_reader_group("crashy", tk.ReaderGroupConfig(streams=[STREAM]))
    procs = ReaderProcesses(tmp_path, metadata_url, client.workspace.storage.location(), "crashy",
                            ["ra", "rb"], pace=0.002)
    try:
        procs.wait_for(lambda: all(len(procs.events(n)) >= 300 for n in ("ra", "rb")), "both readers to read")
        # a checkpoint while both run: its cut is exactly where each reader said it passed it
        checkpoint = group.initiate_checkpoint("mid").wait(60)
        passed: dict[int, int] = {}
        for n in ("ra", "rb"):
            marks = [r for r in procs.records(n) if r[0] == "checkpoint" and r[1] == "mid"]
            assert len(marks) == 1
            for seg, off in marks[0][2].get(STREAM, {}).items():
                passed[int(tk.SegmentId(seg))] = off  # the helper writes str(segment): "E.N"
        assert checkpoint.cuts[STREAM].positions == passed
        procs.wait_for(lambda: len(procs.events("ra")) >= 1200, "reader ra to read more")
        procs.procs["ra"].send_signal(signal.SIGKILL)
        procs.procs["ra"].wait()
        killed_ns = time.monotonic_ns()
        last_stored = stored_positions(group, "ra")
        assert last_stored, "the killed reader held no segments"
        group.reader_offline("ra")
        assert "ra" not in group.online_readers()
        procs.wait_for(lambda: caught_up(group), "reader rb to take over and catch up", alive={"rb"})
        procs.stop(["rb"])
    finally:
        procs.kill_all()
    read_a, read_b = procs.events("ra"), procs.events("rb")
    everything = all_events(client)
    seen = [(seg, off) for seg, off, *_ in read_a + read_b]
    assert set(seen) == everything, "an event was lost"
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for pos in seen:
        counts[pos] += 1
    duplicates = {pos for pos, c in counts.items() if c > 1}
    for seg, off in duplicates:  # at-least-once: only what the killed reader read after its last stored position
        assert seg in last_stored and off >= last_stored[seg], (seg, off, last_stored)
    assert all(c <= 2 for c in counts.values())
    # before the kill every segment had one reader at a time, handed on at exact positions (rb may
    # have read a segment before the group gave it to ra): by return time, each key runs from 0
    check_per_key_order(read_a + [e for e in read_b if e[4] < killed_ns])
    # after it rb read ra's segments from their stored positions on: each key's numbers, one gapless run
    check_per_key_order([e for e in read_b if e[4] > killed_ns], from_zero=False)


def test_checkpoint_cut_is_where_readers_passed_it_and_resuming_rereads_nothing_before_it(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=3))
    writer = KeyedWriter(client, STREAM, keys=50, batch_size="1KiB")
    writer.write(600)
    group = client.create_reader_group("cp", tk.ReaderGroupConfig(streams=[STREAM]))
    r1, r2 = group.reader("r1", sync_every_events=10), group.reader("r2", sync_every_events=10)
    before: list[tuple[int, int]] = []
    for _ in range(60):  # both readers hold segments and have read some events
        for r in (r1, r2):
            e = r.read_next_event(0)
            if e.is_event:
                before.append((e.position.segment, e.position.offset))
    handle = group.initiate_checkpoint("c1")
    assert group.checkpoint("c1") is None and not handle.done()
    with pytest.raises(tk.AlreadyExists, match="checkpoint 'c1' already exists"):
        group.initiate_checkpoint("c1")
    passed: dict[int, int] = {}
    after: list[tuple[int, int]] = []
    for r in (r1, r2):
        while True:
            e = r.read_next_event(0)
            if e.is_checkpoint:
                assert e.checkpoint_name == "c1"
                for seg, off in r.positions().get(STREAM, {}).items():
                    passed[seg] = off
                break
            assert e.is_event, "a reader ran dry before it returned the checkpoint"
            before.append((e.position.segment, e.position.offset))
    checkpoint = handle.wait(10)
    assert checkpoint.cuts[STREAM].positions == passed
    assert set(passed) == {segment_id(0, i) for i in range(3)}
    for seg, off in before:
        assert off < passed[seg], "an event returned before the checkpoint lies after its cut"
    writer.write(200)
    writer.close()
    after = [(e.position.segment, e.position.offset) for _, e in drain([r1, r2]) if e.is_event]
    for seg, off in after:
        assert seg not in passed or off >= passed[seg], "an event returned after the checkpoint lies before its cut"
    assert set(before) | set(after) == all_events(client) and not set(before) & set(after)
    assert group.last_checkpoint().name == "c1"
    r1.close()
    r2.close()
    # resume from it: a reset to the checkpoint's cut re-reads exactly what came after it
    generation = group.reset(tk.ReaderGroupConfig(streams={STREAM: (checkpoint.cuts[STREAM], None)}))
    assert generation == 1 and group.generation == 1
    r3 = group.reader("r3")
    again = [(e.position.segment, e.position.offset) for _, e in drain([r3]) if e.is_event]
    assert sorted(again) == sorted(after)
    # a new group from the compact string form of the cut does the same
    fresh = client.create_reader_group("cp2", tk.ReaderGroupConfig(streams={STREAM: (str(checkpoint.cuts[STREAM]),
                                                                                     None)}))
    r4 = fresh.reader("r4")
    assert sorted((e.position.segment, e.position.offset) for _, e in drain([r4]) if e.is_event) == sorted(after)


def test_checkpoint_waits_for_every_online_reader_and_not_for_one_handed_off(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = KeyedWriter(client, STREAM, keys=20)
    writer.write(100)
    writer.close()
    group = client.create_reader_group("wait", tk.ReaderGroupConfig(streams=[STREAM], max_outstanding_checkpoints=2))
    r1, r2 = group.reader("r1", sync_every_events=1), group.reader("r2", sync_every_events=1)
    assert r1.read_next_event(0).is_event and r2.read_next_event(0).is_event
    handle = group.initiate_checkpoint("a")
    group.initiate_checkpoint("b")
    with pytest.raises(TooManyCheckpoints, match=r"cannot initiate checkpoint 'c': 2 checkpoints are already pending"):
        group.initiate_checkpoint("c")
    assert group.describe()["pending_checkpoints"] == ["a", "b"]
    # a reader synced after every event returns the markers next, oldest first, before any event
    assert r1.read_next_event(0).checkpoint_name == "a"
    assert r1.read_next_event(0).checkpoint_name == "b"
    assert r1.read_next_event(0).is_event
    with pytest.raises(CheckpointTimeout):
        handle.wait(0.2)
    r2_segments = stored_positions(group, "r2")
    group.reader_offline("r2")  # crashed without passing: its segments' positions are its stored ones
    done = handle.wait(5)
    for seg, off in r2_segments.items():
        assert done.cuts[STREAM].positions[seg] == off
    assert group.last_checkpoint().name == "b"


def test_readers_rebalance_fairly_and_read_everything_once(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=4))
    writer = KeyedWriter(client, STREAM, keys=40, batch_size="1KiB")
    writer.write(800)
    writer.close()
    group = client.create_reader_group("fair", tk.ReaderGroupConfig(streams=[STREAM]))
    r1 = group.reader("r1", sync_every_events=5)
    first = [r1.read_next_event(0) for _ in range(20)]
    assert len(r1.segments()) == 4  # alone, it holds everything
    r2 = group.reader("r2", sync_every_events=5)
    got = [("r1", e) for e in first] + drain([r1, r2])
    assert len(r1.segments()) <= 2 and len(r2.segments()) <= 2
    readers_of = {rid for rid, e in got if e.is_event}
    assert readers_of == {"r1", "r2"}
    positions = [(e.position.segment, e.position.offset) for _, e in got if e.is_event]
    assert len(positions) == len(set(positions)) and set(positions) == all_events(client)
    r1.close()
    assert group.online_readers() == ["r2"]
    r2.read_next_event(0)
    assert len(r2.segments()) == 4  # r1's released segments went to r2


def test_end_cut_is_honoured_and_describe_shows_lag(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = KeyedWriter(client, STREAM, keys=10)
    writer.write(100)
    middle = client.stream(STREAM).tail_cut()
    before_middle = all_events(client)
    client.stream(STREAM).split("0.1", 2)
    writer.write(100)
    writer.close()
    bounded = client.create_reader_group("bounded", tk.ReaderGroupConfig(streams={STREAM: (None, middle)}))
    unbounded = client.create_reader_group("all", tk.ReaderGroupConfig(streams=[STREAM]))
    total = client.stream(STREAM).size_between(client.stream(STREAM).head_cut(), client.stream(STREAM).tail_cut())
    assert unbounded.describe()["streams"][STREAM]["unread_bytes"] == total
    assert bounded.describe()["streams"][STREAM]["unread_bytes"] == client.stream(STREAM).size_between(
        client.stream(STREAM).head_cut(), middle)
    r = bounded.reader("r")
    got = {(e.position.segment, e.position.offset) for _, e in drain([r]) if e.is_event}
    assert got == before_middle
    assert bounded.describe()["streams"][STREAM]["unread_bytes"] == 0
    described = bounded.describe()
    assert described["readers"][0]["reader"] == "r"
    assert {s["status"] for s in described["segments"]} == {"COMPLETED"}


def test_automatic_checkpoints_follow_the_clock(tmp_path: Path, metadata_url: str, storage_uri: str,
                                                clock: tk.ManualClock) -> None:
    client = _connect(tmp_path, metadata_url, storage_uri, clock)
    try:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        writer = KeyedWriter(client, STREAM, keys=5)
        writer.write(50)
        writer.close()
        group = client.create_reader_group("auto", tk.ReaderGroupConfig(streams=[STREAM],
                                                                         automatic_checkpoint_interval="10s"))
        r = group.reader("r", sync_every_events=1)
        assert r.read_next_event(0).is_event
        clock.advance(9_000)
        assert r.read_next_event(0).is_event
        clock.advance(1_000)
        marker = r.read_next_event(0)
        assert marker.checkpoint_name == "auto-1"
        assert group.last_checkpoint().name == "auto-1"
        assert group.last_checkpoint().cuts[STREAM].positions == r.positions()[STREAM]
        group.initiate_checkpoint("auto-2")  # a user checkpoint with the next automatic name
        assert r.read_next_event(0).is_event  # the reader learns of it at its next sync (after 1 event)
        assert r.read_next_event(0).checkpoint_name == "auto-2"
        clock.advance(10_000)  # also past sync_interval_ms: the reader syncs at once
        assert r.read_next_event(0).checkpoint_name == "auto-3"  # the automatic one skips the taken name
    finally:
        client.close()


def test_truncated_position_raises_once_then_reads_from_the_head(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    writer = KeyedWriter(client, STREAM, keys=5)
    writer.write(100)
    group = client.create_reader_group("late", tk.ReaderGroupConfig(streams=[STREAM]))
    skipping = client.create_reader_group("skip", tk.ReaderGroupConfig(streams=[STREAM], skip_truncated=True))
    middle = client.stream(STREAM).tail_cut()
    writer.write(50)
    writer.close()
    after_middle = all_events(client) - {(e.segment, e.offset) for e in client.stream(STREAM).read(end=middle)}
    client.stream(STREAM).truncate(middle)
    r = group.reader("r")
    with pytest.raises(tk.TruncatedData, match="has been truncated"):
        r.read_next_event(0)
    got = {(e.position.segment, e.position.offset) for _, e in drain([r]) if e.is_event}
    assert got == after_middle
    s = skipping.reader("s")
    got = {(e.position.segment, e.position.offset) for _, e in drain([s]) if e.is_event}
    assert got == after_middle
    entries = [a for a in client.audit(STREAM) if a["action"] == "rg_skip_truncated"]
    assert len(entries) == 1 and entries[0]["bytes_freed"] == client.stream(STREAM).size_between(
        client.stream(STREAM).state().cut({segment_id(0, 0): 0}), middle)
    # the non-skipping group can also be reset to the head and reads the same
    group.reset(tk.ReaderGroupConfig(streams=[STREAM]))
    assert {(e.position.segment, e.position.offset) for _, e in drain([r]) if e.is_event} == after_middle


# ---- bad input ---------------------------------------------------------------------------------------


def _one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_bad_input_is_a_typed_one_line_error_and_changes_nothing(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    client.create_stream("rg/other", tk.StreamConfig(segments=1))
    writer = KeyedWriter(client, STREAM, keys=10)
    writer.write(40)
    writer.close()
    head, tail = client.stream(STREAM).head_cut(), client.stream(STREAM).tail_cut()
    with pytest.raises(tk.NotFound) as exc:
        client.reader_group("nope")
    assert _one_line(exc) == "reader group 'nope' does not exist"
    with pytest.raises(tk.NotFound):
        client.delete_reader_group("nope")
    cases: list[tuple[Any, type[Exception], str]] = [
        (tk.ReaderGroupConfig(streams=["rg/missing"]), tk.NotFound, "stream 'rg/missing' does not exist"),
        (tk.ReaderGroupConfig(streams={STREAM: (tail, head)}), tk.InvalidStreamCut, "is not at or before end cut"),
        (tk.ReaderGroupConfig(streams={STREAM: (client.stream("rg/other").head_cut(), None)}), tk.InvalidStreamCut,
         "stream cut is for 'rg/other', not 'rg/events'"),
        (tk.ReaderGroupConfig(streams=[]), tk.InvalidInput, "no streams given"),
        (tk.ReaderGroupConfig(streams=[STREAM], retention_type="KEEP"), tk.InvalidInput, "invalid retention_type"),
        (tk.ReaderGroupConfig(streams=[STREAM], max_outstanding_checkpoints=0), tk.InvalidInput,
         "max_outstanding_checkpoints 0"),
        ("not a config", tk.InvalidInput, "use tidekeep.ReaderGroupConfig"),
    ]
    for config, error, message in cases:
        with pytest.raises(error) as exc:
            client.create_reader_group("g", config)
        assert message in _one_line(exc), str(exc.value)
        assert client.list_reader_groups() == []
    with pytest.raises(tk.InvalidName):
        client.create_reader_group("bad name!", tk.ReaderGroupConfig(streams=[STREAM]))
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    with pytest.raises(tk.AlreadyExists):
        client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    group.reader("r1")
    described = group.describe()
    with pytest.raises(tk.AlreadyExists) as exc:
        group.reader("r1")
    assert _one_line(exc) == "reader 'r1' is already online in this reader group"
    with pytest.raises(tk.NotFound):
        group.reader_offline("ghost")
    with pytest.raises(tk.InvalidStreamCut):
        group.reset(tk.ReaderGroupConfig(streams={STREAM: (tail, head)}))
    after = group.describe()
    for key in ("generation", "readers", "segments", "config"):
        assert after[key] == described[key]
    client.delete_reader_group("g")
    assert client.list_reader_groups() == []


# ---- CLI ---------------------------------------------------------------------------------------------


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    env["TIDEKEEP_HOME"] = str(home)
    return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_cli_create_list_read_checkpoint_describe_delete(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    tk.init_workspace(home)
    with tk.connect(home, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        writer = KeyedWriter(client, STREAM, keys=7)
        writer.write(30)
        writer.close()
        expected = {(e.segment, e.offset) for e in client.stream(STREAM).read()}
    done = _cli(home, "rg", "create", "g", "--stream", STREAM,
                "--retention-type", "automatic_release_at_last_checkpoint")
    assert done.returncode == 0 and done.stdout.strip() == f"created reader group g on {STREAM}", done.stderr
    assert json.loads(_cli(home, "rg", "list", "--json").stdout) == ["g"]
    first = _cli(home, "rg", "read", "g", "--reader", "r", "--limit", "10", "--timeout", "200", "--json")
    assert first.returncode == 0, first.stderr
    events = [json.loads(line) for line in first.stdout.splitlines()]
    assert len(events) == 10 and all(e["stream"] == STREAM for e in events)
    cp = _cli(home, "rg", "checkpoint", "g", "c1", "--json")
    assert cp.returncode == 0, cp.stderr
    cut = json.loads(cp.stdout)["cuts"][STREAM]
    rest = _cli(home, "rg", "read", "g", "--reader", "r", "--timeout", "200", "--json")
    more = [json.loads(line) for line in rest.stdout.splitlines()]
    got = [(segment_id(*map(int, e["segment"].split("."))), e["offset"]) for e in events + more]
    assert len(got) == len(set(got)) and set(got) == expected  # the second read went on where the first stopped
    with tk.connect(home, create=True) as client:
        checkpoint = client.reader_group("g").last_checkpoint()
        assert checkpoint is not None and str(checkpoint.cuts[STREAM]) == cut
        assert client.stream(STREAM).size_between(client.stream(STREAM).head_cut(), cut) == sum(
            len(f"{e['payload']}") + 8 for e in events)
    described = json.loads(_cli(home, "rg", "describe", "g", "--json").stdout)
    assert described["streams"][STREAM]["unread_bytes"] == 0
    assert described["config"]["retention_type"] == "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT"
    text = _cli(home, "rg", "describe", "g")
    assert text.returncode == 0 and "UNREAD BYTES" in text.stdout
    assert _cli(home, "rg", "delete", "g").stdout.strip() == "deleted reader group g"
    gone = _cli(home, "rg", "describe", "g")
    assert gone.returncode == 3 and gone.stderr.strip() == "error: reader group 'g' does not exist"
    bad = _cli(home, "rg", "create", "h", "--stream", STREAM, "--retention-type", "forever")
    assert bad.returncode == 2 and bad.stderr.strip().startswith("error: invalid retention type 'forever'")
    assert json.loads(_cli(home, "rg", "list", "--json").stdout) == []


def test_one_group_over_two_streams_reads_both_once_and_checkpoints_both(client: tk.Client) -> None:
    other = "rg/second"
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    client.create_stream(other, tk.StreamConfig(segments=1))
    for name in (STREAM, other):
        writer = KeyedWriter(client, name, keys=9)
        writer.write(120)
        writer.close()
    group = client.create_reader_group("both", tk.ReaderGroupConfig(streams=[STREAM, other]))
    r1, r2 = group.reader("r1", sync_every_events=7), group.reader("r2", sync_every_events=7)
    got = [e for _, e in drain([r1, r2]) if e.is_event]
    by_stream: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for e in got:
        by_stream[e.position.stream].add((e.position.segment, e.position.offset))
    assert len(got) == 240
    assert by_stream[STREAM] == all_events(client, STREAM) and by_stream[other] == all_events(client, other)
    handle = group.initiate_checkpoint("both-end")
    drain([r1, r2])
    checkpoint = handle.wait(5)
    assert set(checkpoint.cuts) == {STREAM, other}
    for name in (STREAM, other):
        assert checkpoint.cuts[name] == client.stream(name).tail_cut()


def test_reader_offline_resumes_after_the_last_processed_event_reads(client: tk.Client) -> None:
    """The application hands over a crashed reader with the last EventRead it processed per
    segment: the next reader starts right after those events — nothing lost, nothing before them
    read again."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = KeyedWriter(client, STREAM, keys=20)
    writer.write(400)
    writer.close()
    group = client.create_reader_group("g", tk.ReaderGroupConfig(streams=[STREAM]))
    crashed = group.reader("r1")
    processed: dict[int, tk.EventRead] = {}
    seen_by_crashed: set[tuple[int, int]] = set()
    while len(seen_by_crashed) < 150:
        event = crashed.read_next_event(1000)
        if event.is_event:
            processed[event.position.segment] = event
            seen_by_crashed.add((event.position.segment, event.position.offset))
    group.reader_offline("r1", list(processed.values()))
    successor = group.reader("r2")
    rest: set[tuple[int, int]] = set()
    while True:
        event = successor.read_next_event(300)
        if event.is_empty:
            break
        if event.is_event:
            rest.add((event.position.segment, event.position.offset))
    successor.close()
    assert not rest & seen_by_crashed
    assert rest | seen_by_crashed == all_events(client)
