"""Watermarks under `tidekeep serve`, run as real subprocesses (docs/watermarks.md, "Storage and the service").

Two processes on PostgreSQL: the owner of a stream's lease is SIGKILLed while writers keep noting
time; the survivor takes the lease over and continues from the stored watermark, so the stored
revisions are consecutive, their lower times strictly increase and their cuts never go backwards.
One process on SQLite: `--once` computes one watermark and `--no-watermarks` none; a stream whose
writers stopped noting is given back (its lease released) and taken again when a writer notes;
SIGTERM with the watermark thread running exits 0. Bad `--watermark-frequency` values exit 2.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from test_serve import SERVE, held_leases, open_client, serve_env, start_serve, wait_for

import tidekeep as tk
from tidekeep.store.leases import LeaseStore
from tidekeep.store.schema_watermarks import watermarks as wm_table
from tidekeep.streams.watermarks import Watermark, compare

QUIET = ["--no-catalog", "--no-archives"]  # only retention leases and watermarks in these processes


class Noter:
    """Writers in a thread of the test process that each write a few events and note an increasing
    time about every 50 ms (writer j notes base + 10·i + j at round i), like an application would."""

    def __init__(self, client: tk.Client, stream: str, writer_ids: list[str], base: int = 1_000) -> None:
        self.writers = [client.stream(stream).writer(w) for w in writer_ids]
        self.base = base
        self.rounds = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"noter-{stream}", daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(0.05):
                for j, writer in enumerate(self.writers):
                    for k in range(3):
                        writer.write(f"r{self.rounds}w{j}e{k}".encode(), routing_key=f"k{k + j}")
                    writer.note_time(self.base + 10 * self.rounds + j)
                self.rounds += 1
        except BaseException as exc:  # surfaced by check(): the test must not pass over a failing writer
            self.error = exc

    def __enter__(self) -> Noter:
        self._thread.start()
        return self

    def check(self) -> None:
        assert self.error is None, f"noting thread failed: {type(self.error).__name__}: {self.error}"
        assert self._thread.is_alive(), "noting thread stopped"

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stored(client: tk.Client, stream: str) -> list[Any]:
    """The stream's watermark rows (with the appending owner), by revision."""
    state = client.stream(stream).state()
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(wm_table).where(wm_table.c.stream_id == state.stream_id)
                                 .order_by(wm_table.c.revision)).all())


def check_sequence(client: tk.Client, stream: str, rows: list[Any]) -> None:
    """Stored watermarks as a single controller would emit them: revisions 0, 1, 2, ... (no gap, no
    duplicate), lower times strictly increasing, upper times never decreasing, every cut at or after
    the one before it (per segment and, across scales, by lineage)."""
    revisions = [r.revision for r in rows]
    assert revisions == list(range(len(rows))), revisions
    lowers = [r.lower_time_ms for r in rows]
    assert all(a < b for a, b in itertools.pairwise(lowers)), lowers
    uppers = [r.upper_time_ms for r in rows]
    assert all(a <= b for a, b in itertools.pairwise(uppers)), uppers
    assert all(r.lower_time_ms <= r.upper_time_ms for r in rows)
    segments = client.stream(stream).state().segments
    cuts = [dict(r.cut) for r in rows]  # the column type decodes positions (store/positions.py)
    for before, after in itertools.pairwise(cuts):
        assert compare(after, before, segments) == 1, (before, after)
        assert all(after[s] >= o for s, o in before.items() if s in after), (before, after)


