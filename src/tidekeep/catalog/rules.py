"""Retention rules and the rule set (Stroom's DataRetentionRule / DataRetentionRules).

Precedence (DESIGN §5): active rules are tested in ascending rule number; the first rule whose
expression matches a record decides; no match retains; a forever rule (age None) always retains.
A rule is active when it is enabled and its expression is enabled (Stroom's getActiveRules); an
enabled expression whose children are all disabled matches everything.

The rule set carries a version, a new random UUID on every save, which invalidates every tracker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidInput
from .ages import Age, age_string, cutoff_ms
from .expressions.ast import Expr, Operator, Term


@dataclass(frozen=True)
class RetentionRule:
    rule_number: int
    name: str
    enabled: bool
    expression: Expr
    age: Age | None  # None = forever

    @property
    def forever(self) -> bool:
        return self.age is None

    @property
    def active(self) -> bool:
        return self.enabled and self.expression.enabled

    @property
    def age_string(self) -> str:
        return age_string(self.age)

    def cutoff_ms(self, now_ms: int) -> int:
        """Records created before this have expired under this rule (the epoch for forever)."""
        return cutoff_ms(now_ms, self.age)

    def __str__(self) -> str:  # Stroom's "<ruleNumber> <name>", as shown for a matching rule
        return f"{self.rule_number} {self.name}"


@dataclass(frozen=True)
class RuleSet:
    version: str  # "" before the first save
    rules: tuple[RetentionRule, ...] = ()

    def active_rules(self) -> tuple[RetentionRule, ...]:
        return active_rules(self.rules)


def active_rules(rules: Iterable[RetentionRule]) -> tuple[RetentionRule, ...]:
    """The rules that take part in retention, in precedence order (ascending rule number)."""
    return tuple(sorted((r for r in rules if r.active), key=lambda r: r.rule_number))


def check_rule(rule: object, where: str | None = None) -> RetentionRule:
    """One rule's own fields; errors name the rule ("rule 3: ...")."""
    if not isinstance(rule, RetentionRule):
        raise InvalidInput(f"{where or 'rule'}: expected a RetentionRule, got {type(rule).__name__}")
    number = rule.rule_number
    if isinstance(number, bool) or not isinstance(number, int):
        raise InvalidInput(f"{where or 'rule'}: rule number {number!r} is not a whole number")
    place = where or f"rule {number}"
    if number < 1:
        raise InvalidInput(f"{place}: rule number must be 1 or more, got {number}")
    if not isinstance(rule.name, str) or not rule.name.strip():
        raise InvalidInput(f"{place}: name must not be empty")
    if not isinstance(rule.enabled, bool):
        raise InvalidInput(f"{place}: enabled must be true or false, got {rule.enabled!r}")
    if not isinstance(rule.expression, (Term, Operator)):
        raise InvalidInput(f"{place}: expression must be an expression tree, got {type(rule.expression).__name__}")
    if rule.age is not None and not isinstance(rule.age, Age):
        raise InvalidInput(f"{place}: age must be an Age or None (forever), got {rule.age!r}")
    return rule


def check_rules(rules: Iterable[object]) -> tuple[RetentionRule, ...]:
    """Every rule's fields, then that rule numbers are unique. Order is kept as given."""
    checked = tuple(check_rule(r) for r in rules)
    seen: set[int] = set()
    for rule in checked:
        if rule.rule_number in seen:
            raise InvalidInput(f"rule {rule.rule_number}: duplicate rule number {rule.rule_number}")
        seen.add(rule.rule_number)
    return checked


__all__ = ["RetentionRule", "RuleSet", "active_rules", "check_rule", "check_rules"]
