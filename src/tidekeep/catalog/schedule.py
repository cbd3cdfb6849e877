"""When the catalog job runs under `tidekeep serve`: a 5-field cron schedule in UTC
(`catalog.schedule`, default "0 0 * * *": daily at midnight, as Stroom's job), and the task that
runs the retention job and then the purge under the lease "catalog", so only one process does.

Cron (pure): minute hour day-of-month month day-of-week; each field `*`, a number, a range `a-b`,
a step `*/n` or `a-b/n`, or a comma list of those; months and weekdays also by name (JAN, MON);
day-of-week 0 and 7 are Sunday. As in Vixie cron, when both day fields are restricted a day
matches if either does. Macros: @yearly (@annually), @monthly, @weekly, @daily (@midnight), @hourly.

The task: the last run time is the lease row's `work_done_ms` (shared by every process), set to
the moment a run began once the job and the purge both succeeded. A run is due when the first
fire time after the last run has come; a schedule that never ran counts from the service's start,
so starting `serve` does not run the job at once. Fire times missed while no service ran are
caught up by one run. A failed run is retried with exponential backoff; it never stops serve.
The job and the purge get the lease's fence (catalog/job.py, catalog/purge.py): a run whose lease
was taken over stops with LeaseLost, which drops the lease without a backoff.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, InvalidInput, LeaseLost

if TYPE_CHECKING:
    from ..service.scheduler import RetentionService

log = logging.getLogger("tidekeep.service")

MINUTE_MS = 60_000
CATALOG_RESOURCE = "catalog"
_MONTH_NAMES = {n: i + 1 for i, n in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAY_NAMES = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_FIELDS = (("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
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


# ---- the task under `tidekeep serve` ----------------------------------------------------------
def describe_result(result: Any) -> str:
    """One log line for a run report: its summary(), or its rows and bytes (the job's RunReport)."""
    summary = getattr(result, "summary", None)
    if callable(summary):
        return str(summary())
    if hasattr(result, "rows") and hasattr(result, "bytes"):
        return (f"run {getattr(result, 'run_id', None)}: {result.rows} record(s), {result.bytes} bytes logically "
                f"deleted; state {getattr(result, 'state', '?')}")
    return repr(result)


@dataclass
class CatalogTask:
    """One pass's look at the catalog schedule (called by RetentionService.run_pass): when due,
    take the lease, run the job, then the purge, note the run in the lease row, give the lease back."""

    cron: Cron
    run_job: Callable[[], Any]
    purge: Callable[[], Any]
    retry_base_ms: int = 60_000
    retry_cap_ms: int = 3_600_000
    started_ms: int | None = None  # when this service first looked: the anchor of a schedule never run
    failures: int = 0
    retry_at_ms: int | None = None

    def _due(self, service: RetentionService, now_ms: int) -> bool:
        row = service.leases.get(CATALOG_RESOURCE)
        last = row.work_done_ms if row is not None and row.work_done_ms is not None else self.started_ms
        return is_due(self.cron, int(last if last is not None else now_ms), now_ms)

    def __call__(self, service: RetentionService) -> bool:
        """True when this call ran the job and the purge successfully."""
        from ..service.scheduler import backoff_ms

        now = service.clock.now_ms()
        if self.started_ms is None:
            self.started_ms = now
        if self.retry_at_ms is not None and now < self.retry_at_ms:
            return False
        if not self._due(service, now):
            return False
        if not service._take(CATALOG_RESOURCE):
            log.debug("catalog: another process holds the catalog lease")
            return False
        try:
            if not self._due(service, service.clock.now_ms()):  # another process ran it meanwhile
                return False
            began = service.clock.now_ms()
            log.info("catalog job: %s", describe_result(self.run_job()))
            log.info("catalog purge: %s", describe_result(self.purge()))
            with service._held_lock:
                version = service.held.get(CATALOG_RESOURCE)
            if version is not None:
                service.leases.record_work_done(CATALOG_RESOURCE, service.owner, version, began)
            self.failures, self.retry_at_ms = 0, None
            return True
        except LeaseLost as exc:  # taken over mid-run: the new holder runs it; no backoff, no retry here
            service.lease_lost(CATALOG_RESOURCE, exc)
            return False
        except Exception as exc:  # retried after a backoff; serve goes on
            self.failures += 1
            wait = backoff_ms(self.failures, self.retry_base_ms, self.retry_cap_ms)
            self.retry_at_ms = service.clock.now_ms() + wait
            log.warning("catalog run failed (attempt %d, retry in %d ms): %s: %s", self.failures, wait,
                        type(exc).__name__, exc)
            return False
        finally:
            service._give_back(CATALOG_RESOURCE)


__all__ = ["CATALOG_RESOURCE", "CatalogTask", "Cron", "check_schedule", "is_due", "next_fire", "parse_cron"]
