"""`tidekeep serve` as real subprocesses: one pass (--once) truncates as the policy says and logs
why; SIGTERM/SIGINT shut down cleanly (exit 0, leases released); two processes on PostgreSQL
divide the streams, one is SIGKILLed and the other takes its streams over within the lease TTL,
with no truncation done twice and none lost."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk
from helpers.procs import worker_env
from tidekeep.store import schema as t
from tidekeep.store.leases import LeaseStore

# without the HTTP API: these tests run several services on one host, and the API's port is one per
# host (tests/api/test_api_server.py tests serve with it)
SERVE = [sys.executable, "-m", "tidekeep.cli.main", "serve", "--no-api"]
HOUR = 3_600_000


def write_batch(client: tk.Client, stream: str, batch: int, events: int = 20) -> None:
    with client.stream(stream).writer(f"w{batch}") as writer:
        writer.write_many([f"{stream}:{batch}:{i}".encode() * 4 for i in range(events)],
                          [f"k{i % 3}" for i in range(events)])


def prepare(client: tk.Client, streams: list[str]) -> dict[str, dict[int, int]]:
    """Each stream: two batches recorded in its retention set an hour apart (in the past), then a
    size policy whose min is 1.5 batches. A third batch (`write_batch(..., 2)`) makes the oldest
    record retain 2 batches ≥ min, so a cycle truncates exactly there. Returns those cuts."""
    expected: dict[str, dict[int, int]] = {}
    base = client.clock.now_ms() - 3 * HOUR
    for stream in streams:
        client.create_stream(stream, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size("1TB")))
        for batch in range(2):
            write_batch(client, stream, batch)
            client.stream(stream).retention.run(now=base + batch * HOUR)
        first, second = client.stream(stream).retention.records()
        batch_bytes = second.recording_size - first.recording_size
        assert batch_bytes > 0
        client.stream(stream).update(tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(
            batch_bytes * 3 // 2)))
        expected[stream] = first.positions
    return expected


def heads(client: tk.Client, streams: list[str]) -> dict[str, dict[int, int]]:
    return {s: dict(client.stream(s).state().head) for s in streams}


def truncations(client: tk.Client) -> list[tuple[str, str]]:
    with client.workspace.db.read() as conn:
        return [(r.target, r.new_head) for r in conn.execute(
            sa.select(t.audit.c.target, t.audit.c.new_head).where(t.audit.c.action == "truncate"))]


def held_leases(client: tk.Client) -> dict[str, str]:
    now = client.clock.now_ms()
    return {lease.resource: lease.owner for lease in LeaseStore(client.workspace.db, client.clock).list()
            if lease.held_at(now)}


def wait_for(condition: Callable[[], bool], timeout: float, what: str, logs: list[Path]) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out waiting for {what}; logs:\n"
                                 + "\n".join(p.read_text(errors="replace")[-4000:] for p in logs))
        time.sleep(0.05)
    return time.monotonic() - start


def start_serve(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as handle:
        return subprocess.Popen([*SERVE, *args], env=env, stdout=handle, stderr=subprocess.STDOUT)


def serve_env(tmp_path: Path, metadata_url: str) -> dict[str, str]:
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    env["TIDEKEEP_RETENTION_FREQUENCY"] = "500ms"  # the retention set records the tail every cycle
    return env


def open_client(tmp_path: Path, metadata_url: str) -> tk.Client:
    return tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                      settings={"writer.linger": 0, "retention.frequency": "500ms"}, create=True)


def test_serve_once_truncates_as_the_policy_says_and_logs_why(tmp_path: Path, metadata_url: str) -> None:
    client = open_client(tmp_path, metadata_url)
    streams = ["s/due", "s/kept", "s/held"]
    expected = prepare(client, streams)
    write_batch(client, "s/due", 2)  # s/due and s/held have reached their policy's min beyond a record
    write_batch(client, "s/held", 2)
    hold_id = client.holds.add("stream", "s/held", "litigation 42")
    # begun an hour ago by its writer's clock: its 1 s lease has run out for the serve process (wall clock)
    past = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                      clock=tk.ManualClock(client.clock.now_ms() - HOUR), settings={"writer.linger": 0})
    abandoned = past.stream("s/kept").transactional_writer("tw", lease="1s").begin()
    abandoned.write(b"never committed", routing_key="k")
    abandoned.flush()
    before = heads(client, streams)
    done = subprocess.run([*SERVE, "--once", "--lease-ttl", "5s"], env=serve_env(tmp_path, metadata_url),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert abandoned.status() is tk.TxnState.ABORTED  # the housekeeping expired it
    assert any("expired transactions: 1" in line for line in done.stderr.splitlines())
    assert heads(client, streams) == {"s/due": expected["s/due"], "s/kept": before["s/kept"],
                                      "s/held": before["s/held"]}
    lines = done.stderr.splitlines()
    truncated = [line for line in lines if "truncated s/due at {" in line]
    assert len(truncated) == 1 and "rule=" in truncated[0] and "freed_bytes=" in truncated[0]
    freed = int(truncated[0].split("freed_bytes=")[1].split()[0])
    assert freed == client.audit("s/due")[0]["bytes_freed"] > 0
    assert any("kept s/kept (nothing to truncate): rule=" in line for line in lines)
    skipped = [line for line in lines if "skipped s/held:" in line]
    assert len(skipped) == 1 and "(HoldActive)" in skipped[0] and f"legal hold {hold_id}" in skipped[0]
    assert not any("failed s/held" in line for line in lines)  # a hold is not a failure to retry
    assert any("sweep:" in line for line in lines)
    assert held_leases(client) == {}  # everything released on exit
    assert truncations(client) == [("s/due", json.dumps({str(k): v for k, v in sorted(expected["s/due"].items())}))]
    past.close()
    client.close()


def test_serve_json_logs_are_one_json_object_per_line(tmp_path: Path, sqlite_client: tk.Client) -> None:
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    client = open_client(tmp_path, url)
    prepare(client, ["s/a"])
    write_batch(client, "s/a", 2)
    done = subprocess.run([*SERVE, "--once", "--json-logs"], env=serve_env(tmp_path, url),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    entries = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(e["message"].startswith("truncated s/a at {") and e["level"] == "INFO" for e in entries)
    client.close()


def test_bad_serve_flags_are_rejected_with_one_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    for flag, value, message in [("--lease-ttl", "0s", "bad --lease-ttl: must be greater than zero"),
                                 ("--frequency", "5 parsecs", "bad --frequency: invalid duration")]:
        done = subprocess.run([*SERVE, "--once", flag, value], env=serve_env(tmp_path, url),
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2 and done.stderr.startswith(f"error: {message}"), done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_sigterm_and_sigint_shut_down_cleanly_and_release_leases(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'meta.db'}"
    client = open_client(tmp_path, url)
    streams = ["s/a", "s/b"]
    expected = prepare(client, streams)
    for stream in streams:
        write_batch(client, stream, 2)
    env = serve_env(tmp_path, url)
    for number, sig in enumerate((signal.SIGTERM, signal.SIGINT)):
        log = tmp_path / f"serve-{number}.log"
        proc = start_serve(["--frequency", "1s", "--lease-ttl", "3s"], env, log)
        try:
            wait_for(lambda: {f"retention:{s}" for s in streams} <= set(held_leases(client)), 60,
                     "serve to take the stream leases", [log])
            wait_for(lambda: heads(client, streams) == expected, 30, "the truncations", [log])
            proc.send_signal(sig)
            assert proc.wait(timeout=20) == 0, log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        text = log.read_text()
        assert f"received {sig.name}" in text and "serve stopped" in text
        assert held_leases(client) == {}
    assert sorted(truncations(client)) == sorted(
        (s, json.dumps({str(k): v for k, v in sorted(expected[s].items())})) for s in streams)
    client.close()


def test_two_processes_on_postgres_one_killed_the_other_takes_over(tmp_path: Path, pg_url: str) -> None:
    client = open_client(tmp_path, pg_url)
    streams = [f"s/r{i}" for i in range(6)]
    expected = prepare(client, streams)
    env = serve_env(tmp_path, pg_url)
    args = ["--frequency", "500ms", "--lease-ttl", "2s", "--sweep-every", "1h"]
    logs = [tmp_path / "serve-a.log", tmp_path / "serve-b.log"]
    a = start_serve(args, env, logs[0])
    procs = [a]
    try:
        wait_for(lambda: len([r for r in held_leases(client) if r.startswith("retention:")]) == 6, 60,
                 "A to take every stream", logs)
        b = start_serve(args, env, logs[1])
        procs.append(b)

        def divided() -> bool:
            owners = [o for r, o in held_leases(client).items() if r.startswith("retention:")]
            return len(owners) == 6 and len(set(owners)) == 2 and owners.count(owners[0]) == 3

        wait_for(divided, 60, "A and B to divide the streams 3/3", logs)
        owner_of_a = next(o for o in held_leases(client).values() if f":{a.pid}:" in o)
        a_streams = sorted(r.removeprefix("retention:") for r, o in held_leases(client).items()
                           if o == owner_of_a and r.startswith("retention:"))
        assert len(a_streams) == 3
        a_leases = {lease.resource: lease for lease in LeaseStore(client.workspace.db, client.clock).list()
                    if lease.resource.removeprefix("retention:") in a_streams}
        a.send_signal(signal.SIGKILL)
        a.wait(timeout=10)
        for stream in streams:  # now every stream has a truncation due, A's included
            write_batch(client, stream, 2)

        def b_holds_all() -> bool:
            owners = {o for r, o in held_leases(client).items() if r.startswith("retention:")}
            return len([r for r in held_leases(client) if r.startswith("retention:")]) == 6 and \
                all(f":{b.pid}:" in o for o in owners)

        wait_for(b_holds_all, 60, "B to take A's streams over", logs)
        # B took each of A's streams only once A's lease had run out, as a new holder (a higher
        # fencing version): never two holders of one stream at once, whatever the machine's speed.
        taken = {lease.resource: lease for lease in LeaseStore(client.workspace.db, client.clock).list()}
        assert len(a_leases) == 3
        for resource, old_lease in a_leases.items():
            assert taken[resource].acquired_ms >= old_lease.expires_ms, resource
            assert taken[resource].version > old_lease.version, resource
        wait_for(lambda: heads(client, streams) == expected, 30, "every truncation", logs)
        done_at = len(logs[1].read_text())

        def two_more_cycles() -> bool:  # each stream decided twice more after its truncation
            later = logs[1].read_text()[done_at:]
            return all(later.count(f"kept {s} (nothing to truncate)") >= 2 for s in streams)

        wait_for(two_more_cycles, 60, "two more cycles of every stream", logs)
        assert heads(client, streams) == expected
        b.send_signal(signal.SIGTERM)
        assert b.wait(timeout=20) == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    rows = truncations(client)
    assert len(rows) == len(set(rows)), "a stream was truncated twice for one decision"
    assert sorted(rows) == sorted((s, json.dumps({str(k): v for k, v in sorted(expected[s].items())}))
                                  for s in streams)  # and no truncation was lost
    b_log = logs[1].read_text()
    for stream in a_streams:
        assert f"truncated {stream} at {{" in b_log  # B did A's work
    assert held_leases(client) == {}
    client.close()


def test_the_heartbeat_keeps_leases_through_a_cycle_longer_than_the_ttl(tmp_path: Path) -> None:
    """A cycle that takes three TTLs keeps its stream: the server's heartbeat thread renews the lease
    while the cycle runs, so another process asking all along is always denied. The cycle's time
    passes on a manual clock, a quarter TTL per step, and each step goes on only once the heartbeat
    has renewed the lease at that time: no step races the real clock."""
    import threading

    from tidekeep.clock import ManualClock
    from tidekeep.service.scheduler import RetentionService
    from tidekeep.service.server import heartbeat
    from tidekeep.service.stream_tasks import retention_tasks

    client = open_client(tmp_path, f"sqlite:///{tmp_path / 'meta.db'}")
    clock = ManualClock()
    ttl_ms = 600
    mine = LeaseStore(client.workspace.db, clock)
    other = LeaseStore(client.workspace.db, clock)
    denials: list[bool] = []

    def renewed_now() -> bool:
        lease = mine.get("retention:s/slow")
        return lease is not None and lease.owner == "me" and lease.expires_ms == clock.now_ms() + ttl_ms

    def slow_cycle(stream: str) -> str:
        for _ in range(12):  # three TTLs in quarter steps: without renewals the lease runs out
            clock.advance(ttl_ms // 4)
            wait_for(renewed_now, 60, "the heartbeat to renew the lease", [])
            denials.append(not other.acquire("retention:s/slow", "other", ttl_ms).granted)
        return "done"

    service = RetentionService(mine, clock, "me", ttl_ms=ttl_ms,
                               retention=retention_tasks(lambda: ["s/slow"], slow_cycle, clock=clock,
                                                         frequency_ms=60_000))
    done = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(service, done, 0.01))
    beat.start()
    try:
        assert service.run_pass().ran == ["s/slow"]
    finally:
        done.set()
        beat.join()
    assert denials == [True] * 12
    lease = mine.get("retention:s/slow")
    assert lease is not None and lease.held_at(clock.now_ms()) and lease.owner == "me"
    service.release_all()
    assert other.acquire("retention:s/slow", "other", ttl_ms).granted
    client.close()
