"""The `tidekeep` CLI, driven for real: `python -m tidekeep.cli.main` in a subprocess against a
workspace in tmp_path (SQLite + local storage; one test on PostgreSQL).

A subprocess costs about half a second of interpreter start-up, so independent read-only calls
run concurrently, set-up and state checks that are not the subject of a test go through the
library, and the edge cases beyond the main ones run the same entry point, `main(argv)`, inside
the test process (`in_process`) with its own stdin/stdout/stderr. The pure helpers behind
`write` and `read --json` get hypothesis property tests.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.cli_runner import InProcess, assert_one_error_line, check_ok, cli, concurrently, fails, ok
from tidekeep.cli.context import parse_set_options
from tidekeep.cli.events import decode_payload, field_key, json_key, parse_lines, payload_fields
from tidekeep.cli.output import iso_utc
from tidekeep.cli.streams import parse_range
from tidekeep.errors import ConfigError, InvalidInput, NotFound, StreamSealed, TruncatedData
from tidekeep.store.database import head_revision


def snapshot(home: Path) -> tuple[list[str], list[tuple[str, int]]]:
    """Everything a command could change: the whole metadata database and the data files."""
    with sqlite3.connect(home / "metadata.db") as conn:
        dump = list(conn.iterdump())
    data = home / "data"
    files = sorted((str(p.relative_to(data)), p.stat().st_size) for p in data.rglob("*") if p.is_file())
    return dump, files


def number_of(payload: str) -> int:
    """The sequence number a test put in a payload: "k3,17" or {"key": "k3", "i": 17}."""
    return json.loads(payload)["i"] if payload.startswith("{") else int(payload.split(",")[1])


def csv_lines(first: int, last: int) -> bytes:
    return "".join(f"k{i % 16},{i}\n" for i in range(first, last)).encode()


# ---- the scenario ------------------------------------------------------------------------------


def test_stream_scenario_through_the_cli(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    out = ok(home, "init").stdout
    assert "initialised tidekeep workspace" in out and "created" in out
    assert (home / "tidekeep.yaml").is_file() and (home / "metadata.db").is_file() and (home / "data").is_dir()

    # create, list
    assert ok(home, "stream", "create", "t/s", "--segments", "2").stdout.startswith(
        "created stream t/s with 2 segment(s): 0.0 [0.0, 0.5), 0.1 [0.5, 1.0)")
    created = ok(home, "stream", "create", "t/j", "--segments", "3", "--json").json()
    assert created["name"] == "t/j" and created["state"] == "ACTIVE"
    assert [s["segment"] for s in created["segments"]] == ["0.0", "0.1", "0.2"]
    bounds = [s["key_range"] for s in created["segments"]]
    assert bounds[0][0] == 0.0 and bounds[-1][1] == 1.0 and all(a[1] == b[0] for a, b in itertools.pairwise(bounds))

    # write from stdin (key field) and from a file (JSON key field)
    assert ok(home, "stream", "write", "t/s", "--key-field", "1", stdin=csv_lines(0, 200)).stdout == \
        "wrote 200 events to t/s\n"
    source = tmp_path / "events.jsonl"
    source.write_text("".join(json.dumps({"key": f"k{i % 16}", "i": i}) + "\n" for i in range(200, 400)))
    summary = ok(home, "stream", "write", "t/s", str(source), "--key-json", "key", "--writer-id", "file-writer",
                 "--json").json()
    assert summary["events"] == 200 and summary["writer_id"] == "file-writer"
    assert summary["logical_bytes"] == summary["payload_bytes"] + 8 * 200

    listed, text, described, read_text, read_json = concurrently(
        home, ("stream", "list", "--json", "--scope", "t"), ("stream", "describe", "t/s"),
        ("stream", "describe", "t/s", "--json"), ("stream", "read", "t/s"), ("stream", "read", "t/s", "--json"))
    assert [s["name"] for s in listed.json()] == ["t/j", "t/s"]

    # describe, text and JSON
    for expected in ("stream     t/s", "state      ACTIVE", "retention  none", "head       t/s:0.0=0,0.1=0",
                     "[0.0, 0.5)", "[0.5, 1.0)"):
        assert expected in text.stdout
    written = csv_lines(0, 200).splitlines() + source.read_bytes().splitlines()
    assert described.json()["size_bytes"] == sum(8 + len(line) for line in written)
    assert [s["segment"] for s in described.json()["segments"]] == ["0.0", "0.1"]
    assert sum(s["tail"] for s in described.json()["segments"]) == described.json()["size_bytes"]

    # read back: text is every line; --json carries key, segment, offset, time and writer
    assert sorted(read_text.stdout.splitlines()) == sorted(w.decode() for w in written)
    records = read_json.json_lines()
    assert sorted(number_of(r["payload"]) for r in records) == list(range(400))
    assert {r["writer_id"] for r in records if r["payload"].startswith("{")} == {"file-writer"}
    assert all(r["routing_key"] == f"k{number_of(r['payload']) % 16}" for r in records)
    assert all(datetime.fromisoformat(r["commit_time"]).utcoffset().total_seconds() == 0 for r in records)

    # scale, split, merge; then more writes land in the new segments
    scaled = ok(home, "stream", "scale", "t/s", "--seal", "0.1", "--range", "0.5:0.75", "--range", "0.75:1.0",
                "--json").json()
    assert scaled["sealed"] == ["0.1"] and [s["segment"] for s in scaled["new_segments"]] == ["1.2", "1.3"]
    assert "sealed 1.3; new segments 2.4 [0.75, 0.875), 2.5 [0.875, 1.0)" in ok(
        home, "stream", "split", "t/s", "1.3", "--parts", "2").stdout
    merged = ok(home, "stream", "merge", "t/s", "2.4", "2.5", "--json").json()
    assert merged["epoch"] == 3 and merged["new_segments"][0]["key_range"] == [0.75, 1.0]
    ok(home, "stream", "write", "t/s", "--key-field", "1", stdin=csv_lines(400, 600))

    read_json, head, tail, before = concurrently(
        home, ("stream", "read", "t/s", "--json"), ("stream", "head", "t/s"), ("stream", "tail", "t/s", "--json"),
        ("stream", "describe", "t/s", "--json"))
    records = read_json.json_lines()
    assert sorted(number_of(r["payload"]) for r in records) == list(range(600))
    by_key: dict[str, list[int]] = defaultdict(list)
    for r in records:
        by_key[r["routing_key"]].append(number_of(r["payload"]))
    assert len(by_key) == 16 and all(v == sorted(v) for v in by_key.values())  # per-key order across scaling
    assert {r["segment"] for r in records if number_of(r["payload"]) >= 400} == {"0.0", "1.2", "3.6"}

    # head and tail
    tail_cut = tk.StreamCut.parse(tail.stdout)
    uid = tail_cut.uid  # every cut printed carries the stream's uid
    assert uid is not None and head.stdout == f"t/s:0.0=0,0.1=0@{uid}\n"
    assert tail_cut.ranges is not None and set(tail_cut.ranges) == {0, (1 << 32) | 2, (3 << 32) | 6}
    assert str(tail_cut) == before.json()["tail"]

    # truncate at a cut built from read --json offsets: the 11th event of 0.0 and of 0.1
    offsets = {seg: sorted(r["offset"] for r in records if r["segment"] == seg) for seg in ("0.0", "0.1")}
    x, y = offsets["0.0"][10], offsets["0.1"][10]
    cut = f"t/s:0.0={x},0.1={y}"
    truncated = ok(home, "stream", "truncate", "t/s", cut, "--reason", "test cut", "--json").json()
    assert truncated["new_head"] == f"{cut}@{uid}" and truncated["old_head"] == f"t/s:0.0=0,0.1=0@{uid}"
    assert truncated["bytes_freed"] == x + y
    after, audit_json, audit_text, read_json = concurrently(
        home, ("stream", "describe", "t/s", "--json"), ("audit", "list", "--stream", "t/s", "--json"),
        ("audit", "list"), ("stream", "read", "t/s", "--json"))
    assert after.json()["head"] == f"{cut}@{uid}" and after.json()["truncated_bytes"] == x + y
    assert after.json()["size_bytes"] == before.json()["size_bytes"] - (x + y)
    entry = audit_json.json()[0]
    assert (entry["action"], entry["bytes_freed"], entry["new_head"], entry["reason"]) == (
        "truncate", x + y, cut, "test cut")
    assert f"t/s:0.0=0,0.1=0 -> {cut}" in audit_text.stdout
    kept = [r for r in records if not ((r["segment"] == "0.0" and r["offset"] < x)
                                       or (r["segment"] == "0.1" and r["offset"] < y))]
    assert read_json.json_lines() == kept

    # seal: writes are refused with StreamSealed's exit code, nothing changes
    assert ok(home, "stream", "seal", "t/s").stdout == "sealed t/s\n"
    state = snapshot(home)
    fails(home, StreamSealed.exit_code, "stream 't/s' is sealed", "stream", "write", "t/s", stdin=b"late\n")
    assert snapshot(home) == state

    # delete: a sealed stream directly; an active one only with --force
    # (an active stream without --force is refused: see test_more_bad_input_in_process)
    assert ok(home, "stream", "delete", "t/s").stdout.startswith("deleted stream t/s: ")
    assert ok(home, "stream", "delete", "t/j", "--force", "--json").json()["sealed_first"] is True
    with tk.connect(home, create=True) as client:
        assert client.list_streams() == []
        assert [e["action"] for e in client.audit("t/j")] == ["delete_stream"]
    assert [p.name for p in (home / "data").rglob("*") if p.is_file()] == ["tidekeep-workspace.json"]

    # a script keeps a cut: `truncate S "$(stream tail S)"` works on the stream it came from and is
    # refused by a stream re-created under the same name, even with the same data
    saved = {}
    for incarnation in range(2):
        ok(home, "stream", "create", "t/s", "--segments", "2")
        ok(home, "stream", "write", "t/s", "--key-field", "1", stdin=csv_lines(0, 50))
        if incarnation == 0:
            saved = {"compact": ok(home, "stream", "tail", "t/s").stdout.strip(),
                     "json": ok(home, "stream", "tail", "t/s", "--json").stdout.strip()}
            assert "truncated" in ok(home, "stream", "truncate", "t/s", saved["compact"]).stdout
            ok(home, "stream", "delete", "t/s", "--force")
    new_uid = tk.StreamCut.parse(ok(home, "stream", "head", "t/s").stdout).uid
    old_uid = tk.StreamCut.parse(saved["compact"]).uid
    assert old_uid != new_uid and tk.StreamCut.parse(saved["compact"]) == tk.StreamCut.parse(
        ok(home, "stream", "tail", "t/s").stdout)
    for form in saved.values():
        fails(home, 2, f"cut of an earlier incarnation of stream t/s (uid {old_uid}), the stream now has uid {new_uid}",
              "stream", "truncate", "t/s", form)


def test_binary_payloads_read_as_base64_in_json_and_replaced_in_text(in_process: InProcess) -> None:
    home = in_process.home
    tk.init_workspace(home)
    with tk.connect(home, create=True) as client:
        client.create_stream("b/bin")
    payloads = [b"plain", b"\xff\xfe bad utf-8", "ünïcødé".encode(), b""]
    check_ok(in_process("stream", "write", "b/bin", "-", stdin=b"\n".join(payloads) + b"\r\n"))
    records = check_ok(in_process("stream", "read", "b/bin", "--json")).json_lines()
    assert [decode_payload(r) for r in records] == payloads
    assert [r["payload_encoding"] for r in records] == ["utf-8", "base64", "utf-8", "utf-8"]
    assert check_ok(in_process("stream", "read", "b/bin", "--limit", "2")).stdout == "plain\n\ufffd\ufffd bad utf-8\n"
    assert check_ok(in_process("stream", "read", "b/bin", "--limit", "0")).stdout == ""


def test_init_is_idempotent_and_commands_need_a_workspace(in_process: InProcess) -> None:
    home = in_process.home
    assert_one_error_line(in_process("stream", "list"), NotFound.exit_code, "run 'tidekeep init' first")
    assert not home.exists()  # a mistyped home is not silently turned into a workspace
    first = check_ok(in_process("init", "--json")).json()
    assert first["created"] == ["home", "config", "database", "storage"]
    config_text = (home / "tidekeep.yaml").read_text()
    again = check_ok(in_process("init")).stdout
    assert "already initialised; nothing changed" in again
    assert (home / "tidekeep.yaml").read_text() == config_text
    assert check_ok(in_process("stream", "list")).stdout == "no streams\n"
    upgraded = check_ok(in_process("db", "upgrade", "--json")).json()
    assert upgraded["revision"] == upgraded["from_revision"] == head_revision()


def test_flags_beat_environment_and_reach_init(in_process: InProcess, tmp_path: Path) -> None:
    home = in_process.home
    flag_db, env_db = tmp_path / "flag.db", tmp_path / "env.db"
    env = {"TIDEKEEP_METADATA_URL": f"sqlite:///{env_db}"}
    report = check_ok(in_process("--metadata-url", f"sqlite:///{flag_db}", "--storage", str(tmp_path / "elsewhere"),
                                 "init", "--json", env=env)).json()
    assert report["storage"] == str(tmp_path / "elsewhere") and (tmp_path / "elsewhere").is_dir()
    assert flag_db.exists() and not env_db.exists() and not (home / "metadata.db").exists()
    check_ok(in_process("--metadata-url", f"sqlite:///{flag_db}", "--storage", str(tmp_path / "elsewhere"),
                        "--set", "writer.batch_size=1KiB", "stream", "create", "f/s", env=env))
    assert not env_db.exists()
    # the environment beats tidekeep.yaml (whose default store is <home>/metadata.db)
    listed = check_ok(in_process("stream", "list", "--json", env={"TIDEKEEP_METADATA_URL": f"sqlite:///{flag_db}",
                                                                  "TIDEKEEP_STORAGE_URI": str(tmp_path / "elsewhere")}))
    assert [s["name"] for s in listed.json()] == ["f/s"]
    # init wrote the store and storage it was given into the new tidekeep.yaml: the home alone opens them
    assert [s["name"] for s in check_ok(in_process("stream", "list", "--json")).json()] == ["f/s"]
    # the environment beats tidekeep.yaml: its store does not exist, which is an error, and creates nothing
    assert_one_error_line(in_process("stream", "list", "--json", env=env), 3,
                          f"no tidekeep workspace at sqlite:///{env_db}")
    assert not env_db.exists() and not (home / "metadata.db").exists() and not (home / "data").exists()


def test_sweep_deletes_only_old_orphans(in_process: InProcess) -> None:
    home = in_process.home
    tk.init_workspace(home)
    with tk.connect(home, settings={"writer.linger": 0}, create=True) as client:
        client.create_stream("s/w")
        with client.stream("s/w").writer("w1") as writer:
            writer.write(b"kept")
    orphan = home / "data" / "streams" / "s" / "orphan.parquet"
    orphan.write_bytes(b"not committed")
    assert check_ok(in_process("sweep", "--json")).json()["files_deleted"] == 0  # default grace 1h protects it
    assert orphan.exists()
    swept = check_ok(in_process("sweep", "--grace", "0s", "--json")).json()
    assert swept["files_deleted"] == 1 and swept["files_seen"] == 2 and not orphan.exists()
    assert check_ok(in_process("stream", "read", "s/w")).stdout == "kept\n"


@pytest.mark.postgres
def test_cli_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    home = tmp_path / "ws"
    flags = ("--metadata-url", pg_url)
    ok(home, *flags, "init")
    ok(home, *flags, "stream", "create", "pg/s", "--segments", "2")
    ok(home, *flags, "stream", "write", "pg/s", "--key-field", "1", stdin=csv_lines(0, 50))
    records = ok(home, *flags, "stream", "read", "pg/s", "--json").json_lines()
    assert sorted(number_of(r["payload"]) for r in records) == list(range(50))
    assert not (home / "metadata.db").exists()


# ---- bad input -----------------------------------------------------------------------------------


@pytest.fixture
def bad_input_workspace(tmp_path: Path) -> dict[str, str]:
    """A workspace with b/s (2 segments, 100 events, head moved past the first events) and b/other;
    returns cuts the cases need."""
    home = tmp_path / "ws"
    tk.init_workspace(home)
    with tk.connect(home, settings={"writer.linger": 0}, create=True) as client:
        client.create_stream("b/s", tk.StreamConfig(segments=2))
        with client.stream("b/s").writer("w1") as writer:
            for i in range(100):
                writer.write(f"k{i % 16},{i}".encode(), routing_key=f"k{i % 16}")
        events = list(client.stream("b/s").read())
        in_0 = [e.offset for e in events if e.segment == 0]
        in_1 = [e.offset for e in events if e.segment == 1]
        client.stream("b/s").truncate(f"b/s:0.0={in_0[5]},0.1={in_1[5]}")
        client.create_stream("b/other")
    return {"original_head": "b/s:0.0=0,0.1=0", "off_boundary": f"b/s:0.0={in_0[8] + 1},0.1={in_1[8]}"}


def test_bad_input_gives_one_error_line_and_changes_nothing(tmp_path: Path,
                                                            bad_input_workspace: dict[str, str]) -> None:
    """Bad names, counts, key ranges and stream cuts, each in a real subprocess."""
    home = tmp_path / "ws"
    cuts = bad_input_workspace
    cases: list[tuple[int, str, tuple[str, ...]]] = [
        (2, "invalid stream name 'a/b/c': expected 'scope/stream'", ("stream", "create", "a/b/c")),
        (2, "invalid scope name '..': contains '.'", ("stream", "create", "../x")),
        (2, "invalid stream name '..': contains '.'", ("stream", "create", "b/..")),
        (2, "invalid stream name '': is empty", ("stream", "create", "b/")),
        (2, "invalid stream name '': expected 'scope/stream'", ("stream", "create", "")),
        (2, "is 256 characters long (at most 255)", ("stream", "create", "b/" + "x" * 256)),
        (3, "stream 'b/nope' does not exist", ("stream", "describe", "b/nope")),
        (4, "stream 'b/s' already exists", ("stream", "create", "b/s")),
        (2, "invalid segment count 0: must be an integer >= 1", ("stream", "create", "b/new", "--segments", "0")),
        (2, "key ranges end at 0.25 but must end at 0.5",
         ("stream", "scale", "b/s", "--seal", "0.0", "--range", "0:0.25")),
        (2, "key ranges [0.0, 0.3) and [0.2, 0.5) overlap",
         ("stream", "scale", "b/s", "--seal", "0.0", "--range", "0:0.3", "--range", "0.2:0.5")),
        (2, "malformed stream cut 'garbage'", ("stream", "truncate", "b/s", "garbage")),
        (2, "bad entry '0.0=1e3'", ("stream", "truncate", "b/s", "b/s:0.0=1e3,0.1=0")),
        (2, "stream cut is for 'b/other', not 'b/s'", ("stream", "truncate", "b/s", "b/other:0.0=0")),
        (2, "is not at an event boundary", ("stream", "truncate", "b/s", cuts["off_boundary"])),
        (2, "is behind the head", ("stream", "truncate", "b/s", cuts["original_head"])),
        (TruncatedData.exit_code, "has been truncated", ("stream", "read", "b/s", "--from", cuts["original_head"])),
    ]
    before = snapshot(home)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda case: cli(home, *case[2]), cases))
    for (code, fragment, _), result in zip(cases, results, strict=True):
        assert_one_error_line(result, code, fragment)
    assert snapshot(home) == before


def test_more_bad_input_in_process(in_process: InProcess, bad_input_workspace: dict[str, str],
                                   tmp_path: Path) -> None:
    """Further edge cases through the same entry point, run in-process to save start-up time."""
    cases: list[tuple[int, str, tuple[str, ...], bytes]] = [
        (2, "invalid writer id 'a.b'", ("stream", "write", "b/s", "--writer-id", "a.b"), b"x\n"),
        (3, "scope 'nope' does not exist", ("stream", "list", "--scope", "nope"), b""),
        (3, "stream 'b/nope' does not exist", ("stream", "write", "b/nope"), b"x\n"),
        (2, "invalid number of parts 0", ("stream", "split", "b/s", "0.0", "--parts", "0"), b""),
        (2, "merge: give at least two adjacent segments", ("stream", "merge", "b/s", "0.0"), b""),
        (2, "leave the gap [0.2, 0.3)",
         ("stream", "scale", "b/s", "--seal", "0.0", "--range", "0:0.2", "--range", "0.3:0.5"), b""),
        (2, "invalid key range '0-0.5'", ("stream", "scale", "b/s", "--seal", "0.0", "--range", "0-0.5"), b""),
        (2, "malformed stream cut JSON", ("stream", "truncate", "b/s", '{"stream": "b/s"'), b""),
        (2, "segment 7.0 does not exist", ("stream", "truncate", "b/s", "b/s:7.0=0"), b""),
        (2, "stream cut is for 'b/other', not 'b/s'", ("stream", "read", "b/s", "--from", "b/other:0.0=0"), b""),
        (2, "line 3 has 1 field(s) split by ','", ("stream", "write", "b/s", "--key-field", "2"),
         b"k1,1\nk2,2\nno-key-field\n"),
        (2, "line 2 has no field 'k'", ("stream", "write", "b/s", "--key-json", "k"), b'{"k": "a"}\n{"j": 1}\n'),
        (2, "line 1 is not valid JSON", ("stream", "write", "b/s", "--key-json", "k"), b"{oops\n"),
        (2, "either --key-field or --key-json", ("stream", "write", "b/s", "--key-field", "1", "--key-json", "k"),
         b"x\n"),
        (2, "--delimiter only applies with --key-field", ("stream", "write", "b/s", "--delimiter", ";"), b"x\n"),
        (3, "input file", ("stream", "write", "b/s", str(tmp_path / "missing.txt")), b""),
        (2, "is not sealed", ("stream", "delete", "b/s"), b""),
        (2, "invalid --limit -1", ("stream", "read", "b/s", "--limit", "-1"), b""),
        (2, "invalid duration 'soon'", ("sweep", "--grace", "soon"), b""),
        (2, "invalid stream name 'a/../b'", ("audit", "list", "--stream", "a/../b"), b""),
        (2, "unknown setting 'nope' in flags", ("--set", "nope=1", "stream", "list"), b""),
        (2, "bad --set 'writer.linger'", ("--set", "writer.linger", "stream", "list"), b""),
        (2, "bad value for 'writer.batch_size' in flags", ("--set", "writer.batch_size=-1", "stream", "list"), b""),
    ]
    before = snapshot(in_process.home)
    for code, fragment, args, stdin in cases:
        assert_one_error_line(in_process(*args, stdin=stdin), code, fragment)
    assert snapshot(in_process.home) == before


def test_broken_configuration_names_the_problem(tmp_path: Path, in_process: InProcess) -> None:
    home = tmp_path / "ws"
    tk.init_workspace(home)
    config = home / "tidekeep.yaml"
    good = config.read_text()
    before = snapshot(home)

    config.write_text(good + "writer:\n  batch_size: [1\n")
    fails(home, ConfigError.exit_code, f"broken {config} at line", "stream", "list")
    config.write_text(good.replace("writer:", "writer:\n  colour: red", 1))
    fails(home, ConfigError.exit_code, "unknown setting 'writer.colour'", "stream", "list")
    config.write_text(good)
    fails(home, ConfigError.exit_code, "unknown setting in environment variable TIDEKEEP_COLOUR", "stream", "list",
          env={"TIDEKEEP_COLOUR": "red"})
    assert_one_error_line(in_process("sweep", env={"TIDEKEEP_SWEEP_GRACE": "soon"}), ConfigError.exit_code,
                          "'sweep.grace' in environment variable TIDEKEEP_SWEEP_GRACE")
    assert snapshot(home) == before


def test_usage_errors_and_help(tmp_path: Path, in_process: InProcess) -> None:
    home = tmp_path / "ws"
    result = cli(home, "stream", "frobnicate")
    assert result.code == 2 and "No such command" in result.stderr and "Traceback" not in result.stderr
    for args in (("stream", "list", "--bogus"), ("stream", "create"), ("audit", "list", "--limit", "many")):
        result = in_process(*args)
        assert result.code == 2 and "Usage:" in result.stderr and "Traceback" not in result.stderr
    help_text = check_ok(in_process("stream", "write", "--help")).stdout
    assert "--key-field" in help_text and "--key-json" in help_text and "--writer-id" in help_text
    assert not home.exists()


# ---- pure helpers --------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@given(fields=st.lists(_text.filter(lambda s: "," not in s), min_size=1, max_size=6),
       number=st.integers(min_value=1, max_value=8))
def test_field_key_picks_the_numbered_field(fields: list[str], number: int) -> None:
    line = ",".join(fields).encode()
    extract = field_key(number, ",")
    if number <= len(fields):
        assert extract(line) == fields[number - 1]
    else:
        with pytest.raises(InvalidInput, match=f"no field {number}"):
            extract(line)


@given(document=st.dictionaries(st.sampled_from(["a", "b", "key"]),
                                st.one_of(st.none(), st.booleans(), st.integers(), _text, st.lists(st.integers()))))
def test_json_key_accepts_strings_and_numbers_only(document: dict[str, Any]) -> None:
    line = json.dumps(document).encode()
    value = document.get("key", "<missing>")
    if "key" in document and isinstance(value, str):
        assert json_key("key")(line) == value
    elif "key" in document and isinstance(value, int) and not isinstance(value, bool):
        assert json_key("key")(line) == str(value)
    else:
        with pytest.raises(InvalidInput):
            json_key("key")(line)


@given(lines=st.lists(st.tuples(st.binary(max_size=20).filter(lambda b: b"\n" not in b and not b.endswith(b"\r")),
                                 st.sampled_from([b"\n", b"\r\n"])), max_size=8),
       last_unterminated=st.booleans())
def test_parse_lines_gives_one_event_per_line(lines: list[tuple[bytes, bytes]], last_unterminated: bool) -> None:
    payloads = [payload for payload, _ in lines]
    data = b"".join(payload + end for payload, end in lines)
    if last_unterminated and payloads and payloads[-1]:
        data = data[: -len(lines[-1][1])]  # a final line without a terminator is still an event
    as_read = [part + b"\n" for part in data.split(b"\n")[:-1]] + ([data.rsplit(b"\n", 1)[-1]]
                                                                  if not data.endswith(b"\n") and data else [])
    events = list(parse_lines(as_read, None))
    assert [e.payload for e in events] == payloads
    assert [e.line_number for e in events] == list(range(1, len(payloads) + 1))


@given(payload=st.binary(max_size=64))
def test_payload_json_round_trips(payload: bytes) -> None:
    fields = payload_fields(payload)
    json.dumps(fields)  # always representable
    assert decode_payload(json.loads(json.dumps(fields))) == payload
    try:
        payload.decode("utf-8")
        assert fields["payload_encoding"] == "utf-8"
    except UnicodeDecodeError:
        assert fields["payload_encoding"] == "base64"


@given(ms=st.integers(min_value=0, max_value=253_402_300_799_999))
def test_iso_utc_is_exact_to_the_millisecond(ms: int) -> None:
    text = iso_utc(ms)
    assert text is not None and text.endswith("Z")
    parsed = datetime.fromisoformat(text)
    assert parsed.utcoffset().total_seconds() == 0
    assert int(parsed.timestamp()) * 1000 + parsed.microsecond // 1000 == ms


def test_small_parsers_reject_garbage() -> None:
    assert parse_range("0.25:0.5") == (0.25, 0.5)
    for bad in ("0.5", "a:b", "0.1:inf", ":"):
        with pytest.raises(InvalidInput, match="invalid key range"):
            parse_range(bad)
    assert parse_set_options(["writer.linger=0", "a.b=x=y"]) == {"writer.linger": "0", "a.b": "x=y"}
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        parse_set_options(["=1"])
