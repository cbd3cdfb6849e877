"""Which adjacent chunks of a segment compaction merges: a pure decision over their offsets.

A chunk is small when its logical length is below the target size. Compaction merges runs of
adjacent small chunks (each starting where the one before ends) into one chunk of at most the
target size, greedily from the lowest offset: a run is cut where the next chunk would take it past
the target, is not small, or does not start where the run ends. Greedy cutting of an ordered
sequence into bins of a capacity makes the fewest bins, so no other grouping leaves fewer chunks
(tests/streams/test_compaction_plan.py checks this against a brute-force count). A group always
holds at least two chunks: a lone chunk is left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class ChunkSpan:
    """A committed chunk as compaction sees it: where it lies in its segment, and its file."""

    base_offset: int
    length: int
    path: str

    @property
    def end(self) -> int:
        return self.base_offset + self.length


def plan_compaction(chunks: Sequence[ChunkSpan], target_size: int) -> list[list[ChunkSpan]]:
    """The groups to merge, in offset order; chunks in no group stay as they are."""
    if target_size <= 0:
        raise ValueError(f"target size must be positive, got {target_size}")
    groups: list[list[ChunkSpan]] = []
    run: list[ChunkSpan] = []
    total = 0
    for chunk in sorted(chunks, key=lambda c: c.base_offset):
        small = chunk.length < target_size
        if small and run and run[-1].end == chunk.base_offset and total + chunk.length <= target_size:
            run.append(chunk)
            total += chunk.length
            continue
        if len(run) > 1:
            groups.append(run)
        run, total = ([chunk], chunk.length) if small else ([], 0)
    if len(run) > 1:
        groups.append(run)
    return groups


__all__ = ["ChunkSpan", "plan_compaction"]
