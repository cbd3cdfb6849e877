"""The `watermark` column of Spark reads (pure): per row, the lower time of the last watermark the
row's position has passed, so a query can use `withWatermark` on writer-supplied time.

A row at offset o of segment s stands at the single-segment position {s: o} (the reader's position
just before it reads the event). By `streams.watermarks.compare`, that position has passed watermark
W (compare > 0, being exactly at the cut counts as passed) iff o >= threshold(W, s), where

- threshold = W.cut[s] when s is in W's cut;
- threshold = 0 when every segment of W's cut that overlaps s has a lower id (the cut lies before s);
- never (no threshold) otherwise: a cut segment overlapping s with a higher id lies after s.

Watermark cuts never go backwards and revisions are in order, so along the revisions a segment's
thresholds never decrease (the "never" ones come last); the driver computes them once per segment
and ships (thresholds, lower times) in the partition. Per row, the answer is one searchsorted:
the last watermark whose threshold is <= the row's offset, or null if there is none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pyarrow as pa

from ..streams.model import Segment
from ..streams.watermarks import Watermark

# (thresholds, lower times in ms): equal-length, thresholds non-decreasing
Thresholds = tuple[tuple[int, ...], tuple[int, ...]]


def threshold(mark: Watermark, seg: int, segments: Mapping[int, Segment]) -> int | None:
    """The first offset of `seg` at which the position {seg: offset} has passed `mark`, or None."""
    if seg in mark.cut:
        return mark.cut[seg]
    overlapping = [s for s in mark.cut if s in segments and segments[s].overlaps(segments[seg])]
    if overlapping and all(s < seg for s in overlapping):
        return 0
    return None


def segment_thresholds(marks: Iterable[Watermark], seg: int, segments: Mapping[int, Segment],
                       low: int = 0, high: int | None = None) -> Thresholds:
    """The (threshold, lower time) pairs of `seg`, oldest revision first, reduced to what a read of
    offsets [low, high) needs: the last mark passed at `low` and the ones with thresholds inside."""
    pairs = [(t, m.lower_time_ms) for m in sorted(marks, key=lambda m: m.revision)
             if (t := threshold(m, seg, segments)) is not None]
    before = [p for p in pairs if p[0] <= low]
    inside = [p for p in pairs if low < p[0] and (high is None or p[0] < high)]
    kept = before[-1:] + inside
    return tuple(p[0] for p in kept), tuple(p[1] for p in kept)


def lower_times(offsets: np.ndarray, thresholds: Thresholds) -> tuple[np.ndarray, np.ndarray]:
    """Per offset, the lower time (ms) of the last mark passed and whether there is one."""
    limits = np.asarray(thresholds[0], dtype=np.int64)
    times = np.asarray(thresholds[1], dtype=np.int64)
    index = np.searchsorted(limits, offsets, side="right") - 1
    valid = index >= 0
    return np.where(valid, times[np.maximum(index, 0)] if len(times) else 0, 0), valid


def watermark_array(offsets: pa.Array, thresholds: Thresholds) -> pa.Array:
    """The `watermark` column for a batch's offsets: a UTC timestamp (us), null before any mark."""
    values, valid = lower_times(offsets.to_numpy(zero_copy_only=False), thresholds)
    return pa.array(values * 1000, type=pa.int64(), mask=~valid).cast(pa.timestamp("us", tz="UTC"))


__all__ = ["Thresholds", "lower_times", "segment_thresholds", "threshold", "watermark_array"]
