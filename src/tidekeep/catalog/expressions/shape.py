"""The shapes and sizes every engine can evaluate (docs/catalog-expressions.md, "Size limits").

An AND or OR of n children written as a chain, `((a or b) or c) or d`, is n levels deep, and the
engines walk expression trees recursively: Spark's analyzer overflows the JVM stack at a few hundred
levels and SQLite refuses a tree deeper than 1000 ("Expression tree is too large"). The compilers
therefore combine children pairwise (`balanced`), so n children are about log2(n) levels deep, and
IN lists are set membership, never a chain of equalities.

Breadth is bounded so that compiling stays cheap and within each engine's limits (SQLite's 32,766
bound parameters per statement among them): `check_size` is called wherever an expression is
saved or checked, and `MAX_RULES` / `MAX_RULE_SET_TERMS` / `MAX_HELD_TERMS` bound what is combined
into one evaluation. Pure: no database or Spark imports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from ...errors import InvalidInput
from .ast import Expr, Operator, Term

T = TypeVar("T")

MAX_TERMS = 1_000  # terms in one expression (a rule's or a hold's), disabled ones included
MAX_RULES = 500  # rules in one rule set
MAX_RULE_SET_TERMS = 2_000  # terms over all the rules of a rule set
MAX_HELD_TERMS = 2_000  # terms over all the holds on catalog records together


def balanced(items: Sequence[T], combine: Callable[[T, T], T]) -> T:
    """`items` combined pairwise, neighbours first, into a tree about log2(len(items)) deep. The
    order of the leaves is kept, so an associative `combine` gives the chain's result."""
    if not items:
        raise ValueError("balanced() needs at least one item")
    level = list(items)
    while len(level) > 1:
        paired = [combine(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def count_terms(expr: Expr) -> int:
    """The number of terms in the tree, disabled ones included (iterative: any depth)."""
    count = 0
    stack: list[object] = [expr]
    while stack:
        item = stack.pop()
        if isinstance(item, Term):
            count += 1
        elif isinstance(item, Operator):
            stack.extend(item.children)
    return count


def check_size(expr: Expr, what: str = "expression") -> int:
    """The expression's term count; InvalidInput when it is above MAX_TERMS."""
    count = count_terms(expr)
    if count > MAX_TERMS:
        raise InvalidInput(f"{what} has {count} terms, at most {MAX_TERMS} are allowed "
                           "(use 'in (...)' or 'in dictionary' for long lists of values)")
    return count


def check_total(counts: Iterable[int], limit: int, what: str) -> int:
    """The sum of `counts`; InvalidInput naming `what` when it is above `limit`."""
    total = sum(counts)
    if total > limit:
        raise InvalidInput(f"{what} have {total} terms together, at most {limit} are allowed")
    return total


__all__ = ["MAX_HELD_TERMS", "MAX_RULES", "MAX_RULE_SET_TERMS", "MAX_TERMS", "balanced", "check_size", "check_total",
           "count_terms"]
