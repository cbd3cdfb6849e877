"""The catalog's retention forecast (catalog/forecast.py, forecast_days.py), on SQLite and
PostgreSQL: the day arithmetic against the definition (the first day whose cutoff, calendar months
and years included, is past the create time), the whole forecast against a brute-force Python
oracle over generated records, rules and holds, day 0 against the impact summary, the days against
what the job then deletes day by day, nothing changed in the store, and the input checks.

The store-backed properties run the slices in the driver (fewer candidates than a slice holds);
`test_the_forecast_through_spark_tasks` runs them as Spark tasks (PostgreSQL, small slices)."""

from __future__ import annotations

import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from helpers.catalog_job import NOW, statuses
from tidekeep.catalog.ages import Age, TimeUnit, cutoff_ms, days_in_month
from tidekeep.catalog.expressions import CompileContext, parse, to_python
from tidekeep.catalog.forecast import CatalogForecast, catalog_forecast
from tidekeep.catalog.forecast_days import MAX_DAYS, check_days, day_cutoffs, day_of_window, window_of
from tidekeep.catalog.impact import impact_summary
from tidekeep.catalog.rules import RetentionRule, RuleSet, active_rules, to_yaml_text
from tidekeep.errors import InvalidInput
from tidekeep.store.schema_catalog import catalog_records, catalog_runs, catalog_trackers

DAY = 86_400_000
HOUR = 3_600_000


