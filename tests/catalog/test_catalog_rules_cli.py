"""`tidekeep catalog rules show|set|validate|export` against a SQLite workspace: the main path in
subprocesses, errors through main(argv) in the test process (test_cli.InProcess)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_catalog_records_cli import cli, fails, ok, ok_json, run_fails, run_ok

import tidekeep as tk
from helpers.cli_runner import InProcess
from tidekeep.catalog.expressions import parse

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
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert cli(ws, "init").returncode == 0
    return ws


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> InProcess:
    run = InProcess(monkeypatch, tmp_path / "ws")
    assert run("init").code == 0
    return run


def test_set_show_export_round_trip(home: Path, tmp_path: Path) -> None:
    assert ok(home, "catalog", "rules", "show").strip() == "no rules saved: every record is retained"
    empty = ok_json(home, "catalog", "rules", "show")
    assert empty == {"version": None, "updated_ms": None, "updated": None, "updated_by": None, "rules": []}

    path = tmp_path / "rules.yaml"
    path.write_text(YAML)
    text = ok(home, "catalog", "rules", "set", str(path))
    assert text.startswith("rules saved: version ") and text.rstrip().endswith(", 3 rule(s)")
    version = text.split()[3].rstrip(",")

    shown = ok_json(home, "catalog", "rules", "show")
    assert shown["version"] == version and shown["updated_by"]
    assert [(r["number"], r["name"], r["age"], r["expression"], r["active"]) for r in shown["rules"]] == [
        (1, "Keep special data", "10 Years", 'feed = "SPECIAL_DATA"', True),
        (2, "Internal logs", "3 Months", 'feed = "INTERNAL_LOGS"', True),
        (3, "Default", "Forever", "all", True),
    ]
    table = ok(home, "catalog", "rules", "show").splitlines()
    assert table[0].startswith(f"version {version}, saved ")
    assert table[1].split() == ["RULE", "NAME", "ENABLED", "AGE", "EXPRESSION"]
    assert table[2].split()[:2] == ["1", "Keep"] and "10 Years" in table[2]

    exported = tmp_path / "exported.yaml"
    exported.write_text(ok(home, "catalog", "rules", "export"))
    stroom = tmp_path / "stroom.json"
    stroom.write_text(ok(home, "catalog", "rules", "export", "--stroom"))
    document = json.loads(stroom.read_text())
    assert document["type"] == "DataRetentionRules" and document["version"] == version
    assert [(r["ruleNumber"], r["forever"]) for r in document["rules"]] == [(1, False), (2, False), (3, True)]

    # both exports load back into the same rules, under a new version each time
    again = ok_json(home, "catalog", "rules", "set", str(stroom))
    assert again["version"] != version and again["rules"] == shown["rules"]
    third = ok_json(home, "catalog", "rules", "set", str(exported))
    assert third["version"] not in {version, again["version"]} and third["rules"] == shown["rules"]
    with tk.connect(home, create=True) as client:
        assert client.catalog.rules().rules[0].expression == parse('feed = "SPECIAL_DATA"')
        assert len([e for e in client.audit("catalog") if e["action"] == "catalog_rules"]) == 3


def test_validate_changes_nothing(in_process: InProcess, tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(YAML)
    out = run_ok(in_process, "catalog", "rules", "validate", str(path))
    assert out.splitlines()[0] == f"{path}: 3 rule(s), valid"
    document = json.loads(run_ok(in_process, "catalog", "rules", "validate", str(path), "--json"))
    assert document["valid"] is True and document["version"] is None and len(document["rules"]) == 3
    with tk.connect(in_process.home, create=True) as client:
        assert client.catalog.rules().version == ""


@pytest.mark.parametrize(("content", "code", "message"), [
    ("rules: [", 2, "invalid YAML at line 1, column 9"),
    ('{"type": "DataRetentionRules", "rules": [}', 2, "invalid JSON at line 1, column 42"),
    ("rules:\n - {number: 1, name: a, expression: all, age: 0 days}", 2, "rule 1: age: amount 0 out of range"),
    ("rules:\n - {number: 1, name: a, expression: all, age: 3 eons}", 2, "rule 1: age: unknown unit 'eons'"),
    ("rules:\n - {number: 1, name: a, expression: all, age: 1d}\n - {number: 1, name: b, expression: all, age: 1d}",
     2, "rule 1: duplicate rule number 1"),
    ("rules:\n - {number: 4, name: a, expression: 'feed = \"x\" and (type = \"y\"', age: 1d}", 2,
     "rule 4: expression: unbalanced parentheses"),
    ("rules:\n - {number: 4, name: a, expression: 'colour = \"x\"', age: 1d}", 2,
     "rule 4: expression: unknown field 'colour'"),
    ("rules:\n - {number: 5, name: a, expression: 'feed in dictionary nope', age: 1d}", 2,
     "rule 5: dictionary 'nope' does not exist"),
])
def test_bad_files_fail_with_one_line_and_change_nothing(in_process: InProcess, tmp_path: Path, content: str,
                                                         code: int, message: str) -> None:
    good = tmp_path / "good.yaml"
    good.write_text(YAML)
    version = json.loads(run_ok(in_process, "catalog", "rules", "set", str(good), "--json"))["version"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    for command in ("set", "validate"):
        run_fails(in_process, code, message, "catalog", "rules", command, str(bad))
    with tk.connect(in_process.home, create=True) as client:
        assert client.catalog.rules().version == version


def test_missing_file(home: Path, tmp_path: Path) -> None:
    fails(home, 3, "does not exist", "catalog", "rules", "set", str(tmp_path / "absent.yaml"))


def test_export_of_no_rules(in_process: InProcess) -> None:
    assert run_ok(in_process, "catalog", "rules", "export").strip() == "rules: []"
    document = json.loads(run_ok(in_process, "catalog", "rules", "export", "--stroom"))
    assert document["rules"] == [] and document["version"] is None
