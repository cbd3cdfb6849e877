"""`tidekeep --json <noun> <verb>`: the root chooses the output, JSON for every command, exactly as the
command's own `--json` flag does (docs/cli.md, "Output")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import run_cli

COMMANDS = [["stream", "list"], ["stream", "describe", "s/x"], ["stream", "head", "s/x"],
            ["config", "show", "writer.batch_size"], ["audit", "list"], ["hold", "list"], ["rg", "list"]]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("root-json")
    assert run_cli(home, "init").returncode == 0
    assert run_cli(home, "stream", "create", "s/x", "--segments", "2").returncode == 0
    return home


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_root_json_is_the_commands_json(workspace: Path, command: list[str]) -> None:
    at_root = run_cli(workspace, "--json", *command)
    own_flag = run_cli(workspace, *command, "--json")
    text = run_cli(workspace, *command)
    assert at_root.returncode == own_flag.returncode == text.returncode == 0, at_root.stderr
    assert at_root.stdout == own_flag.stdout
    json.loads(at_root.stdout)
    assert text.stdout != at_root.stdout