def ms(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


def first_day(create_time: int, now: int, age: Age, days: int) -> int | None:
    """The definition, by brute force: the first day d whose end's cutoff is past the create time."""
    return next((d for d in range(days + 1) if create_time < cutoff_ms(now + d * DAY, age)), None)


# ---- strategies ----------------------------------------------------------------------------------

fixed_ages = st.builds(Age, st.integers(1, 9999), st.sampled_from([TimeUnit.MINUTES, TimeUnit.HOURS]))
day_ages = st.builds(Age, st.integers(1, 400), st.sampled_from([TimeUnit.DAYS, TimeUnit.WEEKS]))
calendar_ages = st.builds(Age, st.integers(1, 30), st.sampled_from([TimeUnit.MONTHS, TimeUnit.YEARS]))
any_age = st.one_of(fixed_ages, day_ages, calendar_ages, calendar_ages)


@st.composite
def month_ends(draw: st.DrawFn) -> int:
    """A moment in the last days of a month (or the first of the next), where calendar cutoffs clamp."""
    year, month = draw(st.integers(1990, 2060)), draw(st.integers(1, 12))
    last = days_in_month(year, month)
    day = draw(st.integers(max(1, last - 4), last))
    return ms(f"{year:04d}-{month:02d}-{day:02d}T00:00:00") + draw(st.integers(0, DAY - 1))


nows = st.one_of(month_ends(), st.integers(ms("1990-01-01T00:00:00"), ms("2060-12-31T23:59:59")))


# ---- the day arithmetic --------------------------------------------------------------------------

@settings(max_examples=1500, deadline=None)
@given(nows, any_age, st.integers(0, 130), st.data())
def test_the_window_of_a_create_time_gives_its_first_day(now: int, age: Age, days: int, data: st.DataObject) -> None:
    cutoffs = day_cutoffs(now, age, days)
    assert cutoffs.first == cutoff_ms(now, age)
    assert cutoffs.steps[0] == 0 and list(cutoffs.steps) == sorted(cutoffs.steps)
    # create times around the cutoffs: exactly at one, a millisecond either side, anywhere between
    day = data.draw(st.integers(0, days))
    at = cutoff_ms(now + day * DAY, age)
    create_time = data.draw(st.one_of(st.sampled_from([at - 1, at, at + 1]),
                                      st.integers(cutoffs.first - 3 * DAY, cutoffs.last + 3 * DAY)))
    expected = first_day(create_time, now, age, days)
    assert day_of_window(cutoffs, window_of(create_time, cutoffs.first)) == expected
    # the statement keeps exactly the create times some day's cutoff passes
    assert (create_time < cutoffs.last) == (expected is not None)


def test_calendar_months_clamp_so_several_days_share_a_cutoff() -> None:
    # 2024-03-28 + 1..4 days minus a month: 02-29, 02-29 (clamped), 02-29 (clamped), 03-01
    now, age = ms("2024-03-28T00:00:00"), Age(1, TimeUnit.MONTHS)
    cutoffs = day_cutoffs(now, age, 4)
    assert cutoffs.first == ms("2024-02-28T00:00:00")
    assert [cutoffs.cutoff(d) for d in range(5)] == [ms("2024-02-28T00:00:00"), ms("2024-02-29T00:00:00"),
                                                     ms("2024-02-29T00:00:00"), ms("2024-02-29T00:00:00"),
                                                     ms("2024-03-01T00:00:00")]
    for created, day in [("2024-02-27T23:00:00", 0), ("2024-02-28T12:00:00", 1), ("2024-02-29T12:00:00", 4),
                         ("2024-03-01T00:00:00", None)]:
        t = ms(created)
        assert day_of_window(cutoffs, window_of(t, cutoffs.first)) == day == first_day(t, now, age, 4)


@pytest.mark.parametrize("bad", [-1, MAX_DAYS + 1, True, "7", 1.5, None])
def test_days_outside_0_to_3660_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_days(bad)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("days: ")


def test_days_inside_the_range_are_kept() -> None:
    assert [check_days(d) for d in (0, 1, 7, MAX_DAYS)] == [0, 1, 7, MAX_DAYS]


# ---- the forecast over a store, against the oracle -----------------------------------------------

EXPRESSIONS = ['feed = "A"', 'type = "Events"', "all", "all", 'feed in ("A", "B")', "file_size > 500",
               'not feed = "C"', "create_time > now()-20d"]
HOLDS = ['feed = "B"', 'type = "Raw" and file_size < 300']


@dataclass(frozen=True)
class Scenario:
    now: int
    days: int
    rules: tuple[RetentionRule, ...]
    holds: tuple[str, ...]
    records: tuple[Mapping[str, Any], ...]


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    now = draw(nows)
    days = draw(st.integers(0, 40))
    numbers = draw(st.lists(st.integers(1, 9), min_size=1, max_size=4, unique=True))
    rules = tuple(RetentionRule(n, f"rule {n}", draw(st.integers(0, 4)) > 0,
                                parse(draw(st.sampled_from(EXPRESSIONS))),
                                draw(st.one_of(st.none(), day_ages, calendar_ages, fixed_ages))) for n in numbers)
    expiring = [r.age for r in rules if r.age is not None]

    def create_time() -> int:
        if expiring and draw(st.integers(0, 2)):  # mostly on or beside a cutoff of some day
            at = cutoff_ms(now + draw(st.integers(0, days)) * DAY, draw(st.sampled_from(expiring)))
            return max(0, at + draw(st.sampled_from([-1, 0, 1, -HOUR, draw(st.integers(-DAY, DAY))])))
        return max(0, now - draw(st.integers(-DAY, 800 * DAY)))

    records = tuple({"feed": draw(st.sampled_from(["A", "B", "C"])), "type": draw(st.sampled_from(["Raw", "Events"])),
                     "create_time": create_time(),
                     "status": draw(st.sampled_from(["UNLOCKED"] * 4 + ["LOCKED", "DELETED"])),
                     "file_size": draw(st.one_of(st.none(), st.integers(0, 1000)))}
                    for _ in range(draw(st.integers(1, 40))))
    holds = tuple(draw(st.lists(st.sampled_from(HOLDS), max_size=2, unique=True)))
    return Scenario(now, days, rules, holds, records)


def oracle(client: tk.Client, rules: Sequence[RetentionRule], holds: Sequence[str], now: int,
           days: int) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(day, rule) → (rows, bytes, held rows), one record at a time: UNLOCKED, first matching active
    rule not forever, the first day whose end's cutoff is past its create time; held if any hold's
    expression matches it."""
    ctx = CompileContext(now, client.catalog.dictionaries())
    hold_tests = [to_python(parse(text), ctx) for text in holds]
    found: dict[tuple[int, int], tuple[int, int, int]] = {}
    for record in client.catalog.records(limit=100_000):
        row = record.to_row() | {"id": record.id}
        deciding = next((r for r in active_rules(rules) if to_python(r.expression, ctx)(row)), None)
        if record.status != "UNLOCKED" or deciding is None or deciding.age is None:
            continue
        day = first_day(record.create_time, now, deciding.age, days)
        if day is None:
            continue
        rows, size, held = found.get((day, deciding.rule_number), (0, 0, 0))
        if any(test(row) for test in hold_tests):
            held += 1
        else:
            rows, size = rows + 1, size + (record.file_size or 0)
        found[(day, deciding.rule_number)] = (rows, size, held)
    return found


def by_day_and_rule(forecast: CatalogForecast) -> dict[tuple[int, int], tuple[int, int, int]]:
    return {(r.day, r.rule): (r.rows, r.bytes, r.held_rows) for r in forecast.rows}


def day_zero_of_impact(client: tk.Client, rules: Any, now: int) -> dict[int, tuple[int, int, int]]:
    """The impact summary at now, summed over feed and type."""
    summed: dict[int, tuple[int, int, int]] = {}
    for row in impact_summary(client.workspace, rules=rules, now_ms=now).rows:
        rows, size, held = summed.get(row.rule, (0, 0, 0))
        summed[row.rule] = (rows + row.rows, size + row.bytes, held + row.held_rows)
    return summed


def store_state(client: tk.Client) -> tuple[Any, ...]:
    """What a forecast must leave as it was: every record's status, the audit, trackers and runs."""
    with client.workspace.db.read() as conn:
        trackers = conn.execute(sa.select(sa.func.count()).select_from(catalog_trackers)).scalar()
        runs = conn.execute(sa.select(sa.func.count()).select_from(catalog_runs)).scalar()
    return statuses(client), len(client.audit(limit=10_000)), trackers, runs, client.catalog.rules().version


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(scenarios())
def test_the_forecast_matches_the_oracle_and_day_0_is_the_impact(client: tk.Client, scenario: Scenario) -> None:
    hold_ids = [client.holds.add("records", text, "forecast test") for text in scenario.holds]
    try:
        client.catalog.add(scenario.records)
        rules = RuleSet("", scenario.rules)
        before = store_state(client)
        forecast = catalog_forecast(client.workspace, rules=rules, now_ms=scenario.now, days=scenario.days)
        expected = oracle(client, scenario.rules, scenario.holds, scenario.now, scenario.days)
        event(f"days with deletions: {min(len({d for d, _ in expected}), 3)}{'+' * (len(expected) >= 3)}")
        event(f"held: {any(held for _, _, held in expected.values())}")
        assert by_day_and_rule(forecast) == expected
        assert [(r.day, r.rule) for r in forecast.rows] == sorted(expected)
        assert {(r.day, r.rule): (r.rule_name, r.age) for r in forecast.rows} == {
            (d, n): (f"rule {n}", next(r.age_string for r in scenario.rules if r.rule_number == n))
            for d, n in expected}
        day_zero = {rule: counts for (day, rule), counts in expected.items() if day == 0}
        assert day_zero_of_impact(client, rules, scenario.now) == day_zero
        assert (forecast.now_ms, forecast.days, forecast.rules_version) == (scenario.now, scenario.days, "")
        assert store_state(client) == before
    finally:
        for hold in hold_ids:
            client.holds.remove(hold)
        with client.workspace.db.write() as conn:
            conn.execute(sa.delete(catalog_records))


def add_mixed(client: tk.Client, now: int, seed: int, n: int) -> None:
    rng = random.Random(seed)
    client.catalog.add([{"feed": rng.choice(["A", "B", "LOGS"]), "type": rng.choice(["Raw", "Events"]),
                         "create_time": now - rng.randrange(0, 500) * DAY - rng.randrange(DAY),
                         "file_size": rng.randrange(1, 1000),
                         "status": rng.choice(["UNLOCKED"] * 6 + ["LOCKED"])} for _ in range(n)])


def mixed_rules() -> list[RetentionRule]:
    return [RetentionRule(1, "keep raw A", True, parse('feed = "A" and type = "Raw"'), None),
            RetentionRule(2, "logs", True, parse('feed = "LOGS"'), Age(30, TimeUnit.DAYS)),
            RetentionRule(3, "events", True, parse('type = "Events"'), Age(3, TimeUnit.MONTHS)),
            RetentionRule(4, "rest", True, parse("all"), Age(1, TimeUnit.YEARS))]


def test_each_day_is_what_the_job_deletes_at_its_end(client: tk.Client) -> None:
    """The saved rules, forecast over 40 days from a month's end; then the job, run at the end of
    every day (incrementally, with its trackers), deletes per rule exactly that day's forecast."""
    now = ms("2024-01-29T06:00:00")
    client.catalog.set_rules(mixed_rules())
    add_mixed(client, now, seed=5, n=300)
    client.holds.add("records", 'feed = "B" and type = "Raw"', "forecast test")
    forecast = catalog_forecast(client.workspace, now_ms=now, days=40)
    assert forecast.rules_version == client.catalog.rules().version != ""
    assert by_day_and_rule(forecast) == oracle(client, mixed_rules(), ['feed = "B" and type = "Raw"'], now, 40)
    assert len({r.day for r in forecast.rows}) > 10  # the data spreads over the days
    for day in range(41):
        report = client.catalog.run(now_ms=now + day * DAY)
        deleted = {rule: (count.rows, count.bytes) for rule, count in report.by_rule().items() if count.rows}
        assert deleted == {r.rule: (r.rows, r.bytes) for r in forecast.rows if r.day == day and r.rows}, day


def test_rules_come_saved_as_a_rule_set_a_list_or_a_file(client: tk.Client, tmp_path: Path) -> None:
    add_mixed(client, NOW, seed=9, n=60)
    rules = mixed_rules()
    path = tmp_path / "rules.yaml"
    path.write_text(to_yaml_text(RuleSet("", tuple(rules))))
    client.catalog.set_rules(rules)
    saved = catalog_forecast(client.workspace, now_ms=NOW, days=10)
    assert saved.rules_version == client.catalog.rules().version
    expected = oracle(client, rules, [], NOW, 10)
    assert by_day_and_rule(saved) == expected and expected
    for given_rules in (RuleSet("", tuple(rules)), rules, str(path), path):
        unsaved = catalog_forecast(client.workspace, rules=given_rules, now_ms=NOW, days=10)
        assert unsaved.rules_version == "" and unsaved.rows == saved.rows


def test_the_dictionary_form_and_its_totals(client: tk.Client) -> None:
    client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW - 10 * DAY + HOUR, "file_size": 7},
                        {"feed": "F", "type": "T", "create_time": NOW - 10 * DAY - HOUR, "file_size": 5},
                        {"feed": "H", "type": "T", "create_time": NOW - 10 * DAY + 2 * HOUR, "file_size": 3},
                        {"feed": "F", "type": "T", "create_time": NOW - 5 * DAY, "file_size": 100}])
    client.holds.add("records", 'feed = "H"', "forecast test")
    rules = [RetentionRule(2, "ten days", True, parse("all"), Age(10, TimeUnit.DAYS))]
    forecast = catalog_forecast(client.workspace, rules=rules, now_ms=NOW, days=3)
    assert forecast.to_dict() == {
        "now_ms": NOW, "days": 3, "rules_version": "", "total_rows": 2, "total_bytes": 12, "held_rows": 1,
        "rows": [{"day": 0, "rule": 2, "rule_name": "ten days", "age": "10 Days", "rows": 1, "bytes": 5,
                  "held_rows": 0},
                 {"day": 1, "rule": 2, "rule_name": "ten days", "age": "10 Days", "rows": 1, "bytes": 7,
                  "held_rows": 1}]}


