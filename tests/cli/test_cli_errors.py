"""No traceback reaches a CLI user (docs/cli.md, "Errors and exit codes").

Each crash class found gets a test through the real entry point, in-process (`main(argv)`,
test_cli.InProcess) or, where the process itself matters (paths, read-only files, Ctrl-C), in a
subprocess: deeply nested expressions, integers beyond 64 bits, paths under a file, non-UTF-8
imports, a read-only storage root and metadata database, Ctrl-C during a Spark job. Then the
catch-all for what is left (one line, exit 70, `--debug` shows the traceback) and a fuzz test that
drives every command with hostile arguments and bad files.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import typer.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import make_archive
from helpers.cli_runner import InProcess, Result, assert_one_error_line, cli
from helpers.procs import worker_env
from helpers.readonly import read_only
from tidekeep.catalog.expressions import from_json, parse
from tidekeep.catalog.expressions.parser import MAX_NESTING
from tidekeep.catalog.expressions.regex import MAX_GROUP_NESTING, parse_regex
from tidekeep.catalog.importer import first_bad_utf8
from tidekeep.cli.failures import describe
from tidekeep.cli.main import app, run
from tidekeep.errors import INTERNAL_ERROR_EXIT, INTERRUPTED_EXIT, InvalidInput
from tidekeep.integers import INT64_MAX, INT64_MIN

CLI = [sys.executable, "-m", "tidekeep.cli.main"]
# docs/cli.md, "Errors and exit codes"
DOCUMENTED_EXIT_CODES = {*range(0, 17), INTERNAL_ERROR_EXIT, INTERRUPTED_EXIT}
BEYOND = str(INT64_MAX + 1)
JVM_START_WARNING = "WARNING: Using incubator modules: jdk.incubator.vector"  # the JVM's own, at start


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> InProcess:
    run_in = InProcess(monkeypatch, tmp_path / "ws")
    assert run_in("init").code == 0
    return run_in


def no_traceback(result: Result) -> None:
    assert "Traceback" not in result.stderr + result.stdout, f"{result.args}:\n{result.stderr}"


# ---- deeply nested expressions ------------------------------------------------------------------


DEEP = {
    "parentheses": "(" * 3000 + 'feed = "a"' + ")" * 3000,
    "nots": "not " * 3000 + 'feed = "a"',
    "both": "(not " * 1500 + 'feed = "a"' + ")" * 1500,
}


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_a_deeply_nested_hold_is_a_typed_error(in_process: InProcess, shape: str) -> None:
    result = in_process("hold", "add", "records", DEEP[shape], "--reason", "r")
    assert_one_error_line(result, 2, f"nested too deeply (parentheses and 'not's nest at most {MAX_NESTING} deep)")
    assert in_process("hold", "list", "--json").json() == []


@pytest.mark.parametrize("shape", sorted(DEEP))
def test_a_deeply_nested_rule_is_a_typed_error(in_process: InProcess, tmp_path: Path, shape: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(json.dumps({"rules": [{"number": 1, "name": "deep", "expression": DEEP[shape], "age": "1d"}]}))
    for command in ("validate", "set"):
        assert_one_error_line(in_process("catalog", "rules", command, str(rules)), 2, "rule 1: expression: nested too")


def test_a_deeply_nested_json_expression_is_a_typed_error(in_process: InProcess, tmp_path: Path) -> None:
    expression: dict[str, Any] = {"type": "term", "field": "Feed", "condition": "EQUALS", "value": "a"}
    for _ in range(3000):
        expression = {"type": "operator", "op": "NOT", "children": [expression]}
    rules = tmp_path / "rules.json"
    # json.dumps itself recurses; build the text by hand
    term = '{"type": "term", "field": "Feed", "condition": "EQUALS", "value": "a"}'
    text = '{"type": "operator", "op": "NOT", "children": [' * 900 + term + "]}" * 900
    rules.write_text('{"type": "DataRetentionRules", "rules": [{"ruleNumber": 1, "name": "deep", "enabled": true, '
                     f'"expression": {text}, "age": 1, "timeUnit": "DAYS"}}]}}')
    assert_one_error_line(in_process("catalog", "rules", "validate", str(rules)), 2, "nested too deeply")
    with pytest.raises(InvalidInput, match=f"expression: nested too deeply \\(operators nest at most {MAX_NESTING}"):
        from_json(expression)


def _nested(depth: int, kinds: str) -> str:
    opening = "".join("(" if kinds[i % len(kinds)] == "p" else "not " for i in range(depth))
    return opening + 'feed = "a"' + ")" * opening.count("(")


@pytest.mark.parametrize("kinds", ["p", "n", "pn"])
def test_the_nesting_limit_is_exact(kinds: str) -> None:
    parse(_nested(MAX_NESTING, kinds))
    with pytest.raises(InvalidInput, match="nested too deeply"):
        parse(_nested(MAX_NESTING + 1, kinds))
    term: dict[str, Any] = {"field": "Feed", "condition": "EQUALS", "value": "a"}
    for _ in range(MAX_NESTING):
        term = {"op": "OR", "children": [term]}
    from_json(term)
    with pytest.raises(InvalidInput, match="nested too deeply"):
        from_json({"op": "OR", "children": [term]})


def test_regex_groups_nest_to_a_limit() -> None:
    parse_regex("(" * MAX_GROUP_NESTING + "a" + ")" * MAX_GROUP_NESTING)
    for depth in (MAX_GROUP_NESTING + 1, 499):
        with pytest.raises(InvalidInput, match="groups nested too deeply"):
            parse_regex("(" * depth + "a" + ")" * depth)


# ---- integers beyond 64 bits --------------------------------------------------------------------


BEYOND_64_BITS = [
    ("archives", "results", BEYOND), ("archives", "cancel", BEYOND), ("archives", "job", BEYOND),
    ("archives", "results", "1", "--page", BEYOND), ("archives", "jobs", "--limit", BEYOND),
    ("catalog", "explain", BEYOND), ("catalog", "show", BEYOND), ("catalog", "list", "--after", BEYOND),
    ("catalog", "list", "--after", "-" + BEYOND), ("catalog", "list", "--limit", BEYOND),
    ("catalog", "runs", "--limit", BEYOND), ("catalog", "generate", "--rows", BEYOND), ("hold", "remove", BEYOND),
    ("audit", "list", "--limit", BEYOND), ("retention", "history", "sc/s", "--limit", BEYOND),
    ("watermark", "list", "sc/s", "--limit", BEYOND), ("watermark", "note", "sc/s", BEYOND, "--writer", "w"),
    ("stream", "read", "sc/s", "--limit", BEYOND), ("stream", "create", "sc/t", "--segments", BEYOND),
    ("stream", "split", "sc/s", "0.0", "--parts", BEYOND), ("rg", "read", "g", "--reader", "r", "--limit", BEYOND),
]


@pytest.mark.parametrize("args", BEYOND_64_BITS, ids=" ".join)
def test_integers_beyond_64_bits_are_usage_errors(in_process: InProcess, args: tuple[str, ...]) -> None:
    with tk.connect(in_process.home) as client:
        client.create_stream("sc/s", tk.StreamConfig(segments=1))
    result = in_process(*args)
    no_traceback(result)
    assert result.code == 2, f"{args}: exit {result.code}\n{result.stderr}"
    assert "9223372036854775807" in result.stderr or "9223372036854775808" in result.stderr, result.stderr


def test_every_integer_parameter_is_bounded_to_64_bits() -> None:
    """The class, not the instances: any int option or argument added later must carry the bounds."""
    unbounded = []

    def walk(command: Any, path: str) -> None:
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())
        for param in getattr(command, "params", []):
            descriptor = getattr(param, "type_descriptor", None)
            annotation = getattr(descriptor, "annotation", None)
            if annotation is int:
                low, high = param.min, param.max
                if low is None or high is None or low < INT64_MIN or high > INT64_MAX:
                    unbounded.append(f"{path} {param.name}")

    walk(typer.main.get_command(app), "")
    assert unbounded == []


def test_the_library_refuses_ids_beyond_64_bits(tmp_path: Path) -> None:
    with tk.connect(tmp_path / "ws", create=True) as client:
        client.create_stream("sc/s", tk.StreamConfig(segments=1))
        for call in (lambda: client.catalog.get(INT64_MAX + 1), lambda: client.catalog.explain(INT64_MAX + 1),
                     lambda: client.catalog.records(after_id=INT64_MAX + 1), lambda: client.archives.job(INT64_MAX + 1),
                     lambda: client.archives.cancel(INT64_MAX + 1), lambda: client.holds.remove(INT64_MAX + 1),
                     lambda: client.stream("sc/s").split("0.0", 10_001)):
            with pytest.raises(InvalidInput):
                call()
        assert [s["segment"] for s in client.stream("sc/s").describe()["segments"]] == ["0.0"]  # not split


# ---- paths under a file -------------------------------------------------------------------------


def test_workspace_paths_under_a_file_are_bad_settings(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    home = tmp_path / "ws"
    cases = [
        ((tmp_path / "a-file" / "sub", "init"), "the workspace directory"),
        ((blocker, "init"), "the workspace directory"),
        ((home, "--storage", str(blocker / "data"), "init"), "'storage.uri'"),
        ((home, "--metadata-url", f"sqlite:///{blocker / 'metadata.db'}", "init"), "'metadata.url'"),
    ]
    for (ws, *args), setting in cases:
        result = cli(Path(ws), *args)
        assert_one_error_line(result, 2, f"bad value for {setting}")
        assert f"{blocker} is a file" in result.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"], f"{args} created something"
    # a read-only command through a path under a file: the workspace is not there
    assert_one_error_line(cli(blocker / "sub", "stream", "list"), 3, "no tidekeep workspace")


# ---- non-UTF-8 imports --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "content", "line"), [
    ("records.csv", b"feed,type,create_time\nF,T,1000\nF,T\xff\xfe,2000\n", 3),
    ("records.csv", b"feed,type,create_\xe9time\n", 1),
    ("records.jsonl", b'{"feed": "F", "type": "T", "create_time": 1000}\n{"feed": "\xc3(", "type": "T", '
                      b'"create_time": 1000}\n', 2),
])
def test_a_non_utf8_import_names_the_line(in_process: InProcess, spark, tmp_path: Path, name: str, content: bytes,
                                          line: int) -> None:
    # the executor reading the file finds the bad line: the import's Spark job runs (the `spark` session)
    path = tmp_path / name
    path.write_bytes(content)
    result = in_process("catalog", "import", str(path))
    assert_one_error_line(result, 2, f"{path} line {line}: not UTF-8 text")
    assert in_process("catalog", "list", "--json").json() == []


@given(st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=6))
def test_first_bad_utf8_matches_a_whole_file_decode(lines: list[bytes]) -> None:
    data = b"\n".join(lines)
    try:
        data.decode("utf-8")
        expected = None
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        expected = (data.count(b"\n", 0, exc.start) + 1, exc.start - line_start + 1, data[exc.start])
    assert first_bad_utf8(io.BytesIO(data)) == expected


# ---- read-only workspaces -----------------------------------------------------------------------


@contextlib.contextmanager
def read_only_file(path: Path) -> Iterator[None]:
    """As helpers.readonly.read_only, for one file: immutable as root, mode 0444 otherwise."""
    mode = path.stat().st_mode & 0o7777
    if os.geteuid() == 0:
        assert subprocess.run(["chattr", "+i", str(path)], check=False).returncode == 0
    else:
        path.chmod(0o444)
    try:
        with pytest.raises(OSError), open(path, "ab"):
            pass
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(path)], check=True)
        else:
            path.chmod(mode)


def test_ingest_into_a_read_only_storage_root(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    assert cli(home, "init").code == 0
    log = tmp_path / "app.log"
    log.write_text("2024-01-01T00:00:00Z login ok\n")
    data = home / "data"
    assert cli(home, "stream", "create", "sc/s").code == 0
    with read_only(data):
        result = cli(home, "archives", "ingest", "app", str(log))
        writing = cli(home, "stream", "write", "sc/s", stdin=b"event\n")  # no Spark: the OS's own error
    assert_one_error_line(result, 15, f"read-only: the storage root {data} is not writable")
    assert_one_error_line(writing, 15, f"read-only or not permitted: {data}")
    assert cli(home, "archives", "datasets", "--json").json() == []
    assert cli(home, "stream", "read", "sc/s", "--json").stdout == ""


def test_a_read_only_metadata_database_says_so(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    assert cli(home, "init").code == 0
    database = home / "metadata.db"
    with read_only_file(database):
        result = cli(home, "stream", "create", "sc/s")
        assert_one_error_line(result, 15, f"read-only: the metadata database {database} cannot be written")
        reading = cli(home, "stream", "list", "--json")  # reading still works
        assert reading.code == 0 and reading.json() == []


# ---- Ctrl-C during a Spark job ------------------------------------------------------------------


def test_ctrl_c_during_a_spark_job_prints_one_line(tmp_path: Path) -> None:
    """A real `archives search` whose Spark task waits at a gate gets SIGINT, as a terminal sends it
    to the whole foreground process group: one `interrupted` line, exit 130, nothing from py4j,
    Python or the JVM."""
    url = f"sqlite:///{tmp_path / 'metadata.db'}"
    env = worker_env(url, tmp_path / "data", tmp_path / "ws")
    assert subprocess.run([*CLI, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    with tk.connect(tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data")) as client:
        make_archive(client, "app", [(1000, "login ok")])
    gate = tmp_path / "gate"
    gate.touch()
    search = subprocess.Popen([*CLI, "archives", "search", "app", "login"],
                              env={**env, "TIDEKEEP_PAUSE": f"search_archive=@{gate}"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while not Path(f"{gate}.reached").exists() and search.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Path(f"{gate}.reached").exists(), search.communicate(timeout=60)
        os.killpg(search.pid, signal.SIGINT)
        out, err = search.communicate(timeout=120)
    finally:
        gate.unlink(missing_ok=True)
        if search.poll() is None:
            search.kill()
    assert search.returncode == INTERRUPTED_EXIT, err
    assert out == ""
    assert [line for line in err.splitlines() if line != JVM_START_WARNING] == ["interrupted"], err


# ---- the catch-all ------------------------------------------------------------------------------


def _failing_app(error: BaseException) -> typer.Typer:
    failing = typer.Typer(add_completion=False, pretty_exceptions_enable=False)

    @failing.callback()
    def root(debug: bool = typer.Option(False, "--debug"), verbose: bool = typer.Option(False, "--verbose", "-v")) \
            -> None:
        pass

    @failing.command("fail")
    def fail() -> None:
        raise error

    return failing


def _run_captured(application: typer.Typer, *args: str, monkeypatch: pytest.MonkeyPatch) -> Result:
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    with pytest.raises(SystemExit) as exited:
        run(application, list(args))
    monkeypatch.undo()
    return Result(tuple(args), int(exited.value.code or 0), out.getvalue(), err.getvalue())


def test_an_internal_error_is_one_line_and_debug_shows_the_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    failing = _failing_app(RuntimeError("something\nunexpected"))
    result = _run_captured(failing, "fail", monkeypatch=monkeypatch)
    assert_one_error_line(result, INTERNAL_ERROR_EXIT, "internal error (RuntimeError: something unexpected); "
                                                      "run again with --debug to see the traceback")
    for flag in ("--debug", "--verbose", "-v"):
        shown = _run_captured(failing, flag, "fail", monkeypatch=monkeypatch)
        assert shown.code == INTERNAL_ERROR_EXIT
        assert "Traceback (most recent call last)" in shown.stderr and "RuntimeError: something" in shown.stderr
        assert shown.stderr.splitlines()[-1].startswith("error: internal error (RuntimeError")


@pytest.mark.parametrize(("error", "code", "fragment"), [
    (PermissionError(errno.EACCES, "Permission denied", "/x/y"), 15, "read-only or not permitted: /x/y"),
    (OSError(errno.EROFS, "Read-only file system", "/x/y"), 15, "read-only or not permitted: /x/y"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "/x/y"), 3, "no such file or directory: /x/y"),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/x/y"), 3, "not a directory: /x/y"),
    (IsADirectoryError(errno.EISDIR, "Is a directory", "/x"), 2, "is a directory, expected a file: /x"),
    (OSError(errno.ENOSPC, "No space left on device", "/x/y"), 16, "No space left on device: /x/y"),
    (MemoryError(), 16, "out of memory"),
    (KeyError("k"), INTERNAL_ERROR_EXIT, "internal error (KeyError: 'k')"),
])
def test_environment_failures_get_their_class_code(monkeypatch: pytest.MonkeyPatch, error: BaseException,
                                                   code: int, fragment: str) -> None:
    assert_one_error_line(_run_captured(_failing_app(error), "fail", monkeypatch=monkeypatch), code, fragment)


@given(st.sampled_from(sorted(errno.errorcode)), st.one_of(st.none(), st.text(max_size=30)))
def test_every_os_error_is_one_documented_line(number: int, filename: str | None) -> None:
    message, code = describe(OSError(number, os.strerror(number), filename))
    assert code in DOCUMENTED_EXIT_CODES - {0, INTERNAL_ERROR_EXIT, INTERRUPTED_EXIT}
    assert message and "\n" not in " ".join(message.split())


# ---- fuzz: every command, hostile arguments -----------------------------------------------------


SPARK_OR_BLOCKING = {"serve", "api", "archives ingest", "archives search", "catalog import", "catalog run",
                     "catalog impact", "rg read", "stream write"}


def _leaves(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    subcommands = getattr(command, "commands", None)
    if subcommands:
        for name, sub in sorted(subcommands.items()):
            yield from _leaves(sub, (*path, name))
    else:
        yield path, command


COMMANDS = [(path, command) for path, command in _leaves(typer.main.get_command(app))
            if " ".join(path) not in SPARK_OR_BLOCKING]


@pytest.fixture(scope="module")
def fuzz_world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("fuzz")
    home = root / "ws"
    with tk.connect(home, create=True) as client:
        client.create_stream("sc/s", tk.StreamConfig(segments=2))
        with client.stream("sc/s").writer("w1") as writer:
            writer.write(b"event", routing_key="k")
        client.holds.add("stream", "sc/s", "fuzz")
        client.catalog.add([{"feed": "F", "type": "T", "create_time": 1000}])
        make_archive(client, "app", [(1000, "login ok")])
    files = root / "files"
    files.mkdir()
    (files / "bad.csv").write_bytes(b"feed,type\n\xff\xfe\n")
    (files / "bad.yaml").write_bytes(b"rules: [\x00\xff")
    (files / "binary.bin").write_bytes(bytes(range(256)) * 4)
    (files / "empty.txt").write_bytes(b"")
    (files / "dir").mkdir()
    (files / "dir" / "x.jsonl").write_bytes(b"{\xff}\n")
    paths = [str(files / name) for name in ("bad.csv", "bad.yaml", "binary.bin", "empty.txt", "dir", "missing")]
    paths += [str(files / "bad.csv" / "under-a-file"), str(files / "dir" / "x.jsonl")]
    return {"home": home, "paths": paths}


def _values(paths: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(["", " ", "0", "-1", "1", BEYOND, "-" + BEYOND, str(10**30), "1e308", "nan", "sc/s", "sc",
                         "app", "0.0", "1.0", "w1", "all", "feed = \"F\"", "(" * 3000, "not " * 2000 + "all",
                         "\x1b[2J", "a\nb", "\x00", "é🙂", "--json", "-", "x=y", "a" * 300]),
        st.sampled_from(paths),
        st.text(max_size=20),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
    )


@st.composite
def _argv(draw: st.DrawFn, paths: list[str]) -> list[str]:
    path, command = draw(st.sampled_from(COMMANDS))
    args = list(path)
    for param in command.params:
        if draw(st.booleans()):
            continue
        opts = getattr(param, "opts", [])
        value = draw(_values(paths))
        if getattr(param, "param_type_name", "") == "argument":
            args.append(value)
        elif getattr(param, "is_flag", False):
            args.append(opts[0])
        else:
            args += [draw(st.sampled_from(opts)), value]
    if draw(st.integers(0, 9)) == 0:  # now and then an unknown extra or a root option in the wrong place
        args.append(draw(st.sampled_from(["--nope", "extra", "--home", "-v"])))
    root: list[str] = []
    if draw(st.integers(0, 5)) == 0:
        root += [draw(st.sampled_from(["--home", "--storage", "--metadata-url", "--set"])), draw(_values(paths))]
    return root + args


def test_fuzz_the_cli_in_process(fuzz_world: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Random commands of the app's tree with hostile values: never a traceback, never an internal
    error, always an exit code from the documented table. Spark and blocking commands are left
    out (the Spark ones have their own tests above)."""
    runner = InProcess(monkeypatch, fuzz_world["home"])
    # a drawn relative path ("--storage -140737488355327") is made under the working directory: the
    # fuzz world's, never the checkout the suite runs from
    monkeypatch.chdir(fuzz_world["home"].parent)

    @settings(derandomize=True, max_examples=250, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example])
    @given(_argv(fuzz_world["paths"]))
    def check(argv: list[str]) -> None:
        result = runner(*argv)
        no_traceback(result)
        assert result.code in DOCUMENTED_EXIT_CODES, f"{argv}: exit {result.code}\n{result.stderr}"
        assert result.code != INTERNAL_ERROR_EXIT, f"{argv}: {result.stderr}"

    check()


@pytest.mark.parametrize("args", [
    ("catalog", "show", BEYOND),
    ("hold", "add", "records", "not " * 3000 + "all", "--reason", "r"),
    ("--home", "/dev/null/ws", "init"),
    ("catalog", "rules", "validate", "/dev/null"),
    ("stream", "write", "sc/s", "--input", "/"),
    ("--set", "writer.batch_size=\x1b[2J", "stream", "list"),
])
def test_fuzz_cases_in_a_real_process(tmp_path: Path, args: tuple[str, ...]) -> None:
    home = tmp_path / "ws"
    assert cli(home, "init").code == 0
    assert cli(home, "stream", "create", "sc/s").code == 0
    result = cli(home, *args)
    no_traceback(result)
    assert result.code in DOCUMENTED_EXIT_CODES - {0, INTERNAL_ERROR_EXIT}, f"{args}: {result.stderr}"
