"""Property tests of the reader-group core (rg_state) against brute-force oracles, on random streams
with random split/merge histories (tests/strategies.py) and random start cuts.

A simulation drives the pure transitions the way readers do (join, read some bytes, sync, pass
checkpoints, close, go offline) and checks after every step:
- successor readiness: a segment enters the group only when every predecessor (every lower-id
  segment sharing a key, by the grid oracle) is completed in the group or lies before the start cut;
- fairness: after a sync with no checkpoint pending, the reader holds at most ceil(open / readers);
- the group's frontier and every completed checkpoint's cut are valid stream cuts (cuts.check_cut),
  and a checkpoint's cut holds each reader's offsets from when it passed;
and at the end, after everyone reads to the end: every byte after the start cut was returned,
exactly once while nobody went offline, and otherwise again only after a stored position.
"""

from __future__ import annotations

import math
from collections import defaultdict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from strategies import ScaledStream, cell_of, predecessors, streams_with_cuts
from tidekeep.streams import rg_state as core
from tidekeep.streams.cuts import check_cut

NAME = "s/x"


def before_start(stream: ScaledStream, start: dict[int, int], seg: int) -> bool:
    """Oracle: the start cut covers some key of `seg` with a later segment."""
    lo, hi = stream.grid[seg]
    return seg not in start and any(cell_of(stream, start, c) > seg for c in range(lo, hi))


def check_invariants(stream: ScaledStream, start: dict[int, int], state: core.GroupState) -> None:
    slot = state.streams[NAME]
    for seg in slot.segments:
        if seg in start:
            continue
        assert not before_start(stream, start, seg)
        for p in predecessors(stream, seg):
            gp = slot.segments.get(p)
            done = (gp is not None and gp.status == core.COMPLETED) or (gp is None and before_start(stream, start, p))
            assert done, f"segment {seg} entered the group before its predecessor {p} was done"
    for seg, g in slot.segments.items():
        assert (g.owner is None) == (g.status != core.ASSIGNED)
        assert g.owner is None or g.owner in state.readers
        assert 0 <= g.offset <= stream.segments[seg].tail
    front = {s: e[0] for s, e in core.frontier(slot, stream.segments).items()}
    check_cut(front, stream.segments, NAME)
    for cp in state.completed:
        check_cut(cp.cuts[NAME], stream.segments, NAME)


class Simulation:
    def __init__(self, stream: ScaledStream, start: dict[int, int]) -> None:
        self.stream = stream
        self.start = start
        self.topo = {NAME: stream.segments}
        self.state = core.initial_state({NAME: start}, {NAME: None}, self.topo, 0)
        self.local: dict[str, dict[int, int]] = {}  # reader -> segment -> next offset (its own view)
        self.reads: dict[int, list[tuple[int, int]]] = defaultdict(list)  # segment -> byte ranges returned
        self.offline_floors: list[dict[int, int]] = []  # stored positions of readers that went offline
        self.passed: dict[str, dict[str, dict[int, int]]] = defaultdict(dict)  # checkpoint -> reader -> offsets
        self.now = 0
        self.counter = 0
        check_invariants(stream, start, self.state)

    def _adopt(self, rid: str) -> None:
        mine = {seg for _, seg in core.owned(self.state, rid)}
        view = self.local[rid]
        for seg in list(view):
            if seg not in mine:
                del view[seg]
        for seg in mine:
            view.setdefault(seg, self.state.streams[NAME].segments[seg].offset)

    def step(self, data: st.DataObject) -> None:
        self.now += 1
        readers = sorted(self.local)
        op = data.draw(st.sampled_from(["join", "read", "sync", "sync", "checkpoint", "close", "offline"]
                                       if readers else ["join"]))
        if op == "join":
            self.counter += 1
            rid = f"r{self.counter}"
            self.state = core.join(self.state, rid, self.now)
            self.local[rid] = {}
        elif op == "checkpoint":
            try:
                self.state = core.initiate_checkpoint(self.state, self.topo, f"c{self.now}", self.now, 2)
            except core.TooManyCheckpoints:
                assert len(self.state.pending) == 2
        else:
            rid = data.draw(st.sampled_from(readers))
            if op == "read":
                self.read(rid, data)
            elif op == "sync":
                self.sync(rid)
            elif op == "close":
                self.leave(rid, self.local[rid])
            else:
                self.offline_floors.append({s: g.offset for s, g in self.state.streams[NAME].segments.items()
                                            if g.owner == rid})
                self.leave(rid, None)
        check_invariants(self.stream, self.start, self.state)

    def read(self, rid: str, data: st.DataObject) -> None:
        view = self.local[rid]
        if not view:
            return
        seg = data.draw(st.sampled_from(sorted(view)))
        left = self.stream.segments[seg].tail - view[seg]
        step = data.draw(st.integers(0, left))
        if step:
            self.reads[seg].append((view[seg], view[seg] + step))
            view[seg] += step

    def sync(self, rid: str) -> None:
        due = core.next_checkpoint_for(self.state, rid)
        if due is not None:  # a reader returns the marker before anything else, passing at its positions
            self.passed[due][rid] = {s: o for s, o in self.local[rid].items()}
            self.state = core.pass_checkpoint(core.sync_reader(self.state, self.topo, rid, {NAME: self.local[rid]},
                                                               self.now), rid, due, {NAME: self.local[rid]}, self.now)
            self._adopt(rid)
            self.check_completed(due)
            return
        self.state = core.sync_reader(self.state, self.topo, rid, {NAME: self.local[rid]}, self.now)
        self._adopt(rid)
        if not self.state.pending:
            share = math.ceil(sum(1 for g in self.state.streams[NAME].segments.values()
                                  if g.status != core.COMPLETED) / len(self.state.readers))
            assert len(core.owned(self.state, rid)) <= share

    def check_completed(self, name: str) -> None:
        done = next((c for c in self.state.completed if c.name == name), None)
        if done is None:
            return
        for offsets in self.passed[name].values():
            for seg, off in offsets.items():
                if seg in done.cuts[NAME]:
                    assert done.cuts[NAME][seg] == off

    def leave(self, rid: str, positions: dict[int, int] | None) -> None:
        self.state = core.release_reader(self.state, self.topo, rid, None if positions is None else {NAME: positions},
                                         self.now)
        del self.local[rid]

    def finish(self) -> None:
        """One reader reads everything that is left, syncing until nothing changes."""
        if not self.local:
            self.state = core.join(self.state, "last", self.now)
            self.local["last"] = {}
        for _ in range(10_000):
            before = core.GroupState.to_dict(self.state)
            for rid in sorted(self.local):
                self.sync(rid)
                for seg in self.local[rid]:
                    tail = self.stream.segments[seg].tail
                    if self.local[rid][seg] < tail:
                        self.reads[seg].append((self.local[rid][seg], tail))
                        self.local[rid][seg] = tail
                self.sync(rid)
            check_invariants(self.stream, self.start, self.state)
            if core.GroupState.to_dict(self.state) == before:
                return
        raise AssertionError("the group never settled")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(streams_with_cuts(count=1), st.data())