def test_no_expiring_rule_no_rows_and_the_clock_gives_now(tmp_path: Path, metadata_url: str) -> None:
    clock = tk.ManualClock(NOW)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=clock, create=True)
    try:
        client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW - 900 * DAY}])
        forever = [RetentionRule(1, "forever", True, parse("all"), None),
                   RetentionRule(2, "off", False, parse("all"), Age(1, TimeUnit.DAYS))]
        assert catalog_forecast(client.workspace, rules=forever).to_dict() == {
            "now_ms": NOW, "days": 7, "rules_version": "", "total_rows": 0, "total_bytes": 0, "held_rows": 0,
            "rows": []}
        clock.advance(DAY)
        shorter = [RetentionRule(1, "a day", True, parse("all"), Age(1, TimeUnit.DAYS))]
        assert catalog_forecast(client.workspace, rules=shorter, days=0).to_dict()["now_ms"] == NOW + DAY
    finally:
        client.close()


@pytest.mark.parametrize("bad", [-1, MAX_DAYS + 1, "7"])
def test_a_bad_horizon_is_refused_before_anything_is_read(client: tk.Client, bad: object) -> None:
    client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW - 900 * DAY}])
    before = store_state(client)
    with pytest.raises(InvalidInput, match=r"^days: "):
        catalog_forecast(client.workspace, rules="/nonexistent/rules.yaml", now_ms=NOW, days=bad)  # type: ignore[arg-type]
    assert store_state(client) == before


