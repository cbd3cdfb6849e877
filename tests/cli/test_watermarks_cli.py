"""`tidekeep watermark list|writers|compute|note` and `stream create --timestamp-aggregation-timeout`,
run for real in subprocesses against one SQLite workspace (each test on its own streams); events are
written and most times noted through the library, which shares the workspace's store. Every CLI call
starts a Python process (about a second of CPU), so independent calls run a few at a time."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.cli import ok_json
from helpers.cli import run_cli as cli
from tidekeep.errors import NotFound
from tidekeep.store.schema_watermarks import watermarks as wm_table
from tidekeep.streams.model import segment_id
from tidekeep.streams.watermarks import Watermark

S0, S1 = segment_id(0, 0), segment_id(0, 1)
Done = subprocess.CompletedProcess[str]


def check_fails(done: Done, code: int, message: str) -> None:
    """The command exited `code` with a one-line error naming `message` and printed nothing else."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
    assert message in done.stderr, done.stderr
    assert done.stdout == "", done.stdout


def run_all(home: Path, *commands: Sequence[str]) -> list[Done]:
    """Run independent commands concurrently (results in order); 120 columns so help is not cut."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        return list(pool.map(lambda args: cli(home, *args, env={"COLUMNS": "120"}), commands))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One workspace for the module (`init` is a subprocess too); every test makes its own streams."""
    ws = tmp_path_factory.mktemp("wm-cli") / "ws"
    assert cli(ws, "init").returncode == 0
    return ws


def make(home: Path, stream: str, segments: int = 2) -> str:
    with tk.connect(home, create=True) as client:
        client.create_stream(stream, tk.StreamConfig(segments=segments))
    return stream


def write(client: tk.Client, stream: str, writer_id: str, count: int) -> tk.Writer:
    """A writer that has committed `count` events spread over both segments of `stream`."""
    writer = client.stream(stream).writer(writer_id)
    writer.write_many([f"{writer_id}-{i}".encode() for i in range(count)], [f"key-{i}" for i in range(count)])
    return writer


