"""Catalog expressions: one AST (ast.py), two ways in (the text syntax in parser.py, Stroom's JSON
tree in jsonform.py), one binder (bind.py) and three compilers with the same meaning (python.py,
sql.py, spark.py). Importing this package does not import pyspark; `to_spark` does, on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .ast import MATCH_ALL, Condition, Expr, Op, Operator, Term
from .bind import CompileContext, referenced_columns, referenced_dictionaries, validate
from .dates import resolve_date
from .jsonform import from_json, to_json
from .normalize import normalize
from .parser import parse, to_text
from .python import to_python
from .sql import register_sqlite_functions, to_sqlalchemy

if TYPE_CHECKING:
    from pyspark.sql import Column


def to_spark(expr: Expr, ctx: CompileContext) -> Column:
    """A Spark Column for the expression (spark.py; pyspark is imported on first use)."""
    from .spark import to_spark as compile_spark

    return compile_spark(expr, ctx)


__all__ = [
    "MATCH_ALL",
    "CompileContext",
    "Condition",
    "Expr",
    "Op",
    "Operator",
    "Term",
    "from_json",
    "normalize",
    "parse",
    "referenced_columns",
    "referenced_dictionaries",
    "register_sqlite_functions",
    "resolve_date",
    "to_json",
    "to_python",
    "to_spark",
    "to_sqlalchemy",
    "to_text",
    "validate",
]