def test_simulated_group_keeps_its_invariants_and_reads_everything(drawn: tuple[ScaledStream, list[dict[int, int]]],
                                                                    data: st.DataObject) -> None:
    stream, (start,) = drawn
    sim = Simulation(stream, start)
    for _ in range(data.draw(st.integers(0, 40))):
        sim.step(data)
    sim.finish()
    slot = sim.state.streams[NAME]
    # every segment after the start cut is in the group; sealed ones are completed
    expected = {s for s in stream.segments if not before_start(stream, start, s)}
    assert set(slot.segments) == expected
    for seg in expected:
        g = slot.segments[seg]
        assert g.offset == stream.segments[seg].tail
        assert (g.status == core.COMPLETED) == stream.segments[seg].sealed
        # the bytes returned cover [first, tail) of the segment; overlaps only after an offline floor
        first = start.get(seg, 0)
        covered: dict[int, int] = defaultdict(int)
        for lo, hi in sim.reads[seg]:
            assert lo >= first
            for b in range(lo, hi):
                covered[b] += 1
        assert set(covered) == set(range(first, stream.segments[seg].tail)), f"segment {seg} was not read fully"
        floors = [f[seg] for f in sim.offline_floors if seg in f]
        for b, times in covered.items():
            if times > 1:
                assert floors and b >= min(floors), f"segment {seg} byte {b} read twice without a hand-over"


@settings(max_examples=150, deadline=None)
@given(streams_with_cuts(count=1), st.data())
def test_ready_successors_match_the_predecessor_oracle(drawn: tuple[ScaledStream, list[dict[int, int]]],
                                                       data: st.DataObject) -> None:
    """For a random set of completed segments (closed under 'its predecessors are done'), the core
    adds exactly the segments whose creating epoch's sealed segments are all done, and each of them
    has every predecessor done."""
    stream, (start,) = drawn
    topo = stream.segments
    slot = core.StreamSlot(dict(start), None, {s: core.GroupSegment(o, None) for s, o in start.items()})
    done: set[int] = set()
    for seg in sorted(s for s in topo if not before_start(stream, start, s)):
        if seg in slot.segments and data.draw(st.booleans()):
            slot.segments[seg].status = core.COMPLETED
            done.add(seg)
            for new in core.ready_successors(slot, topo):
                slot.segments[new] = core.GroupSegment(0, None)
    ready = set(core.ready_successors(slot, topo))
    assert not ready  # added eagerly above

    def is_done(p: int) -> bool:
        return p in done or before_start(stream, start, p)

    for seg in slot.segments:
        if seg not in start:
            assert all(is_done(p) for p in predecessors(stream, seg))
    # oracle for what must have been added: every segment after the start whose epoch's sealed are all done
    for seg, segment in topo.items():
        if segment.epoch == 0 or seg in start or before_start(stream, start, seg):
            continue
        sealed_then = [s for s, x in topo.items() if x.sealed_epoch == segment.epoch]
        assert (seg in slot.segments) == all(is_done(p) for p in sealed_then)
