"""`tidekeep stream read --follow`: a real subprocess follows a stream while the test writes more
events; the test waits on output lines, never on sleeps. The follow loop itself runs in-process with
its sleep hook doing the writing (and a scaling), so every round boundary is exercised exactly."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.cli import run_cli
from tidekeep.cli.follow import FollowOptions, follow

STREAM = "logs/app"


class Lines:
    """The stdout lines of a process, read by a thread, so the test can wait for each with a timeout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.queue: queue.Queue[bytes] = queue.Queue()
        assert process.stdout is not None
        out = process.stdout
        threading.Thread(target=lambda: [self.queue.put(line) for line in iter(out.readline, b"")],
                         daemon=True).start()

    def take(self, n: int, timeout: float = 60) -> list[str]:
        return [self.queue.get(timeout=timeout).decode().rstrip("\n") for _ in range(n)]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with tk.connect(tmp_path / "ws", create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
    return tmp_path / "ws"


def write(home: Path, payloads: list[str]) -> None:
    with tk.connect(home) as client, client.stream(STREAM).writer("w", linger=0) as writer:
        writer.write_many([p.encode() for p in payloads], ["one-key"] * len(payloads))


def start_follow(home: Path, *args: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    env["TIDEKEEP_HOME"] = str(home)
    return subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", "stream", "read", STREAM, "--follow",
                             "--poll-interval", "50ms", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_follow_prints_events_written_while_it_runs_then_stops_at_the_limit(home: Path) -> None:
    write(home, ["a1", "a2", "a3"])
    process = start_follow(home, "--limit", "8")
    try:
        lines = Lines(process)
        assert lines.take(3) == ["a1", "a2", "a3"]  # what was there, then it keeps waiting
        write(home, ["b1", "b2"])
        assert lines.take(2) == ["b1", "b2"]  # printed (and flushed) while it follows
        write(home, ["c1", "c2", "c3", "c4"])
        assert lines.take(3) == ["c1", "c2", "c3"]  # the 8th event ends it
        assert process.wait(timeout=60) == 0
        assert process.stdout is not None and process.stderr is not None
        assert lines.queue.empty() and process.stderr.read() == b""
    finally:
        process.kill()
        process.wait()


def test_ctrl_c_stops_a_follow_with_exit_130(home: Path) -> None:
    write(home, ["x"])
    process = start_follow(home, "--json")
    try:
        lines = Lines(process)
        assert '"payload":"x"' in lines.take(1)[0]
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 130
        assert process.stderr is not None and process.stderr.read() == b"interrupted\n"  # as every command
    finally:
        process.kill()
        process.wait()


def test_a_follow_ends_when_the_stream_is_sealed_and_read_to_its_end(home: Path) -> None:
    write(home, ["before"])
    process = start_follow(home)
    try:
        lines = Lines(process)
        assert lines.take(1) == ["before"]
        write(home, ["last"])
        with tk.connect(home) as client:
            client.stream(STREAM).seal()
        assert process.wait(timeout=60) == 0
        assert lines.take(1) == ["last"]
    finally:
        process.kill()
        process.wait()


def test_idle_timeout_ends_a_follow_and_bad_flags_are_one_line(home: Path) -> None:
    write(home, ["only"])
    idle = run_cli(home, "stream", "read", STREAM, "--follow", "--poll-interval", "20ms", "--idle-timeout", "200ms")
    assert (idle.returncode, idle.stdout, idle.stderr) == (0, "only\n", "")
    for args, message in [
        (["--follow", "--to", "tail"], "give --to or --follow, not both"),
        (["--idle-timeout", "1s"], "--idle-timeout only applies with --follow"),
        (["--follow", "--poll-interval", "0s"], "invalid --poll-interval '0s': must be greater than zero"),
        (["--follow", "--poll-interval", "soon"], "bad --poll-interval: invalid duration 'soon'"),
    ]:
        done = run_cli(home, "stream", "read", STREAM, *args)
        assert done.returncode == 2 and done.stdout == "", (args, done.stderr)
        assert done.stderr.startswith("error: ") and message in done.stderr and done.stderr.count("\n") == 1, args


def test_follow_reads_every_event_once_across_rounds_and_scaling(tmp_path: Path) -> None:
    client = tk.connect(tmp_path / "ws", settings={"writer.linger": 0}, create=True)
    try:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
        keys = [f"k{i}" for i in range(6)]
        written: list[bytes] = []

        def write_round(tag: str) -> None:
            payloads = [f"{tag}-{k}-{i}".encode() for i in range(3) for k in keys]
            with client.stream(STREAM).writer(f"w-{tag}") as writer:
                writer.write_many(payloads, [p.decode().split("-")[1] for p in payloads])
            written.extend(payloads)

        steps = iter([lambda: write_round("r1"),
                      lambda: (client.stream(STREAM).split("0.0", 3), write_round("r2")),  # successors from here on
                      lambda: None,  # an empty poll
                      lambda: write_round("r3")])
        sleeps: list[float] = []

        def on_sleep(seconds: float) -> None:
            sleeps.append(seconds)
            next(steps, lambda: client.stream(STREAM).seal())()

        write_round("r0")
        rounds: list[int] = []
        events = list(follow(client, STREAM, None, FollowOptions(poll_interval_s=0.25, sleep=on_sleep),
                             end_of_round=lambda: rounds.append(len(sleeps))))
        payloads = [e.payload for e in events]
        assert sorted(payloads) == sorted(written) and len(payloads) == len(set(payloads)) == 4 * 18
        for key in keys:  # per key in write order, across the split
            assert [p for p in payloads if p.split(b"-")[1] == key.encode()] == \
                   [p for p in written if p.split(b"-")[1] == key.encode()]
        assert set(sleeps) == {0.25} and len(sleeps) == 5  # polled only when a round found nothing
        assert rounds == [0, 1, 2, 4]  # output flushed after each round that printed
    finally:
        client.close()