def test_compute_emits_or_explains_and_writers_show_their_state(home: Path) -> None:
    stream = make(home, "wm/compute")
    empty_writers, empty_compute = run_all(home, ["watermark", "writers", stream, "--json"],
                                           ["watermark", "compute", stream])
    assert empty_writers.returncode == 0 and empty_writers.stdout.strip() == "[]"
    assert empty_compute.returncode == 0 and empty_compute.stdout.strip() == (
        f"no new watermark for {stream}: no writer has a mark")

    with tk.connect(home, create=True) as client:
        slow, fast = write(client, stream, "slow", 20), write(client, stream, "fast", 10)
        slow.note_time(1_000)
        fast.note_time(1_500)
        end = dict(client.stream(stream).tail_cut().positions)
        first = ok_json(home, "watermark", "compute", stream)
        assert first == {"emitted": True, "writers": [], "watermark": {
            "revision": 0, "lower_time_ms": 1_000, "upper_time_ms": 1_500, "cut": {"0.0": end[S0], "0.1": end[S1]}}}
        assert client.stream(stream).watermarks.latest() == Watermark(0, 1_000, 1_500, end)

        # slow has not noted past the watermark's lower time 1000 and has not timed out (60 s): it holds
        # the next watermark back, and compute says so, naming it
        fast.note_time(1_700)
        explained, text, listed, table = run_all(
            home, ["watermark", "compute", stream, "--json"], ["watermark", "compute", stream],
            ["watermark", "writers", stream, "--json"], ["watermark", "writers", stream])
        assert client.stream(stream).watermarks.latest().revision == 0  # type: ignore[union-attr]
        for done in (explained, text, listed, table):
            assert done.returncode == 0 and done.stderr == "", done.stderr
        explained_json = json.loads(explained.stdout)
        assert explained_json["emitted"] is False and explained_json["watermark"] is None
        states = {w["writer_id"]: (w["active"], w["participating"], w["state"], w["time_ms"], w["source"])
                  for w in explained_json["writers"]}
        assert states == {"slow": (True, False, "lagging: holds watermarks back", 1_000, "note"),
                          "fast": (True, True, "participating", 1_700, "note")}
        assert text.stdout.strip() == (
            f"no new watermark for {stream}: waiting for slow to note past the last watermark or time out")

        writers = json.loads(listed.stdout)
        assert [(w["writer_id"], w["active"], w["participating"], w["state"]) for w in writers] == [
            ("fast", True, True, "participating"), ("slow", True, False, "lagging: holds watermarks back")]
        slow_mark = next(m for m in client.stream(stream).watermarks.marks() if m.writer_id == "slow")
        assert writers[1]["positions"] == {"0.0": slow_mark.positions[S0], "0.1": slow_mark.positions[S1]}
        assert writers[1]["noted_ms"] == slow_mark.noted_ms and writers[1]["noted_at"].endswith("Z")
        rows = table.stdout.splitlines()
        assert rows[0].split() == ["WRITER", "TIME", "POSITION", "SOURCE", "NOTED", "ACTIVE", "STATE"]
        assert rows[1].split()[:2] == ["fast", "1700"] and rows[1].split()[-2:] == ["yes", "participating"]
        assert rows[2].split()[:2] == ["slow", "1000"] and rows[2].split()[5] == "yes"
        assert rows[2].rstrip().endswith("lagging: holds watermarks back")

        slow.note_time(1_600)  # past 1000: every writer participates, the lower time advances to 1600
        fast.note_time(1_800)
        text = cli(home, "watermark", "compute", stream)
        assert text.returncode == 0 and text.stdout.strip() == (
            f"appended watermark 1 of {stream}: lower 1600, upper 1800, cut 0.0={end[S0]},0.1={end[S1]}")
        assert client.stream(stream).watermarks.latest() == Watermark(1, 1_600, 1_800, end)
        assert {r.owner for r in stored_owners(client, stream)} == {"cli"}
        # a closed writer no longer holds watermarks back: fast alone sets the next lower time, and once
        # that watermark is appended the closed writer is gone from the list
        slow.close()
        fast.note_time(1_900)
        closed = ok_json(home, "watermark", "compute", stream)
        assert (closed["watermark"]["revision"], closed["watermark"]["lower_time_ms"]) == (2, 1_900)
        assert [w.mark.writer_id for w in client.stream(stream).watermarks.writers()] == ["fast"]
        fast.close()


def stored_owners(client: tk.Client, stream: str) -> list[Any]:
    """The owner column of the stream's watermark rows (the CLI appends as "cli")."""
    state = client.stream(stream).state()
    with client.workspace.db.read() as conn:
        return list(conn.execute(sa.select(wm_table.c.owner).where(wm_table.c.stream_id == state.stream_id)))


def test_list_text_json_limit_all(home: Path) -> None:
    stream = make(home, "wm/list")
    empty_json, empty_text = run_all(home, ["watermark", "list", stream, "--json"], ["watermark", "list", stream])
    assert empty_json.returncode == 0 and json.loads(empty_json.stdout) == []
    assert empty_text.returncode == 0 and empty_text.stdout.strip() == (
        f"{stream} has no watermarks yet (no writer has noted time, or `tidekeep serve` has not run)")
    with tk.connect(home, create=True) as client:
        writer = client.stream(stream).writer("w")
        for i in range(23):  # more than list's default of 20
            writer.write(f"event {i}".encode(), routing_key=f"k{i}")
            writer.note_time(100 * (i + 1))
            assert client.stream(stream).watermarks.compute(owner="test") is not None
        cuts = [m.to_dict()["cut"] for m in client.stream(stream).watermarks.list()]
        writer.close()
    assert cuts[0] != cuts[-1]
    newest, every, two, two_text, zero = run_all(
        home, ["watermark", "list", stream, "--json"], ["watermark", "list", stream, "--all", "--json"],
        ["watermark", "list", stream, "--limit", "2", "--json"], ["watermark", "list", stream, "--limit", "2"],
        ["watermark", "list", stream, "--limit", "0"])
    newest_json = json.loads(newest.stdout)
    assert [m["revision"] for m in newest_json] == list(range(3, 23))  # the newest 20, oldest first
    assert [(m["lower_time_ms"], m["upper_time_ms"]) for m in newest_json] == [
        (100 * (r + 1), 100 * (r + 1)) for r in range(3, 23)]
    assert [m["cut"] for m in newest_json] == cuts[3:]
    every_json = json.loads(every.stdout)
    assert [m["revision"] for m in every_json] == list(range(23)) and [m["cut"] for m in every_json] == cuts
    assert [m["revision"] for m in json.loads(two.stdout)] == [21, 22]

    lines = two_text.stdout.splitlines()
    assert lines[0].split() == ["REVISION", "LOWER", "UPPER", "CUT"] and len(lines) == 3
    for line, revision in zip(lines[1:], (21, 22), strict=True):
        cut_text = ",".join(f"{name}={offset}" for name, offset in cuts[revision].items())
        assert line.split() == [str(revision), str(100 * (revision + 1)), str(100 * (revision + 1)), cut_text]
    assert zero.returncode == 2 and "--limit" in zero.stderr and zero.stdout == ""


