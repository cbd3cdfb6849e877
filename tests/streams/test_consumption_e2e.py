"""Consumption-based retention end to end, in the spirit of Pravega's
ConsumptionBasedRetentionWithMultipleReaderGroupsTest: two AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT
subscriber groups, each read by its own process with automatic checkpoints, a writer (this process)
appending, and retention cycles after the rounds. The slow group lags because the test pauses its
reader (a pause file), not because of its pace: what each group has acknowledged at a cycle is known,
and every wait is on a condition (an acknowledgement reaches the tail), bounded by pytest's timeout.

After every cycle: the head is at or before every subscriber's cut (the slower group's, in effect),
unless the maximum forced it (cases iii/v), and then the stream keeps at most the maximum. A split in
the middle changes none of this; resetting the slower group to NONE releases its hold; a group that
stops acknowledging holds data only up to the maximum.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.procs import worker_env
from helpers.rg_workers import RG_WORKERS
from tidekeep.streams.cuts import CutOrder
from tidekeep.streams.model import segment_id
from tidekeep.streams.retention import RetentionDecision

STREAM = "cbr/orders"
EVENT_BYTES = 100  # 92-byte payloads + the 8-byte header
ROUND_EVENTS = 30
MAX_BYTES = 24_000
FORCED = ("iii", "v")  # the cases in which the maximum overrides the subscribers


@dataclass
class Readers:
    """One reader process per group; `stop(group)` lets it finish its reads and leave."""

    env: dict[str, str]
    tmp: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, group: str) -> None:
        out, stop = self.tmp / f"{group}.out", self.tmp / f"{group}.stop"
        with open(self.tmp / f"{group}.log", "wb") as log:
            self.procs[group] = subprocess.Popen(
                [sys.executable, str(RG_WORKERS), "read", "--group", group, "--reader", f"{group}-r1",
                 "--out", str(out), "--stop-file", str(stop), "--pause-file", str(self.pause_file(group)),
                 "--sync-every", "10"],
                env=self.env, stdout=log, stderr=subprocess.STDOUT)
        wait_for(lambda: Path(str(out) + ".joined").exists(), f"{group}'s reader to join", self)

    def pause_file(self, group: str) -> Path:
        return self.tmp / f"{group}.pause"

    def pause(self, group: str) -> None:
        """Returns once the reader has stopped reading: its group's acknowledgement no longer moves."""
        self.pause_file(group).touch()
        wait_for(Path(f"{self.pause_file(group)}.paused").exists, f"{group}'s reader to pause", self)

    def resume(self, group: str) -> None:
        self.pause_file(group).unlink()

    def stop(self, group: str) -> None:
        (self.tmp / f"{group}.stop").touch()
        code = self.procs[group].wait()  # it finishes its reads and leaves; pytest's timeout ends a hang
        assert code == 0, (self.tmp / f"{group}.log").read_text()

    def check_alive(self) -> None:
        for group, proc in self.procs.items():
            if proc.poll() not in (None, 0):
                raise AssertionError(f"reader of {group} failed:\n" + (self.tmp / f"{group}.log").read_text())

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def wait_for(condition: Callable[[], bool], what: str, readers: Readers) -> None:
    """Polls until the condition holds; fails at once if a reader died (naming `what` in its
    output). No deadline of its own: pytest's timeout ends a hang."""
    while not condition():
        try:
            readers.check_alive()
        except AssertionError as exc:
            raise AssertionError(f"while waiting for {what}: {exc}") from None
        time.sleep(0.05)


@pytest.fixture
def setup(tmp_path: Path, metadata_url: str) -> Iterator[tuple[tk.Client, Readers]]:
    url = metadata_url  # SQLite and PostgreSQL
    client = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"),
                        settings={"writer.linger": 0, "retention.frequency": "1ms"}, create=True)
    client.workspace.db.ensure_schema()
    readers = Readers(worker_env(url, tmp_path / "data", tmp_path / "ws"), tmp_path)
    yield client, readers
    readers.kill_all()
    client.close()


def effective_cuts(client: tk.Client) -> dict[str, dict[int, int]]:
    """Each subscriber's cut as retention sees it: acknowledged, or the group's start cut."""
    return {s.reader_group: dict(s.positions if s.positions is not None else s.start_positions)
            for s in client.stream(STREAM).subscribers()}


def at_or_before(client: tk.Client, a: dict[int, int], b: dict[int, int]) -> bool:
    return client.stream(STREAM).state().topology().compare(a, b) in (CutOrder.BEFORE, CutOrder.EQUAL)


def same(client: tk.Client, a: dict[int, int] | None, b: dict[int, int]) -> bool:
    return a is not None and client.stream(STREAM).state().topology().compare(a, b) is CutOrder.EQUAL


def size_now(client: tk.Client) -> int:
    return client.stream(STREAM).describe()["size_bytes"]


