"""A reader's time window per stream (docs/watermarks.md): the shell around watermarks.WindowTracker.

The position is the reader group's: every segment of the group's frontier at its shared offset, with
this reader's own segments at its local (newer) offsets — Pravega's `lastReadPosition` map. The
tracker only moves forward; `watermarks.advance` also keeps the window shown to the caller from ever
moving back. A reset of the group (new generation) starts the window afresh, since the position moved.

Watermarks are fetched by revision, a page at a time and only while the tracker has consumed all it
holds, so a reader far behind never loads the marks ahead of the first one it has not passed. The
first call finds where to start by binary search over revisions: watermark cuts never go backwards,
so "the reader's position has passed watermark r" holds for a prefix of the revisions, and the window
needs only the last passed watermark and those after it — not the stream's whole history.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .model import Segment
from .watermark_store import WatermarkStore
from .watermarks import TimeWindow, WindowTracker, advance, last_passed

NO_WINDOW = TimeWindow(None, None)
PAGE = 256


class StreamWindow:
    """One reader's window over one stream."""

    def __init__(self, store: WatermarkStore, stream: str) -> None:
        self.store = store
        self.stream = stream
        self.generation: int | None = None
        self.tracker: WindowTracker | None = None
        self.loaded_revision: int | None = None  # the last revision handed to the tracker
        self.shown = NO_WINDOW

    def window(self, generation: int, position: Mapping[int, int], segments: Mapping[int, Segment],
               refresh: Callable[[], Mapping[int, Segment]]) -> TimeWindow:
        """The window at `position`; `segments` is the topology the position was read in, `refresh`
        reloads it when a watermark fetched afterwards names a segment it does not know (a scale and a
        watermark landed between the two reads)."""
        if generation != self.generation or self.tracker is None:
            self.generation, self.shown = generation, NO_WINDOW
            self.tracker = WindowTracker([], segments)
            self.loaded_revision = self._start_after(position, segments)
        tracker = self.tracker
        tracker.segments = segments  # the latest topology: new watermarks may name new segments
        window = tracker.advance_to(position)
        while tracker.consumed_all:
            page = self.store.list(self.stream, after_revision=self.loaded_revision, limit=PAGE)
            if not page:
                break
            self.loaded_revision = page[-1].revision
            if any(seg not in tracker.segments for mark in page for seg in mark.cut):
                tracker.segments = refresh()
            tracker.add(page)
            window = tracker.advance_to(position)
        self.shown = advance(self.shown, window)
        return self.shown

    def _start_after(self, position: Mapping[int, int], segments: Mapping[int, Segment]) -> int | None:
        """The revision to load after: just before the last watermark the position has passed (found by
        binary search), or None to load from the oldest stored."""
        bounds = self.store.revision_bounds(self.stream)
        if bounds is None:
            return None
        passed = last_passed(position, bounds[0], bounds[1], lambda r: self.store.get(self.stream, r), segments)
        return None if passed is None else passed - 1
