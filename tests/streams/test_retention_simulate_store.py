"""What-if retention of a stream on a real SQLite workspace (streams/retention_forecast.py), through the
client: for generated streams — writes over simulated hours, scales, compaction, retention cycles,
manual truncations, a subscriber that acknowledged a cut, holds — and generated policies:

- simulate-equals-preview property: simulating the stream's current policy gives for day 0 exactly
  the decision `retention preview` gives at the same now (rule, case, cut, freed bytes, held-ness,
  reason, every field), and on a held stream its held bytes are what the preview frees once the hold
  is gone;
- the real cycles, run afterwards at the simulated cycle times (`retention.run(now=t)`), make exactly
  the decisions the simulation made, cycle by cycle, so each day deletes what the forecast says;
- simulating writes nothing: the audit table, the retention set, the holds, the head stay as they were.
On SQLite and PostgreSQL: a fixed scenario of each kind."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.errors import HoldActive, InvalidInput, NotFound
from tidekeep.forecast import day_of
from tidekeep.store import schema as t
from tidekeep.store.schema_holds import holds
from tidekeep.store.schema_retention import retention_set

MINUTE = 60_000
HOUR = 60 * MINUTE
KEYS = [f"k{i}" for i in range(8)]
counter = itertools.count()


def shared_client(home: Path, frequency: str) -> tk.Client:
    clock = tk.ManualClock(1_700_000_000_000)
    return tk.connect(home=home / "ws", storage=str(home / "data"), clock=clock, create=True,
                      settings={"writer.linger": 0, "retention.frequency": frequency})


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tk.Client]:
    with shared_client(Path(tmp_path_factory.mktemp("simulate-preview")), "10m") as client:
        yield client


@pytest.fixture(scope="module")
def six_hourly(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tk.Client]:
    """Cycles every 6 hours: a few days of real cycles stay quick."""
    with shared_client(Path(tmp_path_factory.mktemp("simulate-runs")), "6h") as client:
        yield client


def clock_of(client: tk.Client) -> tk.ManualClock:
    clock = client.clock
    assert isinstance(clock, tk.ManualClock)
    return clock


# ---- a generated history ----------------------------------------------------------------------------
policies = st.one_of(
    st.builds(lambda low, high: tk.RetentionPolicy.by_size(low, None if high is None else low + high),
              st.integers(0, 3000), st.none() | st.integers(0, 3000)),
    st.builds(lambda low, high: tk.RetentionPolicy.by_time(low * MINUTE,
                                                           None if high is None else (low + high) * MINUTE),
              st.integers(0, 600), st.none() | st.integers(0, 900)),
)
rounds = st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(KEYS), st.integers(1, 60)), min_size=1, max_size=5),
                            st.integers(1, 90)), min_size=1, max_size=6)


@st.composite
def histories(draw: st.DrawFn) -> dict[str, Any]:
    return {"segments": draw(st.integers(1, 3)), "rounds": draw(rounds), "split": draw(st.booleans()),
            "compact": draw(st.booleans()), "truncate": draw(st.none() | st.integers(0, 100)),
            "subscriber": draw(st.none() | st.integers(0, 100)), "cycles": draw(st.integers(0, 3)),
            "hold": draw(st.integers(0, 3)) == 3, "policy": draw(policies), "later": draw(st.integers(0, 24 * 60)),
            "days": draw(st.integers(0, 3))}


def build(client: tk.Client, history: dict[str, Any]) -> str:
    """A stream with `history`: write rounds, each followed by a cycle under a policy that deletes
    nothing (it records the tail); a split after the first round; then compaction, a subscriber's
    acknowledged cut and a manual truncation at tails seen on the way, the real policy and a few of
    its cycles, and a hold. Returns the stream's name."""
    clock = clock_of(client)
    name = f"sim/s{next(counter)}"
    client.create_stream(name, tk.StreamConfig(segments=history["segments"],
                                               retention=tk.RetentionPolicy.by_size(10**12)))
    handle = client.stream(name)
    tails = [handle.tail_cut()]
    for number, (events, minutes) in enumerate(history["rounds"]):
        with handle.writer("w") as writer:
            for i, (key, size) in enumerate(events):
                writer.write(f"{number}.{i}".encode() + b"x" * size, key)
                writer.flush()  # one chunk per event: cuts between them fall on chunk boundaries
        clock.advance(minutes * MINUTE)
        handle.retention.run()
        tails.append(handle.tail_cut())
        if number == 0 and history["split"]:
            handle.split(handle.state().active_segments()[0].id)
    if history["compact"]:
        handle.compact("1MiB")  # merged chunks: a cut inside one has events on both sides
    if history["subscriber"] is not None:
        group = client.create_reader_group(f"g{name.split('/')[1]}", tk.ReaderGroupConfig(
            streams=[name], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
        group.update_retention_stream_cut({name: tails[history["subscriber"] % len(tails)]})
    if history["truncate"] is not None:
        handle.truncate(tails[history["truncate"] % len(tails)], "by hand")
    handle.update(tk.StreamConfig(segments=history["segments"], retention=history["policy"]))
    for _ in range(history["cycles"]):
        clock.advance(7 * MINUTE)
        handle.retention.run()
    if history["hold"]:
        client.holds.add("stream", name, "litigation")
    clock.advance(history["later"] * MINUTE)
    return name


def stored(client: tk.Client) -> dict[str, list[tuple[Any, ...]]]:
    """What simulating must not change: audit, retention set, holds, streams, segments and chunks."""
    with client.workspace.db.read() as conn:
        return {table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
                for table in (t.audit, retention_set, holds, t.streams, t.segments, t.chunks)}


# ---- simulate-equals-preview property ---------------------------------------------------------------
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(history=histories(), offset=st.integers(0, 3 * HOUR))
def test_simulate_equals_preview_property(shared: tk.Client, history: dict[str, Any], offset: int) -> None:
    name = build(shared, history)
    handle = shared.stream(name)
    now = shared.clock.now_ms() + offset
    before = stored(shared)
    sim = handle.retention.simulate(now=now, days=history["days"])
    assert stored(shared) == before  # simulating wrote nothing
    preview = handle.retention.preview(now)
    first = sim.cycles[0]
    assert first.time_ms == now
    assert first.decision.to_dict() == preview.to_dict()  # rule, case, cut, freed bytes, reason, every field
    forecast = sim.forecast().to_dict()
    assert forecast["by_day"][0]["bytes"] == preview.freed_bytes
    assert forecast["details"]["now"]["rule"] == preview.rule.value
    held = bool(shared.holds.list("stream", name))
    assert (preview.rule.value == "held") == (held and first.held_bytes > 0)
    if held:
        for hold in shared.holds.list("stream", name):
            shared.holds.remove(hold.id)
        unheld = handle.retention.preview(now)
        assert first.held_bytes == unheld.freed_bytes and first.held_decision is not None
        assert first.held_decision.to_dict() == unheld.to_dict()
        assert forecast["by_day"][0]["held_bytes"] == unheld.freed_bytes


# ---- the real cycles make the simulated decisions ----------------------------------------------------
def run_the_cycles(client: tk.Client, name: str, days: int) -> None:
    """Simulate, then run the real cycles at the simulated times: each makes the simulated decision
    (a held one is refused by the hold, as the simulation says), and the days add up as forecast."""
    handle = client.stream(name)
    sim = handle.retention.simulate(days=days)
    forecast = sim.forecast()
    freed = [0] * (days + 1)
    for cycle in sim.cycles:
        if cycle.decision.rule.value == "held":
            with pytest.raises(HoldActive):
                handle.retention.run(cycle.time_ms)
            continue
        decision = handle.retention.run(cycle.time_ms)
        assert decision.to_dict() == cycle.decision.to_dict(), cycle.time_ms
        freed[day_of(sim.now_ms, cycle.time_ms)] += decision.freed_bytes
    assert freed == [d["bytes"] for d in forecast.by_day()]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(history=histories())
def test_the_real_cycles_make_the_simulated_decisions(six_hourly: tk.Client, history: dict[str, Any]) -> None:
    name = build(six_hourly, history)
    run_the_cycles(six_hourly, name, history["days"])


@pytest.fixture
def daily(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True,
                   clock=tk.ManualClock(1_700_000_000_000), settings={"writer.linger": 0, "retention.frequency": "6h"})
    yield c
    c.close()


FIXED = {"segments": 2, "rounds": [([(k, 40) for k in KEYS], 5 * 60)] * 6, "split": True, "compact": False,
         "truncate": 1, "subscriber": 4, "cycles": 2, "hold": False,
         "policy": tk.RetentionPolicy.by_time("12h", "20h"), "later": 60, "days": 2}


@pytest.mark.parametrize("hold", [False, True])
def test_a_fixed_history_on_both_backends(daily: tk.Client, hold: bool) -> None:
    name = build(daily, dict(FIXED, hold=hold))
    handle = daily.stream(name)
    now = daily.clock.now_ms()
    before = stored(daily)
    forecast = handle.retention.simulate(days=2).forecast().to_dict()
    assert stored(daily) == before
    assert forecast["details"]["now"]["rule"] == handle.retention.preview(now).rule.value
    # the subscriber acknowledged the tail after the fourth round: the lower bound stops the time policy there
    assert {line["case"] for line in forecast["lines"]} <= {"i", "ii", "iii", "iv", "v"}
    if hold:
        assert forecast["totals"]["bytes"] == 0 and forecast["totals"]["held_bytes"] > 0
    else:
        assert forecast["totals"]["bytes"] > 0 and forecast["totals"]["held_bytes"] == 0
    run_the_cycles(daily, name, 2)


def test_a_proposed_policy_is_simulated_without_being_set(daily: tk.Client) -> None:
    name = build(daily, dict(FIXED, subscriber=None))
    handle = daily.stream(name)
    proposed = tk.RetentionPolicy.by_size(200)
    before = stored(daily)
    sim = handle.retention.simulate(proposed, days=1)
    assert stored(daily) == before and handle.state().info.config.retention == FIXED["policy"]
    doc = sim.forecast().to_dict()
    assert doc["proposal"] == {"current": False, "policy": proposed.to_dict(),
                               "policy_text": "by size: keep at least 200 B (no maximum)"}
    size = handle.describe()["size_bytes"]
    assert doc["totals"]["bytes"] > 0 and size - doc["totals"]["bytes"] >= 200  # it keeps at least the minimum
    # the same as setting it: then it is the current policy, and the real cycles do what it forecast
    handle.update(tk.StreamConfig(segments=2, retention=proposed))
    current = handle.retention.simulate(days=1).forecast().to_dict()
    assert dict(current, proposal=None) == dict(doc, proposal=None) and current["proposal"]["current"]
    run_the_cycles(daily, name, 1)


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"days": 367}, InvalidInput, "invalid days 367: expected a whole number of days from 0 to 366"),
    ({"days": -1}, InvalidInput, "invalid days -1"),
    ({"now": -5}, InvalidInput, "invalid time -5"),
    ({"policy": "7d"}, InvalidInput, "invalid retention policy '7d'"),
])
def test_bad_input_is_refused_and_changes_nothing(daily: tk.Client, kwargs: dict[str, Any], error: type,
                                                  message: str) -> None:
    name = build(daily, dict(FIXED, subscriber=None, truncate=None))
    before = stored(daily)
    with pytest.raises(error, match=message):
        daily.stream(name).retention.simulate(**kwargs)
    with pytest.raises(NotFound, match="does not exist"):
        daily.stream("sim/missing").retention.simulate()
    assert stored(daily) == before
