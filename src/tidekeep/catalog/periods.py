"""Processing periods and per-period rule actions (Stroom's DataRetentionPolicyExecutor;
docs/design/catalog.md). Pure: values in, values out; `now` and the trackers come in as arguments.

1. Every active rule has a cutoff, `now − age` (the epoch for forever). Rules are grouped by cutoff;
   the epoch is always a boundary.
2. The newest cutoff is dropped: every rule retains data younger than it, so [newest, now) is
   never processed.
3. The remaining boundaries, newest to oldest, each open a period [c, previous boundary). A rule's
   action in a period is DELETE iff the period starts before the rule's cutoff; a forever rule
   always RETAINs. No cutoff lies strictly inside a period, so the action is right for every
   create time in it.
4. Trackers shorten periods. A period's tracker is keyed by the age string of the rules at its
   older boundary ("Forever" for the epoch period). When the period was last processed at
   `last_run`, only records that have since crossed its newer boundary can have changed their
   outcome, so the period starts where that boundary stood at `last_run`.

One deliberate difference from Stroom in step 4: Stroom starts the period at
`to − (now − last_run)`. For minutes to weeks that is exactly where the boundary stood; for
calendar months and years it is not (from 2023-02-28 to 2023-03-01 the one-month cutoff moves four
days, from 2023-01-28 to 2023-02-01), and Stroom then never looks at the records created in the
gap: they are kept forever. Here the period starts at the earliest position, at `last_run`, of the
cutoff of any rule whose cutoff now is at or after the period's end; for fixed-length ages that is
Stroom's value.

Periods come out youngest first, the order the job processes and saves trackers in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from .ages import EPOCH_MS, FOREVER
from .rules import RetentionRule, active_rules

NO_TRACKERS: Mapping[str, int] = MappingProxyType({})


@dataclass(frozen=True)
class RuleAction:
    rule_number: int
    rule_name: str
    delete: bool  # False = RETAIN

    @property
    def outcome(self) -> str:
        return "DELETE" if self.delete else "RETAIN"


@dataclass(frozen=True)
class Period:
    from_ms: int  # inclusive
    to_ms: int  # exclusive
    tracker_age: str  # the tracker key saved once this period is done
    actions: tuple[RuleAction, ...]  # one per active rule, ascending rule number

    def __contains__(self, create_ms: object) -> bool:
        return isinstance(create_ms, int) and self.from_ms <= create_ms < self.to_ms

    @property
    def empty(self) -> bool:
        return self.from_ms >= self.to_ms

    @property
    def deletes(self) -> bool:
        """Whether any rule deletes in this period (a period where all retain changes nothing)."""
        return any(a.delete for a in self.actions)


def rule_actions(rules: Sequence[RetentionRule], from_ms: int, now_ms: int) -> tuple[RuleAction, ...]:
    """Each active rule's action for a period starting at `from_ms`, in precedence order."""
    return tuple(RuleAction(r.rule_number, r.name, not r.forever and from_ms < r.cutoff_ms(now_ms))
                 for r in rules)


def _group_age(group: Sequence[RetentionRule]) -> str:
    # Stroom takes "any" rule of the group; the lowest rule number makes the key deterministic
    return min(group, key=lambda r: r.rule_number).age_string if group else FOREVER


def _tracked_from(c: int, to: int, last_run_ms: int, rules: Sequence[RetentionRule], now_ms: int) -> int:
    """Where the period [c, to) starts given it was last fully processed at `last_run_ms`: the
    earliest position, at the last run, of a cutoff that now lies at or after `to`."""
    crossing = [r.cutoff_ms(last_run_ms) for r in rules if not r.forever and r.cutoff_ms(now_ms) >= to]
    since = min(crossing) if crossing else to
    return min(to, max(c, since))  # a tracker from the future (clock moved back) leaves the period empty


def process_periods(rules: Iterable[RetentionRule], now_ms: int,
                    trackers: Mapping[str, int] = NO_TRACKERS) -> list[Period]:
    """The periods to process, youngest first, each with its actions; no active rules ⇒ none.
    `trackers` maps a tracker key (an age string) to the `now` of the run that last completed
    that period under the current rules version."""
    active = active_rules(rules)
    groups: dict[int, list[RetentionRule]] = {EPOCH_MS: []}
    for rule in active:
        groups.setdefault(rule.cutoff_ms(now_ms), []).append(rule)
    boundaries = sorted(groups, reverse=True)
    periods: list[Period] = []
    to = boundaries[0]  # the newest cutoff: younger data is retained by every rule
    for c in boundaries[1:]:
        tracker_age = _group_age(groups[c])
        last_run = trackers.get(tracker_age)
        start = c if last_run is None else _tracked_from(c, to, last_run, active, now_ms)
        periods.append(Period(start, to, tracker_age, rule_actions(active, start, now_ms)))
        to = c
    return periods


def decide(record_matches: Sequence[bool], actions: Sequence[RuleAction]) -> RuleAction | None:
    """The action that decides a record: the first (in precedence order) whose rule matches it;
    None when no rule matches (the record is retained). `record_matches[i]` is whether the
    record matches the rule of `actions[i]`."""
    if len(record_matches) != len(actions):
        raise ValueError(f"{len(record_matches)} match flags for {len(actions)} rule actions")
    for matched, action in zip(record_matches, actions, strict=True):
        if matched:
            return action
    return None


def deciding_rule(rules: Iterable[RetentionRule], matches: Mapping[int, bool]) -> RetentionRule | None:
    """The active rule that decides a record, given whether it matches each active rule (by rule
    number); None when none matches."""
    for rule in active_rules(rules):
        if matches[rule.rule_number]:
            return rule
    return None


def expired(rule: RetentionRule | None, create_ms: int, now_ms: int) -> bool:
    """Whether a record created at `create_ms` and decided by `rule` has expired at `now_ms`.
    A cutoff is exclusive: a record created exactly at it is retained."""
    return rule is not None and not rule.forever and create_ms < rule.cutoff_ms(now_ms)


__all__ = ["NO_TRACKERS", "Period", "RuleAction", "decide", "deciding_rule", "expired", "process_periods",
           "rule_actions"]