def test_note_with_positions_and_bad_notes(home: Path) -> None:
    stream, other = make(home, "wm/note"), make(home, "wm/note-other", segments=1)
    with tk.connect(home, create=True) as client:
        write(client, stream, "w", 12).close()
        end = dict(client.stream(stream).tail_cut().positions)
        assert end[S0] > 0 and end[S1] > 0
        position = f"{stream}:0.0={end[S0]},0.1=0"
        noted, text = run_all(home, ["watermark", "note", stream, "100", "--writer", "ext", "--position", position,
                                     "--json"],
                              # without --position: after the writer's last committed events, as stored
                              ["watermark", "note", stream, "7", "--writer", "w"])
        assert noted.returncode == 0 and noted.stderr == "", noted.stderr
        mark = json.loads(noted.stdout)
        assert (mark["writer_id"], mark["time_ms"], mark["positions"]) == ("ext", 100, {"0.0": end[S0], "0.1": 0})
        assert text.returncode == 0 and text.stdout.strip() == (
            f"noted w at time 7, position 0.0={end[S0]},0.1={end[S1]}")
        marks = {m.writer_id: (m.time_ms, m.positions) for m in client.stream(stream).watermarks.marks()}
        assert marks == {"ext": (100, {S0: end[S0], S1: 0}), "w": (7, {S0: end[S0], S1: end[S1]})}

        other_cut, backwards, moved_back = run_all(
            home, ["watermark", "note", stream, "200", "--writer", "ext2", "--position", f"{other}:0.0=0"],
            ["watermark", "note", stream, "99", "--writer", "ext", "--position", position],
            ["watermark", "note", stream, "300", "--writer", "ext", "--position", f"{stream}:0.0=0,0.1=0"])
        check_fails(other_cut, 2, f"position is for stream '{other}', not '{stream}'")
        check_fails(backwards, 2, "writer ext: time went backwards from 100 to 99 ms")
        check_fails(moved_back, 2, f"writer ext: position in segment 0.0 went backwards from {end[S0]} to 0")
        # nothing recorded by any refused note
        assert {m.writer_id: (m.time_ms, m.positions) for m in client.stream(stream).watermarks.marks()} == marks
        assert client.stream(other).watermarks.marks() == []


def test_note_takes_iso_8601_or_epoch_ms_and_refuses_other_text(home: Path) -> None:
    stream = make(home, "wm/note-iso")
    iso, bad, before_epoch = run_all(
        home, ["watermark", "note", stream, "2024-06-01T14:00:00.250+02:00", "--writer", "a", "--json"],
        ["watermark", "note", stream, "yesterday", "--writer", "b"],
        ["watermark", "note", stream, "1969-12-31T23:00:00Z", "--writer", "b"])
    assert iso.returncode == 0 and json.loads(iso.stdout)["time_ms"] == 1_717_243_200_250, iso.stderr
    later = cli(home, "watermark", "note", stream, "1717243200251", "--writer", "a")  # a's time only grows
    assert later.returncode == 0 and "at time 1717243200251" in later.stdout, later.stderr
    check_fails(bad, 2, "invalid time 'yesterday': expected epoch milliseconds or an ISO-8601 time")
    check_fails(before_epoch, 2, "invalid time '1969-12-31T23:00:00Z': before 1970-01-01T00:00:00Z")
    with tk.connect(home) as client:
        marks = client.stream(stream).watermarks.marks()
        assert [(m.writer_id, m.time_ms) for m in marks] == [("a", 1_717_243_200_251)]


