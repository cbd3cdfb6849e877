"""The one binder every parser and compiler shares: which conditions each field takes, what its
values mean, and the typed literals the compilers use.

`check_term` validates one term without any context (parsers call it so errors carry a column or
JSON path); `validate` checks a whole tree (used on save); `bind` turns a tree into a `Bound` tree
of typed literals for a `CompileContext` (a fixed `now` and the dictionaries), applying Stroom's
structural rules (normalize.py). Pure: no database, storage or Spark imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import assert_never

from ...errors import InvalidInput, NotFound
from ...units import parse_size_bytes
from ..fields import STATUSES, Field, FieldKind, lookup_field
from .ast import Condition, Expr, Op, Operator, Term
from .dates import parse_date, resolve_date
from .normalize import normalize
from .regex import Regex, parse_regex
from .shape import check_size

C = Condition
ORDERING = frozenset({C.GREATER_THAN, C.GREATER_THAN_OR_EQUAL_TO, C.LESS_THAN, C.LESS_THAN_OR_EQUAL_TO, C.BETWEEN})
NO_VALUE = frozenset({C.IS_NULL, C.IS_NOT_NULL})
ALLOWED: dict[FieldKind, frozenset[Condition]] = {
    FieldKind.TEXT: frozenset(
        {C.EQUALS, C.NOT_EQUALS, C.CONTAINS, C.STARTS_WITH, C.ENDS_WITH, C.IN, C.IN_DICTIONARY, C.MATCHES_REGEX}
    )
    | NO_VALUE,
    FieldKind.STATUS: frozenset({C.EQUALS, C.NOT_EQUALS, C.IN, C.IN_DICTIONARY}) | NO_VALUE,
    FieldKind.INTEGER: frozenset({C.EQUALS, C.NOT_EQUALS, C.IN}) | ORDERING | NO_VALUE,
    FieldKind.DATE: frozenset({C.EQUALS, C.NOT_EQUALS, C.IN}) | ORDERING | NO_VALUE,
}
DICTIONARY_NAME = re.compile(r"[A-Za-z0-9_-]{1,255}")  # as names.check_name, which the dictionary store uses
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]+")
MAX_VALUE_LENGTH = 10_000


@dataclass(frozen=True)
class CompileContext:
    now_ms: int
    dictionaries: Mapping[str, Sequence[str]] = field(default_factory=dict)


# ---- validation (no context) -----------------------------------------------------------------


def check_condition(fld: Field, condition: Condition) -> None:
    if condition not in ALLOWED[fld.kind]:
        if fld.name.startswith("attr.") and condition in ORDERING:
            raise InvalidInput(f"condition {condition.value} is not allowed on {fld.name}: custom attributes are text")
        allowed = ", ".join(sorted(c.value for c in ALLOWED[fld.kind]))
        raise InvalidInput(f"condition {condition.value} is not allowed on {fld.name} (allowed: {allowed})")


def check_value(fld: Field, condition: Condition, value: object) -> str | None:
    """The canonical value text for a term, or InvalidInput saying what is wrong with it (a JSON
    tree may hold any value here)."""
    if condition in NO_VALUE:
        if value not in (None, ""):
            raise InvalidInput(f"{condition.value} takes no value, got {value!r}")
        return None
    if value is None:
        raise InvalidInput(f"{condition.value} on {fld.name} needs a value")
    if not isinstance(value, str):
        raise InvalidInput(f"value {value!r} for {fld.name} must be text")
    if "\x00" in value:
        raise InvalidInput(f"value for {fld.name} contains a NUL character")
    if len(value) > MAX_VALUE_LENGTH:
        raise InvalidInput(f"value for {fld.name} is longer than {MAX_VALUE_LENGTH} characters")
    if condition is C.IN_DICTIONARY:
        if not DICTIONARY_NAME.fullmatch(value):
            raise InvalidInput(f"invalid dictionary name {value!r}: expected [A-Za-z0-9_-]{{1,255}}")
        return value
    if condition is C.MATCHES_REGEX:
        parse_regex(value)
        return value
    if condition is C.BETWEEN:
        parts = value.split(",")
        if len(parts) != 2:
            raise InvalidInput(f"BETWEEN on {fld.name} needs two values 'low,high', got {value!r}")
        for part in parts:
            _typed(fld, part)
        return value
    if condition is C.IN:
        items = in_items(value)
        if fld.kind is FieldKind.STATUS:
            return ",".join(str(_typed(fld, item)) for item in items)
        for item in items:
            _typed(fld, item)
        return value
    if fld.kind is FieldKind.STATUS:
        _typed(fld, value)
        return value.strip().upper()
    if fld.kind is not FieldKind.TEXT:
        _typed(fld, value)
    return value


def in_items(value: str) -> list[str]:
    """Stroom's IN list: comma-separated, trimmed, empty items dropped."""
    return [item.strip() for item in value.split(",") if item.strip()]


