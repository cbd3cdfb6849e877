"""The compaction plan (streams/compaction_plan.py) against brute force: which adjacent chunks of a
segment are merged, and that no other grouping within the rules leaves fewer chunks."""

from __future__ import annotations

import functools
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.streams.compaction_plan import ChunkSpan, plan_compaction


@st.composite
def segments(draw: st.DrawFn) -> tuple[list[ChunkSpan], int]:
    """Chunks of one segment in offset order, with now and then a gap (a truncated or missing range),
    and a target size."""
    target = draw(st.integers(1, 60))
    lengths = draw(st.lists(st.integers(1, 80), max_size=14))
    chunks, offset = [], draw(st.integers(0, 50))
    for i, length in enumerate(lengths):
        if draw(st.integers(0, 5)) == 0:
            offset += draw(st.integers(1, 10))
        chunks.append(ChunkSpan(offset, length, f"c{i}"))
        offset += length
    return chunks, target


def chunks_after(chunks: list[ChunkSpan], groups: list[list[ChunkSpan]]) -> int:
    """How many chunks the segment holds once `groups` are merged."""
    return len(chunks) - sum(len(g) - 1 for g in groups)


def fewest_chunks(chunks: list[ChunkSpan], target: int) -> int:
    """Brute force: try every way of cutting the sequence into runs, keep those a merge may make
    (one chunk as it is, or adjacent chunks each below the target, together at most the target)."""
    @functools.cache
    def best(start: int) -> int:
        if start == len(chunks):
            return 0
        result = 1 + best(start + 1)  # the chunk stays as it is
        total = chunks[start].length
        if total >= target:
            return result
        for stop in range(start + 1, len(chunks)):
            nxt = chunks[stop]
            if nxt.length >= target or chunks[stop - 1].end != nxt.base_offset or total + nxt.length > target:
                break
            total += nxt.length
            result = min(result, 1 + best(stop + 1))
        return result

    return best(0)


@given(segments())
def test_groups_follow_the_rules(case: tuple[list[ChunkSpan], int]) -> None:
    chunks, target = case
    groups = plan_compaction(chunks, target)
    seen: set[str] = set()
    for group in groups:
        assert len(group) >= 2
        assert all(c.length < target for c in group)
        assert sum(c.length for c in group) <= target
        assert all(a.end == b.base_offset for a, b in itertools.pairwise(group))  # adjacent, in order
        assert not seen & {c.path for c in group}
        seen |= {c.path for c in group}
    # groups come in offset order
    firsts = [g[0].base_offset for g in groups]
    assert firsts == sorted(firsts)


@given(segments())
def test_no_grouping_leaves_fewer_chunks(case: tuple[list[ChunkSpan], int]) -> None:
    chunks, target = case
    assert chunks_after(chunks, plan_compaction(chunks, target)) == fewest_chunks(chunks, target)


@given(segments())
def test_a_compacted_segment_has_nothing_more_to_merge_in_one_pass(case: tuple[list[ChunkSpan], int]) -> None:
    """Planning again over the result merges nothing: one run reaches the fixed point."""
    chunks, target = case
    merged = {c.path for g in plan_compaction(chunks, target) for c in g}
    after = [c for c in chunks if c.path not in merged] + [
        ChunkSpan(g[0].base_offset, sum(c.length for c in g), f"m{i}")
        for i, g in enumerate(plan_compaction(chunks, target))]
    assert plan_compaction(after, target) == []


def test_examples() -> None:
    small = [ChunkSpan(i * 10, 10, f"c{i}") for i in range(5)]
    assert [[c.path for c in g] for g in plan_compaction(small, 30)] == [["c0", "c1", "c2"], ["c3", "c4"]]
    big_in_between = [ChunkSpan(0, 10, "a"), ChunkSpan(10, 50, "big"), ChunkSpan(60, 10, "b"), ChunkSpan(70, 10, "c")]
    assert [[c.path for c in g] for g in plan_compaction(big_in_between, 30)] == [["b", "c"]]
    gap = [ChunkSpan(0, 10, "a"), ChunkSpan(20, 10, "b")]  # b does not start where a ends
    assert plan_compaction(gap, 30) == []
    with pytest.raises(ValueError):
        plan_compaction(small, 0)
