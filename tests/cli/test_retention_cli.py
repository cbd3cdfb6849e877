"""`tidekeep retention preview|run|history`, `stream create --retention-*` and `stream policy`, run
for real in subprocesses against a SQLite workspace; data is written through the library."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import tidekeep as tk
from helpers.cli import ok_json
from helpers.cli import run_cli as cli
from tidekeep.streams.model import segment_id

STREAM = "ret/cli"
FAST = ("--set", "retention.frequency=1ms")  # every cycle records the tail


def write(home: Path, count: int) -> None:
    with tk.connect(home, create=True) as client:
        w = client.stream(STREAM).writer("w")
        w.write_many([b"x" * 2] * count)  # 10-byte events
        w.close()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert cli(ws, "init").returncode == 0
    return ws


def test_policy_preview_run_history(home: Path) -> None:
    created = ok_json(home, "stream", "create", STREAM, "--retention-size", "100:300")
    assert created["retention"] == "by size: keep at least 100 B and at most 300 B"
    write(home, 30)
    first = ok_json(home, *FAST, "retention", "run", STREAM)
    assert first["rule"] == "no-cmin" and first["recorded"]["recording_size"] == 300 and first["cut"] is None
    write(home, 30)
    # decided a second after now, explicitly: the tail is due for recording whatever the machine's speed
    preview = ok_json(home, *FAST, "retention", "preview", STREAM, "--at", "+1s")
    assert preview["dry_run"] and preview["rule"] == "above-max" and preview["cut"] == {"0.0": 300}
    assert preview["freed_bytes"] == 300 and preview["retained"] == 300
    assert [r["retained"] for r in preview["records"]] == [300, 0]  # the recorded cut and the would-be tail
    with tk.connect(home, create=True) as client:
        assert client.stream(STREAM).head_cut().positions == {segment_id(0, 0): 0}  # the preview changed nothing
        assert len(client.stream(STREAM).retention.records()) == 1
    run = ok_json(home, *FAST, "retention", "run", STREAM)
    assert (run["dry_run"], run["rule"], run["cut"], run["freed_bytes"]) == (False, "above-max", {"0.0": 300}, 300)
    history = ok_json(home, "retention", "history", STREAM)
    assert len(history) == 1 and history[0]["bytes_freed"] == 300
    assert history[0]["new_head"] == f"{STREAM}:0.0=300" and history[0]["reason"].startswith("retention above-max")
    text = cli(home, "retention", "preview", STREAM, "--at", "+2h")
    assert text.returncode == 0 and "rule" in text.stdout and "Cmin" in text.stdout and "retention set:" in text.stdout

    assert cli(home, "stream", "policy", STREAM, "--time", "1h:2h").stdout.strip() == (
        f"{STREAM}: retention by time: keep at least 1h and at most 2h")
    assert cli(home, "stream", "policy", STREAM, "--none").returncode == 0
    stopped = ok_json(home, *FAST, "retention", "run", STREAM)
    assert stopped["rule"] == "no-policy" and stopped["cut"] is None
    assert ok_json(home, "stream", "describe", STREAM)["retention"] is None


@pytest.mark.parametrize(("args", "message"), [
    (("stream", "create", "ret/new", "--retention-size", "300:100"), "max 100 B is less than min 300 B"),
    (("stream", "create", "ret/new", "--retention-time", "2h:1h"), "max 1h is less than min 2h"),
    (("stream", "create", "ret/new", "--retention-size", "-5"), "invalid size '-5'"),
    (("stream", "create", "ret/new", "--retention-size", "10parsecs"), "unknown unit 'parsecs'"),
    (("stream", "create", "ret/new", "--retention-size", "1GB", "--retention-time", "1d"), "only one retention"),
    (("stream", "policy", "ret/nope", "--size", "1GB"), "stream 'ret/nope' does not exist"),
    (("stream", "policy", STREAM, "--size", "5:"), "expected MIN or MIN:MAX"),
    (("stream", "policy", STREAM, "--size", "1GB", "--none"), "only one retention"),
    (("stream", "policy", STREAM), "give one of --size"),
    (("retention", "preview", STREAM, "--at", "yesterday-ish"), "invalid --at 'yesterday-ish'"),
    (("retention", "run", "ret/nope"), "stream 'ret/nope' does not exist"),
])
def test_bad_input_is_one_line_and_changes_nothing(home: Path, args: tuple[str, ...], message: str) -> None:
    assert cli(home, "stream", "create", STREAM, "--retention-size", "10").returncode == 0
    done = cli(home, *args)
    assert done.returncode != 0 and done.stdout == ""
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
    with ThreadPoolExecutor(2) as pool:
        listed, described = pool.map(lambda a: ok_json(home, *a), [("stream", "list"), ("stream", "describe", STREAM)])
    assert [s["name"] for s in listed] == [STREAM]  # nothing created
    assert described["retention"] == "by size: keep at least 10 B (no maximum)"  # policy unchanged
    with tk.connect(home, create=True) as client:
        assert client.stream(STREAM).retention.records() == []
