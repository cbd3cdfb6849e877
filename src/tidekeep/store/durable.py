"""Durable local writes: a data file, and the directory entries that lead to it, are on disk before
the metadata commit that names it (`storage.fsync`, docs/configuration.md).

pyarrow never fsyncs, so a file it has written can still be lost, or come back empty, after a power
failure or a kernel crash, while the metadata commit that names it survived. With fsync on and a
local filesystem, a file is written through an OS file handle (store/fileio.py, the only caller
of these functions) and:

1. the file is fsynced (its data and size);
2. its directory is fsynced (the new name);
3. every directory between it and the storage root whose own entry this process has not made
   durable yet gets its parent fsynced, deepest first: a segment, transaction or archive directory
   the write created, and also one another process created a moment ago, since nothing says that
   process has synced it yet. Which entries are durable is remembered per process, so the steady
   state is two fsyncs per file; the walk stops at the root or at the first remembered directory.

All of it happens before the call returns, so a caller that commits afterwards commits only what
is on disk. The memory relies on tidekeep never recreating a deleted directory under the same name
in another process (stream directories carry the stream's uid; transaction, ingest and sink staging
directories a random id; search results the job id, which is never reused); a directory deleted
through FileIO is also forgotten in the deleting process (`forget_directory`).

On other filesystems (s3://, gs://, ...) a completed upload is already durable and nothing is done.
With fsync off, files are written as before: pyarrow's own output stream, no syncs.

On a local filesystem every file and directory a writer creates is owner-only (store/private.py),
fsync on or off: pyarrow would create them open to everyone the umask lets in.
"""

from __future__ import annotations

import os
import posixpath
import threading

from .private import make_private_directories

_MAX_REMEMBERED = 4096  # directories whose entry is known durable; past this the memory starts over

_remembered: set[str] = set()
_remembered_lock = threading.Lock()


def fsync_directory(path: str) -> None:
    """fsync a directory: makes the names in it (created, renamed, removed) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_directory_entries(directory: str, root: str) -> None:
    """Make the names in `directory` durable, and its own entry and those of its ancestors up to
    `root` (steps 2 and 3 above). `directory` is `root` or lies under it; both are absolute."""
    directory, root = posixpath.normpath(directory), posixpath.normpath(root)
    if directory != root and not directory.startswith(root.rstrip("/") + "/"):
        raise ValueError(f"{directory} is not under the storage root {root}")
    fsync_directory(directory)
    current = directory
    while current != root:
        with _remembered_lock:
            if current in _remembered:
                return
        parent = posixpath.dirname(current)
        fsync_directory(parent)
        with _remembered_lock:
            if len(_remembered) >= _MAX_REMEMBERED:
                _remembered.clear()
            _remembered.add(current)
        current = parent


def make_directories(path: str) -> None:
    """`mkdir -p path`, owner-only, with the entry of every directory it creates made durable (for
    the storage root, which everything else hangs from)."""
    for created in reversed(make_private_directories(path)):  # deepest first: each parent holds the new entry
        fsync_directory(posixpath.dirname(created))


def forget_directory(directory: str) -> None:
    """A directory (and everything under it) is being deleted: its entry must be synced again if it
    is ever recreated."""
    directory = posixpath.normpath(directory)
    prefix = directory + "/"
    with _remembered_lock:
        gone = {d for d in _remembered if d == directory or d.startswith(prefix)}
        _remembered.difference_update(gone)


__all__ = ["forget_directory", "fsync_directory", "make_directories", "sync_directory_entries"]
