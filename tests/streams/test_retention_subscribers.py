"""Consumption-based retention inside the retention cycle, on SQLite and PostgreSQL: preview and run
with subscriber reader groups land in cases i, ii and iii (docs/design/streams.md#consumption) for
SIZE and TIME; no subscriber leaves size/time retention unchanged; consumption truncations are
audited with the subscribers that allowed them; a legal hold still wins; `tidekeep retention
preview` shows subscribers, LB and case.

Every scenario: a one-segment stream, nine rounds of ten 100-byte events with a cycle 11 minutes
apart, while a min-only policy too large to truncate anything builds the retention set (records at
1,000 … 9,000 bytes, recorded 88 … 0 minutes before `now`); then the real policy is set, a manual
subscriber acknowledges a cut, and the decision follows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.cli import run_cli as cli
from helpers.procs import worker_env
from tidekeep.errors import HoldActive
from tidekeep.streams.of_workspace import retention_manager, stream_controller
from tidekeep.streams.retention_store import SubscribersChanged, subscribers_unchanged

STREAM = "cbr/s"
MINUTE = 60_000
SEG = "0.0"
# SIZE: min 2,000, max 6,000 bytes over a 9,000-byte stream: Cmin = the record at 7,000 (keeps 2,000),
# Cmax = the record at 3,000 (keeps 6,000). TIME: min 30 min, max 60 min; the record at 6,000 is 33 min
# old (Cmin), the one at 4,000 55 min old (Cmax).
POLICIES = {"size": tk.RetentionPolicy.by_size(2_000, 6_000), "time": tk.RetentionPolicy.by_time("30m", "60m")}
# (acknowledged offset, case, expected truncation offset)
CASES = {
    "size": [(5_000, "i", 5_000), (8_000, "ii", 7_000), (2_000, "iii", 3_000)],
    "time": [(5_000, "i", 5_000), (8_000, "ii", 6_000), (2_000, "iii", 4_000)],
}


@pytest.fixture
def cclient(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                   settings={"writer.linger": 0, "retention.frequency": "10m"}, create=True)
    c.workspace.db.ensure_schema()
    yield c
    c.close()


def build(client: tk.Client, clock: tk.ManualClock, kind: str, subscriber: bool = True) -> tk.ReaderGroup | None:
    """The scenario stream with its retention set; returns the manual subscriber group (at the head)."""
    building = tk.RetentionPolicy.by_size(10**9) if kind == "size" else tk.RetentionPolicy.by_time("365d")
    client.create_stream(STREAM, tk.StreamConfig(segments=1, retention=building))
    group = None
    if subscriber:
        group = client.create_reader_group("billing", tk.ReaderGroupConfig(
            streams=[STREAM], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    w = client.stream(STREAM).writer("w")
    for _ in range(9):
        w.write_many([b"e" * 92] * 10)
        w.flush()
        clock.advance(11 * MINUTE)
        assert client.stream(STREAM).retention.run().cut is None
    w.close()
    client.stream(STREAM).update(tk.StreamConfig(segments=1, retention=POLICIES[kind]))
    return group


def head_offset(client: tk.Client) -> int:
    return dict(client.stream(STREAM).head_cut().positions)[0]


def acknowledge(group: tk.ReaderGroup, offset: int) -> None:
    group.update_retention_stream_cut({STREAM: f"{STREAM}:{SEG}={offset}"})


@pytest.mark.parametrize("kind", ["size", "time"])
@pytest.mark.parametrize("index", [0, 1, 2], ids=["case-i", "case-ii", "case-iii"])
def test_preview_and_run_land_in_the_case_of_the_lower_bound(cclient: tk.Client, clock: tk.ManualClock,
                                                             kind: str, index: int) -> None:
    acked, case, expected = CASES[kind][index]
    group = build(cclient, clock, kind)
    assert group is not None
    acknowledge(group, acked)
    preview = cclient.stream(STREAM).retention.preview()
    assert head_offset(cclient) == 0  # a preview changes nothing
    assert preview.case == case and preview.cut == {0: expected} and preview.lower_bound == {0: acked}
    assert [(v.reader_group, v.acknowledged, v.positions, v.unconsumed_bytes) for v in preview.subscribers] == [
        ("billing", True, {0: acked}, 9_000 - acked)]
    assert preview.rule == {"i": "cbr-within-limits", "ii": "cbr-below-min", "iii": "cbr-above-max"}[case]
    ran = cclient.stream(STREAM).retention.run()
    assert (ran.case, ran.cut, ran.freed_bytes) == (case, {0: expected}, expected)
    assert head_offset(cclient) == expected
    entry = cclient.stream(STREAM).retention.history(limit=1)[0]
    details = json.loads(entry["details"])["consumption"]
    assert details["case"] == case and details["rule"] == ran.rule and details["lower_bound"] == {SEG: acked}
    # the subscriber allowed it unless the maximum overrode it (case iii truncates past its cut)
    assert details["subscribers"] == [{
        "reader_group": "billing", "generation": group.generation, "cut": {SEG: acked}, "acknowledged": True,
        "updated_ms": preview.subscribers[0].updated_ms, "unconsumed_bytes": 9_000 - acked,
        "allowed": case != "iii"}]
    assert entry["reason"].startswith(f"retention {ran.rule}: ")


@pytest.mark.parametrize("kind", ["size", "time"])
def test_without_subscribers_retention_is_unchanged(cclient: tk.Client, clock: tk.ManualClock, kind: str) -> None:
    build(cclient, clock, kind, subscriber=False)
    # a group that is not a subscriber (retention type NONE) holds nothing back
    cclient.create_reader_group("audit", tk.ReaderGroupConfig(streams=[STREAM]))
    preview = cclient.stream(STREAM).retention.preview()
    assert preview.lower_bound is None and preview.case is None and preview.subscribers == ()
    # plain rules: the stream is above max, so Cmax (size: 3,000; time: 4,000)
    expected = {"size": 3_000, "time": 4_000}[kind]
    assert preview.rule == "above-max" and preview.cut == {0: expected}
    ran = cclient.stream(STREAM).retention.run()
    assert ran.cut == {0: expected} and head_offset(cclient) == expected
    assert "consumption" not in json.loads(cclient.stream(STREAM).retention.history(limit=1)[0]["details"])


def test_a_subscriber_that_acknowledged_nothing_holds_the_stream_at_its_start_cut(
        cclient: tk.Client, clock: tk.ManualClock) -> None:
    build(cclient, clock, "size")
    cclient.stream(STREAM).update(tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(0, 20_000)))
    preview = cclient.stream(STREAM).retention.preview()
    view = preview.subscribers[0]
    assert (view.acknowledged, view.positions, view.unconsumed_bytes) == (False, {0: 0}, 9_000)
    assert preview.lower_bound == {0: 0} and preview.cut is None
    assert cclient.stream(STREAM).retention.run().cut is None and head_offset(cclient) == 0


def test_the_slower_of_two_subscribers_sets_the_bound(cclient: tk.Client, clock: tk.ManualClock) -> None:
    fast = build(cclient, clock, "size")
    assert fast is not None
    slow = cclient.create_reader_group("slow", tk.ReaderGroupConfig(
        streams=[STREAM], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    acknowledge(fast, 8_000)
    acknowledge(slow, 4_000)
    ran = cclient.stream(STREAM).retention.run()
    assert (ran.case, ran.lower_bound, ran.cut) == ("i", {0: 4_000}, {0: 4_000})
    details = json.loads(cclient.stream(STREAM).retention.history(limit=1)[0]["details"])["consumption"]
    assert {s["reader_group"]: s["allowed"] for s in details["subscribers"]} == {"billing": True, "slow": True}
    # the slow group leaves: the next cycle follows the other one (case ii: Cmin at 7,000 keeps 2,000)
    cclient.delete_reader_group("slow")
    again = cclient.stream(STREAM).retention.run()
    assert (again.case, again.cut) == ("ii", {0: 7_000}) and head_offset(cclient) == 7_000


def test_a_legal_hold_still_wins(cclient: tk.Client, clock: tk.ManualClock) -> None:
    group = build(cclient, clock, "size")
    assert group is not None
    acknowledge(group, 5_000)
    hold_id = cclient.holds.add("stream", STREAM, "litigation")
    preview = cclient.stream(STREAM).retention.preview()
    assert preview.rule == "held" and preview.cut is None and preview.case == "i"
    with pytest.raises(HoldActive):
        cclient.stream(STREAM).retention.run()
    assert head_offset(cclient) == 0 and cclient.stream(STREAM).retention.history() == []
    cclient.holds.remove(hold_id)
    assert cclient.stream(STREAM).retention.run().cut == {0: 5_000}


@pytest.mark.parametrize("release", ["acknowledge", "reset", "delete"])
def test_a_reader_group_releasing_a_held_stream_frees_nothing(cclient: tk.Client, clock: tk.ManualClock,
                                                              release: str) -> None:
    """Whatever a subscriber does to let data go (acknowledge it all, stop subscribing, disappear),
    the cycle that follows is refused by the hold; the retention set keeps growing meanwhile."""
    group = build(cclient, clock, "size")
    assert group is not None
    acknowledge(group, 1_000)
    hold_id = cclient.holds.add("stream", STREAM, "litigation 9")
    if release == "acknowledge":
        acknowledge(group, 9_000)
    elif release == "reset":
        group.reset(tk.ReaderGroupConfig(streams=[STREAM]))  # retention type NONE: no longer a subscriber
    else:
        cclient.delete_reader_group("billing")
    assert cclient.stream(STREAM).retention.preview().rule == "held"
    recorded = len(cclient.stream(STREAM).retention.records())
    for cycle in range(1, 3):
        clock.advance(11 * MINUTE)
        with pytest.raises(HoldActive) as caught:
            cclient.stream(STREAM).retention.run()
        assert caught.value.hold_id == hold_id and "litigation 9" in str(caught.value)
        assert len(cclient.stream(STREAM).retention.records()) == recorded + cycle
    state = cclient.stream(STREAM).state()
    assert head_offset(cclient) == 0 and state.truncated_bytes == 0
    assert len(list(cclient.stream(STREAM).read())) == 90 and cclient.stream(STREAM).retention.history() == []
    cclient.holds.remove(hold_id)
    assert cclient.stream(STREAM).retention.run().cut is not None and head_offset(cclient) > 0


def test_cli_preview_shows_subscribers_lower_bound_and_case(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    assert cli(home, "init").returncode == 0
    clock = tk.ManualClock()
    with tk.connect(home, clock=clock, settings={"retention.frequency": "10m"}, create=True) as client:
        group = build(client, clock, "size")
        assert group is not None
        # a group that starts reading at 4,000 and has acknowledged nothing yet holds the stream there
        client.create_reader_group("late", tk.ReaderGroupConfig(
            streams={STREAM: (f"{STREAM}:{SEG}=4000", None)},
            retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
        acknowledge(group, 5_000)
        now = clock.now_ms()
    done = cli(home, "retention", "preview", STREAM, "--at", str(now), "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    shown = json.loads(done.stdout)
    assert shown["dry_run"] and shown["case"] == "i" and shown["lower_bound"] == {SEG: 4000}
    assert shown["cut"] == {SEG: 4000} and shown["freed_bytes"] == 4000
    assert sorted((s["reader_group"], s["acknowledged"], s["age_ms"], s["unconsumed_bytes"])
                  for s in shown["subscribers"]) == [("billing", True, 0, 4000), ("late", False, None, 5000)]
    text = cli(home, "retention", "preview", STREAM, "--at", str(now))
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    billing = next(line for line in lines if line.strip().startswith("billing"))
    late = next(line for line in lines if line.strip().startswith("late"))
    assert f"{STREAM}:{SEG}=5000" in billing and billing.endswith("3.9 KiB")  # 4,000 bytes, exact in --json
    assert f"start cut (nothing acknowledged): {STREAM}:{SEG}=4000" in late and late.endswith("4.9 KiB")
    assert any(line.startswith("lower bound") and line.endswith(f"{STREAM}:{SEG}=4000") for line in lines)
    assert any(line.startswith("case") and line.endswith("(i)") for line in lines)
    ran = cli(home, "retention", "run", STREAM, "--json")
    assert ran.returncode == 0 and json.loads(ran.stdout)["cut"] == {SEG: 4000}, ran.stderr
    history = json.loads(cli(home, "retention", "history", STREAM, "--json").stdout)
    consumption = history[0]["consumption"]
    assert consumption["case"] == "i" and consumption["lower_bound"] == {SEG: 4000}
    assert [(s["reader_group"], s["allowed"]) for s in consumption["subscribers"]] == [
        ("billing", True), ("late", True)]
    table = cli(home, "retention", "history", STREAM).stdout
    assert "(i) allowed by billing,late" in table.splitlines()[1]


def test_a_truncation_is_refused_when_a_subscriber_appears_after_the_decision(
        cclient: tk.Client, clock: tk.ManualClock) -> None:
    group = build(cclient, clock, "size")
    assert group is not None
    acknowledge(group, 5_000)
    decision = cclient.stream(STREAM).retention.preview()
    assert decision.cut == {0: 5_000}
    manager = retention_manager(cclient.workspace)
    guard = subscribers_unchanged(STREAM, list(decision.subscribers), manager.subscribers)
    # a group created now starts at the head (0): the decision did not know it would be holding data
    cclient.create_reader_group("newcomer", tk.ReaderGroupConfig(
        streams=[STREAM], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    with pytest.raises(SubscribersChanged, match="subscriber newcomer changed since the decision"):
        stream_controller(cclient.workspace).truncate(STREAM, f"{STREAM}:{SEG}=5000", reason="retention", guard=guard)
    assert head_offset(cclient) == 0 and cclient.stream(STREAM).retention.history() == []
    # an acknowledgement that moved forward is no change that matters
    cclient.delete_reader_group("newcomer")
    acknowledge(group, 6_000)
    stream_controller(cclient.workspace).truncate(STREAM, f"{STREAM}:{SEG}=5000", reason="retention", guard=guard)
    assert head_offset(cclient) == 5_000
    # and a cycle now decides with the newcomer: it holds the stream at its start cut
    cclient.create_reader_group("newcomer", tk.ReaderGroupConfig(
        streams=[STREAM], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    ran = cclient.stream(STREAM).retention.run()
    assert ran.lower_bound == {0: 5_000} and ran.cut is None and head_offset(cclient) == 5_000


def test_a_cycle_decides_again_when_a_subscriber_appears_before_its_truncation(
        cclient: tk.Client, clock: tk.ManualClock, tmp_path: Path, metadata_url: str) -> None:
    group = build(cclient, clock, "size")
    assert group is not None
    cclient.stream(STREAM).update(tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(0, 100_000)))
    acknowledge(group, 5_000)
    assert cclient.stream(STREAM).retention.preview().cut == {0: 5_000}
    recorded = len(cclient.stream(STREAM).retention.records())
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws")
    gate = tmp_path / "truncate-paused"  # the cycle waits before its truncation until the newcomer exists
    gate.touch()
    env["TIDEKEEP_PAUSE"] = f"retention.before_truncate=@{gate}"
    cycle = subprocess.Popen([sys.executable, "-m", "tidekeep.cli.main", "--set", "retention.frequency=1ms",
                              "retention", "run", STREAM, "--json"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    # the cycle records the tail, decides (truncate at 5,000) and waits at the gate before truncating
    # (no deadline of our own: the cycle reaches the gate or exits; pytest's timeout ends a hang)
    while not Path(f"{gate}.reached").exists():
        assert cycle.poll() is None, cycle.communicate()
        time.sleep(0.02)
    assert len(cclient.stream(STREAM).retention.records()) > recorded
    cclient.create_reader_group("newcomer", tk.ReaderGroupConfig(
        streams=[STREAM], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    gate.unlink()
    out, err = cycle.communicate(timeout=120)
    assert cycle.returncode == 0, err
    decided = json.loads(out)
    # the truncation refused the stale decision; deciding again, the newcomer holds the stream at 0
    assert decided["lower_bound"] == {SEG: 0} and decided["cut"] is None
    assert sorted(s["reader_group"] for s in decided["subscribers"]) == ["billing", "newcomer"]
    assert head_offset(cclient) == 0 and cclient.stream(STREAM).retention.history() == []


def test_after_the_maximum_overrode_a_stopped_subscriber_cycles_keep_the_maximum(
        cclient: tk.Client, clock: tk.ManualClock) -> None:
    """The bound behind the head counts nothing already truncated: with no new writes, nothing more goes."""
    cclient.create_stream(STREAM, tk.StreamConfig(segments=1, retention=tk.RetentionPolicy.by_size(0, 6_000)))
    group = cclient.create_reader_group("stopped", tk.ReaderGroupConfig(
        streams=[STREAM], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    w = cclient.stream(STREAM).writer("w")
    for round_ in range(9):
        w.write_many([b"e" * 92] * 10)
        w.flush()
        if round_ == 0:
            acknowledge(group, 1_000)  # and never again
        clock.advance(11 * MINUTE)
        cclient.stream(STREAM).retention.run()
    w.close()
    assert head_offset(cclient) == 3_000 and cclient.stream(STREAM).describe()["size_bytes"] == 6_000  # max forced
    for _ in range(3):
        clock.advance(11 * MINUTE)
        quiet = cclient.stream(STREAM).retention.run()
        assert quiet.cut is None and quiet.lower_bound == {0: 3_000}, quiet.reason
    assert head_offset(cclient) == 3_000 and cclient.stream(STREAM).describe()["size_bytes"] == 6_000


def test_a_truncation_at_the_lower_bound_prunes_the_records_it_passed(cclient: tk.Client,
                                                                      clock: tk.ManualClock) -> None:
    """LB is no retention-set record, so the set is pruned by the truncation cut itself: every record
    at or before it goes (docs/design/streams.md#retention-set); otherwise a queue always truncated at
    LB would never prune."""
    group = build(cclient, clock, "size")
    assert group is not None
    before = [r.recording_size for r in cclient.stream(STREAM).retention.records()]
    acknowledge(group, 5_000)
    ran = cclient.stream(STREAM).retention.run()
    assert (ran.case, ran.cut, ran.chosen) == ("i", {0: 5_000}, None)
    after = [r.recording_size for r in cclient.stream(STREAM).retention.records()]
    assert after == [size for size in before if size > 5_000] and len(after) < len(before)
