"""Stroom's structural rules (CommonExpressionMapper) as one rewrite every consumer shares.

- disabled items are dropped;
- an operator with no surviving children is dropped from its parent, and at the top level is the
  empty AND, which matches everything (docs/design/catalog.md#expressions);
- NOT over several children is NOT(AND(children));
- AND / OR with a single child is that child.

The result has the same meaning as the input and is what the text parser produces, so
`parse(to_text(e)) == normalize(e)`.
"""

from __future__ import annotations

from typing import assert_never

from .ast import MATCH_ALL, Expr, Op, Operator, Term


def normalize(expr: Expr) -> Expr:
    result = _normalize(expr)
    return MATCH_ALL if result is None else result


def _normalize(expr: Expr) -> Expr | None:
    if not expr.enabled:
        return None
    match expr:
        case Term():
            return expr
        case Operator():
            return _normalize_operator(expr)
        case _:
            assert_never(expr)


def _normalize_operator(expr: Operator) -> Expr | None:
    children = tuple(child for child in (_normalize(c) for c in expr.children) if child is not None)
    if not children:
        return None
    if expr.op is Op.NOT:
        inner = children[0] if len(children) == 1 else Operator(Op.AND, children)
        return Operator(Op.NOT, (inner,))
    if len(children) == 1:
        return children[0]
    return Operator(expr.op, children)


__all__ = ["normalize"]
