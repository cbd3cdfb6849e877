"""Rule files: tidekeep's YAML and Stroom's DataRetentionRules JSON, round trips, validation with
errors that name the rule and the field, and fuzzing of the loaders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.catalog.ages import Age, TimeUnit
from tidekeep.catalog.expressions import Condition, Op, Operator, Term, parse
from tidekeep.catalog.rules import (
    RetentionRule,
    RuleSet,
    check_rules,
    load_rules_file,
    parse_rules_text,
    rules_from_document,
    to_stroom_json,
    to_yaml_text,
)
from tidekeep.errors import InvalidInput, NotFound

SEED_YAML = """\
rules:
  - number: 1
    name: Keep special data
    expression: feed = "SPECIAL_DATA"
    age: 10 years
  - number: 2
    name: Internal logs
    expression: feed = "INTERNAL_LOGS"
    age: 3 months
  - number: 3
    name: Five years
    expression: feed = "*"
    age: 5 years
  - number: 4
    name: Default
    expression: all
    age: forever
    enabled: true
"""

# the shape Stroom writes (DataRetentionRules with its metadata; an ExpressionOperator per rule)
STROOM_JSON = {
    "type": "DataRetentionRules",
    "uuid": "1c8c4b5a-0a8e-4e8c-9d4c-3a7b1f0f1c11",
    "name": "Data Retention",
    "version": "7d3f9c1e-2b1a-4f43-8a7e-5c2d1e0b9a88",
    "createTimeMs": 1600000000000,
    "updateTimeMs": 1600000500000,
    "createUser": "admin",
    "updateUser": "admin",
    "rules": [
        {"ruleNumber": 1, "creationTime": 1600000000000, "name": "Raw events", "enabled": True,
         "expression": {"type": "operator", "op": "AND", "children": [
             {"type": "term", "field": "Feed", "condition": "EQUALS", "value": "INTERNAL_*"},
             {"type": "term", "field": "Type", "condition": "IN", "value": "Raw Events,Events"}]},
         "age": 30, "timeUnit": "DAYS", "forever": False},
        {"ruleNumber": 2, "creationTime": 1600000000000, "name": "Keep audit", "enabled": False,
         "expression": {"type": "operator", "children": [
             {"type": "term", "field": "Feed", "condition": "EQUALS", "value": "AUDIT", "enabled": False}]},
         "age": 50, "timeUnit": "YEARS", "forever": True},
        {"ruleNumber": 3, "creationTime": 1600000000000, "name": "Everything else", "enabled": True,
         "expression": {"type": "operator", "op": "AND"}, "age": 1, "timeUnit": "YEARS", "forever": False},
    ],
}


def test_yaml_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(SEED_YAML)
    ruleset = load_rules_file(path)
    assert ruleset.version == ""
    assert ruleset.rules == (
        RetentionRule(1, "Keep special data", True, Term("Feed", Condition.EQUALS, "SPECIAL_DATA"), Age(10, "YEARS")),
        RetentionRule(2, "Internal logs", True, Term("Feed", Condition.EQUALS, "INTERNAL_LOGS"), Age(3, "MONTHS")),
        RetentionRule(3, "Five years", True, Term("Feed", Condition.EQUALS, "*"), Age(5, "YEARS")),
        RetentionRule(4, "Default", True, Operator(Op.AND, ()), None),
    )


def test_yaml_expression_may_be_a_stroom_tree() -> None:
    ruleset = parse_rules_text("""
rules:
  - number: 7
    name: tree
    enabled: false
    age: 2w
    expression:
      op: OR
      children:
        - {field: Feed, condition: STARTS_WITH, value: "A"}
        - {field: attr.host, condition: IS_NULL, enabled: false}
