"""The saved rule set and trackers on SQLite and PostgreSQL: versions change on every save, saves
are audited, bad input (rules, expressions, missing dictionaries) changes nothing, trackers of
other rule versions are dropped, tracker upserts."""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path

import pytest

import tidekeep as tk
from tidekeep.catalog.ages import Age, TimeUnit
from tidekeep.catalog.expressions import Condition, Operator, Term, parse
from tidekeep.catalog.rules import RetentionRule, RuleSet
from tidekeep.catalog.rules_store import RulesStore
from tidekeep.errors import InvalidInput, NotFound, StaleVersion
from tidekeep.streams.of_workspace import stream_controller

YAML = """\
rules:
  - number: 2
    name: Internal logs
    expression: feed = "INTERNAL_LOGS"
    age: 3 months
  - number: 1
    name: Keep special data
    expression: feed = "SPECIAL_DATA"
    age: 10 years
  - number: 3
    name: Default
    expression: all
    age: forever
    enabled: false
"""


def rules_audit(client: tk.Client) -> list[dict]:
    return [e for e in client.audit("catalog") if e["action"] == "catalog_rules"]


def test_empty_before_the_first_save(client: tk.Client) -> None:
    assert client.catalog.rules() == RuleSet("", ())
    assert RulesStore(client.workspace).saved().updated_ms is None


