"""A reader's time window per stream (issue 8, point 5): the shell around watermarks.WindowTracker.

The position is the reader group's: every segment of the group's frontier at its shared offset, with
this reader's own segments at its local (newer) offsets — Pravega's `lastReadPosition` map. Watermarks
stored since the last call are fetched by revision and fed to the tracker, which only moves forward;
`watermarks.advance` also keeps the window shown to the caller from ever moving back. A reset of the
group (new generation) starts the window afresh, since the reader's position moved back.
"""

from __future__ import annotations

from collections.abc import Mapping

from .model import Segment
from .watermark_store import WatermarkStore
from .watermarks import TimeWindow, WindowTracker, advance

NO_WINDOW = TimeWindow(None, None)


class StreamWindow:
    """One reader's window over one stream."""

    def __init__(self, store: WatermarkStore, stream: str) -> None:
        self.store = store
        self.stream = stream
        self.generation: int | None = None
        self.tracker: WindowTracker | None = None
        self.loaded_revision: int | None = None
        self.shown = NO_WINDOW

    def window(self, generation: int, position: Mapping[int, int], segments: Mapping[int, Segment]) -> TimeWindow:
        if generation != self.generation or self.tracker is None:
            self.generation, self.loaded_revision, self.shown = generation, None, NO_WINDOW
            self.tracker = WindowTracker([], segments)
        fresh = self.store.list(self.stream, after_revision=self.loaded_revision)
        if fresh:
            self.loaded_revision = fresh[-1].revision
            self.tracker.add(fresh)
        self.tracker.segments = segments  # the latest topology: new watermarks may name new segments
        self.shown = advance(self.shown, self.tracker.advance_to(position))
        return self.shown
