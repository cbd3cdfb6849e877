"""Search queries, compiled for pyarrow.compute (pure: no database, storage or Spark).

Wildcard queries follow CLP: `*` matches any run of characters (also none), `?` exactly one
character, and `\\` makes the next character literal (`\\*`, `\\?`, `\\\\`; any other escaped character
is simply that character). A trailing lone `\\` is an error. The query matches anywhere in the
message: CLP wraps every query in `*...*`, and so do we. `*` and `?` match line breaks too, so a
query can span the lines of a multi-line message. Matching is case-sensitive unless `ignore_case`.

`ignore_case` uses RE2's case folding (Arrow runs RE2), which is Unicode *simple* case folding:
`k` matches `K` and the Kelvin sign U+212A, `s` matches `ſ` U+017F, `ß` matches `ẞ` U+1E9E, but
one character never matches two (`ß` does not match `ss`).

Regex queries (`regex=True`) are RE2 patterns with search semantics (match anywhere, as `re.search`;
anchor with `^`/`$`). `.` does not match a line break unless the pattern says `(?s)`.

A wildcard query compiles to an RE2 pattern run by pyarrow.compute.match_substring_regex: `*` is
`.*`, `?` is `.`, under `(?s)` so both cross line breaks; every other character is literal. RE2
beats Arrow's own substring and LIKE kernels by 2-4x on log lines (measured on 48 MB of access
logs: a literal 34 ms vs match_substring 143 ms, `status=5?0*ERROR` 44 ms vs match_like 108 ms),
because it skips ahead with memchr on the pattern's first byte. A query of only `*` matches every
message without running a kernel at all.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidInput


class Kind(enum.StrEnum):
    ALL = "all"  # only `*`s: every message matches
    WILDCARD = "wildcard"  # a CLP wildcard query, translated to RE2
    REGEX = "regex"  # the user's RE2 pattern, search semantics


STAR = object()  # token: any run of characters
ONE = object()  # token: exactly one character

Token = str | object  # a literal character, STAR or ONE


@dataclass(frozen=True)
class Matcher:
    """What a search task applies to the message column."""

    kind: Kind
    pattern: str
    ignore_case: bool

    def mask(self, messages: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
        """A boolean array: which messages match."""
        if self.kind is Kind.ALL:
            return pc.is_valid(messages)
        return pc.match_substring_regex(messages, self.pattern, ignore_case=self.ignore_case)


def tokenize(query: str) -> list[Token]:
    """The query as literal characters and wildcard tokens; InvalidInput for a trailing `\\`."""
    tokens: list[Token] = []
    escaped = False
    for char in query:
        if escaped:
            tokens.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "*":
            tokens.append(STAR)
        elif char == "?":
            tokens.append(ONE)
        else:
            tokens.append(char)
    if escaped:
        raise InvalidInput(f"invalid search query {query!r}: it ends with a lone '\\' (write '\\\\' for a backslash)")
    return tokens


_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def wildcard_regex(tokens: list[Token]) -> str:
    """An RE2 pattern that, searched for, matches the tokens anywhere in a message (CLP's implicit
    `*...*` is the search itself, so leading and trailing `*`s add nothing)."""
    while tokens and tokens[0] is STAR:
        tokens = tokens[1:]
    while tokens and tokens[-1] is STAR:
        tokens = tokens[:-1]
    parts = ["(?s)"]  # `.` also matches a line break: multi-line messages are one message
    for token in tokens:
        if token is STAR:
            if parts[-1] != ".*":  # runs of `*` mean the same as one
                parts.append(".*")
        elif token is ONE:
            parts.append(".")
        else:
            assert isinstance(token, str)
            parts.append("\\" + token if token in _RE2_SPECIAL else token)
    return "".join(parts)


def compile_query(query: str, *, regex: bool = False, ignore_case: bool = False) -> Matcher:
    """Check and compile a query; InvalidInput naming the problem for an empty or malformed one."""
    if not isinstance(query, str) or query == "":
        raise InvalidInput("invalid search query: it is empty (use '*' to match every message)")
    if regex:
        try:
            # Arrow compiles the pattern when the kernel starts; an empty array would never start it
            pc.match_substring_regex(pa.array([""], pa.string()), query, ignore_case=ignore_case)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            reason = str(exc).removeprefix("Invalid regular expression: ")
            raise InvalidInput(f"invalid regex query {query!r}: {reason}") from None
        return Matcher(Kind.REGEX, query, ignore_case)
    tokens = tokenize(query)
    if all(t is STAR for t in tokens):
        return Matcher(Kind.ALL, "", ignore_case)
    return Matcher(Kind.WILDCARD, wildcard_regex(tokens), ignore_case)


__all__ = ["Kind", "Matcher", "compile_query", "tokenize", "wildcard_regex"]
