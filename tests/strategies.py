"""Shared hypothesis strategies and brute-force oracles for the stream model and cut algebra.

Random scaled streams are built here independently of `tidekeep.streams.model.plan_scale`, on a
grid of 1/64: every key boundary is an exact binary fraction, so float comparisons in the code
under test and in the oracles agree exactly.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from hypothesis import strategies as st

from tidekeep.streams.model import Segment

GRID = 64  # key-space resolution of generated streams: boundaries are multiples of 1/GRID


def make_id(epoch: int, number: int) -> int:
    """Segment id from the documented definition, spelled out independently of model.segment_id."""
    return epoch * 2**32 + number


@dataclass(frozen=True)
class ScaledStream:
    """A stream after a random history of splits and merges. `segments` holds every segment ever
    created (sealed ones keep their final tail); `grid` maps each segment to its [low, high) in
    grid units."""

    segments: dict[int, Segment]
    grid: dict[int, tuple[int, int]]
    epoch: int

    @property
    def ranges(self) -> dict[int, tuple[float, float]]:
        return {s: (seg.key_low, seg.key_high) for s, seg in self.segments.items()}

    @property
    def active(self) -> list[int]:
        return sorted(s for s, seg in self.segments.items() if not seg.sealed)


@st.composite
def scaled_streams(draw: st.DrawFn, max_initial: int = 3, max_scales: int = 5, max_tail: int = 40) -> ScaledStream:
    """Epoch 0 with 1..max_initial segments, then up to max_scales scales. Each scale either splits
    one active segment into 1..3 parts (one part = a successor with the same range) or merges 2..3
    adjacent active segments. Every segment gets a random tail length; sealed ones keep theirs."""
    initial = draw(st.integers(1, max_initial))
    cuts = sorted(draw(st.sets(st.integers(1, GRID - 1), min_size=initial - 1, max_size=initial - 1)))
    bounds = [0, *cuts, GRID]
    grid: dict[int, tuple[int, int]] = {make_id(0, i): (bounds[i], bounds[i + 1]) for i in range(initial)}
    sealed_in: dict[int, int] = {}
    active = sorted(grid, key=lambda s: grid[s][0])
    next_number, epoch = initial, 0
    for _ in range(draw(st.integers(0, max_scales))):
        if len(active) > 1 and draw(st.booleans()):
            start = draw(st.integers(0, len(active) - 2))
            length = draw(st.integers(2, min(3, len(active) - start)))
            sealed = active[start:start + length]
            new_ranges = [(grid[sealed[0]][0], grid[sealed[-1]][1])]
        else:
            victim = draw(st.sampled_from(active))
            low, high = grid[victim]
            inner = list(range(low + 1, high))
            points = sorted(draw(st.sets(st.sampled_from(inner), max_size=min(2, len(inner))))) if inner else []
            edges = [low, *points, high]
            sealed = [victim]
            new_ranges = list(itertools.pairwise(edges))
        epoch += 1
        for s in sealed:
            sealed_in[s] = epoch
        created = []
        for lo, hi in new_ranges:
            seg = make_id(epoch, next_number)
            next_number += 1
            grid[seg] = (lo, hi)
            created.append(seg)
        active = sorted([s for s in active if s not in sealed] + created, key=lambda s: grid[s][0])
    segments = {
        s: Segment(
            id=s,
            key_low=lo / GRID,
            key_high=hi / GRID,
            tail=draw(st.integers(0, max_tail)),
            sealed=s in sealed_in,
            sealed_epoch=sealed_in.get(s),
        )
        for s, (lo, hi) in grid.items()
    }
    return ScaledStream(segments, grid, epoch)


# ---- brute-force oracles for cut validity -----------------------------------------------------------


def predecessors(stream: ScaledStream, seg: int) -> set[int]:
    """Segments whose key range overlaps `seg`'s and whose id is lower (the documented definition)."""
    lo, hi = stream.grid[seg]
    return {o for o, (olo, ohi) in stream.grid.items() if o < seg and olo < hi and ohi > lo}


def done_sets(stream: ScaledStream) -> Iterator[frozenset[int]]:
    """Every predecessor-closed set of segments (a set that holds each member's predecessors)."""
    order = sorted(stream.segments)
    preds = {s: predecessors(stream, s) for s in order}

    def walk(i: int, chosen: frozenset[int]) -> Iterator[frozenset[int]]:
        if i == len(order):
            yield chosen
            return
        seg = order[i]
        yield from walk(i + 1, chosen)
        if preds[seg] <= chosen:
            yield from walk(i + 1, chosen | {seg})

    yield from walk(0, frozenset())