def test_unknown_stream_help_and_stream_create_timeout(home: Path) -> None:
    checks: list[tuple[list[str], Callable[[Done], None]]] = []
    for args in (["list", "wm/nope"], ["writers", "wm/nope"], ["compute", "wm/nope"],
                 ["note", "wm/nope", "1", "--writer", "w"]):
        checks.append((["watermark", *args], lambda done: check_fails(done, 3, "wm/nope")))

    def helped(command: list[str], words: list[str]) -> Callable[[Done], None]:
        def check(done: Done) -> None:
            assert done.returncode == 0 and done.stderr == "", done.stderr
            assert f"Usage: tidekeep {' '.join(command)}" in done.stdout, done.stdout
            for word in words:
                assert word in done.stdout, (command, word, done.stdout)
        return check

    for command, words in [(["watermark", "list"], ["--limit", "--all", "--json"]),
                           (["watermark", "writers"], ["lagging", "inactive", "--json"]),
                           (["watermark", "compute"], ["conditional", "--json"]),
                           (["watermark", "note"], ["--writer", "--position", "TIME", "ISO-8601", "--json"]),
                           (["stream", "create"], ["--timestamp-aggregation-timeout"])]:
        checks.append(([*command, "--help"], helped(command, words)))

    def created(done: Done) -> None:
        assert done.returncode == 0 and done.stderr == "", done.stderr

    def created_five(done: Done) -> None:
        created(done)
        assert json.loads(done.stdout)["timestamp_aggregation_timeout_ms"] == 5_000

    checks.append((["stream", "create", "wm/bad", "--timestamp-aggregation-timeout", "-5s"],
                   lambda done: check_fails(done, 2, "invalid duration '-5s'")))
    checks.append((["stream", "create", "wm/five", "--timestamp-aggregation-timeout", "5s", "--json"], created_five))
    checks.append((["stream", "create", "wm/default"], created))
    checks.append((["stream", "create", "wm/zero", "--timestamp-aggregation-timeout", "0s"], created))
    for (args, check), done in zip(checks, run_all(home, *[a for a, _ in checks]), strict=True):
        try:
            check(done)
        except AssertionError as exc:
            raise AssertionError(f"tidekeep {' '.join(args)}: {exc}") from exc

    with tk.connect(home, create=True) as client:
        timeouts = {name: client.stream(name).state().info.config.timestamp_aggregation_timeout_ms
                    for name in ("wm/five", "wm/default", "wm/zero")}
        assert timeouts == {"wm/five": 5_000, "wm/default": 60_000, "wm/zero": 0}
        with pytest.raises(NotFound):
            client.stream("wm/bad").state()
        # with a zero timeout, a writer that has not noted past the watermark is out at once
        writer = client.stream("wm/zero").writer("w")
        writer.note_time(10)
        assert client.stream("wm/zero").watermarks.compute() is not None
        listed, text = run_all(home, ["watermark", "writers", "wm/zero", "--json"], ["watermark", "compute", "wm/zero"])
        assert [(w["active"], w["participating"], w["state"]) for w in json.loads(listed.stdout)] == [
            (False, False, "inactive: timed out, rejoins on its next note")]
        assert text.stdout.strip() == ("no new watermark for wm/zero: no writer counts for time (every one timed "
                                       "out or closed)")
        writer.close()
    described, as_json = run_all(home, ["stream", "describe", "wm/five"], ["stream", "describe", "wm/five", "--json"])
    assert "watermark  a writer stops holding it back 5s after its last note" in described.stdout, described.stdout
    assert json.loads(as_json.stdout)["timestamp_aggregation_timeout_ms"] == 5_000
