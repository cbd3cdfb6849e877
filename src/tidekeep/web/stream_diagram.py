"""The geometry of a stream's epochs-and-segments diagram, drawn as inline SVG by the stream page
(templates/streams/stream.html): x is the epoch, y the key range [0, 1), one rectangle per segment
from the epoch that created it to the epoch that sealed it (or the current one), and a link from
each predecessor to each successor whose key ranges overlap — the splits and merges over time.
Pure: no query, no markup."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..streams.model import Segment, segment_name

WIDTH = 760
HEIGHT = 300
LEFT = 48  # room for the key labels
TOP = 8
BOTTOM = 28  # room for the epoch labels
GAP = 14  # between epoch columns, where the predecessor links run


@dataclass(frozen=True)
class Box:
    segment: str
    x: float
    y: float
    width: float
    height: float
    sealed: bool
    label: str  # what the box says when hovered (its <title>)
    show_name: bool  # whether the name fits inside the box


@dataclass(frozen=True)
class Link:
    x1: float
    y1: float
    x2: float
    y2: float


@dataclass(frozen=True)
class Tick:
    x: float
    y: float
    text: str


@dataclass(frozen=True)
class Diagram:
    width: int
    height: int
    boxes: list[Box]
    links: list[Link]
    epoch_ticks: list[Tick]
    key_ticks: list[Tick]
    description: str  # the diagram in words, for its aria-label


def stream_diagram(segments: Iterable[Segment], current_epoch: int) -> Diagram:
    shown = sorted(segments, key=lambda s: s.id)
    columns = current_epoch + 1
    column = (WIDTH - LEFT) / columns
    plot = HEIGHT - TOP - BOTTOM

    def x_of(epoch: int) -> float:
        return LEFT + epoch * column

    def y_of(key: float) -> float:
        return TOP + key * plot

    def end_of(s: Segment) -> int:
        return current_epoch + 1 if s.sealed_epoch is None else s.sealed_epoch

    boxes = []
    for s in shown:
        x, width = x_of(s.epoch) + GAP / 2, (end_of(s) - s.epoch) * column - GAP
        y, height = y_of(s.key_low), max((s.key_high - s.key_low) * plot, 1.0)
        state = "sealed" if s.sealed else "active"
        label = (f"segment {segment_name(s.id)}: keys [{s.key_low:g}, {s.key_high:g}), {state}, "
                 f"offsets {s.head} to {s.tail}")
        boxes.append(Box(segment_name(s.id), round(x, 1), round(y, 1), round(max(width, 2.0), 1), round(height, 1),
                         s.sealed, label, width >= 36 and height >= 14))
    sealed_in: dict[int, list[Segment]] = {}  # the segments each scaling sealed, by that scaling's epoch
    for s in shown:
        if s.sealed_epoch is not None:
            sealed_in.setdefault(s.sealed_epoch, []).append(s)
    links = []
    for successor in shown:
        for predecessor in sealed_in.get(successor.epoch, []):
            if predecessor.overlaps(successor):
                # from the middle of the one to the middle of the other: a split fans out, a merge in
                links.append(Link(round(x_of(successor.epoch) - GAP / 2, 1),
                                  round(y_of((predecessor.key_low + predecessor.key_high) / 2), 1),
                                  round(x_of(successor.epoch) + GAP / 2, 1),
                                  round(y_of((successor.key_low + successor.key_high) / 2), 1)))
    step = max(1, columns // 12)  # at most about a dozen epoch labels
    epoch_ticks = [Tick(round(x_of(e) + column / 2, 1), HEIGHT - 10, str(e)) for e in range(0, columns, step)]
    key_ticks = [Tick(LEFT - 6, round(y_of(k), 1) + 4, f"{k:g}") for k in (0.0, 0.25, 0.5, 0.75, 1.0)]
    sealed = sum(1 for s in shown if s.sealed)
    description = (f"{len(shown)} segments over {columns} epochs ({sealed} sealed, {len(shown) - sealed} active), "
                   f"{len(links)} predecessor links")
    return Diagram(WIDTH, HEIGHT, boxes, links, epoch_ticks, key_ticks, description)
