"""Files are private (docs/workspace.md "Files are private"): everything tidekeep creates — the
settings file, the SQLite database and its side files, the storage root and every data file under
it, whoever writes it (the CLI, the Python API, Spark executors) — is owner-only, whatever the
umask lets through, and never looser than the umask."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import HELPERS_DIR
from tidekeep.store.private import create_private_file, make_private_directories, write_private_text

WORKLOAD = HELPERS_DIR / "private_workload.py"


def everything_under(*roots: Path) -> Iterator[Path]:
    for root in roots:
        yield root
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                yield Path(folder) / name


def loose(*roots: Path) -> list[str]:
    """Every file or directory some other user could read, write or enter: mode and path."""
    return [f"{stat.S_IMODE(p.lstat().st_mode):o} {p}" for p in everything_under(*roots)
            if stat.S_IMODE(p.lstat().st_mode) & 0o077]


@pytest.mark.spark
@pytest.mark.parametrize("umask", [0o000, 0o022])
def test_a_workspace_that_ran_every_kind_of_write_is_owner_only(tmp_path: Path, umask: int) -> None:
    home, data = tmp_path / "ws", tmp_path / "store" / "data"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(WORKLOAD), f"{umask:o}", str(home), str(tmp_path / "work"),
                           "--storage", str(data)], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    created = list(everything_under(home, data))
    names = {p.name for p in created}
    # the run did write each kind of file: config, database, chunks, archives, results, catalog data
    assert {"tidekeep.yaml", "metadata.db", "tidekeep-workspace.json"} <= names
    assert any(p.suffix == ".parquet" for p in created) and any(p.suffix == ".dat" for p in created)
    for area in ("streams", "archives", "search-results", "catalog"):
        assert any(area in p.relative_to(data).parts[:1] for p in created if data in p.parents), area
    assert loose(home, data) == []
    assert stat.S_IMODE((tmp_path / "store").stat().st_mode) == 0o700  # the storage root's parent, made too


def test_the_helpers_are_owner_only_under_any_umask_and_never_looser(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        for umask in (0o000, 0o022, 0o002, 0o077, 0o027):
            os.umask(umask)
            base = tmp_path / f"u{umask:o}"
            made = make_private_directories(base / "a" / "b")
            assert made == [str(base), str(base / "a"), str(base / "a" / "b")]
            create_private_file(base / "a" / "f")
            write_private_text(base / "a" / "g", "text")
            assert loose(base) == []
            assert stat.S_IMODE((base / "a" / "f").stat().st_mode) == 0o600
            assert stat.S_IMODE((base / "a" / "b").stat().st_mode) == 0o700
        # a stricter umask wins: the file is no looser than it allows
        os.umask(0o277)
        create_private_file(tmp_path / "strict")
        assert stat.S_IMODE((tmp_path / "strict").stat().st_mode) == 0o400
    finally:
        os.umask(old)
    # what exists keeps its mode and its contents
    existing = tmp_path / "mine"
    existing.write_text("kept")
    existing.chmod(0o640)
    create_private_file(existing)
    assert existing.read_text() == "kept" and stat.S_IMODE(existing.stat().st_mode) == 0o640
    assert make_private_directories(tmp_path) == []
