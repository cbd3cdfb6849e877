"""Retention cycles end to end on SQLite and PostgreSQL with an injected clock: size and time
policies over simulated hours, the retention set across a scale (as in Pravega's
SMTT.sizeBasedRetentionStreamTest), preview vs run, manual truncation winning, policy removal,
history, bad input."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.procs import worker_env
from tidekeep.streams.cuts import CutOrder
from tidekeep.streams.model import routing_key_position, segment_id
from tidekeep.streams.of_workspace import retention_manager
from tidekeep.streams.retention import BEHIND_HEAD, BELOW_MIN, NO_POLICY, RetentionDecision

STREAM = "ret/s"
MINUTE = 60_000


@pytest.fixture
def rclient(tmp_path: Path, metadata_url: str, storage_uri: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    """A client on both metadata backends and both storages (local, S3)."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri, clock=clock,
                   settings={"writer.linger": 0, "retention.frequency": "10m"}, create=True)
    yield c
    c.close()


def key_in(low: float, high: float) -> str:
    return next(k for k in (f"k{i}" for i in itertools.count()) if low <= routing_key_position(k) < high)


def write(client: tk.Client, count: int, payload_size: int, writer: str = "w") -> None:
    w = client.stream(STREAM).writer(writer)
    w.write_many([b"x" * payload_size] * count, [f"key{i % 7}" for i in range(count)])
    w.close()


def size_now(client: tk.Client) -> int:
    return client.stream(STREAM).describe()["size_bytes"]


def set_allows(client: tk.Client, decision: RetentionDecision, head_before: tk.StreamCut, low: int, high: int) -> bool:
    """Some recorded cut ahead of the head keeps an amount within [min, max]."""
    topology = client.stream(STREAM).state().topology()
    return any(low <= r.retained <= high
               and topology.compare(r.record.positions, head_before.positions) is CutOrder.AFTER
               for r in decision.records)


def test_size_policy_keeps_the_stream_within_limits_over_simulated_hours(rclient: tk.Client,
                                                                         clock: tk.ManualClock) -> None:
    low, high = 3_000, 7_000
    rclient.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(low, high)))
    truncations = within_checked = 0
    for cycle in range(24):  # four simulated hours, a cycle every 11 minutes
        write(rclient, 10 + (cycle * 7) % 25, 92)  # 100-byte events, an uneven rate
        clock.advance(11 * MINUTE)
        before, head_before = size_now(rclient), rclient.stream(STREAM).head_cut()
        decision = rclient.stream(STREAM).retention.run()
        after = size_now(rclient)
        assert decision.recorded is not None  # 11 min > 10 min frequency: the tail is recorded every cycle
        if decision.cut is None:
            assert after == before  # nothing truncated
        else:
            truncations += 1
            assert after == decision.retained == before - decision.freed_bytes
            assert after >= low  # never below min
        if set_allows(rclient, decision, head_before, low, high):
            within_checked += 1
            assert low <= after <= high, (cycle, decision.rule, after)
    assert truncations >= 5 and within_checked >= 15
    assert low <= size_now(rclient) <= high
    history = rclient.stream(STREAM).retention.history()
    assert len(history) == truncations and all(h["reason"].startswith("retention ") for h in history)
    # every cycle's row names its rule in its details: a deletion report reads that, not the reason
    assert all(json.loads(h["details"])["retention"] == {"rule": h["reason"].split()[1].rstrip(":")}
               for h in history)


def test_time_policy_never_deletes_data_younger_than_min(rclient: tk.Client, clock: tk.ManualClock) -> None:
    low, high = 40 * MINUTE, 90 * MINUTE
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_time("40m", "90m")))
    written: list[int] = []  # commit time of every write batch
    recorded_at: dict[tuple[tuple[int, int], ...], int] = {}
    truncations = within_checked = 0
    for _cycle in range(30):  # five and a half simulated hours
        clock.advance(11 * MINUTE)
        write(rclient, 5, 50)
        written.append(clock.now_ms())
        head_before = rclient.stream(STREAM).head_cut()
        decision = rclient.stream(STREAM).retention.run()
        for r in decision.records:
            recorded_at[tuple(r.record.positions.items())] = r.record.recording_time_ms
        now = clock.now_ms()
        remaining = {e.commit_time_ms for e in rclient.stream(STREAM).read()}
        # data-level check, independent of the decision: every batch younger than min is still there
        assert {t for t in written if now - t < low} <= remaining
        if decision.cut is not None:
            truncations += 1
            head = tuple(rclient.stream(STREAM).head_cut().positions.items())
            retained = now - recorded_at[head]
            assert retained == decision.retained and retained >= low
            if set_allows(rclient, decision, head_before, low, high):
                within_checked += 1
                assert retained <= high
            # nothing older than the retained window is left right after the head
            assert min(remaining) > recorded_at[head]
    assert truncations >= 10 and within_checked >= 10


