"""The regex subset MATCHES_REGEX accepts, and its translation for each engine.

Python's `re`, Java's `java.util.regex` (Spark's rlike) and PostgreSQL's ARE (`~`) disagree on
much: what `.` and `$` match around newlines, what `\\d`/`\\w`/`\\s` mean outside ASCII, escapes,
lookarounds, backreferences, lazy and possessive quantifiers. So a pattern is parsed here into a
small common subset and re-emitted for each engine with the meaning pinned down:

- literals (ASCII punctuation escaped with a backslash), `\\t`, `\\n`, `\\r`;
- `.` = any character except newline; `^` = start of the text; `$` = end of the text (not before
  a trailing newline);
- classes `[abc]`, `[^a-z]` with ranges, and `\\d` `\\w` `\\s` (ASCII `[0-9]`, `[A-Za-z0-9_]`,
  `[ \\t\\n\\r\\f\\v]`) and their negations `\\D` `\\W` `\\S` outside classes;
- groups `( )` and `(?: )`, alternation `|`, greedy quantifiers `*` `+` `?` `{n}` `{n,}` `{n,m}`
  (m at most 255, PostgreSQL's limit).

Anything else (lookarounds, backreferences, `\\b`, named groups, inline flags, lazy or possessive
quantifiers, nested classes, POSIX classes) is rejected with InvalidInput naming the position.
Matching has search semantics everywhere: a match anywhere in the value counts unless anchored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...errors import InvalidInput

MAX_PATTERN = 1000
MAX_REPEAT = 255
ENGINES = ("python", "java", "postgres")

_WHITESPACE = " \t\n\r\f\v"
_CLASS_SHORTHAND = {"d": "0-9", "w": "A-Za-z0-9_", "s": _WHITESPACE}
_CHAR_ESCAPES = {"t": "\t", "n": "\n", "r": "\r"}
_END = {"python": r"\Z", "java": r"\z", "postgres": "$"}


@dataclass(frozen=True)
class Regex:
    """A validated pattern and its translation for each engine."""

    source: str
    python: str
    java: str
    postgres: str

    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.python)


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
        self.out: dict[str, list[str]] = {engine: [] for engine in ENGINES}

    def fail(self, what: str, pos: int | None = None) -> InvalidInput:
        at = (self.pos if pos is None else pos) + 1
        return InvalidInput(f"invalid regex {self.text!r}: {what} at position {at}")

    def emit(self, same: str | None = None, **per_engine: str) -> None:
        for engine in ENGINES:
            self.out[engine].append(per_engine.get(engine, same or ""))

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def parse(self) -> None:
        self.alternation()
        if self.pos < len(self.text):
            raise self.fail("unbalanced ')'")

    def alternation(self) -> None:
        self.sequence()
        while self.peek() == "|":
            self.pos += 1
            self.emit("|")
            self.sequence()

    def sequence(self) -> None:
        start = self.pos
        while self.pos < len(self.text) and self.peek() not in ("|", ")"):
            quantifiable = self.atom()
            if self.peek() in ("*", "+", "?", "{"):
                if not quantifiable:
                    raise self.fail("nothing to repeat")
                self.quantifier()
        if self.pos == start:
            raise self.fail("empty alternative")

    def atom(self) -> bool:
        char = self.peek()
        if char == "(":
            open_at = self.pos
            self.pos += 1
            if self.text.startswith("?:", self.pos):
                self.pos += 2
            elif self.peek() == "?":
                raise self.fail("unsupported group '(?' (lookarounds, flags and named groups are not allowed)")
            self.emit("(?:")
            self.alternation()
            if self.peek() != ")":
                raise self.fail("missing ')'", open_at)
            self.pos += 1
            self.emit(")")
            return True
        if char == "[":
            self.char_class()
            return True
        if char == ".":
            self.pos += 1
            self.emit("[^\n]")
            return True
        if char == "^":
            self.pos += 1
            self.emit("^")
            return False
        if char == "$":
            self.pos += 1
            self.emit(**_END)
            return False
        if char in ("*", "+", "?"):
            raise self.fail("nothing to repeat")
        if char in ("{", "}", "]"):
            raise self.fail(f"'{char}' must be escaped")
        if char == "\\":
            self.escape()
            return True
        self.pos += 1
        self.emit(_lit(char))
        return True

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
        else:
            raise self.fail(f"unsupported escape '\\{char}'", at)

    def quantifier(self) -> None:
        char = self.peek()
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
        else:
            self.pos += 1
            self.emit(char)
        if self.peek() in ("*", "+", "?", "{"):
            raise self.fail("lazy, possessive or repeated quantifiers are not supported")

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


def parse_regex(pattern: str) -> Regex:
    """Validate a MATCHES_REGEX value and translate it; InvalidInput names the position."""
    if not isinstance(pattern, str):
        raise InvalidInput(f"invalid regex {pattern!r}: expected text")
    if len(pattern) > MAX_PATTERN:
        raise InvalidInput(f"invalid regex: longer than {MAX_PATTERN} characters")
    if pattern == "":
        raise InvalidInput("invalid regex '': empty pattern")
    parser = _Parser(pattern)
    parser.parse()
    result = Regex(pattern, *("".join(parser.out[engine]) for engine in ENGINES))
    try:
        result.compiled()
    except re.error as exc:  # pragma: no cover - the subset parser should have caught it
        raise InvalidInput(f"invalid regex {pattern!r}: {exc}") from None
    return result


__all__ = ["Regex", "parse_regex"]