def _typed(fld: Field, text: str) -> str | int:
    if fld.kind is FieldKind.TEXT:
        return text
    if fld.kind is FieldKind.STATUS:
        status = text.strip().upper()
        if status not in STATUSES:
            raise InvalidInput(f"invalid status {text!r} for {fld.name}: expected one of {', '.join(STATUSES)}")
        return status
    if fld.kind is FieldKind.DATE:
        parse_date(text)
        return text
    stripped = text.strip()
    if _INTEGER.fullmatch(stripped):
        number = int(stripped)
    elif fld.sizes:
        try:
            number = parse_size_bytes(stripped)
        except InvalidInput:
            raise InvalidInput(f"invalid size {text!r} for {fld.name}: expected bytes or a size like 10MB") from None
    else:
        raise InvalidInput(f"invalid number {text!r} for {fld.name}: expected a whole number")
    if not INT64_MIN <= number <= INT64_MAX:
        raise InvalidInput(f"number {text!r} for {fld.name} is out of range")
    return number


def check_term(term: Term) -> Term:
    """The term with its field name and value in canonical form; InvalidInput if invalid."""
    fld = lookup_field(term.field)
    condition = Condition(term.condition)
    check_condition(fld, condition)
    return Term(fld.name, condition, check_value(fld, condition, term.value), term.enabled)


def validate(expr: Expr) -> None:
    """Check the size (shape.py) and every term (disabled ones too: they are saved and can be
    re-enabled)."""
    check_size(expr)
    _validate(expr, "expression")


def _validate(expr: Expr, where: str) -> None:
    if isinstance(expr, Term):
        try:
            check_term(expr)
        except InvalidInput as exc:  # the same type: InvalidRegex stays one
            raise type(exc)(f"{where}: {exc}") from None
        return
    if not isinstance(expr, Operator):
        raise InvalidInput(f"{where}: not an expression: {expr!r}")
    for index, child in enumerate(expr.children):
        _validate(child, f"{where}.children[{index}]")


def _enabled_terms(expr: Expr) -> list[Term]:
    normal = normalize(expr)
    terms: list[Term] = []
    stack = [normal]
    while stack:
        item = stack.pop()
        if isinstance(item, Term):
            terms.append(item)
        else:
            stack.extend(item.children)
    return terms


def referenced_dictionaries(expr: Expr) -> set[str]:
    return {t.value for t in _enabled_terms(expr) if t.condition is C.IN_DICTIONARY and t.value is not None}


def referenced_columns(expr: Expr) -> set[str]:
    """The catalog_records columns the expression's enabled terms read."""
    return {lookup_field(t.field).column for t in _enabled_terms(expr)}


# ---- binding (typed literals for the compilers) ----------------------------------------------


class TermKind(StrEnum):
    """What a bound term tests; the compilers have one method per kind (visitor.py)."""

    EQ = "eq"
    NE = "ne"
    GT = "gt"
    GE = "ge"
    LT = "lt"
    LE = "le"
    BETWEEN = "between"
    IN = "in"
    GLOB = "glob"
    NOT_GLOB = "not_glob"
    CONTAINS = "contains"
    STARTS = "starts"
    ENDS = "ends"
    REGEX = "regex"
    NULL = "null"
    NOT_NULL = "not_null"


@dataclass(frozen=True)
class BoundTerm:
    """A term with typed values; `kind` says which fields it uses:

    eq / ne: `value` (str or int); glob / not_glob: `parts` (the text between `*`s);
    in: `values` (non-empty); gt / ge / lt / le: `value`; between: `values` = (low, high);
    contains / starts / ends: `value` (str); regex: `regex`; null / not_null: none.
    """

    field: Field
    kind: TermKind
    value: str | int | None = None
    values: tuple[str | int, ...] = ()
    parts: tuple[str, ...] = ()
    regex: Regex | None = None


@dataclass(frozen=True)
class BoundConst:
    value: bool


@dataclass(frozen=True)
class BoundOp:
    op: Op  # AND / OR with two or more children, NOT with exactly one
    children: tuple[Bound, ...]


Bound = BoundTerm | BoundConst | BoundOp

K = TermKind


def bind(expr: Expr, ctx: CompileContext) -> Bound:
    validate(expr)
    return _bind(normalize(expr), ctx)


def _bind(expr: Expr, ctx: CompileContext) -> Bound:
    match expr:
        case Operator():
            return _bind_operator(expr, ctx)
        case Term():
            term = check_term(expr)
            return bind_term(lookup_field(term.field), term.condition, term.value, ctx)
        case _:
            assert_never(expr)


