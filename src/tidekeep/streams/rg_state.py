"""The pure core of reader groups: the group's shared state as values, and the decisions on it.

Nothing here touches the database or storage. The shell (rg_store.py) loads a GroupState and the
streams' segment topology, calls one transition, and writes the result back with optimistic
concurrency. Transitions never mutate their input; they return a new state.

Rules (see docs/reader-groups.md):
- Successors: the segments an epoch created become assignable together, once every segment that
  epoch sealed is completed (read to its final length) or lies before the group's start cut. That
  is stricter than "all of a segment's own predecessors" only for scales that seal several segments
  at once, and it keeps the group's frontier a valid stream cut at every moment (a successor read
  while a sibling still waits on another predecessor admits no valid cut).
- Fairness: each online reader holds at most ceil(open segments / online readers) segments; a
  reader over its share releases the surplus at its current position.
- Checkpoints: while one is pending nobody acquires or releases segments (as in Pravega), so the
  frontier snapshot taken when it is initiated stays a tiling; each reader overwrites the offsets
  of the segments it owned with the positions at which it passed the checkpoint.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import AlreadyExists, ConflictError, NotFound
from .model import Segment, segment_key

UNASSIGNED, ASSIGNED, COMPLETED = "UNASSIGNED", "ASSIGNED", "COMPLETED"
COMPLETED_CHECKPOINTS_KEPT = 20

SegmentMap = Mapping[int, Segment]  # every segment of one stream, as the metadata store has it now
Positions = dict[str, dict[int, int]]  # stream -> segment -> offset


class TooManyCheckpoints(ConflictError):
    """max_outstanding_checkpoints checkpoints are already pending."""


@dataclass
class GroupSegment:
    offset: int  # the next byte to read: everything before it has been returned by some reader
    end: int | None  # where reading stops: an end-cut offset, or None for the sealed tail
    owner: str | None = None
    status: str = UNASSIGNED


@dataclass
class StreamSlot:
    start: dict[int, int]  # the start cut, kept to tell which old segments lie before it
    end: dict[int, int] | None  # the end cut, None for "read on forever"
    segments: dict[int, GroupSegment] = field(default_factory=dict)


@dataclass
class PendingCheckpoint:
    name: str
    created_ms: int
    remaining: set[str]  # online readers that have not passed it yet
    # the frontier when it was initiated: stream -> segment -> [offset, owner or None]
    snapshot: dict[str, dict[int, list[Any]]]


@dataclass
class CompletedCheckpoint:
    name: str
    created_ms: int
    completed_ms: int
    cuts: Positions  # one complete, valid stream cut per stream


@dataclass
class GroupState:
    streams: dict[str, StreamSlot]
    readers: dict[str, int] = field(default_factory=dict)  # online reader -> last seen ms
    pending: list[PendingCheckpoint] = field(default_factory=list)
    completed: list[CompletedCheckpoint] = field(default_factory=list)
    last_checkpoint_ms: int = 0  # when the last checkpoint was initiated (drives automatic ones)
    auto_counter: int = 0

    # ---- JSON form (the `state` column) ---------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        def slot(s: StreamSlot) -> dict[str, Any]:
            return {"start": keys_out(s.start), "end": None if s.end is None else keys_out(s.end),
                    "segments": {segment_key(k): [g.offset, g.end, g.owner, g.status] for k, g in s.segments.items()}}

        return {
            "streams": {name: slot(s) for name, s in self.streams.items()},
            "readers": self.readers,
            "pending": [{"name": c.name, "created_ms": c.created_ms, "remaining": sorted(c.remaining),
                         "snapshot": {st: keys_out(segs) for st, segs in c.snapshot.items()}}
                        for c in self.pending],
            "completed": [{"name": c.name, "created_ms": c.created_ms, "completed_ms": c.completed_ms,
                           "cuts": {st: keys_out(p) for st, p in c.cuts.items()}} for c in self.completed],
            "last_checkpoint_ms": self.last_checkpoint_ms,
            "auto_counter": self.auto_counter,
        }

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> GroupState:
        streams = {
            name: StreamSlot(keys_in(s["start"]), None if s["end"] is None else keys_in(s["end"]),
                             {int(k): GroupSegment(*v) for k, v in s["segments"].items()})
            for name, s in data["streams"].items()
        }
        pending = [PendingCheckpoint(c["name"], c["created_ms"], set(c["remaining"]),
                                     {st: {int(k): v for k, v in segs.items()} for st, segs in c["snapshot"].items()})
                   for c in data["pending"]]
        completed = [CompletedCheckpoint(c["name"], c["created_ms"], c["completed_ms"],
                                         {st: keys_in(p) for st, p in c["cuts"].items()}) for c in data["completed"]]
        return GroupState(streams, dict(data["readers"]), pending, completed, data["last_checkpoint_ms"],
                          data["auto_counter"])


_V = TypeVar("_V")


def keys_out(positions: Mapping[int, _V]) -> dict[str, _V]:
    return {segment_key(k): v for k, v in sorted(positions.items())}


def keys_in(positions: Mapping[str, int]) -> dict[int, int]:
    return {int(k): v for k, v in positions.items()}


# ---- lineage helpers ----------------------------------------------------------------------------


def lies_before(seg: Segment, cut: Mapping[int, int], topology: SegmentMap) -> bool:
    """The whole segment is before the cut: a later segment of the cut covers part of its keys."""
    return any(c > seg.id and seg.overlaps(topology[c]) for c in cut if c in topology)


def lies_after(seg: Segment, cut: Mapping[int, int], topology: SegmentMap) -> bool:
    return any(c < seg.id and seg.overlaps(topology[c]) for c in cut if c in topology)


def end_offset(seg: Segment, end: Mapping[int, int] | None, topology: SegmentMap) -> int | None:
    """Where a reader stops in `seg`: the end cut's offset, 0 if the end cut lies before the
    segment, None (its sealed tail) otherwise."""
    if end is None:
        return None
    if seg.id in end:
        return end[seg.id]
    return 0 if lies_after(seg, end, topology) else None


def successors(seg: Segment, topology: SegmentMap) -> list[int]:
    if seg.sealed_epoch is None:
        return []
    return [s.id for s in topology.values() if s.epoch == seg.sealed_epoch and s.overlaps(seg)]


def is_finished(gseg: GroupSegment, seg: Segment) -> bool:
    if gseg.end is not None:
        return gseg.offset >= gseg.end
    return seg.sealed and gseg.offset >= seg.tail


# ---- building and refreshing ----------------------------------------------------------------------


def initial_state(starts: Mapping[str, Mapping[int, int]], ends: Mapping[str, Mapping[int, int] | None],
                  topologies: Mapping[str, SegmentMap], now_ms: int,
                  readers: Mapping[str, int] | None = None) -> GroupState:
    streams = {}
    for name, start in starts.items():
        end = ends.get(name)
        topology = topologies[name]
        segs = {s: GroupSegment(off, end_offset(topology[s], end, topology)) for s, off in start.items()}
        streams[name] = StreamSlot(dict(start), None if end is None else dict(end), segs)
    state = GroupState(streams, dict(readers or {}), last_checkpoint_ms=now_ms)
    return refresh(state, topologies)


def refresh(state: GroupState, topologies: Mapping[str, SegmentMap]) -> GroupState:
    """Complete open segments already read to their end and add successors that became ready,
    until nothing changes."""
    state = copy.deepcopy(state)
    for name, slot in state.streams.items():
        topology = topologies[name]
        changed = True
        while changed:
            changed = False
            for seg_id, gseg in slot.segments.items():
                if gseg.status == UNASSIGNED and is_finished(gseg, topology[seg_id]):
                    gseg.status = COMPLETED
                    changed = True
            for new_seg in ready_successors(slot, topology):
                slot.segments[new_seg] = GroupSegment(0, end_offset(topology[new_seg], slot.end, topology))
                changed = True
    return state


def ready_successors(slot: StreamSlot, topology: SegmentMap) -> list[int]:
    """Segments not yet in the group whose creating epoch's sealed segments are all done."""
    by_epoch: dict[int, list[Segment]] = {}
    sealed_in: dict[int, list[Segment]] = {}
    for seg in topology.values():
        by_epoch.setdefault(seg.epoch, []).append(seg)
        if seg.sealed_epoch is not None:
            sealed_in.setdefault(seg.sealed_epoch, []).append(seg)
    ready: list[int] = []
    for epoch, created in sorted(by_epoch.items()):
        if epoch == 0 or epoch not in sealed_in:
            continue
        missing = [s for s in created if s.id not in slot.segments and not lies_before(s, slot.start, topology)]
        if not missing:
            continue
        if all(_done(p, slot, topology) for p in sealed_in[epoch]):
            ready.extend(s.id for s in missing)
    return sorted(ready)