def test_retention_set_sizes_count_sealed_segments_across_a_scale(rclient: tk.Client, clock: tk.ManualClock) -> None:
    # Pravega's SMTT.sizeBasedRetentionStreamTest (docs/retention.md, "The retention set"): segments 0 and 1
    # sealed at 70 bytes each, then the cut {2:29, 3:30} has size 199
    rclient.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(1_000)))
    low_key, high_key = key_in(0.0, 0.5), key_in(0.5, 1.0)
    w = rclient.stream(STREAM).writer("w")
    for _ in range(2):  # 2 events of 8 + 27 bytes = 70 bytes per segment
        w.write(b"a" * 27, low_key)
        w.write(b"b" * 27, high_key)
    w.close()
    rclient.stream(STREAM).scale(["0.0", "0.1"], [(0.0, 0.5), (0.5, 1.0)])
    w = rclient.stream(STREAM).writer("w2")
    w.write(b"c" * 21, low_key)  # 29 bytes in segment 1.2
    w.write(b"d" * 22, high_key)  # 30 bytes in segment 1.3
    w.close()
    clock.advance(MINUTE)
    decision = rclient.stream(STREAM).retention.run()
    assert decision.recorded is not None
    assert decision.recorded.positions == {segment_id(1, 2): 29, segment_id(1, 3): 30}
    assert decision.recorded.recording_size == 199
    assert [(r.recording_size, r.positions) for r in rclient.stream(STREAM).retention.records()] == [
        (199, {segment_id(1, 2): 29, segment_id(1, 3): 30})]


def test_sizes_stay_absolute_after_truncation_and_pruning(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(150)))
    sizes = []
    for _ in range(4):
        write(rclient, 10, 2)  # 10 events of 10 bytes
        clock.advance(11 * MINUTE)
        sizes.append(rclient.stream(STREAM).retention.run())
    # records at 100, 200, 300, 400: absolute positions even after the head moved
    assert [d.recorded.recording_size for d in sizes if d.recorded] == [100, 200, 300, 400]
    # the last cycle truncated at the size-200 cut (Cmin: retains 200 >= 150) and pruned it and older
    assert sizes[-1].cut is not None and sizes[-1].retained == 200
    assert [r.recording_size for r in rclient.stream(STREAM).retention.records()] == [300, 400]
    assert rclient.stream(STREAM).describe()["truncated_bytes"] == 200


def test_cadence_records_only_after_the_frequency(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(10)))
    write(rclient, 2, 2)
    assert rclient.stream(STREAM).retention.run().recorded is not None
    clock.advance(5 * MINUTE)
    assert rclient.stream(STREAM).retention.run().recorded is None  # 5 min later: not recorded
    clock.advance(5 * MINUTE)
    assert rclient.stream(STREAM).retention.run().recorded is None  # exactly the frequency: not recorded
    clock.advance(1)
    assert rclient.stream(STREAM).retention.run().recorded is not None  # frequency + 1 ms: recorded
    assert len(rclient.stream(STREAM).retention.records()) == 2


def test_preview_changes_nothing_and_matches_the_following_run(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(100, 250)))
    for _ in range(4):
        write(rclient, 10, 2)
        clock.advance(11 * MINUTE)
        rclient.stream(STREAM).retention.run()
    write(rclient, 10, 2)
    clock.advance(11 * MINUTE)
    records_before, head_before = rclient.stream(STREAM).retention.records(), rclient.stream(STREAM).head_cut()
    preview = rclient.stream(STREAM).retention.preview()
    assert preview.recorded is not None and preview.cut is not None  # would record the tail, then truncate
    assert rclient.stream(STREAM).retention.records() == records_before
    assert rclient.stream(STREAM).head_cut() == head_before
    run = rclient.stream(STREAM).retention.run()
    assert (run.rule, run.cut, run.freed_bytes, run.retained) == (
        preview.rule, preview.cut, preview.freed_bytes, preview.retained)
    assert rclient.stream(STREAM).head_cut().positions == run.cut


