"""The controller service's scheduling: pure decisions (property tests against brute-force
oracles) and the pass loop on real leases (SQLite and PostgreSQL) with an injected cycle."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.errors import ConflictError, NotFound
from tidekeep.service.assembly import sweep_task
from tidekeep.service.scheduler import SWEEP_RESOURCE, RetentionService, fair_share, plan_claims
from tidekeep.service.stream_tasks import (
    StreamTrack,
    after_failure,
    after_success,
    due_streams,
    retention_tasks,
    stream_resource,
)
from tidekeep.service.tasks import backoff_ms
from tidekeep.store.leases import LeaseStore

# ---- pure decisions ----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(frequency=st.integers(1, 50), durations=st.lists(st.integers(0, 30), min_size=1, max_size=8),
       start=st.integers(0, 1000))
def test_runs_are_spaced_by_the_frequency_from_the_end_of_the_previous_run(
        frequency: int, durations: list[int], start: int) -> None:
    """Tick a clock 1 ms at a time, run the stream whenever the scheduler says it is due; the
    oracle: the first run starts at once, every later run starts exactly `frequency` after the
    previous run ended (never earlier, and — ticking every ms — never later)."""
    now, track, starts, ends = start, StreamTrack(), [], []
    while len(ends) < len(durations):
        if due_streams(["s"], {"s": track}, {}, now, frequency) == ["s"]:
            starts.append(now)
            now += durations[len(ends)]
            ends.append(now)
            track = after_success(track, now)
        else:
            now += 1
    assert starts[0] == start
    for previous_end, next_start in zip(ends[:-1], starts[1:], strict=True):
        assert next_start == previous_end + frequency


@settings(max_examples=200, deadline=None)
@given(base=st.integers(1, 10_000), cap=st.integers(1, 10**7), failures=st.integers(1, 200))
def test_backoff_doubles_from_the_base_and_is_bounded(base: int, cap: int, failures: int) -> None:
    expected = base
    for _ in range(failures - 1):  # brute force: double once per earlier failure, then cap
        expected *= 2
    assert backoff_ms(failures, base, cap) == min(cap, expected)
    assert backoff_ms(failures, base, cap) <= cap
    assert backoff_ms(failures + 1, base, cap) >= backoff_ms(failures, base, cap)
    if base * 2 ** failures <= cap:
        assert backoff_ms(failures + 1, base, cap) > backoff_ms(failures, base, cap)


def test_a_failed_stream_is_retried_at_its_backoff_not_at_the_frequency() -> None:
    track = StreamTrack(last_end_ms=0)
    track = after_failure(track, 5_000, 1_000, 60_000)
    assert track.retry_at_ms == 6_000
    assert due_streams(["s"], {"s": track}, {}, 5_999, 60_000) == []
    assert due_streams(["s"], {"s": track}, {}, 6_000, 60_000) == ["s"]
    track = after_failure(track, 6_000, 1_000, 60_000)
    assert track.retry_at_ms == 8_000 and track.failures == 2
    assert after_success(track, 9_000) == StreamTrack(last_end_ms=9_000)


def test_due_streams_use_the_latest_end_known_and_come_most_overdue_first() -> None:
    tracks = {"a": StreamTrack(last_end_ms=100), "b": StreamTrack(last_end_ms=50)}
    # another process ran "a" later (the lease row's work-done time): that end counts
    assert due_streams(["a", "b", "c"], tracks, {"a": 900}, 1_000, 500) == ["c", "b"]
    assert due_streams(["a", "b", "c"], tracks, {"a": 400}, 1_000, 500) == ["c", "b", "a"]


@settings(max_examples=200, deadline=None)
@given(stream_count=st.integers(0, 12), members=st.integers(1, 4), order=st.randoms(use_true_random=False))
def test_claims_settle_on_a_fair_division_where_every_stream_has_one_owner(
        stream_count: int, members: int, order) -> None:  # type: ignore[no-untyped-def]
    """Oracle: members take turns (in random order) applying their plan until nothing changes;
    then every stream has exactly one owner and nobody holds more than ceil(streams/members)."""
    streams = [f"s/{i}" for i in range(stream_count)]
    held: dict[str, set[str]] = {m: set() for m in range(members)}  # type: ignore[misc]
    for _ in range(10 * (members + 1)):
        changed = False
        for member in order.sample(range(members), members):
            others = set().union(*(held[m] for m in held if m != member))
            plan = plan_claims(streams, held[member], others, members)
            assert not set(plan.acquire) & others  # never takes what another holds
            new = (held[member] - set(plan.release)) | set(plan.acquire)
            changed |= new != held[member]
            held[member] = new
        if not changed:
            break
    assert not changed
    owners = [m for s in streams for m in held if s in held[m]]
    assert len(owners) == len(streams)  # no stream held by two members
    assert set().union(*held.values()) == set(streams)
    assert all(len(h) <= fair_share(stream_count, members) for h in held.values())


# ---- the loop on real leases -------------------------------------------------------------------

TTL = 6_000
FREQ = 60_000


class Recorder:
    """An injected retention cycle: records calls, takes `duration` ms of clock, may raise."""

    def __init__(self, clock: tk.ManualClock, duration: int = 0) -> None:
        self.clock, self.duration = clock, duration
        self.calls: list[tuple[str, int]] = []
        self.raise_for: dict[str, list[BaseException]] = {}

    def __call__(self, stream: str) -> str:
        self.calls.append((stream, self.clock.now_ms()))
        self.clock.advance(self.duration)
        pending = self.raise_for.get(stream)
        if pending:
            raise pending.pop(0)
        return f"decision for {stream}"


@pytest.fixture
def env(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tuple[tk.Client, tk.ManualClock]]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
        create=True)
    yield c, clock
    c.close()


def service(c: tk.Client, owner: str, streams: list[str], cycle: Recorder, sweeps: list[str] | None = None,
            sweep_every_ms: int = 3_600_000) -> RetentionService:
    sweep = sweep_task(lambda: (sweeps if sweeps is not None else []).append(owner), sweep_every_ms)
    retention = retention_tasks(lambda: list(streams), cycle, clock=c.clock, frequency_ms=FREQ, retry_base_ms=1_000,
                                skip_errors=(NotFound,))
    return RetentionService(LeaseStore(c.workspace.db, c.clock), c.clock, owner, ttl_ms=TTL, retention=retention,
                            tasks=[sweep])


def owned_by(c: tk.Client, owner: str) -> set[str]:
    now = c.clock.now_ms()
    return {lease.resource for lease in LeaseStore(c.workspace.db, c.clock).list("retention:")
            if lease.owner == owner and lease.held_at(now)}


def test_two_services_divide_streams_and_one_takes_over_when_the_other_dies(
        env: tuple[tk.Client, tk.ManualClock]) -> None:
    c, clock = env
    streams = [f"s/{n}" for n in "abcdef"]
    cycle = Recorder(clock)
    a, b = service(c, "A", streams, cycle), service(c, "B", streams, cycle)
    a.run_pass()  # alone: A takes and runs everything
    assert owned_by(c, "A") == {stream_resource(s) for s in streams}
    assert sorted(s for s, _ in cycle.calls) == streams
    b.run_pass()  # B joins: everything is held, B waits
    a.run_pass()  # A sees two members and gives back half
    b.run_pass()
    mine_a, mine_b = owned_by(c, "A"), owned_by(c, "B")
    assert len(mine_a) == len(mine_b) == 3 and not mine_a & mine_b
    assert mine_a | mine_b == {stream_resource(s) for s in streams}
    # B's new streams were run by A less than a frequency ago (the lease row says so): not run again
    assert len(cycle.calls) == 6
    # A dies (stops renewing). Before the TTL runs out B takes nothing of A's ...
    clock.advance(TTL - 1)
    b.run_pass()
    assert owned_by(c, "B") == mine_b
    clock.advance(1)
    b.run_pass()  # ... at the TTL it takes all of A's streams over
    assert owned_by(c, "B") == {stream_resource(s) for s in streams}
    assert owned_by(c, "A") == set()
    clock.advance(TTL + 1)
    b.renew()
    b.run_pass()  # A's membership, expired for over a TTL, is purged
    assert [lease.resource for lease in LeaseStore(c.workspace.db, clock).list("member:")] == ["member:B"]


def test_a_stream_runs_again_a_frequency_after_its_last_run_ended(env: tuple[tk.Client, tk.ManualClock]) -> None:
    c, clock = env
    cycle = Recorder(clock, duration=2_000)  # each run takes 2 s of clock
    s = service(c, "A", ["s/a"], cycle)
    s.run_pass()
    first_end = clock.now_ms()
    clock.advance(FREQ - 1)
    s.renew()
    assert s.run_pass().ran == []
    clock.advance(1)
    assert s.run_pass().ran == ["s/a"]
    assert cycle.calls[1][1] == first_end + FREQ


def test_failures_are_retried_with_backoff_and_skips_wait_for_the_next_run(
        env: tuple[tk.Client, tk.ManualClock]) -> None:
    c, clock = env
    cycle = Recorder(clock)
    cycle.raise_for["s/a"] = [ConflictError("busy"), ConflictError("busy"), ConflictError("busy")]
    cycle.raise_for["s/b"] = [NotFound("stream 's/b' does not exist")]
    s = service(c, "A", ["s/a", "s/b"], cycle)
    report = s.run_pass()
    assert report.failed == ["s/a"] and report.skipped == ["s/b"]
    retry_times = []
    for _ in range(200):  # 100 ms steps through the backoffs
        clock.advance(100)
        s.renew()
        report = s.run_pass()
        retry_times += [clock.now_ms() for stream in report.failed + report.ran if stream == "s/a"]
        if report.ran:
            break
    start = cycle.calls[0][1]
    assert [t - start for t in retry_times] == [1_000, 3_000, 7_000]  # waits 1 s, 2 s, 4 s; then success
    assert [stream for stream, _ in cycle.calls].count("s/b") == 1  # a skip is not retried early


def test_stop_finishes_the_stream_in_hand_and_starts_no_other(env: tuple[tk.Client, tk.ManualClock]) -> None:
    c, clock = env
    s: RetentionService

    class StopDuringTheCycle(Recorder):
        def __call__(self, stream: str) -> str:
            s.stop.set()  # SIGTERM arrives during the first stream
            return "done"

    s = service(c, "A", ["s/a", "s/b", "s/c"], StopDuringTheCycle(clock))
    report = s.run_pass()
    assert report.ran == ["s/a"] and report.swept is False
    assert sorted(s.release_all()) == ["member:A", "retention:s/a", "retention:s/b", "retention:s/c"]
    assert owned_by(c, "A") == set()


def test_the_sweep_runs_once_per_interval_under_its_lease(env: tuple[tk.Client, tk.ManualClock]) -> None:
    c, clock = env
    sweeps: list[str] = []
    a = service(c, "A", [], Recorder(clock), sweeps, sweep_every_ms=10_000)
    b = service(c, "B", [], Recorder(clock), sweeps, sweep_every_ms=10_000)
    assert a.run_pass().swept and not b.run_pass().swept  # done less than an interval ago
    clock.advance(9_999)
    a.renew()
    b.renew()
    assert not a.run_pass().swept and not b.run_pass().swept
    clock.advance(1)
    LeaseStore(c.workspace.db, clock).acquire(SWEEP_RESOURCE, "C", TTL)  # a third process is sweeping right now
    assert not a.run_pass().swept and not b.run_pass().swept
    LeaseStore(c.workspace.db, clock).release(SWEEP_RESOURCE, "C")
    assert b.run_pass().swept and not a.run_pass().swept
    assert sweeps == ["A", "B"]
    assert LeaseStore(c.workspace.db, clock).get(SWEEP_RESOURCE).owner is None  # released after each sweep
