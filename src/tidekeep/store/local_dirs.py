"""Creating the workspace's local directories (the home, the SQLite database's directory, a local
storage root) with typed errors instead of the operating system's: a path under a file is a bad
setting that names the file, and a directory that cannot be written says "read-only" and names it.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import ConfigError, ReadOnlyWorkspace
from .private import make_private_directories

_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def blocking_file(path: Path) -> Path | None:
    """The existing non-directory at `path` or above it that stops `path` being a directory, or None."""
    current = Path(os.path.abspath(path))
    while True:
        if current.exists():
            return None if current.is_dir() else current
        if current.parent == current:
            return None
        current = current.parent


def check_can_be_directory(path: Path, setting: str) -> None:
    """ConfigError naming the file when `path` cannot be a directory because it, or a parent, is a file;
    `setting` names where the path came from (e.g. 'storage.uri')."""
    blocker = blocking_file(path)
    if blocker is not None:
        raise ConfigError(f"bad value for {setting}: {str(path)!r} cannot be a directory: {blocker} is a file")


def ensure_directory(path: Path, setting: str) -> None:
    """`mkdir -p path`, each new directory owner-only (store/private.py), with check_can_be_directory's
    error and ReadOnlyWorkspace for a parent that cannot be written."""
    check_can_be_directory(path, setting)
    with read_only_as_typed(path):
        make_private_directories(path)


@contextlib.contextmanager
def read_only_as_typed(path: Path) -> Iterator[None]:
    """Creating directories at `path`: a parent that cannot be written is ReadOnlyWorkspace naming it."""
    try:
        yield
    except OSError as exc:
        if exc.errno in _READ_ONLY:
            where = str(exc.filename or path)
            raise ReadOnlyWorkspace(f"read-only: cannot create directory {where} ({exc.strerror})", where) from None
        raise
