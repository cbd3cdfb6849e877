"""Resetting a reader group to new positions: Kafka's `--reset-offsets --to-earliest/--to-latest/
--to-offset`, Pravega's `resetReaderGroup` with starting stream cuts (docs/reader-groups.md).

`plan_reset` turns a target — every stream's head, every stream's tail, one cut per stream, or a
completed checkpoint of the group — into the new start cut of each stream, next to the position the
group has reached now; it changes nothing (`rg reset --dry-run` prints it). `apply_reset` resets
the group to the plan through ReaderGroup.reset, keeping its end cuts and options; it is refused
while readers are members unless `allow_online_readers`.

A target before a stream's head (data truncated away since the cut or checkpoint was taken) is
refused with TruncatedData naming the head, rather than silently moved: the group would otherwise
skip data its user asked to re-read without saying so. `--to head` is the explicit way to clamp.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput, InvalidStreamCut, TruncatedData
from . import rg_state as core
from .cuts import CutOrder, StreamCut
from .readergroup import ReaderGroup, ReaderGroupConfig, RetentionType

HEAD, TAIL, CUTS, CHECKPOINT = "head", "tail", "cuts", "checkpoint"


@dataclass(frozen=True)
class ResetTarget:
    kind: str  # HEAD, TAIL, CUTS or CHECKPOINT
    cuts: tuple[StreamCut | str, ...] = ()  # CUTS: one per stream of the group
    checkpoint: str | None = None  # CHECKPOINT: its name

    @staticmethod
    def head() -> ResetTarget:
        return ResetTarget(HEAD)

    @staticmethod
    def tail() -> ResetTarget:
        return ResetTarget(TAIL)

    @staticmethod
    def to_cuts(cuts: Sequence[StreamCut | str]) -> ResetTarget:
        return ResetTarget(CUTS, cuts=tuple(cuts))

    @staticmethod
    def to_checkpoint(name: str) -> ResetTarget:
        return ResetTarget(CHECKPOINT, checkpoint=name)


@dataclass(frozen=True)
class StreamReset:
    stream: str
    current: StreamCut  # where the group is now (its frontier)
    new: StreamCut  # where it starts after the reset


@dataclass(frozen=True)
class ResetPlan:
    group: str
    generation: int  # the group's generation the plan was made against
    target: ResetTarget
    streams: tuple[StreamReset, ...]
    online_readers: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"reader_group": self.group, "generation": self.generation, "target": self.target.kind,
                "checkpoint": self.target.checkpoint, "online_readers": list(self.online_readers),
                "streams": {r.stream: {"current": str(r.current), "new": str(r.new)} for r in self.streams}}


def plan_reset(group: ReaderGroup, target: ResetTarget) -> ResetPlan:
    """The new start cut of every stream of the group (typed errors for a bad target; nothing changes)."""
    row = group.row()
    controller = group.controller
    streams = sorted(row.config["streams"])
    chosen = _target_positions(group, target, streams)
    resets = []
    for name in streams:
        state = controller.state(name)
        slot = row.state.streams[name]
        current = {seg: entry[0] for seg, entry in core.frontier(slot, state.segments).items()}
        new = chosen[name] if name in chosen else (dict(state.head) if target.kind == HEAD else state.tail())
        order = state.topology().compare(new, state.head)
        if order in (CutOrder.BEFORE, CutOrder.OVERLAPS):
            raise TruncatedData(f"cannot reset reader group {group.name!r}: the {_what(target)} "
                                f"{state.shown(new)} is before the head {state.shown(state.head)} of {name} "
                                "(truncated away); reset to the head instead (rg reset --to head)")
        resets.append(StreamReset(name, state.cut(current), state.cut(new)))
    return ResetPlan(group.name, row.generation, target, tuple(resets), tuple(sorted(row.state.readers)))


def apply_reset(group: ReaderGroup, plan: ResetPlan, allow_online_readers: bool = False) -> int:
    """Reset the group to the plan's cuts, keeping its end cuts and options; returns the new generation."""
    config = group.config
    ends: dict[str, Any] = {name: s["end"] for name, s in config["streams"].items()}
    streams: dict[str, tuple[StreamCut | str | None, StreamCut | str | None]] = {}
    for r in plan.streams:
        end = ends.get(r.stream)
        streams[r.stream] = (r.new, None if end is None else StreamCut(
            r.stream, {int(k): v for k, v in end.items()}, uid=r.new.uid))
    interval = config["automatic_checkpoint_interval_ms"]
    new_config = ReaderGroupConfig(
        streams=streams, retention_type=RetentionType(config["retention_type"]),
        automatic_checkpoint_interval=interval, max_outstanding_checkpoints=config["max_outstanding_checkpoints"],
        skip_truncated=config["skip_truncated"])
    return group.reset(new_config, allow_online_readers=allow_online_readers)


def _target_positions(group: ReaderGroup, target: ResetTarget, streams: Sequence[str]) -> Mapping[str, dict[int, int]]:
    """stream -> positions for CUTS and CHECKPOINT (validated); empty for HEAD and TAIL."""
    controller = group.controller
    if target.kind in (HEAD, TAIL):
        return {}
    if target.kind == CHECKPOINT:
        assert target.checkpoint is not None
        done = group.checkpoint(target.checkpoint)  # NotFound if the group has no such checkpoint
        if done is None:
            raise InvalidInput(f"checkpoint {target.checkpoint!r} of reader group {group.name!r} has not completed "
                               "yet: wait for it, or reset to another target")
        return {name: dict(cut.positions) for name, cut in done.cuts.items()}
    if target.kind != CUTS:
        raise InvalidInput(f"invalid reset target {target.kind!r}: use head, tail, cuts or checkpoint")
    chosen: dict[str, dict[int, int]] = {}
    for text in target.cuts:
        cut = StreamCut.parse(text) if isinstance(text, str) else text
        if cut.stream not in streams:
            raise InvalidStreamCut(f"cut {cut} is for stream {cut.stream}, which reader group {group.name!r} does not "
                                   f"read (it reads {', '.join(streams)})")
        if cut.stream in chosen:
            raise InvalidInput(f"two cuts given for stream {cut.stream}: give one per stream")
        chosen[cut.stream] = controller.to_positions(controller.state(cut.stream), cut)
    missing = [s for s in streams if s not in chosen]
    if missing:
        raise InvalidInput(f"no cut given for stream {', '.join(missing)} of reader group {group.name!r}: "
                           "give one cut per stream it reads")
    return chosen


def _what(target: ResetTarget) -> str:
    return f"checkpoint {target.checkpoint!r} cut" if target.kind == CHECKPOINT else "cut"


__all__ = ["CHECKPOINT", "CUTS", "HEAD", "TAIL", "ResetPlan", "ResetTarget", "StreamReset",
           "apply_reset", "plan_reset"]
