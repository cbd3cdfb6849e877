"""The archive timeline of a dataset's page: where each archive's bar lies on a time axis, where
the expiry line (now − archive_output.retention_period) lies, and which archive passes its
retention next. Pure values for the template's inline SVG (docs/dashboard.md, "Archives"); the
expiry rule is the collector's own (archives/expiry.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from ..archives.expiry import is_expired, retention_ms
from ..archives.model import Archive

# the SVG's coordinate system (viewBox units)
WIDTH = 1000
LEFT = 10
PLOT_WIDTH = WIDTH - 2 * LEFT
LANE_HEIGHT = 14
BAR_HEIGHT = 10
TOP = 6
AXIS_HEIGHT = 30
MAX_LANES = 40  # archives overlapping more than this share the last lane
MIN_BAR_WIDTH = 2.0  # an archive of one instant still shows
TICKS = 5


@dataclass(frozen=True)
class Bar:
    archive: Archive
    x: float
    y: float
    width: float
    expired: bool  # past its retention: the next sweep deletes it unless held or a running search keeps it
    held: bool  # a hold keeps it (archives/holds.py): it does not go, whatever its age


@dataclass(frozen=True)
class Timeline:
    start_ms: int
    end_ms: int
    height: int
    axis_y: int
    bars: list[Bar]
    ticks: list[tuple[float, int]]  # (x, time ms)
    now_ms: int
    retention_minutes: int | None
    expiry_ms: int | None  # now − retention; None without a retention period
    expiry_x: float | None
    expired: int  # archives left of the line
    held_expired: int  # of those, the held ones (the rest go at the next sweep, unless a running search keeps them)
    timeless: int  # archives without timestamps: no bar, never expire
    next_to_go: Archive | None  # of the unheld archives not yet past retention, the one whose end is oldest
    next_expires_ms: int | None  # when it passes its retention: end + retention (kept at that instant)

    @property
    def empty(self) -> bool:
        return not self.bars


def x_of(ms: int, start_ms: int, end_ms: int) -> float:
    """The horizontal position of the time `ms` on an axis spanning [start_ms, end_ms]."""
    if end_ms <= start_ms:
        return LEFT + PLOT_WIDTH / 2
    return LEFT + (ms - start_ms) * PLOT_WIDTH / (end_ms - start_ms)


def _lanes(archives: Sequence[Archive]) -> list[tuple[Archive, int]]:
    """Each archive with a lane: the first whose last bar ended before it begins (interval packing)."""
    placed: list[tuple[Archive, int]] = []
    lane_ends: list[int] = []
    for archive in sorted(archives, key=lambda a: (a.begin_ts or 0, a.end_ts or 0, a.id)):
        begin = archive.begin_ts if archive.begin_ts is not None else archive.end_ts or 0
        lane = next((i for i, end in enumerate(lane_ends) if end < begin), None)
        if lane is None:
            if len(lane_ends) < MAX_LANES:
                lane_ends.append(0)
                lane = len(lane_ends) - 1
            else:
                lane = MAX_LANES - 1
        lane_ends[lane] = max(lane_ends[lane], archive.end_ts or 0)
        placed.append((archive, lane))
    return placed


def timeline(archives: Sequence[Archive], now_ms: int, retention_minutes: int | None,
             held: Collection[str] = ()) -> Timeline:
    """The timeline of `archives` at `now_ms`: the axis spans their timestamps and the expiry line.
    `held`: the ids of the archives a hold keeps."""
    timed = [a for a in archives if a.end_ts is not None]
    expiry = None if retention_minutes is None else now_ms - retention_ms(retention_minutes)
    times = [a.begin_ts if a.begin_ts is not None else a.end_ts for a in timed] + [a.end_ts for a in timed]
    points = [t for t in times if t is not None] + ([expiry] if expiry is not None and timed else [])
    start, end = (min(points), max(points)) if points else (now_ms, now_ms)
    placed = _lanes(timed)
    lanes = max((lane for _, lane in placed), default=-1) + 1
    bars = []
    for archive, lane in placed:
        assert archive.end_ts is not None
        left = x_of(archive.begin_ts if archive.begin_ts is not None else archive.end_ts, start, end)
        width = max(x_of(archive.end_ts, start, end) - left, MIN_BAR_WIDTH)
        bars.append(Bar(archive, left, TOP + lane * LANE_HEIGHT, width,
                        expiry is not None and is_expired(archive.end_ts, expiry), archive.id in held))
    axis_y = TOP + max(lanes, 1) * LANE_HEIGHT + 4
    ticks = [(x_of(start + (end - start) * i // (TICKS - 1), start, end), start + (end - start) * i // (TICKS - 1))
             for i in range(TICKS)] if end > start else [(x_of(start, start, end), start)]
    waiting = [a for a in timed if expiry is not None and not is_expired(a.end_ts, expiry) and a.id not in held]
    next_to_go = min(waiting, key=lambda a: (a.end_ts, a.id), default=None)
    next_expires = (None if next_to_go is None or next_to_go.end_ts is None or retention_minutes is None
                    else next_to_go.end_ts + retention_ms(retention_minutes))
    return Timeline(start, end, axis_y + AXIS_HEIGHT, axis_y, bars, ticks, now_ms, retention_minutes, expiry,
                    None if expiry is None or not timed else x_of(expiry, start, end),
                    sum(1 for b in bars if b.expired), sum(1 for b in bars if b.expired and b.held),
                    len(archives) - len(timed), next_to_go, next_expires)


__all__ = ["LEFT", "PLOT_WIDTH", "WIDTH", "Bar", "Timeline", "timeline", "x_of"]
