"""Create-time slices (docs/design/catalog.md#slices), pure.

Stroom deletes a period in slices: take the first `batch_size` matching rows from the slice
start by create time, and update every matching row in [min, max + 1) of their create times. Rows
that share the boundary millisecond all fall in the same slice, so a slice can exceed the batch
size. Over rows already sorted by create time this is: cut after `batch_size` rows, then extend the
cut over the rows tied with the last one.
"""

from __future__ import annotations

from collections.abc import Sequence


def slice_ends(create_times: Sequence[int], batch_size: int) -> list[int]:
    """End indexes (exclusive) of consecutive slices of `create_times` (ascending)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    ends: list[int] = []
    start, n = 0, len(create_times)
    while start < n:
        end = min(start + batch_size, n)
        last = create_times[end - 1]
        while end < n and create_times[end] == last:
            end += 1
        ends.append(end)
        start = end
    return ends
