"""Running the CLI for tests: in a subprocess (`cli`, `ok`, `fails`) or its entry point `main(argv)`
inside the test process (`InProcess`; the `in_process` fixture in tests/conftest.py), with the
result's exit code and output (`Result`)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tidekeep.cli.main import main

CLI = [sys.executable, "-m", "tidekeep.cli.main"]


@dataclass(frozen=True)
class Result:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)

    def json_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stdout.splitlines()]


def cli(home: Path, *args: str, stdin: bytes = b"", env: Mapping[str, str] | None = None) -> Result:
    """Run the CLI in a subprocess with TIDEKEEP_HOME=home and only the TIDEKEEP_* variables in `env`."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    environment["TIDEKEEP_HOME"] = str(home)
    environment.update(env or {})
    done = subprocess.run([*CLI, *args], input=stdin, capture_output=True, env=environment, timeout=120, check=False)
    return Result(tuple(args), done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8"))


def concurrently(home: Path, *calls: Sequence[str]) -> list[Result]:
    """Independent read-only CLI calls, run side by side; each must succeed with a clean stderr."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda args: cli(home, *args), calls))
    for result in results:
        check_ok(result)
    return results


class InProcess:
    """The CLI entry point, main(argv), run inside the test process with its own standard streams,
    TIDEKEEP_HOME and TIDEKEEP_* environment; the logging set-up it changes is restored after."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
        self.monkeypatch = monkeypatch
        self.home = home

    def __call__(self, *args: str, stdin: bytes = b"", env: Mapping[str, str] | None = None) -> Result:
        out, err = io.BytesIO(), io.BytesIO()
        streams = {name: io.TextIOWrapper(buffer, encoding="utf-8", write_through=True)
                   for name, buffer in (("stdin", io.BytesIO(stdin)), ("stdout", out), ("stderr", err))}
        logger = logging.getLogger("tidekeep")
        saved = (logger.handlers[:], logger.level, logger.propagate)
        with self.monkeypatch.context() as patch:
            patch.setenv("TIDEKEEP_HOME", str(self.home))
            for name, value in (env or {}).items():
                patch.setenv(name, value)
            for name, stream in streams.items():
                patch.setattr(sys, name, stream)
            patch.setattr(sys, "excepthook", sys.excepthook)  # Typer installs its own; put ours back after
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = 0 if exc.code is None else int(exc.code)
            finally:
                logger.handlers[:], logger.level, logger.propagate = saved
        return Result(tuple(args), code, out.getvalue().decode("utf-8"), err.getvalue().decode("utf-8"))


def check_ok(result: Result) -> Result:
    assert result.code == 0, f"{result.args}: exit {result.code}\n{result.stderr}"
    assert result.stderr == "", f"{result.args}: unexpected stderr\n{result.stderr}"
    return result


def ok(home: Path, *args: str, stdin: bytes = b"", env: Mapping[str, str] | None = None) -> Result:
    return check_ok(cli(home, *args, stdin=stdin, env=env))


def assert_one_error_line(result: Result, code: int, fragment: str) -> None:
    assert result.code == code, f"{result.args}: exit {result.code}, wanted {code}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{result.args}: stderr was\n{result.stderr}"
    assert fragment in lines[0], f"{result.args}: {fragment!r} not in {lines[0]!r}"
    assert result.stdout == ""


def fails(home: Path, code: int, fragment: str, *args: str, stdin: bytes = b"",
          env: Mapping[str, str] | None = None) -> Result:
    result = cli(home, *args, stdin=stdin, env=env)
    assert_one_error_line(result, code, fragment)
    return result
