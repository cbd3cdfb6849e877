"""The dataset timeline's geometry (web/archive_timeline.py) on its own: bars inside the plot and
never overlapping in a lane, the expiry rule the collector's (archives/expiry.py), and the edge
cases a page must still draw (one instant, no timestamps, more overlaps than lanes)."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from tidekeep.archives.expiry import is_expired
from tidekeep.archives.model import Archive
from tidekeep.web.archive_timeline import LEFT, MAX_LANES, MIN_BAR_WIDTH, PLOT_WIDTH, timeline

MIN = 60_000
NOW = 1_700_000_000_000


def archive(n: int, begin: int | None, end: int | None) -> Archive:
    return Archive(f"{n:032x}", "app", begin, end, 1, 10, 10, f"archives/app/{n:032x}.parquet", NOW, "i")


def test_random_archives_fit_the_plot_and_lanes_never_overlap() -> None:
    rng = random.Random(7)
    for _ in range(200):
        archives = []
        for n in range(rng.randint(1, 30)):
            begin = NOW - rng.randint(0, 300) * MIN
            archives.append(archive(n, begin, begin + rng.randint(0, 90) * MIN))
        retention = rng.choice([None, 1, 60, 240])
        drawn = timeline(archives, NOW, retention)
        assert len(drawn.bars) == len(archives)
        for bar in drawn.bars:
            assert bar.x >= LEFT - 1e-6 and bar.x + bar.width <= LEFT + PLOT_WIDTH + MIN_BAR_WIDTH + 1e-6
            expiry = drawn.expiry_ms
            assert bar.expired == (expiry is not None and is_expired(bar.archive.end_ts, expiry))
        by_lane: dict[float, list[Archive]] = {}
        for bar in drawn.bars:
            by_lane.setdefault(bar.y, []).append(bar.archive)
        for lane in by_lane.values():
            spans = sorted((a.begin_ts or 0, a.end_ts or 0) for a in lane)
            assert all(prev[1] < nxt[0] for prev, nxt in pairwise(spans))
        if retention is not None:
            assert drawn.expiry_x is not None and LEFT <= drawn.expiry_x <= LEFT + PLOT_WIDTH
            waiting = [a for a in archives if a.end_ts is not None and a.end_ts >= NOW - retention * MIN]
            oldest = min(waiting, key=lambda a: (a.end_ts, a.id), default=None)
            assert drawn.next_to_go == oldest
            assert drawn.next_expires_ms == (None if oldest is None or oldest.end_ts is None
                                             else oldest.end_ts + retention * MIN)


def test_one_instant_and_timeless_archives() -> None:
    drawn = timeline([archive(1, NOW, NOW), archive(2, None, None)], NOW, None)
    assert [b.archive.id for b in drawn.bars] == [f"{1:032x}"] and drawn.timeless == 1
    assert drawn.bars[0].width == MIN_BAR_WIDTH and drawn.expiry_x is None and drawn.next_to_go is None
    assert drawn.bars[0].x == pytest.approx(LEFT + PLOT_WIDTH / 2)  # an axis of one instant: its middle
    nothing = timeline([archive(2, None, None)], NOW, 60)
    assert nothing.empty and nothing.expiry_x is None and nothing.next_to_go is None and nothing.expired == 0


def test_more_overlaps_than_lanes_share_the_last_lane() -> None:
    drawn = timeline([archive(n, NOW - 10 * MIN, NOW) for n in range(MAX_LANES + 5)], NOW, 60)
    assert len({b.y for b in drawn.bars}) == MAX_LANES
    assert drawn.next_to_go == archive(0, NOW - 10 * MIN, NOW) and drawn.next_expires_ms == NOW + 60 * MIN
