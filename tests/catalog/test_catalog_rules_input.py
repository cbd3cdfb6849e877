"""`client.catalog.set_rules` takes what `tidekeep catalog rules set` takes — the text of a YAML or
Stroom JSON rule file, or that document as mappings — besides rule objects and a file path, with the
CLI's error messages (the source named "rules" instead of the file), and bad input saves nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_catalog_rules_store import YAML

import tidekeep as tk
from helpers.cli_runner import InProcess
from tidekeep.catalog.expressions import Operator
from tidekeep.catalog.rules import load_rules_file, to_stroom_json
from tidekeep.errors import InvalidInput

BAD_DOCUMENTS = [
    "rules: [",
    '{"type": "DataRetentionRules", "rules": [}',
    "rules:\n - {number: 1, name: a, expression: all, age: 0 days}",
    "rules:\n - {number: 1, name: a, expression: all, age: 3 eons}",
    "rules:\n - {number: 1, name: a, expression: all, age: 1d}\n - {number: 1, name: b, expression: all, age: 1d}",
    "rules:\n - {number: 4, name: a, expression: 'feed = \"x\" and (type = \"y\"', age: 1d}",
    "rules:\n - {number: 4, name: a, expression: 'colour = \"x\"', age: 1d}",
    "rules:\n - {number: 5, name: a, expression: 'feed in dictionary nope', age: 1d}",
    "rules:\n - {number: 1, name: a, expression: all, age: 1d, colour: red}",
    "rules: 7",
    "- {number: 1, name: a, expression: all, age: 1d}",
]


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> InProcess:
    """main(argv) inside this process, on an initialised workspace."""
    run = InProcess(monkeypatch, tmp_path / "ws")
    assert run("init").code == 0
    return run


def by_number(ruleset: tk.RuleSet) -> list[tk.RetentionRule]:
    return sorted(ruleset.rules, key=lambda r: r.rule_number)


def test_text_and_documents_give_the_rules_of_the_file(client: tk.Client, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(YAML)
    expected = by_number(load_rules_file(path))
    stroom = to_stroom_json(load_rules_file(path), 1_700_000_000_000)
    document = yaml.safe_load(YAML)
    versions = []
    for given in (YAML, json.dumps(stroom), json.dumps(stroom, indent=2), document, document["rules"], stroom,
                  stroom["rules"], str(path), path):
        saved = client.catalog.set_rules(given)
        assert by_number(saved) == expected and by_number(client.catalog.rules()) == expected, given
        versions.append(saved.version)
    assert len(set(versions)) == len(versions)  # each one saved, under a new version


def test_one_line_yaml_is_text_and_a_relative_path_is_a_file(client: tk.Client, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert client.catalog.set_rules("rules: []").rules == ()
    one = client.catalog.set_rules('{"rules": [{"number": 1, "name": "a", "expression": "all", "age": "1d"}]}')
    assert [r.name for r in one.rules] == ["a"]
    monkeypatch.chdir(tmp_path)
    Path("rules.yaml").write_text(YAML)
    assert len(client.catalog.set_rules("rules.yaml").rules) == 3
    with pytest.raises(tk.NotFound, match=r"rule file 'absent\.yaml' does not exist"):
        client.catalog.set_rules("absent.yaml")


@pytest.mark.parametrize("content", BAD_DOCUMENTS)
def test_bad_text_fails_as_the_cli_does_and_saves_nothing(in_process: InProcess, tmp_path: Path,
                                                         content: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    cli = in_process("catalog", "rules", "set", str(bad))
    assert cli.code == 2 and cli.stderr.startswith("error: "), cli.stderr
    said = cli.stderr.removeprefix("error: ").rstrip("\n")
    # a parse error names its source (the file there, "rules" here); a missing dictionary names none
    expected = "rules: " + said.removeprefix(f"{bad}: ") if said.startswith(f"{bad}: ") else said
    with tk.connect(in_process.home) as client:
        before = client.catalog.set_rules([tk.RetentionRule(9, "keep", True, Operator(), None)])
        with pytest.raises(InvalidInput) as raised:
            client.catalog.set_rules(content)
        assert str(raised.value) == expected
        assert client.catalog.rules() == before


@pytest.mark.parametrize(("given", "message"), [
    ({"rules": [{"number": 1, "name": "a", "expression": "all", "age": "0 days"}]},
     "rule 1: age: amount 0 out of range"),
    ([{"number": 2, "name": "a", "expression": "colour = 'x'", "age": "1d"}], "rule 2: expression: unknown field"),
    ({"rulez": []}, "rule file: unknown key 'rulez'"),
    ([tk.RetentionRule(3, "r", True, Operator(), None), {"number": 4, "name": "m", "expression": "all", "age": "1d"}],
     "expected a list of RetentionRule or a list of rule mappings, not a mix of both"),
    (tk.RetentionRule(3, "r", True, Operator(), None), "expected a rule file's text"),
    (42, "expected a rule file's text"),
    (b"rules: []", "expected a rule file's text"),
])
def test_bad_mappings_and_objects_save_nothing(client: tk.Client, given: object, message: str) -> None:
    before = client.catalog.set_rules([tk.RetentionRule(9, "keep", True, Operator(), None)])
    with pytest.raises(InvalidInput) as raised:
        client.catalog.set_rules(given)  # type: ignore[arg-type]
    assert str(raised.value).startswith(message), str(raised.value)
    assert client.catalog.rules() == before
