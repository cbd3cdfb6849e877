"""Durable local writes: a data file, and the directory entries that lead to it, are on disk before
the metadata commit that names it (`storage.fsync`, docs/configuration.md).

pyarrow never fsyncs, so a file it has written can still be lost, or come back empty, after a power
failure or a kernel crash, while the metadata commit that names it survived. With fsync on and a
local filesystem, a file is written through an OS file handle and:

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
through ChunkStorage is also forgotten in the deleting process (`forget_directory`).

On other filesystems (s3://, gs://, ...) a completed upload is already durable and nothing is done.
With fsync off, files are written as before: pyarrow's own output stream, no syncs.

On a local filesystem every file and directory a writer creates is owner-only (store/private.py),
fsync on or off: pyarrow would create them open to everyone the umask lets in.
"""

from __future__ import annotations

import os
import posixpath
import threading
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .private import create_private_file, make_private_directories

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


class StorageWriter:
    """Writes files under one storage root, durably when fsync is on and the filesystem is local.
    Every writer of data files (chunks, archives, search results) goes through one of these."""

    def __init__(self, fs: pafs.FileSystem, root: str, fsync: bool) -> None:
        self.fs = fs
        self.root = root
        self.local = isinstance(fs, pafs.LocalFileSystem)
        self.durable = fsync and self.local

    def create_root(self) -> None:
        """Create the storage root if it is missing (durably: see make_directories)."""
        if self.durable:
            make_directories(self.root)
        else:
            self.make_directories(self.root)

    def make_directories(self, directory: str) -> None:
        """`mkdir -p directory`: owner-only on a local filesystem. Its entry is not made durable here;
        a file written into it through `close` or `moved_into` does that."""
        if self.local:
            make_private_directories(directory)
        else:
            self.fs.create_dir(directory, recursive=True)

    def open(self, full_path: str) -> Any:
        """A new file at `full_path` (its directory created), to be finished with `close`."""
        self.make_directories(posixpath.dirname(full_path))
        if self.local:
            create_private_file(full_path)  # the open below truncates it and keeps its mode
        if self.durable:
            return pa.OSFile(full_path, "wb")  # a real file descriptor, to fsync
        return self.fs.open_output_stream(full_path)

    def close(self, sink: Any, full_path: str) -> None:
        """Close a file from `open`; when durable, it and its directory entries are on disk on return."""
        self.close_file(sink)
        if self.durable:
            sync_directory_entries(posixpath.dirname(full_path), self.root)

    def close_file(self, sink: Any) -> None:
        """Close a file from `open`, its data on disk when durable but not its name: for a file that
        is renamed next (then `moved_into` its directory)."""
        if not self.durable:
            sink.close()
            return
        try:
            os.fsync(sink.fileno())
        finally:
            sink.close()

    def write_parquet(self, full_path: str, table: pa.Table, **options: Any) -> None:
        """Write `table` as one Parquet file (`options` as for `pq.write_table`)."""
        if not self.durable:
            self.make_directories(posixpath.dirname(full_path))
            if self.local:
                create_private_file(full_path)
            pq.write_table(table, full_path, filesystem=self.fs, **options)
            return
        sink = self.open(full_path)
        try:
            pq.write_table(table, sink, **options)
        except BaseException:
            sink.close()
            raise
        self.close(sink, full_path)

    def moved_into(self, directory: str) -> None:
        """Files were renamed into `directory` (already durable themselves): make the new names durable."""
        if self.durable:
            sync_directory_entries(directory, self.root)

    def forget(self, directory: str) -> None:
        """`directory` was deleted (see forget_directory)."""
        if self.durable:
            forget_directory(directory)


__all__ = ["StorageWriter", "forget_directory", "fsync_directory", "make_directories", "sync_directory_entries"]
