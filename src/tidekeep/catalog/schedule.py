"""When the catalog job runs under `tidekeep serve`: the `catalog.schedule` setting, a 5-field
cron schedule in UTC (default "0 0 * * *": daily at midnight). The service runs the job and then
the purge on it as a periodic task (service/tasks.py `CronTask`).

The syntax and the fire times are tidekeep/cron.py's (the settings validate the key with it too);
here a bad schedule is a ConfigError naming `catalog.schedule`.
"""

from __future__ import annotations

from ..cron import Cron
from ..cron import parse_cron as parse_cron_reason
from ..errors import ConfigError, InvalidInput

_PREFIX = "bad value for 'catalog.schedule': "


def parse_cron(text: str) -> Cron:
    """A 5-field cron expression (or macro); ConfigError naming catalog.schedule if it is not one
    or can never fire (e.g. "0 0 31 2 *")."""
    try:
        return parse_cron_reason(text)
    except InvalidInput as exc:
        raise ConfigError(f"{_PREFIX}{exc}") from None


def next_fire(cron: str | Cron, after_ms: int) -> int:
    """The first fire time strictly after `after_ms` (ms, at a whole UTC minute)."""
    checked = cron if isinstance(cron, Cron) else parse_cron(cron)
    try:
        return checked.next_fire(after_ms)
    except InvalidInput as exc:
        raise ConfigError(f"{_PREFIX}{exc}") from None


def is_due(cron: str | Cron, last_run_ms: int, now_ms: int) -> bool:
    """Has a fire time come since the last run?"""
    return next_fire(cron, last_run_ms) <= now_ms


__all__ = ["Cron", "is_due", "next_fire", "parse_cron"]
