"""`tidekeep rg retention-cut`, `rg describe` and `retention subscribers`, run for real in subprocesses
against a SQLite workspace; data is written through the library."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import tidekeep as tk
from helpers.cli import ok_json
from helpers.cli import run_cli as cli

STREAM = "cbr/cli"
MANUAL = "MANUAL_RELEASE_AT_USER_STREAMCUT"


def fails(home: Path, code: int, message: str, *args: str) -> None:
    done = cli(home, *args)
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr, done.stderr


def write(home: Path, count: int) -> str:
    """Write `count` 10-byte events; returns the tail cut after them, compact form."""
    with tk.connect(home, create=True) as client:
        w = client.stream(STREAM).writer("w")
        w.write_many([b"x" * 2] * count)
        w.close()
        return str(client.stream(STREAM).tail_cut())


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert cli(ws, "init").returncode == 0
    with tk.connect(ws, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=1))
    return ws


def test_publish_a_manual_cut_and_see_it_in_describe_and_subscribers(home: Path) -> None:
    first = write(home, 30)
    write(home, 20)
    ok_json(home, "rg", "create", "slow", "--stream", STREAM, "--retention-type", MANUAL)
    ok_json(home, "rg", "create", "plain", "--stream", STREAM)
    before = ok_json(home, "retention", "subscribers", STREAM)
    assert [(s["reader_group"], s["retention_type"], s["acknowledged"], s["age_ms"], s["unconsumed_bytes"])
            for s in before] == [("slow", MANUAL, None, None, 500)]
    uid = tk.StreamCut.parse(first).uid  # the stream's; every cut shown carries it
    assert uid is not None and before[0]["effective"] == before[0]["start"] == f"{STREAM}:0.0=0@{uid}"

    published = ok_json(home, "rg", "retention-cut", "slow", first)
    assert published == {"reader_group": "slow", "acknowledged": {STREAM: first}}
    after = ok_json(home, "retention", "subscribers", STREAM)
    assert after[0]["acknowledged"] == first == f"{STREAM}:0.0=300@{uid}"
    assert after[0]["unconsumed_bytes"] == 200 and after[0]["age_ms"] >= 0 and after[0]["acknowledged_at"]
    described = ok_json(home, "rg", "describe", "slow")
    assert described["streams"][STREAM]["subscriber"]["acknowledged"] == first
    assert described["streams"][STREAM]["subscriber"]["unconsumed_bytes"] == 200
    assert ok_json(home, "rg", "describe", "plain")["streams"][STREAM]["subscriber"] is None

    text = cli(home, "rg", "describe", "slow")
    assert text.returncode == 0 and "ACKNOWLEDGED CUT" in text.stdout and first in text.stdout
    text = cli(home, "retention", "subscribers", STREAM)
    row = next(line for line in text.stdout.splitlines() if line.startswith("slow"))
    assert text.returncode == 0 and first in row and row.endswith("  200 B")  # UNCONSUMED, a byte count
    text = cli(home, "rg", "retention-cut", "slow", first)
    assert text.returncode == 0 and text.stdout.strip() == f"reader group slow acknowledged {first}"


def test_bad_retention_cuts_are_one_line_errors_and_change_nothing(home: Path) -> None:
    first = write(home, 30)
    ok_json(home, "rg", "create", "slow", "--stream", STREAM, "--retention-type", MANUAL)
    ok_json(home, "rg", "create", "auto", "--stream", STREAM, "--retention-type",
            "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    ok_json(home, "rg", "retention-cut", "slow", first)
    stored = ok_json(home, "retention", "subscribers", STREAM)
    fails(home, 2, "moves backwards", "rg", "retention-cut", "slow", f"{STREAM}:0.0=0")
    fails(home, 2, "has retention type AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT", "rg", "retention-cut", "auto", first)
    fails(home, 2, "malformed stream cut", "rg", "retention-cut", "slow", "not-a-cut")
    fails(home, 2, "two cuts given for stream", "rg", "retention-cut", "slow", first, first)
    fails(home, 3, "reader group 'nope' does not exist", "rg", "retention-cut", "nope", first)
    fails(home, 3, "stream 'cbr/none' does not exist", "retention", "subscribers", "cbr/none")
    def without_age(subs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{k: v for k, v in s.items() if k != "age_ms"} for s in subs]

    now = ok_json(home, "retention", "subscribers", STREAM)
    assert without_age(now) == without_age(stored)  # the same cuts, times and bytes
    assert [s["acknowledged"] for s in now] == [None, first]


def test_help(home: Path) -> None:
    for args in (("rg", "retention-cut"), ("retention", "subscribers")):
        done = cli(home, *args, "--help")
        assert done.returncode == 0 and "Usage:" in done.stdout
    assert "--json" in cli(home, "retention", "subscribers", "--help").stdout
    assert "STREAM_CUT" in cli(home, "rg", "retention-cut", "--help").stdout
