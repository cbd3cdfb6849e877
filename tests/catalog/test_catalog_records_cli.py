"""`tidekeep catalog add|import|generate|list|show` and `tidekeep catalog dict ...` against a SQLite
workspace (one run on PostgreSQL): the main paths in subprocesses, the rest through the same entry
point, main(argv), inside the test process (test_cli.InProcess), where `import` uses the session's
Spark instead of starting a JVM per command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

import tidekeep as tk
from helpers.cli import run_cli
from helpers.cli_runner import InProcess

T0 = 1_704_067_200_000  # 2024-01-01T00:00:00Z


def cli(home: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(home, *args, env=env, timeout=300)  # imports start Spark


def ok(home: Path, *args: str, clean_stderr: bool = True) -> str:
    done = cli(home, *args)
    assert done.returncode == 0, f"{args}: exit {done.returncode}\n{done.stderr}"
    if clean_stderr:
        assert done.stderr == "", done.stderr
    return done.stdout


def ok_json(home: Path, *args: str) -> Any:
    return json.loads(ok(home, *args, "--json"))


def fails(home: Path, code: int, fragment: str, *args: str) -> None:
    done = cli(home, *args)
    assert done.returncode == code, f"{args}: exit {done.returncode}, wanted {code}\n{done.stderr}"
    lines = done.stderr.splitlines()
    assert lines and lines[-1].startswith("error: ") and fragment in lines[-1], done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    assert cli(ws, "init").returncode == 0
    return ws


def test_add_list_show(home: Path, tmp_path: Path) -> None:
    added = ok_json(home, "catalog", "add",
                    '{"feed":"INTERNAL_LOGS","type":"Raw Events","create_time":"2024-01-01T00:00:00Z","file_size":5}',
                    '[{"feed":"SPECIAL_DATA","type":"Events","create_time":1704067200000,"attr.owner":"ops"}]')
    assert len(added["ids"]) == 2
    lines = tmp_path / "more.jsonl"
    lines.write_text('{"id": 50, "feed": "APP_1_EVENTS", "type": "Error", "create_time": 1, "status": "LOCKED"}\n\n')
    assert ok(home, "catalog", "add", "--file", str(lines)) == "added 1 record(s): 50\n"

    listed = ok_json(home, "catalog", "list")
    assert [r["feed"] for r in listed] == ["INTERNAL_LOGS", "SPECIAL_DATA", "APP_1_EVENTS"]
    assert listed[0]["create_iso"] == "2024-01-01T00:00:00.000Z" and listed[1]["attributes"] == {"owner": "ops"}
    assert [r["id"] for r in ok_json(home, "catalog", "list", "--status", "locked")] == [50]
    assert [r["feed"] for r in ok_json(home, "catalog", "list", "--type", "Events", "--limit", "5")] == ["SPECIAL_DATA"]
    text = ok(home, "catalog", "list", "--feed", "INTERNAL_LOGS").splitlines()
    assert text[0].split() == ["ID", "FEED", "TYPE", "CREATED", "STATUS", "FILE", "SIZE", "LOCATION"]
    assert "INTERNAL_LOGS  Raw Events  2024-01-01T00:00:00.000Z  UNLOCKED" in text[1]
    assert ok(home, "catalog", "list", "--feed", "NONE") == "no records\n"

    shown = ok_json(home, "catalog", "show", str(added["ids"][1]))
    assert (shown["feed"], shown["status"], shown["attributes"]) == ("SPECIAL_DATA", "UNLOCKED", {"owner": "ops"})
    text = ok(home, "catalog", "show", str(added["ids"][1]))
    assert "attributes      owner=ops" in text and "status time     2024-01-01T00:00:00.000Z" in text


def run_ok(run: InProcess, *args: str) -> str:
    result = run(*args)
    assert result.code == 0 and result.stderr == "", f"{args}: exit {result.code}\n{result.stderr}"
    return result.stdout


def run_fails(run: InProcess, code: int, fragment: str, *args: str) -> None:
    result = run(*args)
    assert result.code == code, f"{args}: exit {result.code}, wanted {code}\n{result.stderr}"
    assert result.stderr.startswith("error: ") and len(result.stderr.splitlines()) == 1, result.stderr
    assert fragment in result.stderr and result.stdout == "", result.stderr


def test_add_and_show_errors_change_nothing(in_process: InProcess) -> None:
    home = in_process.home
    assert in_process("init").code == 0
    run_ok(in_process, "catalog", "add", '{"feed":"A","type":"T","create_time":1}')
    fails = run_fails
    run = in_process
    fails(run, 2, "record 2: field 'create_time' is not a time", "catalog", "add",
          '{"feed":"A","type":"T","create_time":1}', '{"feed":"B","type":"T","create_time":"soon"}')
    fails(run, 2, "argument 1: not JSON", "catalog", "add", "{feed")
    fails(run, 2, "no records given", "catalog", "add")
    fails(run, 4, "record id 1 already exists", "catalog", "add", '{"id":1,"feed":"A","type":"T","create_time":1}')
    fails(run, 3, "record 99 does not exist", "catalog", "show", "99")
    fails(run, 2, "invalid status 'GONE'", "catalog", "list", "--status", "GONE")
    with tk.connect(home, create=True) as client:
        assert client.catalog.count() == 1


def test_dictionaries(in_process: InProcess, tmp_path: Path) -> None:
    run = in_process
    assert run("init").code == 0
    assert run_ok(run, "catalog", "dict", "list") == "no dictionaries\n"
    assert run_ok(run, "catalog", "dict", "set", "feeds", "A", " B ", "A") == "dictionary feeds: 2 word(s)\n"
    words = tmp_path / "words.txt"
    words.write_text("x\n\n y\n")
    assert json.loads(run_ok(run, "catalog", "dict", "set", "types", "--file", str(words), "--json")) == {
        "name": "types", "words": ["x", "y"]}
    assert run_ok(run, "catalog", "dict", "show", "feeds") == "A\nB\n"
    assert json.loads(run_ok(run, "catalog", "dict", "list", "--json")) == {"feeds": ["A", "B"], "types": ["x", "y"]}
    assert run_ok(run, "catalog", "dict", "list").splitlines() == ["NAME   WORDS", "feeds  2", "types  2"]
    run_fails(run, 2, "invalid dictionary name 'bad name'", "catalog", "dict", "set", "bad name", "w")
    run_fails(run, 2, "give the words either as arguments or with --file", "catalog", "dict", "set", "t", "w",
              "--file", str(words))
    run_fails(run, 3, "dictionary 'nope' does not exist", "catalog", "dict", "show", "nope")
    assert json.loads(run_ok(run, "catalog", "dict", "delete", "feeds", "--json")) == {"name": "feeds",
                                                                                       "deleted": True}
    run_fails(run, 3, "dictionary 'feeds' does not exist", "catalog", "dict", "delete", "feeds")
    with tk.connect(in_process.home, create=True) as client:
        assert client.catalog.dictionaries() == {"types": ["x", "y"]}


def test_generate(home: Path) -> None:
    report = ok_json(home, "catalog", "generate", "--rows", "3000", "--seed", "5", "--span-days", "30")
    assert (report["rows"], report["first_id"], report["last_id"]) == (3000, 1, 3000)
    text = ok(home, "catalog", "generate", "--rows", "10", "--seed", "5")
    assert text.startswith("generated 10 record(s), ids 3001-3010, in ")
    with tk.connect(home, create=True) as client:
        assert client.catalog.count() == 3010
    fails(home, 2, "invalid rows -5", "catalog", "generate", "--rows", "-5")


def test_import_with_spark(in_process: InProcess, spark, tmp_path: Path) -> None:
    run = in_process
    assert run("init").code == 0
    good = tmp_path / "records.csv"
    good.write_text("id,feed,type,create_time,attr.owner\n1,A,Raw Events,2024-01-01T00:00:00Z,ops\n"
                    "2,B,Events,1704067200000,\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"feed":"A","type":"T","create_time":1}\n{"feed":"A","type":"T"}\n')
    out = run_ok(run, "catalog", "import", str(good))
    assert out.startswith("imported 2 row(s) from 1 file(s): 2 inserted, 0 skipped (id already present) in ")
    report = json.loads(run_ok(run, "catalog", "import", str(good), "--json"))
    assert (report["rows"], report["files"], report["inserted"], report["skipped"]) == (2, 1, 0, 2)
    run_fails(run, 2, f"{bad} line 2: field 'create_time' is required", "catalog", "import", str(bad))
    run_fails(run, 2, "unknown import format 'xml'", "catalog", "import", str(good), "--format", "xml")
    with tk.connect(in_process.home, create=True) as client:
        assert [(r.id, r.feed, dict(r.attributes)) for r in client.catalog.records()] == [
            (1, "A", {"owner": "ops"}), (2, "B", {})]


def test_on_postgres(tmp_path: Path, pg_url: str) -> None:
    ws = tmp_path / "pg"
    env = {"TIDEKEEP_METADATA_URL": pg_url}
    assert cli(ws, "init", env=env).returncode == 0
    done = cli(ws, "catalog", "add", '{"feed":"A","type":"T","create_time":1}', "--json", env=env)
    assert done.returncode == 0, done.stderr
    done = cli(ws, "catalog", "list", "--json", env=env)
    assert [r["feed"] for r in json.loads(done.stdout)] == ["A"]


def test_help_lists_the_commands(home: Path) -> None:
    text = ok(home, "catalog", "--help")
    for command in ("add", "import", "generate", "list", "show", "dict"):
        assert command in text
    assert "set" in ok(home, "catalog", "dict", "--help")