def pid_of(owner: str, procs: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """The serve process whose owner id (host:pid:uuid) this is."""
    return next(p for p in procs if f":{p.pid}:" in owner)


def stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_two_processes_on_postgres_the_owner_killed_watermarks_continue(tmp_path: Path, pg_url: str) -> None:
    client = open_client(tmp_path, pg_url)
    stream = "wm/failover"
    resource = f"retention:{stream}"
    client.create_stream(stream, tk.StreamConfig(segments=2))
    env = serve_env(tmp_path, pg_url)
    args = ["--lease-ttl", "2s", "--watermark-frequency", "100ms", *QUIET]
    logs = [tmp_path / "serve-a.log", tmp_path / "serve-b.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with Noter(client, stream, ["w0", "w1"]) as noter:
            procs = [start_serve(args, env, logs[0]), start_serve(args, env, logs[1])]
            wait_for(lambda: len(stored(client, stream)) >= 5, 60, "watermarks to be appended", logs)
            owner = held_leases(client)[resource]
            killed = pid_of(owner, procs)
            survivor = next(p for p in procs if p is not killed)
            # the survivor is up and a member of the service before the owner dies
            wait_for(lambda: any(r.startswith("member:") and f":{survivor.pid}:" in o
                                 for r, o in held_leases(client).items()), 60, "the second process to join", logs)
            assert {r.owner for r in stored(client, stream)} == {owner}  # only the lease holder appended
            noter.check()
            killed.send_signal(signal.SIGKILL)
            killed.wait(timeout=10)

            def survivor_appends() -> bool:
                noter.check()
                return sum(1 for r in stored(client, stream) if f":{survivor.pid}:" in (r.owner or "")) >= 5

            wait_for(survivor_appends, 60, "the survivor to take over and append watermarks", logs)
            noter.check()
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(timeout=30) == 0, logs[procs.index(survivor)].read_text()
    finally:
        stop_all(procs)
    rows = stored(client, stream)
    check_sequence(client, stream, rows)
    new_owner = next(r.owner for r in rows if r.owner != owner)
    assert f":{survivor.pid}:" in new_owner
    owners = [r.owner for r in rows]
    switch = owners.index(new_owner)
    # one handover, from the killed process to the survivor: never back, nobody else, no double append
    assert owners == [owner] * switch + [new_owner] * (len(rows) - switch), owners
    assert switch >= 5 and len(rows) - switch >= 5
    survivor_log = logs[procs.index(survivor)].read_text()
    assert f"lease taken: {resource}" in survivor_log
    assert f"watermark {stream} revision {switch}:" in survivor_log  # it resumed right after the stored one
    # the lower times are times the writers noted, and the cuts followed the writers' events
    assert all((r.lower_time_ms - 1_000) % 10 in (0, 1) for r in rows)
    assert rows[-1].cut != rows[0].cut
    assert all(o > 0 for o in rows[-1].cut.values())
    assert held_leases(client) == {}
    client.close()


def sqlite_setup(tmp_path: Path) -> tuple[tk.Client, dict[str, str], str]:
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    return open_client(tmp_path, url), serve_env(tmp_path, url), url


def owner_in(log_text: str) -> str:
    line = next(line for line in log_text.splitlines() if "serve started: owner=" in line)
    return line.split("owner=")[1].split()[0]


def test_serve_once_computes_a_watermark_and_no_watermarks_computes_none(tmp_path: Path) -> None:
    client, env, _ = sqlite_setup(tmp_path)
    stream = "wm/once"
    client.create_stream(stream, tk.StreamConfig(segments=2))
    writer = client.stream(stream).writer("w")
    writer.write_many([b"e" * 10] * 12, [f"k{i}" for i in range(12)])
    writer.note_time(5_000)
    leases = LeaseStore(client.workspace.db, client.clock)

    off = subprocess.run([*SERVE, "--once", "--no-watermarks", *QUIET], env=env, capture_output=True, text=True,
                         timeout=120, check=False)
    assert off.returncode == 0, off.stderr
    assert client.stream(stream).watermarks.latest() is None
    assert leases.get(f"retention:{stream}") is None  # not even taken: the stream is no work of this process

    on = subprocess.run([*SERVE, "--once", *QUIET], env=env, capture_output=True, text=True, timeout=120,
                        check=False)
    assert on.returncode == 0, on.stderr
    tail = dict(client.stream(stream).tail_cut().positions)
    assert client.stream(stream).watermarks.list() == [Watermark(0, 5_000, 5_000, tail)]
    assert [r.owner for r in stored(client, stream)] == [owner_in(on.stderr)]
    assert f"watermark {stream} revision 0: lower=5000 upper=5000" in on.stderr
    assert held_leases(client) == {}  # released on exit
    writer.close()
    client.close()


def test_serve_live_and_stale_streams_then_sigterm(tmp_path: Path) -> None:
    """A stream with writers noting gets watermarks continuously; a stream whose only writer stopped
    noting (timed out, its mark older than the last watermark) is released, stays without further
    watermarks while the other keeps getting them, and is taken again when its writer notes."""
    client, env, _ = sqlite_setup(tmp_path)
    live, stale = "wm/live", "wm/stale"
    client.create_stream(live, tk.StreamConfig(segments=2))
    client.create_stream(stale, tk.StreamConfig(segments=1, timestamp_aggregation_timeout="1s"))
    idle = client.stream(stale).writer("idle")
    idle.write(b"one event", routing_key="k")
    idle.note_time(100)
    leases = LeaseStore(client.workspace.db, client.clock)
    log = tmp_path / "serve.log"
    proc = start_serve(["--lease-ttl", "3s", "--watermark-frequency", "100ms", *QUIET], env, log)
    try:
        with Noter(client, live, ["w0", "w1"]) as noter:
            live_marks, stale_marks = client.stream(live).watermarks, client.stream(stale).watermarks
            wait_for(lambda: len(live_marks.list()) >= 3, 60, "watermarks of the live stream", [log])
            wait_for(lambda: stale_marks.latest() is not None, 60, "the stale stream's watermark", [log])

            def released() -> bool:
                lease = leases.get(f"retention:{stale}")
                return lease is not None and lease.owner is None

            wait_for(released, 60, "the stale stream's lease to be released", [log])
            count = len(client.stream(live).watermarks.list())
            wait_for(lambda: len(client.stream(live).watermarks.list()) >= count + 5, 60, "more live watermarks", [log])
            noter.check()
            # passes went on meanwhile: the stale stream was neither taken again nor computed
            assert released()
            assert [(m.revision, m.lower_time_ms) for m in client.stream(stale).watermarks.list()] == [(0, 100)]
            assert [(s.mark.writer_id, s.active) for s in stale_marks.writers()] == [("idle", False)]

            idle.note_time(200)  # the writer comes back: the stream is due again
            wait_for(lambda: len(client.stream(stale).watermarks.list()) == 2, 60, "the stale stream's next watermark",
                     [log])
            assert client.stream(stale).watermarks.latest().lower_time_ms == 200  # type: ignore[union-attr]
            noter.check()
            proc.send_signal(signal.SIGTERM)  # the watermark thread is running (noter still noting)
            assert proc.wait(timeout=30) == 0, log.read_text()
    finally:
        stop_all([proc])
    text = log.read_text()
    assert "received SIGTERM" in text and "serve stopped" in text
    assert f"lease released: retention:{stale}" in text
    assert "Traceback" not in text and "failed" not in text, text
    assert held_leases(client) == {}
    check_sequence(client, live, stored(client, live))
    check_sequence(client, stale, stored(client, stale))
    idle.close()
    client.close()


def test_bad_watermark_frequency_is_rejected_with_one_line(tmp_path: Path) -> None:
    _, env, _ = sqlite_setup(tmp_path)
    for value, message in [("0", "bad --watermark-frequency: must be greater than zero"),
                           ("0s", "bad --watermark-frequency: must be greater than zero"),
                           ("abc", "bad --watermark-frequency: invalid duration")]:
        done = subprocess.run([*SERVE, "--once", "--watermark-frequency", value], env=env, capture_output=True,
                              text=True, timeout=60, check=False)
        assert done.returncode == 2 and done.stderr.startswith(f"error: {message}"), done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
    # a bad value is an error even when watermarks are off
    done = subprocess.run([*SERVE, "--once", "--no-watermarks", "--watermark-frequency", "abc"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.startswith("error: bad --watermark-frequency"), done.stderr
