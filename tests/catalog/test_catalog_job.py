"""The data retention job on Spark, end to end on SQLite and PostgreSQL: the four-rule example of
docs/catalog-rules.md, Stroom's integration scenarios (multiple runs, batching, trackers), holds, LOCKED
rows, dry runs, the impact summary and explain — each checked against a plain-Python oracle of the
rules."""

from __future__ import annotations

import itertools
import json
import random
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.catalog_job import NOW, oracle, statuses
from tidekeep.catalog.ages import Age, cutoff_ms
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.store.schema_catalog import catalog_trackers

DAY = 86_400_000
pytestmark = pytest.mark.spark


def rule(number: int, expression: str, age: str | None, name: str | None = None, enabled: bool = True) -> RetentionRule:
    parsed_age = None if age is None else Age(int(age.split()[0]), age.split()[1])
    return RetentionRule(number, name or f"rule {number}", enabled, parse(expression), parsed_age)


def seed_rules() -> list[RetentionRule]:
    """The four-rule example of docs/catalog-rules.md: 10 years SPECIAL_DATA, 3 months INTERNAL_LOGS,
    5 years everything, forever."""
    return [rule(1, 'feed = "SPECIAL_DATA"', "10 years"), rule(2, 'feed = "INTERNAL_LOGS"', "3 months"),
            rule(3, 'feed = "*"', "5 years"), rule(4, "all", None, "Default forever rule")]


def add_aged(client: tk.Client, feeds: list[str], ages_days: list[int]) -> list[int]:
    return client.catalog.add([{"feed": feed, "type": "Raw Events", "create_time": NOW - days * DAY,
                                "file_size": 100 + days}
                               for feed in feeds for days in ages_days])


def test_the_four_rule_example_deletes_exactly_what_its_periods_say(client: tk.Client, spark) -> None:
    rules = seed_rules()
    client.catalog.set_rules(rules)
    add_aged(client, ["SPECIAL_DATA", "INTERNAL_LOGS", "OTHER"], [1, 80, 100, 365 * 4, 365 * 6, 365 * 11])
    expected = oracle(client, rules, NOW)
    report = client.catalog.run(now_ms=NOW)
    assert [(p.to_dict()["actions"]) for p in report.periods] == [
        [{"rule": 1, "name": "rule 1", "action": "RETAIN"}, {"rule": 2, "name": "rule 2", "action": "DELETE"},
         {"rule": 3, "name": "rule 3", "action": "RETAIN"},
         {"rule": 4, "name": "Default forever rule", "action": "RETAIN"}],
        [{"rule": 1, "name": "rule 1", "action": "RETAIN"}, {"rule": 2, "name": "rule 2", "action": "DELETE"},
         {"rule": 3, "name": "rule 3", "action": "DELETE"},
         {"rule": 4, "name": "Default forever rule", "action": "RETAIN"}],
        [{"rule": 1, "name": "rule 1", "action": "DELETE"}, {"rule": 2, "name": "rule 2", "action": "DELETE"},
         {"rule": 3, "name": "rule 3", "action": "DELETE"},
         {"rule": 4, "name": "Default forever rule", "action": "RETAIN"}],
    ]
    after = statuses(client)
    assert {i for i, (s, _) in after.items() if s == "DELETED"} == expected
    # INTERNAL_LOGS older than 3 months (100 d and older), OTHER older than 5 y, SPECIAL_DATA older than 10 y
    assert len(expected) == 4 + 2 + 1
    assert all(after[i][1] == NOW for i in expected)  # status time = the run's fixed now
    assert report.rows == len(expected)
    assert report.by_rule()[2].rows == 4 and report.by_rule()[3].rows == 2 and report.by_rule()[1].rows == 1


def test_multiple_runs_change_nothing_the_second_time(client: tk.Client, spark) -> None:
    # Stroom's testMultipleRuns: a 1-day rule and a forever rule
    client.catalog.set_rules([rule(1, 'feed = "TEST_FEED"', "1 days"), rule(2, 'feed = "KEEP"', None)])
    old, young = add_aged(client, ["TEST_FEED"], [3, 0])
    forever = add_aged(client, ["KEEP"], [900])[0]
    client.catalog.run(now_ms=NOW)
    first = statuses(client)
    assert first[old] == ("DELETED", NOW)
    assert first[young][0] == "UNLOCKED" and first[forever][0] == "UNLOCKED"
    second = client.catalog.run(now_ms=NOW + 60_000)
    assert second.rows == 0
    assert statuses(client) == first  # the deleted row keeps its status time


