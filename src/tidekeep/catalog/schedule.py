"""When the catalog job runs under `tidekeep serve`: a 5-field cron schedule in UTC
(`catalog.schedule`, default "0 0 * * *": daily at midnight), and the task that runs the
retention job and then the purge under the lease "catalog", so only one process does.

Cron (pure): minute hour day-of-month month day-of-week; each field `*`, a number, a range `a-b`,
a step `*/n`, `a/n` or `a-b/n`, or a comma list of those; months and weekdays also by name (JAN,
MON); day-of-week 0 and 7 are Sunday. As in Vixie cron, when both day fields are restricted (do
not start with `*`) a day matches if either does. Macros: @yearly (@annually), @monthly, @weekly,
@daily (@midnight), @hourly. The fire times are computed by the `cronsim` library (Debian cron's
rules); this module checks the syntax first, so that a bad schedule is refused with one line
naming the field and the token, and only this syntax is accepted (no seconds field, no `L`/`#`).

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
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronsim import CronSim, CronSimError

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
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, _MONTH_NAMES), ("day of week", 0, 7, _DAY_NAMES))
_PREFIX = "bad value for 'catalog.schedule': "


@dataclass(frozen=True)
class Cron:
    """A checked schedule: `text` as written (whitespace collapsed), `expression` the 5 fields
    (macros expanded) that the fire times are computed from."""

    text: str
    expression: str

    def next_fire(self, after_ms: int) -> int:
        """The first fire time strictly after `after_ms` (ms, at a whole UTC minute)."""
        minute = datetime.fromtimestamp(after_ms // MINUTE_MS * 60, UTC)
        try:
            fire = next(CronSim(self.expression, minute))
        except StopIteration:  # no fire time within 50 years: parse_cron refuses such schedules
            raise ConfigError(f"{_PREFIX}{self.text!r} never fires") from None
        return int(fire.timestamp()) * 1000


def _number(text: str, names: dict[str, int], field: str) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ValueError(f"{field} {text!r} is not a number")
    return int(text)


def _checked_field(text: str, field: str, low: int, high: int, names: dict[str, int]) -> str:
    """One field as the library is to read it; ValueError with the one-line reason if it is not
    valid cron (the library only says which field is bad)."""
    terms = []
    for term in text.split(","):
        span, slash, step_text = term.partition("/")
        if slash and (not step_text.isdigit() or int(step_text) < 1):
            raise ValueError(f"{field} step {step_text!r} must be a whole number above zero")
        if span != "*":
            ends = [_number(token, names, field) for token in span.split("-", 1)]
            if (outside := next((v for v in ends if not low <= v <= high), None)) is not None:
                raise ValueError(f"{field} {outside} is outside {low}-{high}")
            if ends[0] > ends[-1]:
                raise ValueError(f"{field} range {span!r} runs backwards")
            if len(ends) == 2 and ends[0] == ends[1]:
                # "a-a/n" is just a: the library would read a one-value range with a step like
                # "a/n" (a, a+n, ... up to the field's end), which is not cron's meaning
                term = span.split("-", 1)[0]
        terms.append(term)
    return ",".join(terms)


def parse_cron(text: str) -> Cron:
    """A 5-field cron expression (or macro); ConfigError naming catalog.schedule if it is not one
    or can never fire (e.g. "0 0 31 2 *")."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{_PREFIX}expected a cron expression like '0 0 * * *'")
    source = " ".join(text.split())
    expanded = _MACROS.get(source.lower(), source)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise ConfigError(f"{_PREFIX}{source!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                          f"got {len(parts)}")
    try:
        fields = [_checked_field(part, name, low, high, names)
                  for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)]
    except ValueError as exc:
        raise ConfigError(f"{_PREFIX}{source!r}: {exc}") from None
    expression = " ".join(fields)
    try:  # the syntax is valid: the library refuses only a day of the month no month has
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError:
        raise ConfigError(f"{_PREFIX}{source!r} never fires (no such day in those months)") from None
    return Cron(source, expression)


def next_fire(cron: str | Cron, after_ms: int) -> int:
    """The first fire time strictly after `after_ms` (ms, at a whole UTC minute)."""
    return (cron if isinstance(cron, Cron) else parse_cron(cron)).next_fire(after_ms)


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
