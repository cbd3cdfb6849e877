"""A stream's retained bytes over time, for the stream page's line chart, from what the store keeps:
the retention set's records (the absolute size written up to each recorded tail, docs/retention.md),
the truncation history (bytes freed, and when) and the stream now. Retained = written − truncated;
the truncated bytes at a moment are today's total less what later truncations freed. Pure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..streams.retention import RetentionRecord


@dataclass(frozen=True)
class Point:
    time_ms: int
    written: int
    retained: int
    event: str  # "created", "recorded", "truncated" or "now"


def retained_series(records: Sequence[RetentionRecord], truncations: Sequence[Mapping[str, Any]],
                    written_now: int, truncated_now: int, now_ms: int, created_ms: int, complete: bool) -> list[Point]:
    """`truncations`: audit rows (`time_ms`, `bytes_freed`), any order; `complete` False when older
    truncations were left out — the series then starts at the oldest one given, as before it the
    truncated total is unknown; complete, it starts empty when the stream was created."""
    ordered = sorted(truncations, key=lambda e: (int(e["time_ms"]), int(e.get("id") or 0)))
    start = int(ordered[0]["time_ms"]) if ordered and not complete else None
    truncated = truncated_now - sum(int(e["bytes_freed"]) for e in ordered)
    moments: list[tuple[int, int, str, int]] = [(r.recording_time_ms, 0, "recorded", r.recording_size) for r in records
                                               if start is None or r.recording_time_ms >= start]
    moments += [(int(e["time_ms"]), 1, "truncated", int(e["bytes_freed"])) for e in ordered]
    written = 0
    points = [Point(created_ms, 0, 0, "created")] if complete else []
    for time_ms, _, event, amount in sorted(moments):
        if event == "recorded":
            written = max(written, amount)
        else:
            truncated += amount
            # nothing is truncated that was not written: the written size is at least the truncated total
            written = max(written, truncated)
        points.append(Point(time_ms, written, max(written - truncated, 0), event))
    points.append(Point(now_ms, written_now, max(written_now - truncated_now, 0), "now"))
    return points


def chart_spec(points: Sequence[Point], label_of: Callable[[int], str]) -> dict[str, Any]:
    """The Chart.js line (static/app.js): retained and written bytes at each moment."""
    return {"type": "line", "labels": [label_of(p.time_ms) for p in points], "bytes": True,
            "xTitle": "time (UTC)", "yTitle": "bytes",
            "datasets": [{"label": "retained", "data": [p.retained for p in points]},
                         {"label": "written", "data": [p.written for p in points]}]}
