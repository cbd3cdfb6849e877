"""Launching worker subprocesses with an explicit environment.

conftest removes TIDEKEEP_* from the test process, so every setting a worker needs is passed
explicitly here; a worker never inherits a developer's workspace.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

WORKERS = Path(__file__).with_name("workers.py")


def worker_env(metadata_url: str, storage: str | Path, home: str | Path, fault: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    env.update({
        "TIDEKEEP_HOME": str(home),
        "TIDEKEEP_METADATA_URL": metadata_url,
        "TIDEKEEP_STORAGE_URI": str(storage),
        "TIDEKEEP_WRITER_LINGER": "0",
        "PYTHONUNBUFFERED": "1",
    })
    if fault is not None:
        env["TIDEKEEP_FAULT"] = fault
    return env


def run_worker(args: Sequence[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a worker to completion and return its exit code and output."""
    return subprocess.run([sys.executable, str(WORKERS), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


def start_worker(args: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """Start a worker in the background; its output goes to `log` (read it when it fails)."""
    return start_worker_script(WORKERS, args, env, log)


def start_worker_script(script: Path, args: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    """`start_worker` for the workers of another script (helpers/rg_workers.py, ...)."""
    handle = open(log, "wb")  # noqa: SIM115 - the child keeps writing after we return
    try:
        return subprocess.Popen([sys.executable, str(script), *args], env=env, stdout=handle,
                                stderr=subprocess.STDOUT)
    finally:
        handle.close()