def _done(seg: Segment, slot: StreamSlot, topology: SegmentMap) -> bool:
    gseg = slot.segments.get(seg.id)
    if gseg is not None:
        return gseg.status == COMPLETED
    return lies_before(seg, slot.start, topology)


def frontier(slot: StreamSlot, topology: SegmentMap) -> dict[int, list[Any]]:
    """The group's position in one stream as a cut: open segments at their offsets, and completed
    ones whose successors are not in the group yet at their final offsets."""
    result = {}
    for seg_id, gseg in sorted(slot.segments.items()):
        if gseg.status == COMPLETED:
            succ = successors(topology[seg_id], topology)
            if succ and all(s in slot.segments for s in succ):
                continue
        result[seg_id] = [gseg.offset, gseg.owner]
    return result


# ---- readers ---------------------------------------------------------------------------------------


def join(state: GroupState, reader_id: str, now_ms: int) -> GroupState:
    if reader_id in state.readers:
        raise AlreadyExists(f"reader {reader_id!r} is already online in this reader group")
    state = copy.deepcopy(state)
    state.readers[reader_id] = now_ms
    return state


def fair_share(state: GroupState) -> int:
    open_segments = sum(1 for slot in state.streams.values() for g in slot.segments.values()
                        if g.status != COMPLETED)
    return math.ceil(open_segments / len(state.readers)) if state.readers else 0


