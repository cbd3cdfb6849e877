"""Output cannot be forged: control characters in text users supplied (reasons, names, attribute values,
payloads, paths echoed by errors) are escaped in human output, and `--json` keeps the exact text.

The CLI runs in the test process through its entry point, main(argv), with its own standard streams,
against a real SQLite workspace in tmp_path.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import tidekeep as tk
from helpers.cli_runner import InProcess, Result

# a newline that starts a fake audit line, ESC sequences that clear the screen and colour text, a
# carriage return, DEL, a C1 control (CSI), the line separator and a right-to-left override
FORGED = ("ok)\n2026-01-01T00:00:00.000Z  truncate  x/y  freed 0 bytes  by root  (\x1b[2Jcleared"
          "\rover\x7fdel\x9bcsi\u2028sep\u202eevil\x1b[31m")
RAW_CONTROLS = ["\n", "\r", "\x1b", "\x7f", "\x9b", "\u2028", "\u202e"]
ESCAPED = ["\\n", "\\r", "\\x1b", "\\x7f", "\\x9b", "\\u2028", "\\u202e"]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def run(monkeypatch: pytest.MonkeyPatch, home: Path) -> InProcess:
    return InProcess(monkeypatch, home)


def ok(result: Result) -> Result:
    assert result.code == 0 and result.stderr == "", result.stderr
    return result


def assert_no_raw_controls(text: str) -> None:
    """Nothing a terminal would act on, apart from the line ends between lines."""
    for char in RAW_CONTROLS[1:]:
        assert char not in text, f"raw {char!r} in output:\n{text!r}"


def assert_escaped(line: str) -> None:
    for escaped in ESCAPED:
        assert escaped in line, f"{escaped} missing from {line!r}"


def test_a_forged_truncation_reason_stays_on_its_audit_line(run: Any, home: Path) -> None:
    ok(run("init"))
    ok(run("stream", "create", "t/s"))
    with tk.connect(home) as client, client.stream("t/s").writer("w") as writer:
        for i in range(3):
            writer.write(f"event {i}".encode(), "k")
    tail = ok(run("stream", "tail", "t/s")).stdout.strip()
    ok(run("stream", "truncate", "t/s", tail, "--reason", FORGED))

    text = ok(run("audit", "list")).stdout
    lines = text.splitlines()
    # one entry: its line and its head line, nothing more, whatever the reason says
    assert len(lines) == 2, text
    assert lines[0].startswith(("20", "19")) and " truncate  t/s  freed " in lines[0]
    assert lines[1].startswith("    head t/s:0.0=0 -> t/s:0.0=")
    assert_escaped(lines[0])
    assert_no_raw_controls(text)

    entries = ok(run("audit", "list", "--json")).json()
    assert [e["reason"] for e in entries] == [FORGED]


def test_names_and_reasons_in_tables_and_fields_are_escaped(run: Any, home: Path, tmp_path: Path) -> None:
    ok(run("init"))
    ok(run("stream", "create", "t/s"))
    # a hold reason in `hold add` (a sentence) and `hold list` (a table); holds keep a reason on one
    # line by collapsing its whitespace, so the other controls are what is left to escape
    stored = " ".join(FORGED.split())
    added = ok(run("hold", "add", "stream", "t/s", "--reason", FORGED)).stdout
    listed = ok(run("hold", "list")).stdout
    assert added.count("\n") == 1 and len(listed.splitlines()) == 2, added + listed
    for text in (added, listed.splitlines()[1]):
        for escaped in ("\\x1b[2J", "\\x7f", "\\x9b", "\\u202e", "\\x1b[31m"):
            assert escaped in text, f"{escaped} missing from {text!r}"
        assert_no_raw_controls(text)
    assert [h["reason"] for h in ok(run("hold", "list", "--json")).json()] == [stored]

    # catalog record fields and attributes in `catalog list` (a table) and `catalog show` (fields)
    record = {"feed": "FEED\x1b[31m", "type": "Raw\nEvents", "create_time": "2024-01-01T00:00:00Z",
              "location": "in\u202ebox/x.dat", "attributes": {"owner": "ops\r\x1b[2K"}}
    record_id = ok(run("catalog", "add", json.dumps(record), "--json")).json()["ids"][0]
    table = ok(run("catalog", "list")).stdout
    assert len(table.splitlines()) == 2, table
    row = table.splitlines()[1]
    assert "FEED\\x1b[31m" in row and "Raw\\nEvents" in row and "in\\u202ebox/x.dat" in row
    shown = ok(run("catalog", "show", str(record_id))).stdout
    assert "ops\\r\\x1b[2K" in shown and "Raw\\nEvents" in shown
    for text in (table, shown):
        assert_no_raw_controls(text)
    exact = ok(run("catalog", "show", str(record_id), "--json")).json()
    assert (exact["feed"], exact["type"], exact["location"]) == (record["feed"], record["type"], record["location"])
    assert exact["attributes"] == record["attributes"]

    # a rule name in a rule file's table (`catalog rules validate`)
    rules = tmp_path / "rules.yaml"
    rules.write_text('rules:\n  - number: 1\n    name: "a\\u202eb\\x1bc\\nd"\n    expression: "feed = \\"q\\""\n'
                     "    age: 1d\n", encoding="utf-8")
    validated = ok(run("catalog", "rules", "validate", str(rules))).stdout
    assert len(validated.splitlines()) == 3, validated
    assert "a\\u202eb\\x1bc\\nd" in validated.splitlines()[2]
    assert_no_raw_controls(validated)


def test_rich_markup_in_user_text_prints_as_written(run: Any, home: Path) -> None:
    ok(run("init"))
    ok(run("stream", "create", "t/s"))
    reason = "[bold red]urgent[/bold red] [link=http://x]click[/link]"
    assert reason in ok(run("hold", "add", "stream", "t/s", "--reason", reason)).stdout
    assert reason in ok(run("hold", "list")).stdout
    # Typer's own error box (rich) echoes an unknown command: markup and controls show as written
    usage = run("stream", "[bold]x[/bold]\x1b[2J")
    assert usage.code == 2 and "[bold]x[/bold]" in usage.stderr
    assert "\x1b" not in usage.stderr


def test_event_payloads_print_one_line_per_event(run: Any, home: Path) -> None:
    ok(run("init"))
    ok(run("stream", "create", "t/s"))
    payloads = [FORGED.encode(), b"plain", b"tab\there", b"bad utf-8 \xff\x1b[2J"]
    with tk.connect(home) as client, client.stream("t/s").writer("w") as writer:
        for payload in payloads:
            writer.write(payload, "k")
    text = ok(run("stream", "read", "t/s")).stdout
    lines = text.split("\n")
    assert lines[-1] == "" and len(lines) == len(payloads) + 1, text
    assert_escaped(lines[0])
    assert lines[1:4] == ["plain", "tab\\there", "bad utf-8 \ufffd\\x1b[2J"]
    assert_no_raw_controls(text)
    assert "\t" not in text

    records = [json.loads(line) for line in ok(run("stream", "read", "t/s", "--json")).stdout.splitlines()]
    assert [r["payload"] for r in records[:3]] == [p.decode() for p in payloads[:3]]


def test_an_error_echoing_input_is_one_escaped_line(run: Any, home: Path, tmp_path: Path) -> None:
    # the rule file's path is echoed by the error: a newline and ESC in it must not reach the terminal
    ok(run("init"))
    bad = tmp_path / "x\x1b[31m\nerror: fake\u202e.yaml"
    bad.write_text("rules: [1\n", encoding="utf-8")
    result = run("catalog", "rules", "validate", str(bad))
    assert result.code != 0 and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "x\\x1b[31m" in lines[0] and "\\u202e.yaml" in lines[0]
    assert_no_raw_controls(result.stderr)
