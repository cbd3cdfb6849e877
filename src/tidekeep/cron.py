"""A 5-field cron schedule in UTC, checked and with its fire times (pure).

Cron: minute hour day-of-month month day-of-week; each field `*`, a number, a range `a-b`, a step
`*/n`, `a/n` or `a-b/n`, or a comma list of those; months and weekdays also by name (JAN, MON);
day-of-week 0 and 7 are Sunday. As in Vixie cron, when both day fields are restricted (do not
start with `*`) a day matches if either does. Macros: @yearly (@annually), @monthly, @weekly,
@daily (@midnight), @hourly. The fire times are computed by the `cronsim` library (Debian cron's
rules); this module checks the syntax first, so that a bad schedule is refused with one line
naming the field and the token, and only this syntax is accepted (no seconds field, no `L`/`#`).
It sits below the settings, which validate cron keys with `check_cron`; its errors carry the
reason only, and the caller names the key (catalog/schedule.py, config.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cronsim import CronSim, CronSimError

from .errors import InvalidInput

MINUTE_MS = 60_000
_MONTH_NAMES = {n: i + 1 for i, n in enumerate(
    ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"])}
_DAY_NAMES = {n: i for i, n in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}
_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
           "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
           ("month", 1, 12, _MONTH_NAMES), ("day of week", 0, 7, _DAY_NAMES))


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
            raise InvalidInput(f"{self.text!r} never fires") from None
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
    """A 5-field cron expression (or macro); InvalidInput with the reason (which the caller
    prefixes with the setting's name) if it is not one or can never fire (e.g. "0 0 31 2 *")."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput("expected a cron expression like '0 0 * * *'")
    source = " ".join(text.split())
    expanded = _MACROS.get(source.lower(), source)
    parts = expanded.split(" ")
    if len(parts) != 5:
        raise InvalidInput(f"{source!r}: expected 5 fields (minute hour day-of-month month day-of-week), "
                           f"got {len(parts)}")
    try:
        fields = [_checked_field(part, name, low, high, names)
                  for part, (name, low, high, names) in zip(parts, _FIELDS, strict=True)]
    except ValueError as exc:
        raise InvalidInput(f"{source!r}: {exc}") from None
    expression = " ".join(fields)
    try:  # the syntax is valid: the library refuses only a day of the month no month has
        CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError:
        raise InvalidInput(f"{source!r} never fires (no such day in those months)") from None
    return Cron(source, expression)


def check_cron(value: Any) -> str:
    """The settings validator of a cron key: the schedule as written (whitespace collapsed), or
    InvalidInput with the reason, which settings turn into a ConfigError naming the key and where
    the value came from."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"expected a cron expression like '0 0 * * *', got {value!r}")
    return parse_cron(value).text


__all__ = ["MINUTE_MS", "Cron", "check_cron", "parse_cron"]
