"""Checking the files Spark tasks wrote before the driver records them.

A task reports every file it staged with the size its worker saw after writing it, and which task
it was. Before the driver records any of them (the sink's transaction, the ingest's archive rows)
it looks for each file in the storage it commits to: a file that is not there, or not at that size,
was written where the driver cannot see (a local path private to the task's worker) or changed
since, and the commit is refused with StagedFileMissing, before anything is recorded.

The driver lists each directory the files are in once, rather than asking for each file: a task
stages into a directory of its own, so on an object store this is one request per task instead of
one per file. (On a local disk either costs a few milliseconds for a thousand files; docs/spark.md.)
"""

from __future__ import annotations

import os
import posixpath
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import StagedFileMissing
from ..store.fileio import FileIO


@dataclass(frozen=True)
class StagedFile:
    """A file a task wrote: its path relative to the storage root, its size in bytes as the task's
    worker saw it, and the task (for the error message)."""

    path: str
    size: int
    task: str


def first_mismatch(files: Iterable[StagedFile], found: Mapping[str, int]) -> tuple[StagedFile, int | None] | None:
    """The first file that `found` (path -> size in the driver's storage) lacks or has at another
    size, with the size found (None: missing); None when every file is there as written."""
    for staged in files:
        size = found.get(staged.path)
        if size != staged.size:
            return staged, size
    return None


def stored_sizes(storage: FileIO, directories: Iterable[str]) -> dict[str, int]:
    """key -> size of the files directly in each directory (a key), one listing each."""
    sizes: dict[str, int] = {}
    for directory in sorted(set(directories)):
        for stored in storage.list_files(directory, recursive=False):
            sizes[stored.path] = stored.size
    return sizes


def verify_staged(storage: FileIO, files: Sequence[StagedFile]) -> None:
    """Raise StagedFileMissing for the first file missing from `storage` or found at another size
    than its task wrote. Changes nothing."""
    if not files:
        return
    root = storage.root
    found = stored_sizes(storage, (posixpath.dirname(f.path) for f in files))
    mismatch = first_mismatch(files, found)
    if mismatch is None:
        return
    staged, size = mismatch
    if size is None:
        raise StagedFileMissing(
            f"staged file {staged.path} is missing from storage {root} (written by {staged.task}): the task "
            "wrote where the driver cannot see, so nothing was committed; every Spark executor needs the "
            "storage the driver uses (a shared filesystem or an object store, see docs/spark.md)", staged.path)
    raise StagedFileMissing(
        f"staged file {staged.path} has {size} bytes in storage {root}, but the task wrote {staged.size} "
        f"(written by {staged.task}): nothing was committed; every Spark executor needs the storage the "
        "driver uses (a shared filesystem or an object store, see docs/spark.md)", staged.path)


def describe_task() -> str:
    """Which task this is, for the messages above: Spark's partition, attempt and stage, and the host
    (executor side); the process and host outside a Spark task."""
    from pyspark import TaskContext

    host = socket.gethostname()
    context = TaskContext.get()
    if context is None:
        return f"process {os.getpid()} on host {host}"
    return (f"partition {context.partitionId()}, attempt {context.attemptNumber()}, stage {context.stageId()}, "
            f"on host {host}")


__all__ = ["StagedFile", "describe_task", "first_mismatch", "stored_sizes", "verify_staged"]
