"""What the `tidekeep` command imports: `--help`, every noun's `--help` and the commands that need no
data import neither Spark, pyarrow, Alembic nor pandas (nor SQLAlchemy, whose import alone is most of
a second's budget); `stream describe` and `stream list` need the metadata store but not Spark, the
writing and reading paths, pyarrow (the workspace's storage stamp is read without it) or the catalog's
libraries (docs/cli.md, "Start-up time"). Each command
runs in a fresh interpreter, which then reports what `sys.modules` holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import run_cli

NEVER_FOR_HELP = ("pyspark", "pyarrow", "alembic", "pandas", "sqlalchemy", "numpy", "yaml", "tidekeep.client",
                  "httpx", "tidekeep.cli.remote")  # the HTTP client loads only with --server
NEVER_FOR_METADATA = ("pyspark", "alembic", "pandas", "pyarrow", "numpy", "tidekeep.catalog.expressions", "httpx",
                      "tidekeep.streams.writer", "tidekeep.streams.reader",
                      "tidekeep.streams.readergroup", "tidekeep.catalog.job", "tidekeep.archives.search",
                      # a command builds only its own noun's part of the command tree (cli/main.py)
                      "tidekeep.cli.catalog", "tidekeep.cli.archives", "tidekeep.cli.rg", "tidekeep.cli.serve",
                      "tidekeep.cli.holds", "tidekeep.cli.txn")

# runs the CLI as `python -m tidekeep.cli` does, then prints the loaded modules as one JSON line on stderr
PROBE = """
import json, runpy, sys
sys.argv = ["tidekeep", *sys.argv[1:]]
try:
    runpy.run_module("tidekeep.cli", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
sys.stderr.write("\\nMODULES " + json.dumps({"code": code, "modules": sorted(sys.modules)}) + "\\n")
"""


def loaded_modules(*args: str, home: Path | None = None) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    if home is not None:
        env["TIDEKEEP_HOME"] = str(home)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    report = json.loads(done.stderr.rsplit("MODULES ", 1)[1])
    assert report["code"] in (0, None), done.stderr
    return set(report["modules"])


def imported(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(name for name in forbidden if name in modules)


@pytest.mark.parametrize("noun", [[], ["stream"], ["catalog"], ["catalog", "rules"], ["archives"], ["rg"],
                                  ["retention"], ["hold"], ["watermark"], ["config"], ["db"], ["serve"]],
                         ids=lambda noun: " ".join(noun) or "tidekeep")
def test_help_imports_no_data_library(noun: list[str]) -> None:
    modules = loaded_modules(*noun, "--help")
    assert imported(modules, NEVER_FOR_HELP) == []


def test_config_show_needs_no_store(tmp_path: Path) -> None:
    modules = loaded_modules("config", "show", home=tmp_path)
    assert "yaml" in modules  # the settings did load
    assert imported(modules, ("pyspark", "pyarrow", "alembic", "pandas", "sqlalchemy", "tidekeep.client")) == []


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("startup")
    assert run_cli(home, "init").returncode == 0
    assert run_cli(home, "stream", "create", "s/x", "--segments", "2").returncode == 0
    return home


@pytest.mark.parametrize("command", [["stream", "describe", "s/x"], ["stream", "list"]], ids=" ".join)
def test_metadata_commands_load_only_the_metadata_path(workspace: Path, command: list[str]) -> None:
    modules = loaded_modules(*command, home=workspace)
    assert "sqlalchemy" in modules  # the probe did run the command against the store
    assert imported(modules, NEVER_FOR_METADATA) == []