def owned(state: GroupState, reader_id: str) -> list[tuple[str, int]]:
    return [(name, seg) for name, slot in sorted(state.streams.items()) for seg, g in sorted(slot.segments.items())
            if g.owner == reader_id and g.status == ASSIGNED]


def sync_reader(state: GroupState, topologies: Mapping[str, SegmentMap], reader_id: str,
                positions: Mapping[str, Mapping[int, int]], now_ms: int, auto_interval_ms: int | None = None,
                max_outstanding: int = 3) -> GroupState:
    """A reader reports its positions (stream -> segment -> next offset) for the segments it owns;
    segments read to their end complete, successors become ready, and (with no checkpoint pending)
    the reader releases its surplus and acquires up to its fair share."""
    if reader_id not in state.readers:
        raise NotFound(f"reader {reader_id!r} is not online in this reader group")
    state = copy.deepcopy(state)
    state.readers[reader_id] = now_ms
    for name, segs in positions.items():
        slot = state.streams[name]
        for seg_id, offset in segs.items():
            gseg = slot.segments.get(seg_id)
            if gseg is None or gseg.owner != reader_id or gseg.status != ASSIGNED:
                continue  # taken away meanwhile (reader_offline): the position is no longer ours to write
            gseg.offset = max(gseg.offset, offset)
            if is_finished(gseg, topologies[name][seg_id]):
                gseg.status, gseg.owner = COMPLETED, None
    state = refresh(state, topologies)
    if auto_interval_ms is not None and now_ms - state.last_checkpoint_ms >= auto_interval_ms \
            and len(state.pending) < max_outstanding:
        taken = checkpoint_names(state)
        state.auto_counter += 1
        while f"auto-{state.auto_counter}" in taken:  # a user may have named a checkpoint like that
            state.auto_counter += 1
        state = initiate_checkpoint(state, topologies, f"auto-{state.auto_counter}", now_ms, max_outstanding)
    if not state.pending:
        _rebalance(state, reader_id)
    return state


def wants_sync(state: GroupState, reader_id: str) -> bool:
    """Whether the group needs `reader_id` to sync before its regular time: a checkpoint waits for
    it, it is no longer online (its next sync says so), or, with no checkpoint pending, it holds
    more than its fair share or fewer while segments wait for a reader."""
    if reader_id not in state.readers or next_checkpoint_for(state, reader_id) is not None:
        return True
    if state.pending:
        return False  # nobody acquires or releases while a checkpoint is pending
    share, mine = fair_share(state), len(owned(state, reader_id))
    if mine > share:
        return True
    return mine < share and any(g.status == UNASSIGNED for slot in state.streams.values()
                                for g in slot.segments.values())


def only_seen_differs(before: GroupState, after: GroupState, reader_id: str) -> bool:
    """`after` is `before` with at most `reader_id`'s last-seen time moved: nothing to store but that."""
    if reader_id not in before.readers:
        return False
    return dataclasses.replace(after, readers={**after.readers, reader_id: before.readers[reader_id]}) == before


