"""The day arithmetic of the retention forecast (docs/catalog.md#retention-forecast): for one
expiring rule, the cutoff at the end of each forecast day, and the day on which a record's create
time is passed by one.

Day d (0..N) ends at `now + d·24h`; day 0 is `now` itself. A record created at t whose deciding
rule has age A is deletable at the end of day d iff t < cutoff_ms(now + d·24h, A) — the job's own
test, with calendar months and years (ages.py). Its forecast day is the first such d.

The database does not compare every record with N + 1 cutoffs. Every cutoff of one rule has the
time of day of its day-0 cutoff c0: a fixed age moves it by whole days, and calendar arithmetic
keeps the time of day. So the cutoffs are c0 + s_d·24h for whole numbers s_d (the `steps`), and
whether t < c0 + s_d·24h depends only on t's whole-day window after c0, w = ⌊(t − c0) / 24h⌋
(−1 for every t before c0): it holds iff s_d > w. The statement groups the records by (rule, w),
and `day_of_window` turns each window into its day here — a bisection over the steps.

The cutoffs are taken as their running maximum over the days: "deletable at the end of some day
up to d" is "created before the largest cutoff up to d", so the first day is the same, and the
steps are ascending. (Whole-day steps never make a calendar cutoff step back — clamping only
repeats a day, e.g. 2024-03-29, -30 and -31 minus a month are all 2024-02-29 — but the forecast
does not depend on that.)

Pure: no storage, no clock.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from ..errors import InvalidInput
from .ages import Age, cutoff_ms

DAY_MS = 86_400_000
MAX_DAYS = 3660  # ten years and a bit: a horizon past the longest age anyone plans for


def check_days(days: object) -> int:
    """The forecast's horizon: a whole number of days, 0..MAX_DAYS."""
    if isinstance(days, bool) or not isinstance(days, int):
        raise InvalidInput(f"days: expected a whole number 0..{MAX_DAYS}, got {days!r}")
    if not 0 <= days <= MAX_DAYS:
        raise InvalidInput(f"days: {days} out of range: expected 0..{MAX_DAYS}")
    return days


@dataclass(frozen=True)
class DayCutoffs:
    """One rule's cutoffs over the forecast: `first` at now (day 0), and the ascending whole-day
    `steps` after it, one per day (steps[0] == 0)."""

    first: int
    steps: tuple[int, ...]

    @property
    def last(self) -> int:
        """The cutoff at the end of the last day: records created from it on stay past the forecast."""
        return self.first + self.steps[-1] * DAY_MS

    def cutoff(self, day: int) -> int:
        return self.first + self.steps[day] * DAY_MS


def day_cutoffs(now_ms: int, age: Age, days: int) -> DayCutoffs:
    """The rule's cutoff at the end of each day 0..days (as their running maximum)."""
    first = cutoff_ms(now_ms, age)
    steps: list[int] = []
    highest = 0
    for day in range(days + 1):
        offset = cutoff_ms(now_ms + day * DAY_MS, age) - first
        whole, rest = divmod(offset, DAY_MS)
        if rest:  # cannot happen (module doc); a wrong day would be worse than no forecast
            raise AssertionError(f"cutoff of day {day} is not a whole number of days after day 0's ({age})")
        highest = max(highest, whole)
        steps.append(highest)
    return DayCutoffs(first, tuple(steps))


def day_of_window(cutoffs: DayCutoffs, window: int) -> int | None:
    """The first day whose cutoff passes create times in `window` (the whole days after the day-0
    cutoff: [first + w·24h, first + (w+1)·24h), −1 for everything before it); None after the last."""
    day = bisect_right(cutoffs.steps, window)
    return day if day < len(cutoffs.steps) else None


def window_of(create_time: int, first: int) -> int:
    """The window of a create time: the arithmetic the statement does (slice_sql.expired_by_window)."""
    return -1 if create_time < first else (create_time - first) // DAY_MS


__all__ = ["DAY_MS", "MAX_DAYS", "DayCutoffs", "check_days", "day_cutoffs", "day_of_window", "window_of"]
