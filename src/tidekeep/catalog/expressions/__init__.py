"""Catalog expressions: one AST (ast.py), two ways in (the text syntax in parser.py, Stroom's JSON
tree in jsonform.py), one binder (bind.py) and three compilers with the same meaning (python.py,
sql.py, spark.py). Importing this package does not import pyspark; `to_spark` does, on first use.
"""

from __future__ import annotations

from .ast import MATCH_ALL, Condition, Expr, Op, Operator, Term
from .bind import CompileContext, referenced_columns, referenced_dictionaries, validate
from .dates import resolve_date
from .jsonform import from_json, to_json
from .normalize import normalize
from .parser import parse, to_text

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
    "resolve_date",
    "to_json",
    "to_text",
    "validate",
]
