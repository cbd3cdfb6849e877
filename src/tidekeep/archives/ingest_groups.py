"""Which input files each ingest task reads, decided on the driver before any file is parsed in
full (pure: no store, storage or Spark).

Each task reads its files whole, once, and writes their messages into archives itself, so no
shuffle moves every message between tasks (docs/archives-ingest.md, "Tasks"). The driver samples
each file cheaply (the timestamps in its first 64 KiB, ingest.survey_input) and orders the files by
time: files whose sample holds no timestamp first, in the order given, then by their first
timestamp, directory and order given. The order is cut into runs of about equal bytes, one per
task, so a task's archives hold a stretch of time and the tasks' archives overlap in time only
where their files do.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ASSUMED_COMPRESSION = 8  # text logs: raw bytes per stored byte, to size the tasks
BIG_INPUT_PER_CORE = 64 << 20


@dataclass(frozen=True)
class FileSpan:
    """What the driver's sample says about one input file."""

    raw_bytes: int
    first_ts: int | None  # None: no timestamp in its first block
    directory: str


def task_count(raw_bytes: int, target_size: int, parallelism: int) -> int:
    """How many tasks an ingest of `raw_bytes` of text uses (before the file count caps it). Each
    task rolls its own archives at the target size and ends with one smaller archive, so more tasks
    than ceil(expected stored size / target) only make small archives; the stored size is estimated
    at 1/8 of the text. A big input (>= 64 MiB of text per core) still gets a task per core: parsing
    and encoding are then the slow part, and archives of a fraction of the target are fine. Not more:
    every task makes archives of its own, and a search pays per archive (docs/benchmarks.md,
    "Compiled kernels, and ingest without a shuffle": four tasks per core made searches 1.5-2x
    slower)."""
    expected = math.ceil(raw_bytes / ASSUMED_COMPRESSION / target_size) if raw_bytes else 1
    count = max(1, expected)
    if raw_bytes >= BIG_INPUT_PER_CORE * parallelism:
        count = max(count, parallelism)
    return count


def time_order(files: Sequence[FileSpan]) -> list[int]:
    """The files' indices in the order the tasks take them (the module docstring)."""
    return sorted(range(len(files)), key=lambda i: (files[i].first_ts is not None, files[i].first_ts or 0,
                                                    files[i].directory, i))


def file_groups(files: Sequence[FileSpan], tasks: int) -> list[list[int]]:
    """min(tasks, files) non-empty runs of `time_order(files)`, one per task. Each run is closed at
    the file that brings it closest to an equal share of the bytes still to place."""
    order = time_order(files)
    count = max(1, min(tasks, len(order)))
    groups: list[list[int]] = []
    left = sum(files[i].raw_bytes for i in order)
    at = 0
    for group in range(count, 0, -1):  # groups still to fill, this one included
        share = left / group
        taken: list[int] = []
        size = 0
        # leave at least one file for each group after this one
        while at < len(order) - (group - 1):
            next_size = files[order[at]].raw_bytes
            if taken and group > 1 and abs(size + next_size - share) > abs(size - share):
                break
            taken.append(order[at])
            size += next_size
            at += 1
        groups.append(taken)
        left -= size
    return groups


__all__ = ["FileSpan", "file_groups", "task_count", "time_order"]