def _rebalance(state: GroupState, reader_id: str) -> None:
    share = fair_share(state)
    mine = owned(state, reader_id)
    for name, seg in mine[share:]:  # release the surplus at the reported positions
        gseg = state.streams[name].segments[seg]
        gseg.owner, gseg.status = None, UNASSIGNED
    room = share - len(mine)
    for _name, slot in sorted(state.streams.items()):
        for gseg in (g for _, g in sorted(slot.segments.items())):
            if room <= 0:
                return
            if gseg.status == UNASSIGNED:
                gseg.owner, gseg.status = reader_id, ASSIGNED
                room -= 1


def release_reader(state: GroupState, topologies: Mapping[str, SegmentMap], reader_id: str,
                   positions: Mapping[str, Mapping[int, int]] | None, now_ms: int) -> GroupState:
    """A reader leaves (close, or reader_offline after a crash): its segments go back to the pool
    at `positions` where given, else at the last offsets it stored; checkpoints stop waiting for it."""
    if reader_id not in state.readers:
        raise NotFound(f"reader {reader_id!r} is not online in this reader group")
    state = copy.deepcopy(state)
    handed: dict[str, dict[int, int]] = {}
    for name, seg in owned(state, reader_id):
        gseg = state.streams[name].segments[seg]
        given = (positions or {}).get(name, {}).get(seg)
        if given is not None:
            gseg.offset = given
        gseg.owner, gseg.status = None, UNASSIGNED
        handed.setdefault(name, {})[seg] = gseg.offset
    del state.readers[reader_id]
    for cp in state.pending:
        if reader_id in cp.remaining:
            cp.remaining.discard(reader_id)
            for name, segs in cp.snapshot.items():
                for seg, entry in segs.items():
                    if entry[1] == reader_id:
                        entry[0] = handed.get(name, {}).get(seg, state.streams[name].segments[seg].offset)
    state = refresh(state, topologies)
    return _complete_finished(state, now_ms)


# ---- checkpoints ------------------------------------------------------------------------------------


def checkpoint_names(state: GroupState) -> set[str]:
    return {c.name for c in state.pending} | {c.name for c in state.completed}


def initiate_checkpoint(state: GroupState, topologies: Mapping[str, SegmentMap], name: str, now_ms: int,
                        max_outstanding: int) -> GroupState:
    if name in checkpoint_names(state):
        raise AlreadyExists(f"checkpoint {name!r} already exists in this reader group")
    if len(state.pending) >= max_outstanding:
        raise TooManyCheckpoints(f"cannot initiate checkpoint {name!r}: {len(state.pending)} checkpoints are "
                                 f"already pending (max_outstanding_checkpoints={max_outstanding})")
    state = copy.deepcopy(state)
    snapshot = {n: frontier(slot, topologies[n]) for n, slot in state.streams.items()}
    state.pending.append(PendingCheckpoint(name, now_ms, set(state.readers), snapshot))
    state.last_checkpoint_ms = now_ms
    return _complete_finished(state, now_ms)


def next_checkpoint_for(state: GroupState, reader_id: str) -> str | None:
    return next((c.name for c in state.pending if reader_id in c.remaining), None)


def pass_checkpoint(state: GroupState, reader_id: str, name: str, positions: Mapping[str, Mapping[int, int]],
                    now_ms: int) -> GroupState:
    """The reader returned the checkpoint event for `name`: its positions go into the checkpoint."""
    state = copy.deepcopy(state)
    cp = next((c for c in state.pending if c.name == name), None)
    if cp is None or reader_id not in cp.remaining:
        return state
    for stream, segs in cp.snapshot.items():
        for seg, entry in segs.items():
            if entry[1] == reader_id:
                here = positions.get(stream, {}).get(seg)
                entry[0] = here if here is not None else state.streams[stream].segments[seg].offset
    cp.remaining.discard(reader_id)
    return _complete_finished(state, now_ms)


def _complete_finished(state: GroupState, now_ms: int) -> GroupState:
    still = []
    for cp in state.pending:
        if cp.remaining:
            still.append(cp)
            continue
        cuts = {stream: {seg: entry[0] for seg, entry in segs.items()} for stream, segs in cp.snapshot.items()}
        state.completed.append(CompletedCheckpoint(cp.name, cp.created_ms, now_ms, cuts))
    state.pending = still
    state.completed = state.completed[-COMPLETED_CHECKPOINTS_KEPT:]
    return state

