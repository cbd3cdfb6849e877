"""The what-if retention chart (docs/dashboard.md): bars per forecast day of the bytes the current
policy (or retention period) deletes beside those of a proposed one, from their forecast documents
(tidekeep/forecast.py), and the rows of the table under it. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def day_label(day: int) -> str:
    return "now" if day == 0 else f"day {day}"


def forecast_chart(forecasts: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The Chart.js bars (static/app.js) of each (label, forecast document): the bytes deleted per day,
    and the bytes a hold keeps per day where it keeps any. The forecasts cover the same days."""
    days = forecasts[0][1]["by_day"]
    datasets = []
    for label, document in forecasts:
        datasets.append({"label": label, "data": [d["bytes"] for d in document["by_day"]]})
        if any(d["held_bytes"] for d in document["by_day"]):
            datasets.append({"label": f"{label}, held", "data": [d["held_bytes"] or 0 for d in document["by_day"]]})
    return {"type": "bar", "labels": [day_label(d["day"]) for d in days], "bytes": True,
            "xTitle": "forecast day (now: a run now; day d: the 24 hours ending now + d days)", "yTitle": "bytes",
            "datasets": datasets}


def forecast_rows(forecasts: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One row per day: its end and, per forecast, the day's sums (`by_day`)."""
    first = forecasts[0][1]["by_day"]
    return [{"day": day["day"], "label": day_label(day["day"]), "end_ms": day["end_ms"],
             "sums": [document["by_day"][i] for _, document in forecasts]} for i, day in enumerate(first)]


__all__ = ["day_label", "forecast_chart", "forecast_rows"]
