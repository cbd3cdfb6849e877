"""RE2 regular expressions for the metadata store: SQLite's `regexp(pattern, value)` function and
the compiled-pattern cache behind it.

Every SQLite connection the store opens gets `regexp` (store/database.py), so statements may use it
(catalog expressions compile MATCHES_REGEX to it, docs/catalog-expressions.md). Patterns run on RE2
(google-re2): linear time in the value, so no pattern can hang a statement. This module knows RE2
only, not which patterns a caller accepts: validating and translating them is the caller's job.
google-re2 is imported on the first pattern compiled, so opening a connection does not load it.
"""

from __future__ import annotations

import functools
from typing import Any

from ..errors import InvalidRegex


@functools.cache
def _options() -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False  # a refused pattern is an InvalidRegex, not a line on stderr
    return options


@functools.lru_cache(maxsize=256)
def compile_re2(pattern: str) -> Any:
    """A compiled RE2 pattern (google-re2); InvalidRegex if RE2 refuses it."""
    import re2

    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise InvalidRegex(f"invalid regex: RE2 refuses it: {reason}") from None


def re2_search(compiled: Any, value: str) -> bool:
    """Whether the compiled pattern matches anywhere in `value`. RE2 reads UTF-8, so a lone
    surrogate (only JSON text can carry one) is read as U+FFFD, one character, as it then is."""
    try:
        return compiled.search(value) is not None
    except UnicodeEncodeError:
        return compiled.search(value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")) is not None


def sqlite_regexp(pattern: str | None, value: str | None) -> int | None:
    """SQLite's `regexp(pattern, value)`: 1 when the RE2 pattern matches anywhere in the value, 0
    when not, NULL when either is NULL."""
    if pattern is None or value is None:
        return None
    return 1 if re2_search(compile_re2(pattern), value) else 0


def register_sqlite_functions(dbapi_connection: Any) -> None:
    """Give a sqlite3 connection `regexp(pattern, value)` (an RE2 pattern, search semantics, in
    linear time; also SQLite's REGEXP operator). The engine calls this on connect; raw sqlite3
    connections must call it too."""
    dbapi_connection.create_function("regexp", 2, sqlite_regexp, deterministic=True)


__all__ = ["compile_re2", "re2_search", "register_sqlite_functions", "sqlite_regexp"]
