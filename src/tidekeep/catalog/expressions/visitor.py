"""The one walk over a bound expression that every compiler shares (python.py, sql.py, spark.py).

`BoundCompiler` has one abstract method per node (constant, AND, OR, NOT, a field's value) and one
per term kind (`TermKind`); `compile` is the only dispatch, an exhaustive `match` whose
`assert_never` makes mypy reject a node or a kind without a case. A compiler that leaves a method
out cannot be instantiated (TypeError naming the method), and each compiler module instantiates its
compiler when it is imported, so a missing case fails at type-check and import time, never on the
first record that happens to use it (docs/catalog-expressions.md, "Compilers").

Every compiler gets the same semantics from here: a term on a missing value is false (`present_and`),
IS_NULL / IS_NOT_NULL test the value itself, and NOT is plain negation (two-valued logic). Pure: no
database or Spark imports.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, TypeVar, assert_never

from ..fields import Field
from .ast import Op
from .bind import Bound, BoundConst, BoundOp, BoundTerm, TermKind

Result = TypeVar("Result")  # what an expression compiles to: a predicate, a SQL clause, a Spark Column
Value = TypeVar("Value")  # how a field's value is read for one record
Test = TypeVar("Test")  # one term's test of a present value


class BoundCompiler(ABC, Generic[Result, Value, Test]):
    """Compiles a `Bound` tree (bind.py) into `Result`. Subclasses implement every abstract method;
    `compile` decides which one runs."""

    def compile(self, bound: Bound) -> Result:
        match bound:
            case BoundConst():
                return self.constant(bound.value)
            case BoundOp():
                children = [self.compile(child) for child in bound.children]
                match bound.op:
                    case Op.AND:
                        return self.all_of(children)
                    case Op.OR:
                        return self.any_of(children)
                    case Op.NOT:
                        return self.negate(children[0])  # bind gives NOT exactly one child
                    case _:
                        assert_never(bound.op)
            case BoundTerm():
                return self.term(bound)
            case _:
                assert_never(bound)

    def term(self, term: BoundTerm) -> Result:
        value = self.value_of(term.field)
        match term.kind:
            case TermKind.NULL:
                return self.is_null(value)
            case TermKind.NOT_NULL:
                return self.is_not_null(value)
            case TermKind.EQ:
                test = self.eq(term, value)
            case TermKind.NE:
                test = self.ne(term, value)
            case TermKind.GT:
                test = self.gt(term, value)
            case TermKind.GE:
                test = self.ge(term, value)
            case TermKind.LT:
                test = self.lt(term, value)
            case TermKind.LE:
                test = self.le(term, value)
            case TermKind.BETWEEN:
                test = self.between(term, value)
            case TermKind.IN:
                test = self.in_(term, value)
            case TermKind.GLOB:
                test = self.glob(term, value)
            case TermKind.NOT_GLOB:
                test = self.not_glob(term, value)
            case TermKind.CONTAINS:
                test = self.contains(term, value)
            case TermKind.STARTS:
                test = self.starts(term, value)
            case TermKind.ENDS:
                test = self.ends(term, value)
            case TermKind.REGEX:
                test = self.regex(term, value)
            case _:
                assert_never(term.kind)
        return self.present_and(value, test)

    # ---- nodes -------------------------------------------------------------------------------

    @abstractmethod
    def constant(self, value: bool) -> Result: ...

    @abstractmethod
    def all_of(self, children: Sequence[Result]) -> Result:
        """AND of two or more children."""

    @abstractmethod
    def any_of(self, children: Sequence[Result]) -> Result:
        """OR of two or more children."""

    @abstractmethod
    def negate(self, child: Result) -> Result: ...

    @abstractmethod
    def value_of(self, field: Field) -> Value:
        """How the field's value is read (a column, an attribute of the JSON object)."""

    @abstractmethod
    def is_null(self, value: Value) -> Result: ...

    @abstractmethod
    def is_not_null(self, value: Value) -> Result: ...

    @abstractmethod
    def present_and(self, value: Value, test: Test) -> Result:
        """True when the value is present and passes `test`; false (never NULL) when it is missing."""

    # ---- one per term kind (bind.py's BoundTerm says which fields each kind uses) ---------------

    @abstractmethod
    def eq(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def ne(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def gt(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def ge(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def lt(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def le(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def between(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def in_(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def glob(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def not_glob(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def contains(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def starts(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def ends(self, term: BoundTerm, value: Value) -> Test: ...

    @abstractmethod
    def regex(self, term: BoundTerm, value: Value) -> Test: ...


__all__ = ["BoundCompiler"]
