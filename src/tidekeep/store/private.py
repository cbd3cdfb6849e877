"""Owner-only files: what tidekeep creates on a local disk is readable by its owner alone.

The settings file may hold the metadata store's password, the metadata database holds every
record, and the data directories hold the data itself; none of it is for other users of the
machine (docs/workspace.md "Files are private"). Every file tidekeep creates is made with mode
0600 and every directory with 0700, through the `mode` argument of the call that creates it, so
the process umask still applies on top (a stricter umask makes them stricter, never looser) and
there is no moment when a new file is open to others. Files and directories that already exist
keep the mode their owner gave them.
"""

from __future__ import annotations

import os

FILE_MODE = 0o600
DIRECTORY_MODE = 0o700


def make_private_directories(path: str | os.PathLike[str]) -> list[str]:
    """`mkdir -p path`, each directory it creates owner-only; returns those, outermost first."""
    missing: list[str] = []
    current = os.path.normpath(os.path.abspath(path))
    while not os.path.isdir(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    created: list[str] = []
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIRECTORY_MODE)
        except FileExistsError:  # made meanwhile by another writer, or a file there (then: as mkdir -p)
            if not os.path.isdir(directory):
                raise
        else:
            created.append(directory)
    return created


def create_private_file(path: str | os.PathLike[str]) -> None:
    """Create `path` empty and owner-only unless it exists, so that a writer opening it next (which
    truncates a file and keeps its mode) writes into an owner-only file."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))


def write_private_text(path: str | os.PathLike[str], text: str) -> None:
    """Write a new owner-only text file; an existing one is replaced in place (its mode kept)."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "w", encoding="utf-8") as out:
        out.write(text)


def write_private_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write a new owner-only binary file; an existing one is replaced in place (its mode kept)."""
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE), "wb") as out:
        out.write(data)


def open_private_lock_file(path: str | os.PathLike[str]) -> int:
    """A file descriptor on a lock file, created owner-only if missing; the caller closes it."""
    return os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)


__all__ = ["DIRECTORY_MODE", "FILE_MODE", "create_private_file", "make_private_directories",
           "open_private_lock_file", "write_private_bytes", "write_private_text"]
