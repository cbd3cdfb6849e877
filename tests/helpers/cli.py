"""Running the `tidekeep` command in a subprocess against one workspace, for CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def run_cli(home: Path, *args: str, env: Mapping[str, str] | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`tidekeep ARGS` with TIDEKEEP_HOME=home; the caller's TIDEKEEP_* settings are dropped (the test
    suite's own TIDEKEEP_TEST_* stay) so only `env` adds settings."""
    environment = {k: v for k, v in os.environ.items()
                   if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    environment["TIDEKEEP_HOME"] = str(home)
    environment.update(env or {})
    return subprocess.run([sys.executable, "-m", "tidekeep.cli.main", *args], capture_output=True, text=True,
                          env=environment, timeout=timeout, check=False)


def ok_json(home: Path, *args: str) -> Any:
    """The parsed --json output of a command that must succeed without a word on stderr."""
    done = run_cli(home, *args, "--json")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return json.loads(done.stdout)