def _bind_operator(expr: Operator, ctx: CompileContext) -> Bound:
    if not expr.children:
        return BoundConst(True)  # only the top level can be childless after normalize
    children: list[Bound] = []
    for child in expr.children:
        bound = _bind(child, ctx)
        if isinstance(bound, BoundOp) and bound.op is expr.op and expr.op is not Op.NOT:
            children.extend(bound.children)  # (a or b) or c is a or b or c: one wide node, kept shallow
        else:
            children.append(bound)
    if expr.op is Op.OR:
        children = _as_sets(children)
        if len(children) == 1:
            return children[0]
    return BoundOp(expr.op, tuple(children))


def _as_sets(children: list[Bound]) -> list[Bound]:
    """OR children with the equality and IN terms on one field merged into one IN term, in the place
    of the first: `f = a or f = b or f in (c)` is `f in (a, b, c)` (each is false on a missing
    value), and one set-membership test is what every engine evaluates fastest."""
    merged: list[Bound] = []
    sets: dict[str, int] = {}  # field name -> index in merged of its IN term
    for child in children:
        if not (isinstance(child, BoundTerm) and child.kind in (K.EQ, K.IN)):
            merged.append(child)
            continue
        values = _members(child)
        name = child.field.name
        if name not in sets:
            sets[name] = len(merged)
            merged.append(child)
            continue
        first = merged[sets[name]]
        assert isinstance(first, BoundTerm)
        merged[sets[name]] = BoundTerm(first.field, K.IN, values=tuple(dict.fromkeys(_members(first) + values)))
    return merged


def _members(term: BoundTerm) -> tuple[str | int, ...]:
    """The values an `eq` or `in` term accepts."""
    if term.kind is K.IN:
        return term.values
    assert term.value is not None  # an eq term always carries its value
    return (term.value,)


def _literal(fld: Field, text: str, ctx: CompileContext) -> str | int:
    if fld.kind is FieldKind.DATE:
        return resolve_date(text, ctx.now_ms)
    return _typed(fld, text)


def bind_term(fld: Field, condition: Condition, value: str | None, ctx: CompileContext) -> Bound:
    """One checked term (check_term) as typed literals; every Condition has a case (mypy checks)."""
    match condition:
        case C.IS_NULL:
            return BoundTerm(fld, K.NULL)
        case C.IS_NOT_NULL:
            return BoundTerm(fld, K.NOT_NULL)
    assert value is not None  # check_value gives every other condition a value
    match condition:
        case C.EQUALS | C.NOT_EQUALS:
            equals = condition is C.EQUALS
            if fld.kind is FieldKind.TEXT and "*" in value:
                return BoundTerm(fld, K.GLOB if equals else K.NOT_GLOB, parts=tuple(value.split("*")))
            return BoundTerm(fld, K.EQ if equals else K.NE, value=_literal(fld, value, ctx))
        case C.GREATER_THAN:
            return BoundTerm(fld, K.GT, value=_literal(fld, value, ctx))
        case C.GREATER_THAN_OR_EQUAL_TO:
            return BoundTerm(fld, K.GE, value=_literal(fld, value, ctx))
        case C.LESS_THAN:
            return BoundTerm(fld, K.LT, value=_literal(fld, value, ctx))
        case C.LESS_THAN_OR_EQUAL_TO:
            return BoundTerm(fld, K.LE, value=_literal(fld, value, ctx))
        case C.BETWEEN:
            low, high = value.split(",")
            return BoundTerm(fld, K.BETWEEN, values=(_literal(fld, low, ctx), _literal(fld, high, ctx)))
        case C.IN | C.IN_DICTIONARY:
            if condition is C.IN:
                items = in_items(value)
            else:
                if value not in ctx.dictionaries:
                    raise NotFound(f"dictionary {value!r} not found (used by an IN_DICTIONARY term on {fld.name})")
                items = [word for word in ctx.dictionaries[value] if word != ""]
            literals = tuple(dict.fromkeys(_literal(fld, item, ctx) for item in items))
            return BoundTerm(fld, K.IN, values=literals) if literals else BoundConst(False)
        case C.CONTAINS | C.STARTS_WITH | C.ENDS_WITH:
            if value == "":  # every text contains, starts and ends with ""
                return BoundTerm(fld, K.NOT_NULL)
            kind = {C.CONTAINS: K.CONTAINS, C.STARTS_WITH: K.STARTS, C.ENDS_WITH: K.ENDS}[condition]
            return BoundTerm(fld, kind, value=value)
        case C.MATCHES_REGEX:
            return BoundTerm(fld, K.REGEX, regex=parse_regex(value))
        case _:
            assert_never(condition)


__all__ = [
    "ALLOWED",
    "Bound",
    "BoundConst",
    "BoundOp",
    "BoundTerm",
    "CompileContext",
    "TermKind",
    "bind",
    "check_condition",
    "check_term",
    "check_value",
    "in_items",
    "referenced_columns",
    "referenced_dictionaries",
    "validate",
]
