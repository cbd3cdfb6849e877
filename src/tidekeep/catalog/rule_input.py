"""Retention rules from what a caller has at hand: the text of a rule file (YAML or Stroom JSON),
that document as Python mappings, a rule file's path, a RuleSet, or RetentionRule objects.

Text, documents and files go through the one parser `tidekeep catalog rules set` uses
(catalog/rules.py), so the API accepts exactly what the CLI accepts, with the same error messages."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from ..errors import InvalidInput
from .rules import RetentionRule, RuleSet, check_rules, load_rules_file, parse_rules_text, rules_from_document

RulesInput: TypeAlias = (str | os.PathLike[str] | RuleSet | Mapping[str, Any]
                         | Iterable[RetentionRule] | Iterable[Mapping[str, Any]])
EXPECTED = ("a rule file's text, a mapping with a 'rules' list, a list of rule mappings, a RuleSet, "
            "a list of RetentionRule or a rule file path")


def rules_from_input(source: RulesInput) -> RuleSet:
    """The rules of `source` as a RuleSet with version "" (validated as one rule set: numbers
    unique, every field checked). InvalidInput (or NotFound for a missing file) otherwise."""
    if isinstance(source, RuleSet):
        return source
    if isinstance(source, os.PathLike):
        return load_rules_file(Path(source))
    if isinstance(source, str):
        return load_rules_file(source) if _is_path(source) else parse_rules_text(source, "rules")
    if isinstance(source, Mapping):
        return rules_from_document(source)
    if isinstance(source, (RetentionRule, bytes)) or not isinstance(source, Iterable):
        raise InvalidInput(f"expected {EXPECTED}, got {type(source).__name__}")
    items = list(source)
    if items and all(isinstance(item, Mapping) for item in items):
        return rules_from_document({"rules": items})
    if any(isinstance(item, Mapping) for item in items):
        raise InvalidInput("expected a list of RetentionRule or a list of rule mappings, not a mix of both")
    return RuleSet("", check_rules(items))


def _is_path(text: str) -> bool:
    """A one-line str that does not parse as a rule document (a mapping or a list) names a file:
    what `set_rules` accepted before it took text. A path never parses as one, as it holds no
    ': ' and starts with neither '{', '[' nor '- '."""
    if "\n" in text.strip():
        return False
    stripped = text.strip()
    return not (stripped.startswith(("{", "[", "- ")) or ": " in stripped or stripped.endswith(":"))