""")
    (rule,) = ruleset.rules
    assert (rule.rule_number, rule.enabled, rule.age) == (7, False, Age(2, TimeUnit.WEEKS))
    assert rule.expression == Operator(Op.OR, (Term("Feed", Condition.STARTS_WITH, "A"),
                                                Term("attr.host", Condition.IS_NULL, None, enabled=False)))


def test_stroom_json_imports_and_exports() -> None:
    ruleset = parse_rules_text(json.dumps(STROOM_JSON), "stroom.json")
    assert [(r.rule_number, r.name, r.enabled, r.age) for r in ruleset.rules] == [
        (1, "Raw events", True, Age(30, TimeUnit.DAYS)),
        (2, "Keep audit", False, None),  # forever: Stroom's 50 years are ignored
        (3, "Everything else", True, Age(1, TimeUnit.YEARS)),
    ]
    assert ruleset.rules[0].expression == parse('feed = "INTERNAL_*" and type in ("Raw Events", "Events")')
    exported = to_stroom_json(RuleSet("abc", ruleset.rules), creation_time_ms=1600000000000)
    assert exported["type"] == "DataRetentionRules" and exported["version"] == "abc"
    assert exported["name"] == "Data Retention"
    for mine, theirs in zip(exported["rules"], STROOM_JSON["rules"], strict=True):
        assert {k: mine[k] for k in ("ruleNumber", "creationTime", "name", "enabled", "age", "timeUnit", "forever")} \
            == {k: theirs[k] for k in ("ruleNumber", "creationTime", "name", "enabled", "age", "timeUnit", "forever")}
    assert rules_from_document(exported).rules == ruleset.rules


def test_yaml_export_round_trips_including_disabled_terms() -> None:
    ruleset = parse_rules_text(json.dumps(STROOM_JSON))
    text = to_yaml_text(ruleset)
    assert 'expression: feed = "INTERNAL_*" and type in ("Raw Events", "Events")' in text
    assert parse_rules_text(text).rules == ruleset.rules  # rule 2's disabled term survives as a tree


def test_rules_keep_the_file_order_and_precedence_is_by_number() -> None:
    ruleset = parse_rules_text("rules:\n - {number: 9, name: b, expression: all, age: 1d}\n"
                               " - {number: 2, name: a, expression: all, age: forever}\n")
    assert [r.rule_number for r in ruleset.rules] == [9, 2]
    assert [r.rule_number for r in ruleset.active_rules()] == [2, 9]


def test_empty_rule_sets() -> None:
    assert parse_rules_text("rules: []").rules == ()
    assert parse_rules_text(json.dumps({"type": "DataRetentionRules", "rules": None})).rules == ()


BAD_FILES = [
    ("rules: [", "f: invalid YAML at line 1, column 9"),
    ("rules:\n  - number: 1\n   name: x", "f: invalid YAML at line 3, column 4"),
    ('{"rules": [}', "f: invalid JSON at line 1, column 12"),
    ("- just a list", "f: expected a mapping with a 'rules' list, got list"),
    ("", "f: expected a mapping with a 'rules' list, got nothing"),
    ("rules: {}", "f: rule file: rules: expected a list, got dict"),
    ("rulez: []", "f: rule file: unknown key 'rulez' (allowed: rules)"),
    ("rules:\n - {name: a, expression: all, age: 1d}", "f: rules[0]: number: missing"),
    ("rules:\n - {number: 0, name: a, expression: all, age: 1d}", "f: rules[0]: rule number must be 1 or more, got 0"),
    ("rules:\n - {number: x, name: a, expression: all, age: 1d}", "f: rules[0]: rule number 'x' is not a whole number"),
    ("rules:\n - {number: 2147483648, name: a, expression: all, age: 1d}",
     "f: rules[0]: rule number must be at most 2147483647, got 2147483648"),
    (json.dumps({"type": "DataRetentionRules", "rules": [
        {"ruleNumber": 10**30, "name": "a", "expression": {}, "forever": True}]}),
     "f: rules[0]: rule number must be at most 2147483647"),
    ("rules:\n - {number: 3, name: a, expression: all}", "f: rule 3: age: missing"),
    ("rules:\n - {number: 3, name: '', expression: all, age: 1d}", "f: rule 3: name must be non-empty text"),
    ("rules:\n - {number: 3, name: a, expression: all, age: 0 days}", "f: rule 3: age: amount 0 out of range"),
    ("rules:\n - {number: 3, name: a, expression: all, age: 3 eons}", "f: rule 3: age: unknown unit 'eons'"),
    ("rules:\n - {number: 3, name: a, expression: all, age: 1d, enabled: yes please}",
     "f: rule 3: enabled must be true or false"),
    ("rules:\n - {number: 3, name: a, expression: all, age: 1d, colour: red}", "f: rule 3: unknown key 'colour'"),
    ("rules:\n - {number: 3, name: a, expression: 'colour = \"red\"', age: 1d}",
     "f: rule 3: expression: unknown field 'colour'"),
    ("rules:\n - {number: 3, name: a, expression: 'feed = \"A\" and (type = \"B\"', age: 1d}",
     "f: rule 3: expression: unbalanced parentheses"),
    ("rules:\n - {number: 3, name: a, expression: 'file_size > \"big\"', age: 1d}", "f: rule 3: expression:"),
    ("rules:\n - {number: 3, name: a, expression: 'feed matches \"(\"', age: 1d}", "f: rule 3: expression:"),
    ("rules:\n - {number: 3, name: a, expression: {field: Nope, condition: EQUALS, value: x}, age: 1d}",
     "f: rule 3: expression.field: unknown field 'Nope'"),
    ("rules:\n - {number: 3, name: a, expression: 12, age: 1d}",
     "f: rule 3: expression: expected text or a Stroom expression tree, got int"),
    ("rules:\n - {number: 3, name: a, expression: all, age: 1d}\n - {number: 3, name: b, expression: all, age: 2d}",
     "f: rule 3: duplicate rule number 3"),
    (json.dumps({"type": "DataRetentionRules", "rules": [{"ruleNumber": 2, "name": "a", "expression": {}}]}),
     "f: rule 2: age and timeUnit are required unless forever is true"),
    (json.dumps({"type": "DataRetentionRules", "rules": [
        {"ruleNumber": 2, "name": "a", "expression": {}, "age": 3, "timeUnit": "FORTNIGHTS"}]}),
     "f: rule 2: age: unknown unit 'FORTNIGHTS'"),
    (json.dumps({"type": "DataRetentionRules", "rules": [
        {"ruleNumber": 2, "name": "a", "expression": {}, "age": 0, "timeUnit": "DAYS"}]}),
     "f: rule 2: age: amount 0 out of range"),
    (json.dumps({"type": "DataRetentionRules", "rules": [
        {"ruleNumber": 2, "name": "a", "expression": None, "forever": True}]}), "f: rule 2: expression: missing"),
    (json.dumps({"type": "DataRetentionRules", "owner": "me", "rules": []}), "f: rule file: unknown key 'owner'"),
    (json.dumps({"type": "DataRetentionRules", "rules": [
        {"ruleNumber": 2, "name": "a", "expression": {}, "forever": True, "colour": 1}]}),
     "f: rule 2: unknown key 'colour'"),
]


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_bad_files_name_the_place(text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse_rules_text(text, "f")
    assert str(raised.value).startswith(message), str(raised.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"rule file .*missing.yaml.* does not exist"):
        load_rules_file(tmp_path / "missing.yaml")
    binary = tmp_path / "rules.yaml"
    binary.write_bytes(b"rules: \xff\xfe")
    with pytest.raises(InvalidInput, match=r"rules.yaml: not UTF-8 text \(byte 7\)"):
        load_rules_file(binary)
    broken = tmp_path / "broken.json"
    broken.write_text('{\n  "type": "DataRetentionRules",\n  "rules": [1,]\n}')
    with pytest.raises(InvalidInput, match=r"broken.json: invalid JSON at line 3, column 15"):
        load_rules_file(broken)


def test_check_rules_validates_constructed_rules() -> None:
    good = RetentionRule(1, "a", True, Operator(), None)
    assert check_rules([good]) == (good,)
    with pytest.raises(InvalidInput, match="rule 0: rule number must be 1 or more"):
        check_rules([RetentionRule(0, "a", True, Operator(), None)])
    with pytest.raises(InvalidInput, match="rule number must be at most 2147483647"):
        check_rules([RetentionRule(2**63, "a", True, Operator(), None)])
    assert check_rules([RetentionRule(2**31 - 1, "a", True, Operator(), None)])[0].rule_number == 2**31 - 1
    with pytest.raises(InvalidInput, match="rule 4: name must not be empty"):
        check_rules([RetentionRule(4, " ", True, Operator(), None)])
    with pytest.raises(InvalidInput, match="rule 1: duplicate rule number 1"):
        check_rules([good, RetentionRule(1, "b", True, Operator(), Age(1, "DAYS"))])
    with pytest.raises(InvalidInput, match="rule 2: age must be an Age or None"):
        check_rules([RetentionRule(2, "a", True, Operator(), "1 day")])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="rule 2: expression must be an expression tree"):
        check_rules([RetentionRule(2, "a", True, "all", None)])  # type: ignore[arg-type]


# ---- fuzzing -------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**4) | st.text(max_size=12)
    | st.sampled_from(["all", "forever", "30 days", "DAYS", "EQUALS", "Feed", "AND", 'feed = "A"', "operator"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(
        st.sampled_from(["rules", "number", "ruleNumber", "name", "expression", "age", "timeUnit", "forever",
                         "enabled", "type", "op", "children", "field", "condition", "value", "x"]),
        children, max_size=6),
    max_leaves=25)


@settings(max_examples=400)
@given(json_values)
def test_fuzz_documents_load_or_fail_cleanly(document: object) -> None:
    for text in (json.dumps(document), json.dumps({"rules": document}),
                 json.dumps({"type": "DataRetentionRules", "rules": [document]})):
        try:
            ruleset = parse_rules_text(text, "fuzz")
        except InvalidInput as exc:
            assert str(exc).startswith("fuzz: ") and "\n" not in str(exc)
        else:
            assert parse_rules_text(to_yaml_text(ruleset)).rules == ruleset.rules
            assert rules_from_document(to_stroom_json(ruleset)).rules == ruleset.rules


@settings(max_examples=300)
@given(st.text(max_size=80) | st.binary(max_size=60).map(lambda b: b.decode("latin-1")))
def test_fuzz_text_loads_or_fails_cleanly(text: str) -> None:
    for candidate in (text, "rules:\n - " + text, "{" + text):
        try:
            parse_rules_text(candidate, "fuzz")
        except InvalidInput as exc:
            assert str(exc).startswith("fuzz: ")


def test_absurdly_deep_expressions_are_refused_cleanly() -> None:
    deep_text = "rules:\n - {number: 1, name: a, age: 1d, expression: '" + "not " * 5000 + "feed = \"a\"'}\n"
    with pytest.raises(InvalidInput, match=r"^f: rule 1: expression: nested too deeply \(parentheses and 'not's nest "
                                           r"at most 100 deep\) at column 400$"):
        parse_rules_text(deep_text, "f")
    deep_json = ('{"type": "DataRetentionRules", "rules": [{"ruleNumber": 1, "name": "x", "forever": true, '
                 '"expression": ' + '{"op": "NOT", "children": [' * 5000 + '{}' + ']}' * 5000 + '}]}')
    # JSON's parser refuses by the interpreter's recursion limit: pin it to the default a `tidekeep`
    # process runs with, since hypothesis raises it while other tests of this process run
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        with pytest.raises(InvalidInput, match=r"^f: invalid JSON: nested too deeply$"):
            parse_rules_text(deep_json, "f")
    finally:
        sys.setrecursionlimit(limit)
