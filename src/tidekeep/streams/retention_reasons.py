"""Why a retention decision chose what it chose: the reason as facts, and the one renderer of its text.

The decision (retention.py) never writes prose: it returns a `Reason`, a code naming the rule or
consumption case that applied and the raw facts it saw (amounts in bytes or ms, cuts as positions,
nested reasons for the parts a sentence is built from). `render_reason` is the only place that turns
a reason into text, so the CLI, the audit row, the service's log line and `--json` say the same
thing, and a test can look at the facts instead of parsing sentences.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import InvalidInput
from ..units import format_duration, format_size
from .config import RetentionKind
from .model import segment_name


@enum.unique
class Why(enum.Enum):
    """One code per sentence shape. The value is the template; `{name}` is filled from the facts."""

    # size/time rules
    NO_POLICY = "the stream has no retention policy"
    EMPTY_SET = "the retention set is empty: no cut has been recorded yet"
    BELOW_MIN = "the stream holds {amount}, less than the minimum {minimum}"
    NO_CMIN = "no recorded cut keeps at least the minimum {minimum}"
    NO_MAX = "no maximum: truncate as far as possible while keeping at least {minimum} (Cmin)"
    ABOVE_MAX_AT_CMAX = ("the stream holds {amount}, more than the maximum {maximum}: truncate at the oldest cut "
                         "keeping between {minimum} and {maximum} (Cmax)")
    ABOVE_MAX_AT_CMIN = ("the stream holds {amount}, more than the maximum {maximum}, and no recorded cut keeps "
                         "between the limits: truncate at Cmin, keeping at least {minimum}")
    BETWEEN_LIMITS = ("the stream holds {amount}, between the minimum {minimum} and the maximum {maximum}: truncate "
                      "at the cut closest to the minimum (Cmin)")
    BEHIND_HEAD = ("the chosen cut ({rule}) is {where} the current head: a truncation ahead of it already happened, "
                   "so nothing is truncated")
    HELD = "held by hold {hold} ({hold_reason}): nothing is truncated while it is active; without it: {inner}"
    # consumption cases (docs/retention.md)
    CHOSEN_BEHIND_HEAD = "{inner}; but that cut is {where} the current head, so nothing is truncated"
    OVERLAPS_MAX_LATER = ("case (v): {beyond}, and overlaps {target}: truncate at the earliest recorded cut at or "
                          "after LB that keeps within the limits {cut}")
    OVERLAPS_MAX_CMIN = ("case (v): {beyond}, and overlaps {target}; no recorded cut at or after LB keeps at least "
                         "{minimum}: truncate at Cmin {cut}")
    OVERLAPS_MIN_EARLIER = ("case (iv): LB {lb} keeps less than the minimum {minimum} and overlaps Cmin{note}: "
                            "truncate at the latest recorded cut at or before LB that keeps at least the minimum {cut}")
    OVERLAPS_MIN_NONE = ("case (iv): LB {lb} keeps less than the minimum {minimum} and overlaps Cmin{note}, and no "
                         "recorded cut keeping at least the minimum is at or before it: nothing is truncated")
    SIZE_ABOVE_MAX_AT_CMAX = ("case (iii): {beyond}, and lies at or before Cmax: the maximum overrides the "
                              "subscribers; truncate at Cmax {cut}")
    SIZE_ABOVE_MAX_AT_LB = ("case ({case}): LB keeps {keeps}, more than the maximum {maximum}, but no recorded cut "
                            "keeps within the limits and none keeps at least the minimum with less than LB: truncate "
                            "at LB {lb}")
    SIZE_ABOVE_MAX_BEFORE_CMIN = ("case (iii): {beyond}, and lies before Cmin, the cut closest to the maximum (none "
                                  "keeps within the limits): the maximum overrides the subscribers; truncate at Cmin "
                                  "{cut}")
    SIZE_ABOVE_MAX_OVERLAPS_CMIN = ("case (v): {beyond}, and overlaps Cmin, the cut closest to the maximum (none "
                                    "keeps within the limits): the maximum overrides the subscribers; truncate at "
                                    "Cmin {cut}")
    SIZE_BELOW_MIN_NONE = ("case (ii): LB {lb} keeps {keeps}, less than the minimum {minimum}, and no recorded cut "
                           "keeps at least the minimum: nothing is truncated")
    SIZE_BELOW_MIN_AT_CMIN = ("case (ii): LB {lb} keeps {keeps}, less than the minimum {minimum}, and Cmin is at or "
                              "before it: truncate at Cmin {cut}")
    SIZE_WITHIN_LIMITS = "case (i): LB keeps {keeps}, within the limits: truncate at LB {lb}"
    TIME_ABOVE_MAX = ("case (iii): {beyond}, and lies at or before {target}: the maximum overrides the subscribers; "
                      "truncate at it {cut}")
    TIME_AFTER_CMIN = ("case (ii): LB {lb} lies after Cmin, so it keeps less than the minimum {minimum}: truncate at "
                       "Cmin {cut}")
    TIME_WITHIN_LIMITS = ("case (i): LB lies at or before Cmin, so it keeps at least the minimum {minimum}: truncate "
                          "at LB {lb}")
    TIME_WITHIN_UNPROVEN = ("case (i): {unproven}, so LB counts as within it and its unread data is kept; LB lies at "
                            "or before Cmin, so it keeps at least the minimum {minimum}: truncate at LB {lb}")
    # parts of the sentences above
    BEYOND_SIZE = "LB {lb} keeps {keeps}, more than the maximum {maximum}"
    BEYOND_TIME = ("LB {lb} holds data written before {proof} was recorded {age} ago, so it keeps more than the "
                   "maximum {maximum}")
    TARGET_CMAX = "Cmax"
    TARGET_CMIN = "Cmin (no recorded cut keeps within the limits)"
    MAX_YIELDS = (" (the stream holds more than the maximum {maximum}, but LB does not keep more than it, so the "
                  "maximum does not drop unread data)")
    NO_NOTE = ""
    UNPROVEN_NONE_OLD = ("nothing proves the data at LB older than the maximum {maximum} (no cut was recorded more "
                         "than {maximum} ago)")
    UNPROVEN_NEWEST_OLD = ("nothing proves the data at LB older than the maximum {maximum} (no data at LB lies before "
                           "a cut recorded more than {maximum} ago; the newest such cut is {newest}, and what follows "
                           "it was written later)")


AMOUNTS = frozenset({"amount", "minimum", "maximum", "keeps", "age"})  # bytes (SIZE) or ms (TIME)
CUTS = frozenset({"lb", "cut", "proof", "newest"})  # positions {segment id: offset}


@dataclass(frozen=True)
class Reason:
    """A code and the facts it was decided on. `kind` says whether amounts are bytes or ms."""

    why: Why
    kind: RetentionKind | None = None
    facts: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def fact(self, name: str) -> Any:
        return self.facts[name]

    def __str__(self) -> str:
        return render_reason(self)


def format_amount(kind: RetentionKind | None, amount: int) -> str:
    return format_size(amount) if kind is RetentionKind.SIZE else format_duration(max(amount, 0))


def cut_text(positions: Mapping[int, int]) -> str:
    return "{" + ", ".join(f"{segment_name(s)}={o}" for s, o in sorted(positions.items())) + "}"


def render_reason(reason: Reason) -> str:
    """The one sentence of a reason (what the CLI, the audit and the logs show)."""
    values: dict[str, str] = {}
    for name, value in reason.facts.items():
        if isinstance(value, Reason):
            values[name] = render_reason(value)
        elif name in AMOUNTS:
            values[name] = format_amount(reason.kind, value)
        elif name in CUTS:
            values[name] = cut_text(value)
        else:
            values[name] = str(value)
    return reason.why.value.format(**values)


class DecisionFacts(Protocol):
    """What `describe_decision` reads of a retention decision (retention.RetentionDecision). A
    protocol rather than the class: the decision renders its reason here, so this module does not
    import it back."""

    @property
    def cut(self) -> Mapping[int, int] | None: ...

    @property
    def rule(self) -> str: ...

    @property
    def freed_bytes(self) -> int: ...

    @property
    def reason(self) -> str: ...


def describe_decision(stream: str, decision: DecisionFacts) -> str:
    """A retention decision in one line (the service's log): what was truncated and why, or why nothing was."""
    if decision.cut is not None:
        cut = ",".join(f"{segment_name(seg)}:{off}" for seg, off in sorted(decision.cut.items()))
        return (f"truncated {stream} at {{{cut}}}: rule={decision.rule} freed_bytes={decision.freed_bytes} "
                f"reason={decision.reason}")
    return f"kept {stream} (nothing to truncate): rule={decision.rule} reason={decision.reason}"


# A retention cycle's truncation reads "retention RULE: why" in the audit trail. A truncation asked for
# by hand may not begin like that, so no reason passes itself off as a cycle's (the cycle's rows carry
# a `retention` detail as well; store/audit_report.py reads that first)
CYCLE_REASON = re.compile(r"retention [a-z][a-z-]*: ")


def cycle_reason(rule: str, why: str) -> str:
    return f"retention {rule}: {why}"


def check_manual_reason(reason: str) -> None:
    if CYCLE_REASON.match(reason):
        raise InvalidInput(f"invalid reason {reason[:80]!r}: a reason beginning 'retention RULE: ' is kept for "
                           "retention cycles")


__all__ = ["CYCLE_REASON", "DecisionFacts", "Reason", "Why", "check_manual_reason", "cut_text", "cycle_reason",
           "describe_decision", "format_amount", "render_reason"]
