"""When the catalog job runs under `tidekeep serve`: a 5-field cron schedule in UTC
(`catalog.schedule`, default "0 0 * * *": daily at midnight, as Stroom's job). The service runs
the job and then the purge on it as a periodic task (service/tasks.py `CronTask`).

Cron (pure): minute hour day-of-month month day-of-week; each field `*`, a number, a range `a-b`,
a step `*/n` or `a-b/n`, or a comma list of those; months and weekdays also by name (JAN, MON);
day-of-week 0 and 7 are Sunday. As in Vixie cron, when both day fields are restricted a day
matches if either does. Macros: @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from ..errors import ConfigError, InvalidInput

MINUTE_MS = 60_000
_MONTH_NAMES = {n: i + 1 for i, n in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAY_NAMES = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
    ("month", 1, 12, _MONTH_NAMES), ("day of week", 0, 7, _DAY_NAMES))
_MAX_DAYS_IN_MONTH = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_SEARCH_DAYS = 366 * 9  # a valid schedule fires within 8 years (Feb 29 skips 2100)


@dataclass(frozen=True)
class Cron:
    text: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]  # of the month
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    days_restricted: bool  # the day-of-month field is not `*`
    weekdays_restricted: bool

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_date = day.day in self.days
        by_weekday = (day.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_date or by_weekday
        return by_date and by_weekday

    def matches(self, ms: int) -> bool:
        """Does the schedule fire in the minute that contains `ms`?"""
        moment = datetime.fromtimestamp(ms // 1000, UTC)
        return moment.minute in self.minutes and moment.hour in self.hours and self.day_matches(moment.date())


def _number(text: str, names: dict[str, int], field: str, cron: str) -> int:
    upper = text.upper()
    if upper in names:
        return names[upper]
    if not text.isdigit():
        raise ConfigError(f"bad value for 'catalog.schedule': {cron!r}: {field} {text!r} is not a number")
    return int(text)


def _parse_field(text: str, field: str, low: int, high: int, names: dict[str, int], cron: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        span, slash, step_text = part.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or int(step_text) < 1:
                raise ConfigError(f"bad value for 'catalog.schedule': {cron!r}: {field} step {step_text!r} "
                                  "must be a whole number above zero")
            step = int(step_text)
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _number(a, names, field, cron), _number(b, names, field, cron)
        else:
            first = _number(span, names, field, cron)
            last = high if slash else first  # "5/15" means 5, 20, 35, 50
        for value in (first, last):
            if not low <= value <= high:
                raise ConfigError(f"bad value for 'catalog.schedule': {cron!r}: {field} {value} is outside "
                                  f"{low}-{high}")
        if first > last:
            raise ConfigError(f"bad value for 'catalog.schedule': {cron!r}: {field} range {span!r} runs backwards")
        values.update(range(first, last + 1, step))
    return frozenset(values)


def parse_cron(text: str) -> Cron:
    """A 5-field cron expression (or macro); ConfigError naming catalog.schedule if it is not one
    or can never fire (e.g. "0 0 31 2 *")."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("bad value for 'catalog.schedule': expected a cron expression like '0 0 * * *'")
    source = " ".join(text.split())
    expanded = _MACROS.get(source.lower(), source)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise ConfigError(f"bad value for 'catalog.schedule': {source!r}: expected 5 fields (minute hour "
                          f"day-of-month month day-of-week), got {len(parts)}")
    sets = [_parse_field(part, name, low, high, names, source)
            for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in sets[4])
    cron = Cron(source, sets[0], sets[1], sets[2], sets[3], weekdays,
                days_restricted=not parts[2].startswith("*"), weekdays_restricted=not parts[4].startswith("*"))
    # both day fields restricted: either matches, so some weekday always comes; otherwise the
    # day of the month must exist in one of the months
    possible = any(d <= _MAX_DAYS_IN_MONTH[m - 1] for m in cron.months for d in cron.days)
    if not (cron.days_restricted and cron.weekdays_restricted) and not possible:
        raise ConfigError(f"bad value for 'catalog.schedule': {source!r} never fires (no such day in those months)")
    return cron


def next_fire(cron: str | Cron, after_ms: int) -> int:
    """The first fire time strictly after `after_ms` (ms, at a whole UTC minute)."""
    schedule = cron if isinstance(cron, Cron) else parse_cron(cron)
    first = (after_ms // MINUTE_MS + 1) * MINUTE_MS
    start = datetime.fromtimestamp(first // 1000, UTC)
    times = sorted(h * 60 + m for h in schedule.hours for m in schedule.minutes)
    for offset in range(_SEARCH_DAYS):
        day = start.date() + timedelta(days=offset)
        if not schedule.day_matches(day):
            continue
        earliest = start.hour * 60 + start.minute if offset == 0 else 0
        for minute_of_day in times:
            if minute_of_day >= earliest:
                midnight = datetime(day.year, day.month, day.day, tzinfo=UTC)
                return int(midnight.timestamp()) * 1000 + minute_of_day * MINUTE_MS
    raise ConfigError(f"bad value for 'catalog.schedule': {schedule.text!r} never fires")


def is_due(cron: str | Cron, last_run_ms: int, now_ms: int) -> bool:
    """Has a fire time come since the last run?"""
    return next_fire(cron, last_run_ms) <= now_ms


def check_schedule(value: Any) -> str:
    """The settings validator for catalog.schedule (InvalidInput, which settings turn into a
    ConfigError naming the key and where the value came from)."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"expected a cron expression like '0 0 * * *', got {value!r}")
    try:
        return parse_cron(value).text
    except ConfigError as exc:
        raise InvalidInput(str(exc).removeprefix("bad value for 'catalog.schedule': ")) from None


__all__ = ["Cron", "check_schedule", "is_due", "next_fire", "parse_cron"]
