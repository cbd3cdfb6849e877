"""A rule set as a JSON document: what `tidekeep catalog rules show --json` prints and
`GET /api/v1/catalog/rules` answers."""

from __future__ import annotations

from typing import Any

from ..units import iso_utc
from .rules import RetentionRule, RuleSet


def rule_document(rule: RetentionRule) -> dict[str, Any]:
    from .expressions import to_json, to_text

    return {"number": rule.rule_number, "name": rule.name, "enabled": rule.enabled, "active": rule.active,
            "age": rule.age_string, "forever": rule.forever, "expression": to_text(rule.expression),
            "expression_tree": to_json(rule.expression)}


def ruleset_document(ruleset: RuleSet, updated_ms: int | None = None, updated_by: str | None = None) -> dict[str, Any]:
    return {"version": ruleset.version or None, "updated_ms": updated_ms, "updated": iso_utc(updated_ms),
            "updated_by": updated_by,
            "rules": [rule_document(r) for r in sorted(ruleset.rules, key=lambda r: r.rule_number)]}
