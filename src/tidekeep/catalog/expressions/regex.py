"""The regex subset MATCHES_REGEX accepts, and its translation for each engine.

A pattern means what RE2 makes of it (docs/catalog-expressions.md): every engine evaluates it in
time linear in the value, so no pattern can hang a job. RE2 itself runs it in Python and in
SQLite's `regexp` function (google-re2) and in Spark (Arrow's regex kernels are RE2); PostgreSQL
runs its own engine (ARE) on a translation, which is linear-time too for what the subset allows: no
backreferences, and only non-capturing groups, so `~` never leaves its DFA.

The subset, parsed here and re-emitted for each engine with the meaning pinned down:

- literals (ASCII punctuation escaped with a backslash), `\\t`, `\\n`, `\\r`;
- `.` = any character except newline; `^` = start of the text; `$` = end of the text (not before
  a trailing newline);
- classes `[abc]`, `[^a-z]` with ranges, and `\\d` `\\w` `\\s` (ASCII `[0-9]`, `[A-Za-z0-9_]`,
  `[ \\t\\n\\r\\f\\v]`) and their negations `\\D` `\\W` `\\S` outside classes;
- groups `( )` and `(?: )`, alternation `|`, greedy quantifiers `*` `+` `?` `{n}` `{n,}` `{n,m}`
  (m at most 255, PostgreSQL's limit; counted repetitions nested in each other multiply to at
  most 1000, RE2's limit).

Anything else is rejected with InvalidRegex naming the position: what no linear-time engine can
run (backreferences, lookarounds, possessive quantifiers, atomic groups) and what the engines would
read differently (`\\b`, named groups, inline flags, lazy quantifiers, nested classes, POSIX classes).
Matching has search semantics everywhere: a match anywhere in the value counts unless anchored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import re2

from ...errors import InvalidRegex
from ...store.sqlite_regexp import compile_re2, re2_search

MAX_PATTERN = 1000
MAX_REPEAT = 255
MAX_GROUP_NESTING = 100  # groups within groups: the parser (and each engine's compiler) recurses per level
MAX_NESTED_REPEAT = 1000  # RE2 refuses counted repetitions whose nested counts multiply above this
# "stdlib" (Python's backtracking re) is only an independent oracle for the tests: user data is never
# matched with it
ENGINES = ("re2", "postgres", "stdlib")

_WHITESPACE = " \t\n\r\f\v"
_CLASS_SHORTHAND = {"d": "0-9", "w": "A-Za-z0-9_", "s": _WHITESPACE}
_CHAR_ESCAPES = {"t": "\t", "n": "\n", "r": "\r"}
_END = {"re2": r"\z", "postgres": "$", "stdlib": r"\Z"}
_LINEAR = "it needs a backtracking engine, and regexes run in linear time (RE2 semantics)"
_GROUPS = (  # what follows "(?" -> why it is refused
    ("=", f"lookahead '(?=' is not supported: {_LINEAR}"),
    ("!", f"lookahead '(?!' is not supported: {_LINEAR}"),
    ("<=", f"lookbehind '(?<=' is not supported: {_LINEAR}"),
    ("<!", f"lookbehind '(?<!' is not supported: {_LINEAR}"),
    (">", f"atomic group '(?>' is not supported: {_LINEAR}"),
    ("P<", "named groups are not supported (write '(' or '(?:')"),
    ("<", "named groups are not supported (write '(' or '(?:')"),
    ("'", "named groups are not supported (write '(' or '(?:')"),
    ("#", "comments '(?#' are not supported"),
)

@dataclass(frozen=True)
class Regex:
    """A validated pattern and its translation for each engine that evaluates user data."""

    source: str
    re2: str  # RE2 syntax: google-re2 (Python, SQLite's regexp) and Arrow's kernels (Spark)
    postgres: str  # PostgreSQL's ARE, for `~`

    def compiled(self) -> Any:
        return compile_re2(self.re2)

    def search(self, value: str) -> bool:
        return re2_search(self.compiled(), value)


def _lit(char: str) -> str:
    """One literal character, written so all three engines read it as itself."""
    if char.isascii() and not char.isalnum() and char not in ("\t", "\n", "\r", " ", "\f", "\v"):
        return "\\" + char
    return char


def _class_lit(char: str) -> str:
    if char.isascii() and not char.isalnum() and char not in _WHITESPACE:
        return "\\" + char
    return char


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.pos = 0
        self.depth = 0
        self.out: dict[str, list[str]] = {engine: [] for engine in ENGINES}

    def fail(self, what: str, pos: int | None = None) -> InvalidRegex:
        at = (self.pos if pos is None else pos) + 1
        return InvalidRegex(f"invalid regex {self.text!r}: {what} at position {at}")

    def emit(self, same: str | None = None, **per_engine: str) -> None:
        for engine in ENGINES:
            self.out[engine].append(per_engine.get(engine, same or ""))

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> None:
        self.alternation()
        if self.pos < len(self.text):
            raise self.fail("unbalanced ')'")

    # Each of alternation, sequence and atom returns the largest product of the counted repetitions
    # nested inside what it parsed (1 when there are none), so quantifier() can refuse a nesting RE2
    # refuses, naming where.

    def alternation(self) -> int:
        nested = self.sequence()
        while self.peek() == "|":
            self.pos += 1
            self.emit("|")
            nested = max(nested, self.sequence())
        return nested

    def sequence(self) -> int:
        start = self.pos
        nested = 1
        while self.pos < len(self.text) and self.peek() not in ("|", ")"):
            atom_at = self.pos
            inner = self.atom()
            if self.peek() in ("*", "+", "?", "{"):
                if inner is None:
                    raise self.fail("nothing to repeat")
                inner *= self.quantifier()
                if inner > MAX_NESTED_REPEAT:
                    raise self.fail(f"nested repetition counts multiply to {inner}, above {MAX_NESTED_REPEAT}",
                                    atom_at)
            nested = max(nested, inner or 1)
        if self.pos == start:
            raise self.fail("empty alternative")
        return nested

    def atom(self) -> int | None:
        """Parse one atom; None when it cannot be repeated (an anchor)."""
        char = self.peek()
        if char == "(":
            open_at = self.pos
            self.pos += 1
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self.peek() == "?":
                after = self.text[self.pos + 1:]
                reason = next((why for prefix, why in _GROUPS if after.startswith(prefix)),
                              "inline flags '(?...)' are not supported")
                raise self.fail(reason, open_at)
            self.depth += 1
            if self.depth > MAX_GROUP_NESTING:
                raise self.fail(f"groups nested too deeply (at most {MAX_GROUP_NESTING} deep)", open_at)
            self.emit("(?:")
            nested = self.alternation()
            if self.peek() != ")":
                raise self.fail("missing ')'", open_at)
            self.depth -= 1
            self.pos += 1
            self.emit(")")
            return nested
        if char == "[":
            self.char_class()
            return 1
        if char == ".":
            self.pos += 1
            self.emit("[^\n]")
            return 1
        if char == "^":
            self.pos += 1
            self.emit("^")
            return None
        if char == "$":
            self.pos += 1
            self.emit(**_END)
            return None
        if char in ("*", "+", "?"):
            raise self.fail("nothing to repeat")
        if char in ("{", "}", "]"):
            raise self.fail(f"'{char}' must be escaped")
        if char == "\\":
            self.escape()
            return 1
        self.pos += 1
        self.emit(_lit(char))
        return 1

    def escape(self) -> None:
        at = self.pos
        self.pos += 1
        if self.pos >= len(self.text):
            raise self.fail("trailing backslash", at)
        char = self.text[self.pos]
        self.pos += 1
        if char in _CLASS_SHORTHAND:
            self.emit(f"[{_class_body(_CLASS_SHORTHAND[char])}]")
        elif char.lower() in _CLASS_SHORTHAND:
            self.emit(f"[^{_class_body(_CLASS_SHORTHAND[char.lower()])}]")
        elif char in _CHAR_ESCAPES:
            self.emit(_lit(_CHAR_ESCAPES[char]))
        elif char.isascii() and not char.isalnum():
            self.emit(_lit(char))
        elif char in "123456789" or char == "k":
            raise self.fail(f"backreference '\\{char}' is not supported: {_LINEAR}", at)
        else:
            raise self.fail(f"unsupported escape '\\{char}'", at)

    def quantifier(self) -> int:
        """Parse a quantifier; returns its count for the nesting limit (1 for `*`, `+`, `?`, which
        RE2 does not unroll)."""
        at = self.pos
        char = self.peek()
        count = 1
        if char == "{":
            match = re.compile(r"\{([0-9]{1,4})(,([0-9]{0,4}))?\}").match(self.text, self.pos)
            if not match:
                raise self.fail("bad repetition '{' (write {n}, {n,} or {n,m}, or escape it)")
            low = int(match.group(1))
            high = None if match.group(2) is None else (int(match.group(3)) if match.group(3) else None)
            if low > MAX_REPEAT or (high is not None and high > MAX_REPEAT):
                raise self.fail(f"repetition count above {MAX_REPEAT}")
            if high is not None and high < low:
                raise self.fail("repetition {n,m} with m < n")
            self.pos = match.end()
            self.emit(match.group(0))
            count = max(1, low if high is None else high)
        else:
            self.pos += 1
            self.emit(char)
        following = self.peek()
        if following == "+":
            raise self.fail(f"possessive quantifier '{self.text[at:self.pos + 1]}' is not supported: {_LINEAR}")
        if following == "?":
            raise self.fail(f"lazy quantifier '{self.text[at:self.pos + 1]}' is not supported (a greedy one "
                            "matches the same values)")
        if following in ("*", "{"):
            raise self.fail("a quantifier cannot follow a quantifier (group the first one)")
        return count

    def char_class(self) -> None:
        open_at = self.pos
        self.pos += 1
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        parts: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("missing ']'", open_at)
            char = self.peek()
            if char == "]":
                if not parts:
                    raise self.fail("empty character class (escape a literal ']')")
                self.pos += 1
                break
            if char == "[":
                raise self.fail("'[' inside a character class must be escaped")
            low = self.class_char()
            if low is None:  # a shorthand already appended
                parts.append(self._last_shorthand)
                continue
            if self.peek() == "-" and self.pos + 1 < len(self.text) and self.text[self.pos + 1] != "]":
                self.pos += 1
                high_at = self.pos
                high = self.class_char()
                if high is None:
                    raise self.fail("a range cannot end in a class shorthand", high_at)
                if ord(high) < ord(low):
                    raise self.fail(f"bad range {low}-{high}", high_at)
                parts.append(f"{_class_lit(low)}-{_class_lit(high)}")
            else:
                parts.append(_class_lit(low))
        self.emit(("[^" if negate else "[") + "".join(parts) + "]")

    _last_shorthand = ""

    def class_char(self) -> str | None:
        char = self.peek()
        if char != "\\":
            self.pos += 1
            return char
        at = self.pos
        self.pos += 1
        if self.pos >= len(self.text):
            raise self.fail("trailing backslash", at)
        char = self.text[self.pos]
        self.pos += 1
        if char in _CLASS_SHORTHAND:
            self._last_shorthand = _class_body(_CLASS_SHORTHAND[char])
            return None
        if char in _CHAR_ESCAPES:
            return _CHAR_ESCAPES[char]
        if char.isascii() and not char.isalnum():
            return char
        raise self.fail(f"unsupported escape '\\{char}' in a character class", at)


def _class_body(chars: str) -> str:
    return chars if chars != _WHITESPACE else _WHITESPACE  # raw control characters read the same everywhere


def _translations(pattern: str) -> dict[str, str]:
    if not isinstance(pattern, str):
        raise InvalidRegex(f"invalid regex {pattern!r}: expected text")
    if len(pattern) > MAX_PATTERN:
        raise InvalidRegex(f"invalid regex: longer than {MAX_PATTERN} characters")
    if pattern == "":
        raise InvalidRegex("invalid regex '': empty pattern")
    parser = _Parser(pattern)
    parser.parse()
    return {engine: "".join(parser.out[engine]) for engine in ENGINES}


def parse_regex(pattern: str) -> Regex:
    """Validate a MATCHES_REGEX value and translate it; InvalidRegex names the position."""
    translated = _translations(pattern)
    result = Regex(pattern, translated["re2"], translated["postgres"])
    try:
        result.compiled()
    except InvalidRegex as exc:  # e.g. a program above RE2's memory budget
        raise InvalidRegex(f"invalid regex {pattern!r}: {str(exc).removeprefix('invalid regex: ')}") from None
    return result


def glob_re2(parts: tuple[str, ...]) -> str:
    """Stroom's `*` wildcard (any run of characters, newlines too) as an RE2 pattern that, searched
    for, matches the whole value: linear-time however many `*`s a value has (a backtracking engine
    needs time polynomial in the value's length, to the power of the number of `*`s)."""
    return "(?s)^" + ".*".join(re2.escape(part) for part in parts) + r"\z"


def stdlib_pattern(pattern: str) -> str:
    """The same meaning for Python's backtracking `re`: an independent oracle for tests only (it is
    not linear-time, so user data is never matched with it)."""
    return _translations(pattern)["stdlib"]


__all__ = ["MAX_PATTERN", "Regex", "compile_re2", "glob_re2", "parse_regex", "re2_search", "stdlib_pattern"]
