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

A wildcard query compiles to the cheapest correct kernel: a plain substring search when it has no
wildcard, Arrow's LIKE otherwise (which Arrow itself turns into a substring, prefix or RE2 match).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import InvalidInput


class Kind(enum.StrEnum):
    ALL = "all"  # only `*`s: every message matches
    SUBSTRING = "substring"  # no wildcard: the literal text anywhere in the message
    LIKE = "like"  # Arrow LIKE pattern (`%`, `_`, `\` escapes)
    REGEX = "regex"  # RE2, search semantics


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
        if self.kind is Kind.SUBSTRING:
            return pc.match_substring(messages, self.pattern, ignore_case=self.ignore_case)
        if self.kind is Kind.LIKE:
            return pc.match_like(messages, self.pattern, ignore_case=self.ignore_case)
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


_LIKE_SPECIAL = {"%": "\\%", "_": "\\_", "\\": "\\\\"}


def like_pattern(tokens: list[Token]) -> str:
    """An Arrow LIKE pattern matching the tokens anywhere in a message (CLP's implicit `*...*`)."""
    parts = ["%"]
    for token in tokens:
        if token is STAR:
            if parts[-1] != "%":  # runs of `*` mean the same as one
                parts.append("%")
        elif token is ONE:
            parts.append("_")
        else:
            assert isinstance(token, str)
            parts.append(_LIKE_SPECIAL.get(token, token))
    if parts[-1] != "%":
        parts.append("%")
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
    if all(isinstance(t, str) for t in tokens):
        return Matcher(Kind.SUBSTRING, "".join(t for t in tokens if isinstance(t, str)), ignore_case)
    return Matcher(Kind.LIKE, like_pattern(tokens), ignore_case)


__all__ = ["Kind", "Matcher", "compile_query", "like_pattern", "tokenize"]
