"""Stroom's JSON tree form of an expression (ExpressionOperator / ExpressionTerm) <-> the AST.

Accepted: {"type": "operator", "op": "AND" | "OR" | "NOT" (missing or null = AND), "enabled"?,
"children": [...]} and {"type": "term", "field": "Feed", "condition": "EQUALS", "value": "X",
"enabled"?}. Stroom's "@type" key works too, and the type may be left out when the shape says
which it is. Stroom's *_CASE_SENSITIVE conditions are read as the plain ones (matching is always
case-sensitive here), and IS_DOC_REF / IS_NOT_DOC_REF ("Feed is X") as EQUALS / NOT_EQUALS of the
docRef's name. Errors name the JSON path: "expression.children[1].field: unknown field ...".
"""

from __future__ import annotations

from typing import Any, assert_never

from ...errors import InvalidInput
from ..fields import lookup_field
from .ast import Condition, Expr, Op, Operator, Term
from .bind import check_condition, check_value
from .parser import MAX_NESTING

_TERM_KEYS = ("field", "condition", "value", "docRef")
_OPERATOR_KEYS = ("op", "children")
_TYPE_NAMES = {"operator": "operator", "expressionoperator": "operator", "term": "term", "expressionterm": "term"}


def from_json(obj: Any, where: str = "expression") -> Expr:
    return _node(obj, where, 0)


def _node(obj: Any, where: str, depth: int) -> Expr:
    if not isinstance(obj, dict):
        raise InvalidInput(f"{where}: expected a JSON object, got {type(obj).__name__}")
    kind = _kind(obj, where)
    enabled = obj.get("enabled", True)
    if enabled is None:
        enabled = True
    if not isinstance(enabled, bool):
        raise InvalidInput(f"{where}.enabled: expected true or false, got {enabled!r}")
    if kind == "operator":
        if depth >= MAX_NESTING:
            raise InvalidInput(f"{where.split('.children', 1)[0]}: nested too deeply (operators nest at most "
                               f"{MAX_NESTING} deep)")
        return _operator(obj, where, enabled, depth)
    return _term(obj, where, enabled)


def _kind(obj: dict[str, Any], where: str) -> str:
    declared = obj.get("type", obj.get("@type"))
    if declared is not None:
        kind = _TYPE_NAMES.get(str(declared).lower()) if isinstance(declared, str) else None
        if kind is None:
            raise InvalidInput(f"{where}.type: expected 'operator' or 'term', got {declared!r}")
        return kind
    is_term = any(key in obj for key in _TERM_KEYS)
    is_operator = any(key in obj for key in _OPERATOR_KEYS)
    if is_term and is_operator:
        raise InvalidInput(f"{where}: cannot tell an operator from a term; add \"type\"")
    return "term" if is_term else "operator"


def _operator(obj: dict[str, Any], where: str, enabled: bool, depth: int) -> Operator:
    raw_op = obj.get("op")
    op: Op | None
    if raw_op is None:
        op = Op.AND
    else:
        try:
            op = Op(str(raw_op).upper()) if isinstance(raw_op, str) else None
        except ValueError:
            op = None
        if op is None:
            raise InvalidInput(f"{where}.op: expected AND, OR or NOT, got {raw_op!r}")
    raw_children = obj.get("children")
    if raw_children is None:
        raw_children = []
    if not isinstance(raw_children, list):
        raise InvalidInput(f"{where}.children: expected a list, got {type(raw_children).__name__}")
    children = tuple(_node(child, f"{where}.children[{i}]", depth + 1) for i, child in enumerate(raw_children))
    return Operator(op, children, enabled)


# Stroom's "Feed is X" terms name a document; the catalog keeps feeds and pipelines as names
_DOC_REF_CONDITIONS = {"IS_DOC_REF": Condition.EQUALS, "IS_NOT_DOC_REF": Condition.NOT_EQUALS}


def _doc_ref_name(obj: dict[str, Any], where: str) -> str:
    doc_ref = obj.get("docRef")
    name = doc_ref.get("name") if isinstance(doc_ref, dict) else None
    if not isinstance(name, str) or not name:
        name = obj.get("value")
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}.docRef: {obj.get('condition')} needs a docRef with a name")
    return name


def _condition(raw: Any, where: str) -> Condition:
    if not isinstance(raw, str):
        raise InvalidInput(f"{where}.condition: expected a condition name, got {raw!r}")
    name = raw.strip().upper()
    if name in _DOC_REF_CONDITIONS:
        return _DOC_REF_CONDITIONS[name]
    name = name.removesuffix("_CASE_SENSITIVE")
    try:
        return Condition(name)
    except ValueError:
        known = ", ".join(c.value for c in Condition)
        raise InvalidInput(f"{where}.condition: unknown condition {raw!r} (known: {known})") from None


def _term(obj: dict[str, Any], where: str, enabled: bool) -> Term:
    if "field" not in obj:
        raise InvalidInput(f"{where}.field: missing")
    try:
        fld = lookup_field(obj["field"])
    except InvalidInput as exc:
        raise InvalidInput(f"{where}.field: {exc}") from None
    if "condition" not in obj:
        raise InvalidInput(f"{where}.condition: missing")
    condition = _condition(obj["condition"], where)
    try:
        check_condition(fld, condition)
    except InvalidInput as exc:
        raise InvalidInput(f"{where}.condition: {exc}") from None
    value = obj.get("value")
    if isinstance(obj["condition"], str) and obj["condition"].strip().upper() in _DOC_REF_CONDITIONS:
        value = _doc_ref_name(obj, where)
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # Stroom writes strings, but a hand-written file may not
    try:
        canonical = check_value(fld, condition, value)
    except InvalidInput as exc:  # the same type: InvalidRegex stays one
        raise type(exc)(f"{where}.value: {exc}") from None
    return Term(fld.name, condition, canonical, enabled)


def to_json(expr: Expr) -> dict[str, Any]:
    """Stroom's JSON form; `enabled` is written only when false (Stroom's null means true)."""
    out: dict[str, Any]
    match expr:
        case Term():
            out = {"type": "term", "field": expr.field, "condition": expr.condition.value}
            if expr.value is not None:
                out["value"] = expr.value
        case Operator():
            out = {"type": "operator", "op": expr.op.value, "children": [to_json(child) for child in expr.children]}
        case _:
            assert_never(expr)
    if not expr.enabled:
        out["enabled"] = False
    return out


__all__ = ["from_json", "to_json"]
