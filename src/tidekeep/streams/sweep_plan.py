"""The orphan sweep's decision (docs/streams.md, "The orphan sweep"): which chunk files go.

Pure: the files as listed, the paths metadata references and the cutoff in, the plan out. The
controller lists, reads the references, deletes and audits (streams/controller.py).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ..store.fileio import StoredFile


@dataclass(frozen=True)
class SweepPlan:
    doomed: list[StoredFile]  # unreferenced, and known to be at least the grace period old
    # unreferenced, but the store gave no modification time: the file's age is unknown, so it may
    # be a writer's upload that has not committed yet; it is kept, never taken for ancient
    unknown_age: list[StoredFile]


def plan_sweep(files: Iterable[StoredFile], referenced: Collection[str], cutoff_ms: int) -> SweepPlan:
    """The files to delete: those no metadata references whose modification time is at or before
    `cutoff_ms` (now − grace). A referenced file is kept however old; an unreferenced one with no
    modification time is kept and reported in `unknown_age` — deleting more than the grace rule
    allows is never an option, so an age that cannot be proven is not assumed."""
    doomed: list[StoredFile] = []
    unknown_age: list[StoredFile] = []
    for stored in files:
        if stored.path in referenced:
            continue
        if stored.mtime_ms is None:
            unknown_age.append(stored)
        elif stored.mtime_ms <= cutoff_ms:
            doomed.append(stored)
    return SweepPlan(doomed, unknown_age)


__all__ = ["SweepPlan", "plan_sweep"]