def test_progress_counts_the_candidates_up_to_the_last_cutoff(client: tk.Client) -> None:
    # candidates: UNLOCKED and created before the latest cutoff of the forecast (now + 5 days − 10 days)
    client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW - d * DAY - HOUR} for d in range(20)])
    calls: list[tuple[int, int]] = []
    rules = [RetentionRule(1, "ten days", True, parse("all"), Age(10, TimeUnit.DAYS))]
    forecast = catalog_forecast(client.workspace, rules=rules, now_ms=NOW, days=5,
                                progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 15) and calls[-1] == (15, 15)
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))
    assert forecast.total_rows == 15
    assert [(r.day, r.rows) for r in forecast.rows] == [(0, 10)] + [(d, 1) for d in range(1, 6)]


# ---- through Spark tasks ---------------------------------------------------------------------------

def test_the_forecast_through_spark_tasks(tmp_path: Path, metadata_url: str, spark) -> None:
    """Many small slices: Spark tasks on PostgreSQL, the driver in turn on SQLite. The same forecast
    as the oracle, day 0 as the impact summary, nothing changed."""
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        settings={"catalog.slice_rows": 30}, create=True)
    try:
        now = ms("2024-02-27T18:30:00")
        add_mixed(client, now, seed=3, n=300)
        client.holds.add("records", 'feed = "B"', "forecast test")
        rules = mixed_rules()
        before = store_state(client)
        forecast = catalog_forecast(client.workspace, rules=rules, now_ms=now, days=45)
        expected = oracle(client, rules, ['feed = "B"'], now, 45)
        assert by_day_and_rule(forecast) == expected
        assert forecast.held_rows > 0 and len({r.day for r in forecast.rows}) >= 5  # spread over days
        assert day_zero_of_impact(client, rules, now) == {
            rule: counts for (day, rule), counts in expected.items() if day == 0}
        assert store_state(client) == before
    finally:
        client.close()