def test_preview_at_a_later_time(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_time("1h")))
    write(rclient, 3, 2)
    clock.advance(MINUTE)
    rclient.stream(STREAM).retention.run()  # records the tail at t1
    write(rclient, 3, 2)
    assert rclient.stream(STREAM).retention.preview().cut is None  # too young
    later = rclient.stream(STREAM).retention.preview(now=clock.now_ms() + 2 * 60 * MINUTE)
    assert later.cut is not None and later.freed_bytes == 30 and later.recorded is not None
    assert rclient.stream(STREAM).head_cut().positions == {segment_id(0, 0): 0}


def test_a_manual_truncation_ahead_of_the_chosen_cut_wins(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(100)))
    for _ in range(3):  # records at sizes 100, 200, 300; cycles truncate at 100, then 200
        write(rclient, 10, 2)
        clock.advance(11 * MINUTE)
        rclient.stream(STREAM).retention.run()
    write(rclient, 20, 2)
    clock.advance(11 * MINUTE)
    seg = segment_id(0, 0)
    preview = rclient.stream(STREAM).retention.preview()  # would record 500 and truncate at the size-300 cut
    assert preview.cut == {seg: 300}
    rclient.stream(STREAM).truncate(tk.StreamCut(STREAM, {seg: 330}, {seg: (0.0, 1.0)}))  # ahead of it, 170 B left
    decision = rclient.stream(STREAM).retention.run()
    assert decision.rule == BEHIND_HEAD and decision.cut is None and decision.freed_bytes == 0
    assert rclient.stream(STREAM).head_cut().positions == {seg: 330}  # the manual truncation stands
    assert rclient.stream(STREAM).retention.history()[0]["reason"] == "manual truncation"
    # the discarded cut (and anything older) can never be chosen again: pruned
    assert [r.recording_size for r in rclient.stream(STREAM).retention.records()] == [500]


def test_removing_the_policy_stops_retention(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(10)))
    assert rclient.stream(STREAM).describe()["retention"] == "by size: keep at least 10 B (no maximum)"
    assert retention_manager(rclient.workspace).streams_with_policy() == [STREAM]
    assert rclient.stream(STREAM).retention.run().rule == BELOW_MIN  # the first cycle records the (empty) tail
    rclient.stream(STREAM).update(tk.StreamConfig())
    write(rclient, 10, 2)
    clock.advance(11 * MINUTE)
    decision = rclient.stream(STREAM).retention.run()
    assert decision.rule == NO_POLICY and decision.cut is None and decision.recorded is None
    assert retention_manager(rclient.workspace).streams_with_policy() == []
    assert rclient.stream(STREAM).describe()["retention"] is None
    assert rclient.stream(STREAM).head_cut().positions == {segment_id(0, 0): 0}


def test_bad_input_is_a_typed_error_and_changes_nothing(rclient: tk.Client) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(10)))
    with pytest.raises(tk.InvalidInput, match="max 5 B is less than min 10 B"):
        tk.RetentionPolicy.by_size(10, 5)
    with pytest.raises(tk.InvalidInput, match="min must not be negative, got -1"):
        tk.RetentionPolicy(tk.RetentionKind.TIME, -1)  # min 0 is allowed (a message queue; docs/retention.md)
    with pytest.raises(tk.InvalidInput):
        tk.RetentionPolicy.by_size(-5)
    with pytest.raises(tk.InvalidInput, match="unit"):
        tk.RetentionPolicy.by_size("10 parsecs")
    with pytest.raises(tk.NotFound, match="does not exist"):
        rclient.stream("ret/nope").update(tk.StreamConfig(retention=tk.RetentionPolicy.by_size(10)))
    with pytest.raises(tk.NotFound):
        rclient.stream("ret/nope").retention.run()
    with pytest.raises(tk.InvalidInput, match="invalid time"):
        rclient.stream(STREAM).retention.preview(now=-1)
    with pytest.raises(tk.InvalidInput, match="invalid limit"):
        rclient.stream(STREAM).retention.history(limit=0)
    assert rclient.stream(STREAM).retention.records() == []
    assert rclient.stream(STREAM).describe()["retention"] == "by size: keep at least 10 B (no maximum)"


