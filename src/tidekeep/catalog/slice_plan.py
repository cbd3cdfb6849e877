"""Balanced create-time slices of a period (docs/design/catalog.md#slices), planned from counts.

The retention job runs one UPDATE per slice inside the database. A slice is a create-time range
[low, high) of about `target` candidate rows. The planner never reads the rows: it asks the
database for a histogram — the candidate count in each of `BUCKETS` equal spans of a range, one
grouped count over the (status, create_time) index — merges adjacent spans into slices of at most
`target` rows, and asks again, over that span only, for a span that alone holds more (skewed
create times). A single millisecond cannot be split, so a slice over one millisecond may hold
more than `target` rows. The slices cover the whole range, so a record written into it after
planning is still in one of them.

`count_spans` is the database's side, injected so the plan is a pure function of the counts it
returns: `count_spans(low, high, n)` gives the candidate counts of the n equal spans
`span_bounds(low, high, n)` cuts [low, high) into.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

BUCKETS = 256
CountSpans = Callable[[int, int, int], list[int]]


@dataclass(frozen=True)
class Slice:
    low: int  # create_time >= low
    high: int  # create_time < high
    rows: int  # candidates in the range when it was planned


def span_bounds(low: int, high: int, n: int) -> list[int]:
    """n + 1 ascending bounds cutting [low, high) into n spans as equal as whole milliseconds
    allow (no empty span: n is at most high - low). Bound i is low + ceil(i * width / n), so that
    a create time is in span floor((t - low) * n / width): `span_of`."""
    n = max(1, min(n, high - low))
    return [low + ((high - low) * i + n - 1) // n for i in range(n + 1)]


def span_of(create_time: int, low: int, high: int, n: int) -> int:
    """The span of `span_bounds(low, high, n)` a create time falls in: the same integer arithmetic
    the database's grouped count uses, so both sides agree on every boundary."""
    n = max(1, min(n, high - low))
    return ((create_time - low) * n) // (high - low)


def plan_slices(count_spans: CountSpans, low: int, high: int, target: int, buckets: int = BUCKETS) -> list[Slice]:
    """Ascending slices that together cover [low, high) exactly (each starts where the one before
    ends), each of at most `target` candidates unless it is one millisecond wide; none when there
    is no candidate. A row written into the range after planning still falls in a slice."""
    if target < 1:
        raise ValueError("target must be at least 1")
    if high <= low:
        return []
    slices: list[Slice] = []
    pending: list[tuple[int, int, int]] = []  # adjacent non-empty spans being merged into one slice
    pending_rows = 0

    def close() -> None:
        nonlocal pending_rows
        if pending:
            slices.append(Slice(pending[0][0], pending[-1][1], pending_rows))
            pending.clear()
            pending_rows = 0

    def walk(span_low: int, span_high: int) -> None:
        nonlocal pending_rows
        bounds = span_bounds(span_low, span_high, buckets)
        counts = count_spans(span_low, span_high, len(bounds) - 1)
        for i, rows in enumerate(counts):
            a, b = bounds[i], bounds[i + 1]
            if rows == 0:
                continue
            if rows > target and b - a > 1:
                close()
                walk(a, b)
                continue
            if pending_rows + rows > target:
                close()
            pending.append((a, b, rows))
            pending_rows += rows

    walk(low, high)
    close()
    # stretch over the spans without candidates: contiguous, from low to high
    return [Slice(low if i == 0 else s.low, high if i == len(slices) - 1 else slices[i + 1].low, s.rows)
            for i, s in enumerate(slices)]


def widen(slices: list[Slice], low: int, high: int) -> list[Slice]:
    """The slices with the first starting at `low` and the last ending at `high`: planned over the
    span that holds candidates, they then cover the whole period."""
    if not slices:
        return []
    first, last = slices[0], slices[-1]
    if len(slices) == 1:
        return [Slice(min(low, first.low), max(high, first.high), first.rows)]
    return [Slice(min(low, first.low), first.high, first.rows), *slices[1:-1],
            Slice(last.low, max(high, last.high), last.rows)]


__all__ = ["BUCKETS", "CountSpans", "Slice", "plan_slices", "span_bounds", "span_of", "widen"]
