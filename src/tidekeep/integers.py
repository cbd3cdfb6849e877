"""The range of integers the metadata store holds: 64-bit signed (SQLite INTEGER, PostgreSQL BIGINT).

An id, a limit or a time beyond it can name nothing stored; the CLI refuses it as a usage error and
the library as InvalidInput, before it reaches a database driver (which would overflow).
"""

from __future__ import annotations

from .errors import InvalidInput

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def check_int64(value: int, what: str) -> int:
    """`value` if the store can hold it; otherwise InvalidInput naming `what` and the range."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise InvalidInput(f"{what} {value} is out of range: expected at most {INT64_MAX} (a 64-bit integer)"
                           if value > 0 else f"{what} {value} is out of range: expected at least {INT64_MIN}")
    return value