def test_a_crash_between_truncation_and_pruning_neither_repeats_nor_loses_work(
        tmp_path: Path, metadata_url: str, storage_uri: str) -> None:

    home, storage = tmp_path / "ws", storage_uri
    settings = {"writer.linger": 0, "retention.frequency": "1ms"}
    with tk.connect(home=home, metadata_url=metadata_url, storage=storage, settings=settings,
        create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(100)))
        write(client, 10, 2)
        client.stream(STREAM).retention.run()  # records size 100
        write(client, 10, 2)
    env = worker_env(metadata_url, storage, home, fault="retention.after_truncate")
    env["TIDEKEEP_RETENTION_FREQUENCY"] = "1ms"
    died = subprocess.run([sys.executable, "-m", "tidekeep.cli.main", "retention", "run", STREAM], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert died.returncode == 77, died.stderr  # killed right after the truncation committed
    seg = segment_id(0, 0)
    with tk.connect(home=home, metadata_url=metadata_url, storage=storage, settings=settings,
        create=True) as client:
        assert client.stream(STREAM).head_cut().positions == {seg: 100}  # the truncation landed...
        sizes = [r.recording_size for r in client.stream(STREAM).retention.records()]
        assert sizes == [100, 200]  # ...the pruning did not
        again = client.stream(STREAM).retention.run()
        assert again.rule == BEHIND_HEAD and again.cut is None  # the same cut is not truncated twice
        assert [r.recording_size for r in client.stream(STREAM).retention.records()] == [200, 200]  # pruned now
        assert len(client.stream(STREAM).retention.history()) == 1
        write(client, 10, 2)
        resumed = client.stream(STREAM).retention.run()
        assert resumed.cut == {seg: 200} and len(client.stream(STREAM).retention.history()) == 2


def test_cycles_across_a_scale_truncate_whole_sealed_segments(rclient: tk.Client, clock: tk.ManualClock) -> None:
    rclient.create_stream(STREAM, tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(500, 900)))
    decisions = []
    for cycle in range(12):
        if cycle == 4:
            rclient.stream(STREAM).split("0.0", 2)
        if cycle == 8:
            rclient.stream(STREAM).merge(["1.2", "1.3"])
        write(rclient, 20, 2)  # 200 bytes per cycle
        clock.advance(11 * MINUTE)
        before = size_now(rclient)
        decision = rclient.stream(STREAM).retention.run()
        decisions.append(decision)
        described = rclient.stream(STREAM).describe()
        assert decision.recorded is not None
        assert decision.recorded.recording_size == 200 * (cycle + 1) == described["written_bytes"]
        if decision.cut is not None:
            assert described["size_bytes"] == decision.retained == before - decision.freed_bytes
            assert 500 <= described["size_bytes"] <= 900
            assert described["truncated_bytes"] == described["written_bytes"] - described["size_bytes"]
    assert sum(d.cut is not None for d in decisions) >= 5
    # data from before the first scale is gone, whole sealed segments with it
    state = rclient.stream(STREAM).state()
    sealed = [s for s in state.segments.values() if s.sealed]
    assert sealed and all(s.head == s.tail for s in sealed)
    assert sum(1 for _ in rclient.stream(STREAM).read()) * 10 == size_now(rclient)


def test_concurrent_cycles_never_report_or_audit_one_truncation_twice(
        tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def connect() -> tk.Client:
        return tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                          clock=clock, settings={"writer.linger": 0, "retention.frequency": "10m"}, create=True)

    with connect() as a, connect() as b, ThreadPoolExecutor(2) as pool:
        a.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(100)))
        reported = 0
        for _ in range(12):
            write(a, 10, 2)
            clock.advance(11 * MINUTE)
            decisions = list(pool.map(lambda c: c.stream(STREAM).retention.run(), [a, b]))
            assert sum(d.recorded is not None for d in decisions) == 1  # one record per due instant
            assert sum(d.cut is not None for d in decisions) <= 1
            reported += sum(d.cut is not None for d in decisions)
        history = a.stream(STREAM).retention.history()
        assert len(history) == reported >= 10
        assert sum(h["bytes_freed"] for h in history) == a.stream(STREAM).describe()["truncated_bytes"]
