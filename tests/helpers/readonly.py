"""Really read-only directories for tests of what happens when files cannot be deleted.

Root ignores permission bits (and the tests run as root in CI), so as root a directory is made
immutable with `chattr +i` (ext4 and friends; root has CAP_LINUX_IMMUTABLE): nothing in it can be
deleted, renamed or created. Other users get `chmod 0o555`, which stops them the same way. Either
way the helper proves the directory is read-only by trying to create a file in it, FAILS the test
(never skips) when it cannot make it so, and always undoes what it did.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False)


def _make_read_only(directory: Path) -> str | None:
    """Make one directory read-only (`_undo` reverses it): None on success, otherwise why not."""
    if os.geteuid() == 0:
        done = _run("chattr", "+i", str(directory))
        if done.returncode != 0:
            return f"chattr +i {directory} failed: {done.stderr.strip() or done.returncode}"
    else:
        directory.chmod(0o555)
    return None


def _undo(directory: Path, mode: int) -> None:
    if os.geteuid() == 0:
        done = _run("chattr", "-i", str(directory))
        if done.returncode != 0:
            raise RuntimeError(f"chattr -i {directory} failed: {done.stderr.strip()}")
    else:
        directory.chmod(mode)


def _is_read_only(directory: Path) -> bool:
    probe = directory / f".probe-{uuid.uuid4().hex}"
    try:
        probe.write_bytes(b"")
    except OSError:
        return True
    probe.unlink()
    return False


@contextlib.contextmanager
def read_only(*directories: Path) -> Iterator[None]:
    """Within the block no file can be deleted from (or created in) any of `directories`."""
    done: list[tuple[Path, int]] = []
    try:
        for directory in directories:
            assert directory.is_dir(), f"{directory} is not a directory"
            mode = directory.stat().st_mode & 0o7777
            problem = _make_read_only(directory)
            if problem is not None:
                pytest.fail(f"cannot make {directory} read-only: {problem}")
            done.append((directory, mode))
            if not _is_read_only(directory):
                pytest.fail(f"{directory} is still writable after making it read-only")
        yield
    finally:
        for directory, mode in reversed(done):
            _undo(directory, mode)