def ready_set(stream: ScaledStream, done: frozenset[int]) -> frozenset[int]:
    return frozenset(s for s in stream.segments if s not in done and predecessors(stream, s) <= done)


def tiles_key_space(stream: ScaledStream, segs: frozenset[int]) -> bool:
    """The segments' grid ranges cover [0, GRID) exactly once."""
    covered = [0] * GRID
    for s in segs:
        lo, hi = stream.grid[s]
        for cell in range(lo, hi):
            covered[cell] += 1
    return all(c == 1 for c in covered)


def tiling_sets(stream: ScaledStream) -> set[frozenset[int]]:
    """Every set of segments that covers each key exactly once, valid cut or not: the candidates
    whose rejection can only come from the lineage rule."""
    starting_at: dict[int, list[int]] = {}
    for seg, (lo, _) in stream.grid.items():
        starting_at.setdefault(lo, []).append(seg)

    def extend(cursor: int) -> Iterator[frozenset[int]]:
        if cursor == GRID:
            yield frozenset()
            return
        for seg in starting_at.get(cursor, []):
            for rest in extend(stream.grid[seg][1]):
                yield rest | {seg}

    return set(extend(0))


def valid_cut_frontiers(stream: ScaledStream) -> dict[frozenset[int], frozenset[int]]:
    """Valid cut segment sets, each with its done set: a set is a valid cut iff it is the ready set
    of some predecessor-closed done set and covers every key exactly once."""
    result: dict[frozenset[int], frozenset[int]] = {}
    for done in done_sets(stream):
        ready = ready_set(stream, done)
        if ready and tiles_key_space(stream, ready):
            result[ready] = done
    return result


def cell_of(stream: ScaledStream, cut: Mapping[int, int], cell: int) -> int:
    """The cut segment whose range holds grid cell `cell`."""
    return next(s for s in cut if stream.grid[s][0] <= cell < stream.grid[s][1])


def position_in(stream: ScaledStream, cut: Mapping[int, int], seg: int) -> int:
    """How far a valid cut lies into `seg`, judged by key: find the cut segment at each of seg's
    cells; the same segment -> its offset, a later one -> seg's whole tail, an earlier one -> 0.
    Asserts that every cell of seg gives the same answer (a property of valid cuts)."""
    answers = set()
    lo, hi = stream.grid[seg]
    for cell in range(lo, hi):
        at = cell_of(stream, cut, cell)
        if at == seg:
            answers.add(cut[seg])
        elif at > seg:
            answers.add(stream.segments[seg].tail)
        else:
            answers.add(0)
    assert len(answers) == 1, f"cut {cut} is inconsistent within segment {seg}"
    return answers.pop()


# ---- drawing valid cuts -----------------------------------------------------------------------------


def draw_offsets(draw: st.DrawFn, stream: ScaledStream, segs: frozenset[int],
                 at_least: Mapping[int, int] | None = None) -> dict[int, int]:
    floor = at_least or {}
    return {s: draw(st.integers(floor.get(s, 0), stream.segments[s].tail)) for s in sorted(segs)}


@st.composite
def streams_with_cuts(draw: st.DrawFn, count: int = 2, ordered: bool = False,
                      **stream_args: int) -> tuple[ScaledStream, list[dict[int, int]]]:
    """A scaled stream and `count` valid cuts of it. With `ordered`, each cut is at or after the
    previous one: its done set contains the previous done set and shared segments do not go back."""
    stream = draw(scaled_streams(**stream_args))
    frontiers = valid_cut_frontiers(stream)
    choices = sorted(frontiers.items(), key=lambda item: sorted(item[0]))
    cuts: list[dict[int, int]] = []
    previous_done: frozenset[int] | None = None
    for _ in range(count):
        if ordered and previous_done is not None:
            later = [item for item in choices if previous_done <= item[1]]
            segs, done = draw(st.sampled_from(later))
            floor = {s: o for s, o in cuts[-1].items() if s in segs}
            cuts.append(draw_offsets(draw, stream, segs, floor))
        else:
            segs, done = draw(st.sampled_from(choices))
            cuts.append(draw_offsets(draw, stream, segs))
        previous_done = done
    return stream, cuts


names = st.from_regex(r"[A-Za-z0-9_-]{1,20}", fullmatch=True)
stream_names = st.builds(lambda scope, stream: f"{scope}/{stream}", names, names)