def test_batches_smaller_than_the_matching_rows_still_delete_every_row(tmp_path, metadata_url: str, spark) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        settings={"catalog.slice_rows": 3, "catalog.parallelism": 2}, create=True)
    try:
        client.catalog.set_rules([rule(1, "all", "1 days")])
        # 20 old rows, several sharing a create time so that some slices exceed the batch size
        client.catalog.add([{"feed": "F", "type": "T", "create_time": NOW - 10 * DAY - (i // 4)} for i in range(20)])
        report = client.catalog.run(now_ms=NOW)
        assert report.rows == 20
        assert all(s == "DELETED" for s, _ in statuses(client).values())
    finally:
        client.close()


def test_locked_and_held_records_are_never_deleted(client: tk.Client, spark) -> None:
    client.catalog.set_rules([rule(1, "all", "1 days")])
    ids = add_aged(client, ["A", "B", "C"], [5])
    from tidekeep.catalog.record_store import RecordStore

    RecordStore(client.workspace).set_status([ids[0]], "LOCKED")
    hold = client.holds.add("records", 'feed = "B"', "litigation 42")
    report = client.catalog.run(now_ms=NOW)
    after = statuses(client)
    assert after[ids[0]][0] == "LOCKED" and after[ids[1]][0] == "UNLOCKED" and after[ids[2]][0] == "DELETED"
    assert report.rows == 1
    answer = client.catalog.explain(ids[1], now_ms=NOW)
    assert answer.decision == "HELD" and answer.holds[0]["id"] == hold and answer.expired
    client.holds.remove(hold)
    client.catalog.run(now_ms=NOW + 1000)
    assert statuses(client)[ids[1]][0] == "DELETED"


def test_a_dry_run_changes_nothing_and_counts_what_the_run_deletes(client: tk.Client, spark) -> None:
    client.catalog.set_rules(seed_rules())
    add_aged(client, ["SPECIAL_DATA", "INTERNAL_LOGS", "OTHER"], [1, 100, 365 * 6, 365 * 11])
    before = statuses(client)
    audit_before = len(client.audit(limit=1000))
    dry = client.catalog.run(dry_run=True, now_ms=NOW)
    assert statuses(client) == before
    assert len(client.audit(limit=1000)) == audit_before
    with client.workspace.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(catalog_trackers)).scalar() == 0
    real = client.catalog.run(now_ms=NOW)
    assert dry.rows == real.rows > 0 and dry.by_rule() == real.by_rule()
    assert dry.bytes == real.bytes


def test_trackers_make_a_run_one_day_later_incremental(client: tk.Client, spark) -> None:
    rules = seed_rules()
    client.catalog.set_rules(rules)
    add_aged(client, ["INTERNAL_LOGS", "OTHER"], [50, 200, 365 * 3])
    client.catalog.run(now_ms=NOW)
    later = NOW + DAY
    # records that cross a cutoff during the day: one just younger than 3 months at NOW
    crossing = client.catalog.add([{"feed": "INTERNAL_LOGS", "type": "Raw Events",
                                    "create_time": cutoff_ms(later, Age(3, "months")) - 1}])[0]
    report = client.catalog.run(now_ms=later)
    assert all(p.to_ms - p.from_ms <= DAY for p in report.periods)
    assert statuses(client)[crossing][0] == "DELETED"
    with client.workspace.db.read() as conn:
        trackers = {r.rule_age: r.last_run_ms for r in conn.execute(sa.select(catalog_trackers))}
    assert trackers == {"10 Years": later, "5 Years": later, "Forever": later}
    # a rules edit invalidates every tracker: the next run covers the whole timeline again
    client.catalog.set_rules(rules)
    full = client.catalog.run(now_ms=later + 1000)
    assert full.periods[-1].from_ms == 0


def test_a_record_exactly_at_a_cutoff_is_kept_and_months_are_calendar_months(client: tk.Client, spark) -> None:
    client.catalog.set_rules([rule(1, "all", "1 months")])
    cutoff = int(datetime(2024, 2, 29, tzinfo=UTC).timestamp() * 1000)
    at, before = client.catalog.add([{"feed": "F", "type": "T", "create_time": cutoff},
                                     {"feed": "F", "type": "T", "create_time": cutoff - 1}])
    client.catalog.run(now_ms=NOW)  # now = 2024-03-31T00:00Z
    after = statuses(client)
    assert after[at][0] == "UNLOCKED" and after[before][0] == "DELETED"


def test_random_rules_and_records_match_the_python_oracle(client: tk.Client, spark) -> None:
    rng = random.Random(7)
    feeds = ["A", "B", "INTERNAL_X", "INTERNAL_Y"]
    client.catalog.add([{"feed": rng.choice(feeds), "type": rng.choice(["Raw Events", "Events"]),
                         "create_time": NOW - rng.randrange(0, 800) * DAY - rng.randrange(DAY),
                         "file_size": rng.randrange(1, 10_000), "status": rng.choice(["UNLOCKED"] * 5 + ["LOCKED"]),
                         "attributes": {"env": rng.choice(["prod", "test"])}} for _ in range(300)])
    expressions = ['feed = "INTERNAL_*"', 'type = "Events"', 'attr.env = "test" or file_size > 5000',
                   'not feed in ("A", "B")', "all", 'feed = "B" and create_time < "2023-06-01T00:00:00Z"']
    units = ["days", "weeks", "months", "years"]
    for round_ in range(3):
        rules = [rule(n, rng.choice(expressions), None if rng.random() < 0.2 else f"{rng.randrange(1, 30)} "
                      f"{rng.choice(units)}", enabled=rng.random() < 0.9) for n in rng.sample(range(1, 20), 5)]
        client.catalog.set_rules(rules)
        now = NOW + round_ * 40 * DAY
        expected = oracle(client, rules, now) | {i for i, (s, _) in statuses(client).items() if s == "DELETED"}
        client.catalog.run(now_ms=now)
        assert {i for i, (s, _) in statuses(client).items() if s == "DELETED"} == expected


def test_impact_counts_what_a_trackerless_run_then_deletes(client: tk.Client, spark) -> None:
    # Stroom's testRetentionSummary: 1-day, 2-day, 1-week and forever rules per feed, n rows a day
    days, per_day = 10, 2
    client.catalog.set_rules([rule(1, 'feed = "F1"', "1 days"), rule(2, 'feed = "F2"', "2 days"),
                              rule(3, 'feed = "F3"', "1 weeks"), rule(4, 'feed = "F4"', None)])
    client.catalog.add([{"feed": f"F{f}", "type": "Events", "create_time": NOW - d * DAY + 1, "file_size": 10}
                        for f in range(1, 5) for d in range(days) for _ in range(per_day)])
    summary = client.catalog.impact(now_ms=NOW)
    assert [(r.rule, r.feed, r.type, r.rows) for r in summary.rows] == [
        (1, "F1", "Events", (days - 1) * per_day - per_day), (2, "F2", "Events", (days - 2) * per_day - per_day),
        (3, "F3", "Events", (days - 7) * per_day - per_day)]
    assert all(r.bytes == r.rows * 10 for r in summary.rows)
    report = client.catalog.run(now_ms=NOW)
    assert {k: v.rows for k, v in report.by_rule().items()} == {r.rule: r.rows for r in summary.rows}


def test_impact_of_unsaved_rules_and_held_records(client: tk.Client, spark, tmp_path) -> None:
    add_aged(client, ["A", "B"], [3, 30])
    client.holds.add("records", 'feed = "B"', "audit")
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - number: 1\n    name: short\n    expression: all\n    age: 7 days\n")
    summary = client.catalog.impact(rules=str(path), now_ms=NOW)
    assert summary.rules_version == ""
    assert [(r.feed, r.rows, r.held_rows) for r in summary.rows] == [("A", 1, 0), ("B", 0, 1)]
    assert client.catalog.rules().version == ""  # nothing was saved


def test_runs_are_recorded_with_their_reports(client: tk.Client, spark) -> None:
    client.catalog.set_rules([rule(1, "all", "1 days")])
    add_aged(client, ["A"], [5, 6])
    calls: list[tuple[int, int]] = []
    report = client.catalog.run(now_ms=NOW, progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 2) and calls[-1] == (2, 2)  # records of the run's periods, to the end
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))
    runs = client.catalog.runs()
    assert runs[0]["id"] == report.run_id and runs[0]["state"] == "SUCCEEDED" and runs[0]["now_ms"] == NOW
    assert runs[0]["report"]["rows"] == 2
    entry = next(a for a in client.audit(limit=50) if a["action"] == "catalog_delete")
    assert json.loads(entry["details"])["run"] == report.run_id


def test_editing_a_dictionary_the_rules_use_makes_the_next_run_a_full_one(client: tk.Client, spark) -> None:
    client.catalog.set_dictionary("short_lived", ["A"])
    client.catalog.set_rules([rule(1, "feed in dictionary short_lived", "1 days")])
    a, b = add_aged(client, ["A", "B"], [10])
    client.catalog.run(now_ms=NOW)
    assert statuses(client)[a][0] == "DELETED" and statuses(client)[b][0] == "UNLOCKED"
    client.catalog.set_dictionary("short_lived", ["A", "B"])  # B, ten days old, now matches
    report = client.catalog.run(now_ms=NOW + 1000)
    assert report.periods[-1].from_ms == 0  # no trackers: the whole timeline again
    assert statuses(client)[b][0] == "DELETED"
    client.catalog.set_dictionary("unused", ["X"])  # not used by the rules: trackers stay
    with client.workspace.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(catalog_trackers)).scalar() > 0