class Cycles:
    """Writes a round, runs a cycle and checks the invariants after it; remembers what happened."""

    def __init__(self, client: tk.Client, readers: Readers) -> None:
        self.client, self.readers = client, readers
        self.writer = client.stream(STREAM).writer("w")
        self.decisions: list[RetentionDecision] = []
        self.written = 0

    def write_round(self) -> None:
        count = ROUND_EVENTS
        self.writer.write_many([b"p" * (EVENT_BYTES - 8)] * count, [f"key-{(self.written + i) % 11}"
                                                                  for i in range(count)])
        self.writer.flush()
        self.written += count

    def cycle(self) -> RetentionDecision:
        self.readers.check_alive()
        decision = self.client.stream(STREAM).retention.run()
        self.decisions.append(decision)
        head = self.client.stream(STREAM).head_cut().positions
        # acknowledgements only move forward, so checking against the cuts read now is safe
        cuts = effective_cuts(self.client)
        if decision.case in FORCED:
            assert decision.cut is not None
            assert size_now(self.client) == decision.retained <= MAX_BYTES, decision.reason
            assert max(v.unconsumed_bytes for v in decision.subscribers) > MAX_BYTES, decision.reason
        else:
            for group, cut in cuts.items():
                assert at_or_before(self.client, head, cut), (group, decision.case, decision.reason)
        if decision.cut is not None:
            assert decision.case is not None or not cuts, decision.reason
            assert {v.reader_group for v in decision.subscribers} == set(cuts) or decision.case in FORCED
        return decision

    def rounds(self, count: int) -> list[RetentionDecision]:
        return [self.write_round_and_cycle() for _ in range(count)]

    def write_round_and_cycle(self) -> RetentionDecision:
        self.write_round()
        return self.cycle()

    def lagging(self, count: int) -> None:
        """`count` cycles, each with the slow group one round behind the fast one: both read a
        round to the tail, the slow reader pauses, another round is written and read by the fast
        group alone, and the cycle runs."""
        for _ in range(count):
            self.readers.resume("slow")
            self.write_round()
            wait_for(caught_up(self.client, "slow", "fast"), "both groups to acknowledge the tail", self.readers)
            self.readers.pause("slow")
            self.write_round()
            wait_for(caught_up(self.client, "fast"), "the fast group to acknowledge the tail", self.readers)
            self.cycle()


def caught_up(client: tk.Client, *groups: str) -> Callable[[], bool]:
    def check() -> bool:
        state, cuts = client.stream(STREAM).state(), effective_cuts(client)
        return all(state.topology().size_between(cuts[g], state.tail()) == 0 for g in groups)

    return check


def test_two_subscribers_at_different_speeds_release_and_stop_acknowledging(
        setup: tuple[tk.Client, Readers]) -> None:
    client, readers = setup
    client.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(0, MAX_BYTES)))
    for group in ("fast", "slow"):
        client.create_reader_group(group, tk.ReaderGroupConfig(
            streams=[STREAM], retention_type=tk.RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT,
            automatic_checkpoint_interval=150, skip_truncated=True))
    initial_head = client.stream(STREAM).head_cut().positions
    readers.start("fast")
    readers.start("slow")
    readers.pause("slow")
    cycles = Cycles(client, readers)

    # phase 1: both subscribers read; retention follows the slower one, across a split in the middle
    cycles.lagging(6)
    client.stream(STREAM).split(segment_id(0, 0))
    cycles.lagging(6)
    readers.resume("slow")
    cycles.write_round()
    wait_for(caught_up(client, "slow", "fast"), "both groups to acknowledge the tail", readers)
    final = cycles.cycle()
    assert final.case == "i" and same(client, final.cut, effective_cuts(client)["slow"])
    phase1 = cycles.decisions
    assert sum(d.cut is not None and d.case == "i" for d in phase1) >= 3, [(d.case, d.rule) for d in phase1]
    topology = client.stream(STREAM).state().topology()
    behind = [d for d in phase1 if d.cut is not None and len(d.subscribers) == 2 and topology.compare(
        *(v.positions for v in sorted(d.subscribers, key=lambda v: v.reader_group != "slow")))
        is CutOrder.BEFORE]
    # the slow group lagged behind the fast one, and those cycles truncated exactly at its cut
    assert behind and all(same(client, d.cut, next(v.positions for v in d.subscribers if v.reader_group == "slow"))
                          for d in behind), [(d.case, d.reason) for d in phase1]
    assert client.stream(STREAM).state().topology().compare(
        initial_head, client.stream(STREAM).head_cut().positions) is CutOrder.BEFORE

    # phase 2: the slow group stops; what it has not read stays, then resetting it to NONE releases it
    readers.stop("slow")
    slow_cut = effective_cuts(client)["slow"]
    cycles.rounds(2)
    wait_for(caught_up(client, "fast"), "the fast group to acknowledge the tail", readers)
    held = cycles.cycle()
    assert held.cut is None and held.case is not None
    # held at the slow group's acknowledgement
    assert same(client, client.stream(STREAM).head_cut().positions, slow_cut)
    client.reader_group("slow").reset(tk.ReaderGroupConfig(streams=[STREAM], retention_type=tk.RetentionType.NONE))
    released = cycles.cycle()
    assert [v.reader_group for v in released.subscribers] == ["fast"]
    assert released.case == "i" and same(client, released.cut, effective_cuts(client)["fast"])
    assert client.stream(STREAM).state().topology().compare(
        slow_cut, client.stream(STREAM).head_cut().positions) is CutOrder.BEFORE
    assert size_now(client) == 0  # a message queue: min 0 and everything consumed

    # phase 3: the fast group stops acknowledging; it holds data only up to the maximum
    readers.stop("fast")
    fast_cut = effective_cuts(client)["fast"]
    forced = []
    for _ in range(14):  # 14 rounds of 3,000 bytes: well past the 24,000-byte maximum
        cycles.write_round()
        decision = cycles.cycle()
        if decision.case in FORCED:
            forced.append(decision)
        else:
            assert decision.cut is None, decision.reason  # LB is the head: only the maximum truncates
    assert forced, [(d.case, d.rule) for d in cycles.decisions[-14:]]
    assert size_now(client) <= MAX_BYTES
    assert not at_or_before(client, client.stream(STREAM).head_cut().positions, fast_cut)  # the max overrode it

    # consumption truncations are audited with the subscribers that allowed them
    history = client.stream(STREAM).retention.history(limit=200)
    details = [h["details"] for h in history if h["details"] and "consumption" in h["details"]]
    assert len(details) == sum(d.cut is not None and d.case is not None for d in cycles.decisions)