def test_save_from_file_list_and_ruleset(client: tk.Client, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(YAML)
    first = client.catalog.set_rules(path)
    assert uuid.UUID(first.version).version == 4
    loaded = client.catalog.rules()
    assert loaded.version == first.version
    assert sorted(loaded.rules, key=lambda r: r.rule_number) == sorted(first.rules, key=lambda r: r.rule_number)
    assert [r.rule_number for r in loaded.rules] == [1, 2, 3]  # stored in rule-number order
    assert loaded.rules[2].enabled is False and loaded.rules[2].age is None

    rules = [RetentionRule(5, "five", True, parse('type in ("Raw Events", "Events")'), Age(5, TimeUnit.DAYS))]
    second = client.catalog.set_rules(rules)
    assert second.version != first.version and client.catalog.rules() == second
    third = client.catalog.set_rules(RuleSet("ignored", tuple(rules)))
    assert third.version not in {first.version, second.version, "ignored"}
    assert client.catalog.rules().rules == tuple(rules)

    saved = RulesStore(client.workspace).saved()
    assert saved.updated_ms is not None and saved.updated_ms <= client.clock.now_ms()
    assert saved.updated_by == stream_controller(client.workspace).actor
    entries = rules_audit(client)
    assert len(entries) == 3
    details = json.loads(entries[0]["details"])  # newest first
    assert details["version"] == third.version and details["previous_version"] == second.version
    assert details["rules"] == [{"number": 5, "name": "five", "enabled": True, "age": "5 Days"}]
    assert json.loads(entries[2]["details"])["previous_version"] is None


def test_an_empty_rule_set_can_be_saved(client: tk.Client) -> None:
    saved = client.catalog.set_rules([])
    assert saved.version and client.catalog.rules() == RuleSet(saved.version, ())


@pytest.mark.parametrize(("rules", "message"), [
    ([RetentionRule(1, "a", True, Operator(), None), RetentionRule(1, "b", True, Operator(), None)],
     "rule 1: duplicate rule number 1"),
    ([RetentionRule(0, "a", True, Operator(), None)], "rule 0: rule number must be 1 or more"),
    ([RetentionRule(3, "", True, Operator(), None)], "rule 3: name must not be empty"),
    ([RetentionRule(4, "a", True, Term("Nope", Condition.EQUALS, "x"), None)], "rule 4: expression: unknown field"),
    ([RetentionRule(4, "a", True, Term("File Size", Condition.GREATER_THAN, "big"), None)], "rule 4: expression:"),
    ([RetentionRule(6, "a", True, Term("Feed", Condition.IN_DICTIONARY, "missing"), None)],
     "rule 6: dictionary 'missing' does not exist"),
    ([RetentionRule(7, "a", False, Operator(children=(
        Term("Feed", Condition.IN_DICTIONARY, "gone", enabled=False),)), Age(1, TimeUnit.DAYS))],
     "rule 7: dictionary 'gone' does not exist"),
    (42, "expected a rule file's text, a mapping with a 'rules' list, a list of rule mappings, a RuleSet, "
         "a list of RetentionRule or a rule file path, got int"),
])
def test_bad_rules_change_nothing(client: tk.Client, rules: object, message: str | None) -> None:
    before = client.catalog.set_rules([RetentionRule(9, "keep", True, Operator(), None)])
    with pytest.raises(InvalidInput) as raised:
        client.catalog.set_rules(rules)
    if message is not None:
        assert str(raised.value).startswith(message), str(raised.value)
    assert client.catalog.rules() == before
    assert len(rules_audit(client)) == 1


def test_bad_files_change_nothing(client: tk.Client, tmp_path: Path) -> None:
    before = client.catalog.set_rules([RetentionRule(9, "keep", True, Operator(), None)])
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n - {number: 1, name: a, expression: all, age: 0 days}\n")
    with pytest.raises(InvalidInput, match=r"bad.yaml: rule 1: age: amount 0 out of range"):
        client.catalog.set_rules(bad)
    with pytest.raises(NotFound):
        client.catalog.set_rules(tmp_path / "absent.yaml")
    assert client.catalog.rules() == before


def test_dictionaries_named_by_rules_must_exist(client: tk.Client) -> None:
    rule = RetentionRule(1, "dict", True, Term("Feed", Condition.IN_DICTIONARY, "feeds"), Age(1, TimeUnit.DAYS))
    with pytest.raises(InvalidInput, match="rule 1: dictionary 'feeds' does not exist"):
        RulesStore(client.workspace).validate([rule])
    client.catalog.set_dictionary("feeds", ["A", "B"])
    assert RulesStore(client.workspace).validate([rule]) == RuleSet("", (rule,))
    saved = client.catalog.set_rules([rule])
    assert client.catalog.rules() == saved
    with pytest.raises(InvalidInput, match="used by the saved retention rules"):
        client.catalog.delete_dictionary("feeds")  # the dictionaries module reads our stored document


def test_validate_saves_nothing(client: tk.Client, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(YAML)
    checked = RulesStore(client.workspace).validate(path)
    assert checked.version == "" and len(checked.rules) == 3
    assert client.catalog.rules() == RuleSet("", ()) and rules_audit(client) == []


def test_trackers_drop_other_versions(client: tk.Client) -> None:
    store = RulesStore(client.workspace)
    assert store.trackers("v1") == {}
    store.save_tracker("v1", "1 Month", 1000)
    store.save_tracker("v1", "Forever", 1000)
    store.save_tracker("v1", "1 Month", 2000)  # an update, not a second row
    store.save_tracker("v2", "1 Year", 3000)
    assert store.trackers("v1") == {"1 Month": 2000, "Forever": 1000}  # v2's is gone now
    store.save_tracker("v2", "1 Year", 3000)
    assert store.trackers("v2") == {"1 Year": 3000}
    assert store.trackers("v1") == {}


def test_concurrent_tracker_upserts_leave_one_row(client: tk.Client) -> None:
    store = RulesStore(client.workspace)
    errors: list[BaseException] = []

    def worker(value: int) -> None:
        try:
            for step in range(10):
                store.save_tracker("v", "1 Day", value * 100 + step)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    trackers = store.trackers("v")
    assert list(trackers) == ["1 Day"] and trackers["1 Day"] % 100 == 9


def test_saved_expressions_are_canonical(client: tk.Client) -> None:
    loose = RetentionRule(1, "loose", True, Operator(children=(Term("feed", Condition.EQUALS, "A"),
                                                               Term("STATUS", Condition.EQUALS, "unlocked"))),
                          Age(1, TimeUnit.DAYS))
    saved = client.catalog.set_rules([loose])
    assert saved == client.catalog.rules()
    assert saved.rules[0].expression == Operator(children=(Term("Feed", Condition.EQUALS, "A"),
                                                           Term("Status", Condition.EQUALS, "UNLOCKED")))


def test_a_save_based_on_an_older_version_is_stale_and_saves_nothing(client: tk.Client) -> None:
    first = client.catalog.set_rules(YAML, expected_version="")
    with pytest.raises(StaleVersion) as stale:
        client.catalog.set_rules(YAML, expected_version="")  # "none saved yet" no longer holds
    assert stale.value.current == first.version
    second = client.catalog.set_rules(YAML, expected_version=first.version)
    with pytest.raises(StaleVersion) as stale:
        client.catalog.set_rules("rules: []", expected_version=first.version)
    assert stale.value.current == second.version
    assert client.catalog.rules().version == second.version and len(client.catalog.rules().rules) == 3
    assert [json.loads(e["details"])["previous_version"] for e in rules_audit(client)] == [first.version, None]


def save_based_on(client: tk.Client, number: int, based_on: str, start: threading.Barrier,
                  won: list[str], stale: list[StaleVersion], other: list[BaseException]) -> None:
    rules = f"rules:\n  - number: 1\n    name: saver {number}\n    expression: all\n    age: 1 days\n"
    start.wait()
    try:
        won.append(client.catalog.set_rules(rules, expected_version=based_on).version)
    except StaleVersion as exc:
        stale.append(exc)
    except BaseException as exc:  # pragma: no cover - reported by the test
        other.append(exc)


@pytest.mark.parametrize("based_on_none", [True, False], ids=["first-save", "later-save"])
def test_of_concurrent_saves_of_one_version_exactly_one_wins(client: tk.Client, based_on_none: bool) -> None:
    base = "" if based_on_none else client.catalog.set_rules(YAML).version
    savers = 4
    for round_number in range(3):
        start = threading.Barrier(savers)
        won: list[str] = []
        stale: list[StaleVersion] = []
        other: list[BaseException] = []
        threads = [threading.Thread(target=save_based_on, args=(client, n, base, start, won, stale, other))
                   for n in range(savers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert other == [] and len(won) == 1 and len(stale) == savers - 1, (round_number, won, stale, other)
        assert all(exc.current == won[0] for exc in stale)
        assert client.catalog.rules().version == won[0]
        saves = [json.loads(e["details"]) for e in rules_audit(client) if json.loads(e["details"])["version"] == won[0]]
        assert [s["previous_version"] for s in saves] == [base or None]
        base = won[0]
