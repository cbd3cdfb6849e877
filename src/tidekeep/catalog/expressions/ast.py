"""The expression tree every catalog predicate is (Stroom's ExpressionOperator/ExpressionTerm).

Values stay as Stroom keeps them, text: "a,b" for BETWEEN, a comma list for IN, a dictionary
name for IN_DICTIONARY, None for IS_NULL/IS_NOT_NULL. Parsing (text syntax or JSON tree) checks
fields, conditions and values; compiling (Python, SQLAlchemy, Spark) turns values into typed
literals with one shared binder, so the three compilers cannot disagree on what a value means.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Op(StrEnum):
    AND = "AND"
    OR = "OR"
    NOT = "NOT"  # over several children: NOT(AND(children))


class Condition(StrEnum):
    EQUALS = "EQUALS"  # `*` is a wildcard
    NOT_EQUALS = "NOT_EQUALS"
    CONTAINS = "CONTAINS"
    STARTS_WITH = "STARTS_WITH"
    ENDS_WITH = "ENDS_WITH"
    GREATER_THAN = "GREATER_THAN"
    GREATER_THAN_OR_EQUAL_TO = "GREATER_THAN_OR_EQUAL_TO"
    LESS_THAN = "LESS_THAN"
    LESS_THAN_OR_EQUAL_TO = "LESS_THAN_OR_EQUAL_TO"
    BETWEEN = "BETWEEN"  # "low,high", inclusive
    IN = "IN"  # comma list, trimmed, empty items dropped; an empty list is false
    IN_DICTIONARY = "IN_DICTIONARY"  # value = dictionary name
    MATCHES_REGEX = "MATCHES_REGEX"  # search semantics: matches anywhere unless anchored
    IS_NULL = "IS_NULL"
    IS_NOT_NULL = "IS_NOT_NULL"


@dataclass(frozen=True)
class Term:
    field: str  # canonical field name: Stroom's display name ("Create Time") or "attr.<name>"
    condition: Condition
    value: str | None = None
    enabled: bool = True


@dataclass(frozen=True)
class Operator:
    op: Op = Op.AND
    children: tuple[Expr, ...] = ()
    enabled: bool = True


Expr = Term | Operator

MATCH_ALL = Operator(Op.AND, ())  # an empty AND matches everything (docs/design/catalog.md#expressions)

__all__ = ["MATCH_ALL", "Condition", "Expr", "Op", "Operator", "Term"]
