"""The readable text syntax for expressions, and the way back (`to_text`).

    feed = "INTERNAL_*" and type in ("Raw Events", "Events")
    not (status = locked or file_size > 10MB) and create_time < now()-30d
    `Create Time` between "2024-01-01" and "2024-02-01T12:00:00Z"

Keywords are case-insensitive; `not` binds tighter than `and`, which binds tighter than `or`;
parentheses group. `all` (or `true`) alone is the empty AND, which matches everything. Errors are
InvalidInput "expression: <what> at column N" (1-based). Parentheses and `not`s nest at most
MAX_NESTING deep. See docs/catalog-expressions.md.
"""

from __future__ import annotations

import re
from typing import assert_never

from ...errors import InvalidInput
from ..fields import Field, FieldKind, lookup_field
from .ast import MATCH_ALL, Condition, Expr, Op, Operator, Term
from .bind import check_condition, check_value
from .dates import RELATIVE_TOKEN
from .normalize import normalize

C = Condition
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_-]+")
_NUMBER_TOKEN = re.compile(r"-?[0-9]+(?:\.[0-9]+)?[A-Za-z]*")
_INTEGER_TOKEN = re.compile(r"-?[0-9]+")
_DICTIONARY_TOKEN = re.compile(r"[A-Za-z0-9_-]+")
_SYMBOL_CONDITIONS = (
    ("!=", C.NOT_EQUALS),
    (">=", C.GREATER_THAN_OR_EQUAL_TO),
    ("<=", C.LESS_THAN_OR_EQUAL_TO),
    ("=", C.EQUALS),
    (">", C.GREATER_THAN),
    ("<", C.LESS_THAN),
)
_RESERVED = {"and", "or", "not"}
# How deep parentheses and `not`s (counted together) may nest, in the text and the JSON form alike.
# Every engine walks an expression recursively; a bound far below Python's recursion limit keeps
# a pathological expression a typed error instead of a RecursionError (docs/catalog-expressions.md).
MAX_NESTING = 100


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.depth = 0

    # ---- scanning ---------------------------------------------------------------------------
    def fail(self, what: str, pos: int | None = None) -> InvalidInput:
        return InvalidInput(f"expression: {what} at column {(self.pos if pos is None else pos) + 1}")

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def word(self) -> str | None:
        """The (lower-case) word at the cursor, without consuming it."""
        self.skip()
        match = _WORD.match(self.text, self.pos)
        return match.group(0).lower() if match else None

    def keyword(self, *words: str) -> bool:
        """Consume a sequence of keywords if all are there."""
        start = self.pos
        for word in words:
            if self.word() != word:
                self.pos = start
                return False
            self.pos += len(word)
        return True

    def symbol(self, sym: str) -> bool:
        self.skip()
        if self.text.startswith(sym, self.pos):
            self.pos += len(sym)
            return True
        return False

    def describe_here(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            return "end of expression"
        match = _WORD.match(self.text, self.pos)
        return repr(match.group(0)) if match else repr(self.text[self.pos])

    # ---- grammar ----------------------------------------------------------------------------
    def parse(self) -> Expr:
        if self.text.strip().lower() in ("all", "true"):
            return MATCH_ALL
        if self.at_end():
            raise self.fail("empty expression (write 'all' to match everything)")
        expr = self.or_expr()
        if not self.at_end():
            if self.text[self.pos] == ")":
                raise self.fail("unbalanced parentheses: ')' without '('")
            raise self.fail(f"expected 'and', 'or' or the end, got {self.describe_here()}")
        return normalize(expr)

    def or_expr(self) -> Expr:
        children = [self.and_expr()]
        while self.keyword("or"):
            children.append(self.and_expr())
        return children[0] if len(children) == 1 else Operator(Op.OR, tuple(children))

    def and_expr(self) -> Expr:
        children = [self.not_expr()]
        while self.keyword("and"):
            children.append(self.not_expr())
        return children[0] if len(children) == 1 else Operator(Op.AND, tuple(children))

    def not_expr(self) -> Expr:
        start = self.pos
        if self.keyword("not"):
            self.enter(start)
            inner = self.not_expr()
            self.depth -= 1
            return Operator(Op.NOT, (inner,))
        return self.primary()

    def enter(self, start: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.skip()
            raise self.fail(f"nested too deeply (parentheses and 'not's nest at most {MAX_NESTING} deep)", start)

    def primary(self) -> Expr:
        self.skip()
        start = self.pos
        if self.symbol("("):
            self.enter(start)
            inner = self.or_expr()
            if not self.symbol(")"):
                if self.at_end():
                    raise self.fail("unbalanced parentheses: '(' is never closed", start)
                raise self.fail(f"expected ')' or an operator, got {self.describe_here()}")
            self.depth -= 1
            return inner
        if self.pos >= len(self.text):
            raise self.fail("expected a condition, got the end of the expression")
        if self.text[self.pos] == ")":
            raise self.fail("unbalanced parentheses: ')' without '('")
        if self.word() in ("all", "true"):
            raise self.fail("'all' can only stand alone as the whole expression")
        return self.term()

    def field(self) -> Field:
        self.skip()
        start = self.pos
        if self.symbol("`"):
            end = self.text.find("`", self.pos)
            if end < 0:
                raise self.fail("unterminated `field name`", start)
            name = self.text[self.pos : end]
            self.pos = end + 1
        else:
            word = _WORD.match(self.text, self.pos)
            if word is None:
                raise self.fail(f"expected a field, got {self.describe_here()}")
            name = word.group(0)
            self.pos = word.end()
            if name.lower() in _RESERVED:
                raise self.fail(f"expected a field, got {name!r}", start)
            if name.lower() == "attr" and self.text.startswith(".", self.pos):
                attribute = _ATTRIBUTE_NAME.match(self.text, self.pos + 1)
                if attribute is None:
                    raise self.fail("expected an attribute name after 'attr.'", self.pos + 1)
                name = "attr." + attribute.group(0)
                self.pos = attribute.end()
        try:
            return lookup_field(name)
        except InvalidInput as exc:
            raise self.fail(str(exc), start) from None

    def condition(self) -> Condition:
        self.skip()
        for sym, condition in _SYMBOL_CONDITIONS:
            if self.symbol(sym):
                return condition
        for words, condition in (
            (("contains",), C.CONTAINS),
            (("starts", "with"), C.STARTS_WITH),
            (("ends", "with"), C.ENDS_WITH),
            (("between",), C.BETWEEN),
            (("in", "dictionary"), C.IN_DICTIONARY),
            (("in",), C.IN),
            (("matches",), C.MATCHES_REGEX),
            (("is", "not", "null"), C.IS_NOT_NULL),
            (("is", "null"), C.IS_NULL),
        ):
            if self.keyword(*words):
                return condition
        raise self.fail(f"unknown operator {self.describe_here()}")

    def term(self) -> Term:
        fld = self.field()
        self.skip()
        op_at = self.pos
        condition = self.condition()
        try:
            check_condition(fld, condition)
        except InvalidInput as exc:
            raise self.fail(str(exc), op_at) from None
        self.skip()
        value_at = self.pos
        value: str | None
        if condition in (C.IS_NULL, C.IS_NOT_NULL):
            value = None
        elif condition is C.IN_DICTIONARY:
            value = self.dictionary_name()
        elif condition is C.BETWEEN:
            low = self.item(fld)
            if not self.keyword("and"):
                raise self.fail(f"expected 'and' in between, got {self.describe_here()}")
            high = self.item(fld)
            value = f"{low},{high}"
        elif condition is C.IN:
            value = ",".join(self.in_list(fld))
        else:
            value = self.value(fld)
        try:
            canonical = check_value(fld, condition, value)
        except InvalidInput as exc:  # the same type (InvalidRegex stays one), placed in the text
            raise type(exc)(str(self.fail(str(exc), value_at))) from None
        return Term(fld.name, condition, canonical)

    def in_list(self, fld: Field) -> list[str]:
        if not self.symbol("("):
            raise self.fail(f"expected '(' after in, got {self.describe_here()}")
        items: list[str] = []
        if self.symbol(")"):
            return items
        while True:
            items.append(self.item(fld))
            if self.symbol(")"):
                return items
            if not self.symbol(","):
                if self.at_end():
                    raise self.fail("unbalanced parentheses: the in list is never closed")
                raise self.fail(f"expected ',' or ')' in the in list, got {self.describe_here()}")

    def item(self, fld: Field) -> str:
        """One value of an IN list or BETWEEN: no commas (Stroom keeps lists as comma text)."""
        self.skip()
        at = self.pos
        value = self.value(fld)
        if "," in value:
            raise self.fail("a value in a list or between cannot contain ','", at)
        if fld.kind is not FieldKind.TEXT:
            try:
                check_value(fld, C.EQUALS, value)
            except InvalidInput as exc:
                raise self.fail(str(exc), at) from None
        return value

    def dictionary_name(self) -> str:
        self.skip()
        if self.text.startswith('"', self.pos):
            return self.quoted()
        match = _DICTIONARY_TOKEN.match(self.text, self.pos)
        if match is None:
            raise self.fail(f"expected a dictionary name, got {self.describe_here()}")
        self.pos = match.end()
        return match.group(0)

    def value(self, fld: Field) -> str:
        self.skip()
        if self.pos >= len(self.text):
            raise self.fail("expected a value, got the end of the expression")
        if self.text[self.pos] == '"':
            return self.quoted()
        bare = None
        if fld.kind is FieldKind.DATE:
            bare = RELATIVE_TOKEN.match(self.text, self.pos) or _INTEGER_TOKEN.match(self.text, self.pos)
        elif fld.kind is FieldKind.INTEGER:
            bare = _NUMBER_TOKEN.match(self.text, self.pos)
        elif fld.kind is FieldKind.STATUS:
            bare = _WORD.match(self.text, self.pos)
        if bare is None:
            expected = "a quoted string" if fld.kind is FieldKind.TEXT else f"a {fld.kind.value} value"
            raise self.fail(f"expected {expected} for {fld.name}, got {self.describe_here()}")
        self.pos = bare.end()
        return bare.group(0)

    def quoted(self) -> str:
        start = self.pos
        self.pos += 1
        out: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("unterminated string", start)
            char = self.text[self.pos]
            if char == '"':
                self.pos += 1
                return "".join(out)
            if char == "\\" and self.pos + 1 < len(self.text):
                nxt = self.text[self.pos + 1]
                hex4 = self.text[self.pos + 2 : self.pos + 6]
                if nxt in _UNESCAPE:
                    out.append(_UNESCAPE[nxt])
                    self.pos += 2
                    continue
                if nxt == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", hex4):
                    out.append(chr(int(hex4, 16)))
                    self.pos += 6
                    continue
                # any other backslash is kept as it is, so regexes read naturally: "\d+"
            out.append(char)
            self.pos += 1


_UNESCAPE = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}


def parse(text: str) -> Expr:
    """Parse the text syntax into a (normalized) AST; InvalidInput names the column."""
    if not isinstance(text, str):
        raise InvalidInput(f"expression: expected text, got {type(text).__name__}")
    return _Parser(text).parse()


# ---- back to text ------------------------------------------------------------------------------


def _quote(value: str) -> str:
    out = ['"']
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif char == "\r":
            out.append("\\r")
        elif ord(char) < 0x20 or 0xD800 <= ord(char) <= 0xDFFF or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _value_text(fld: Field, value: str) -> str:
    bare = (
        (fld.kind is FieldKind.INTEGER and _NUMBER_TOKEN.fullmatch(value))
        or (fld.kind is FieldKind.DATE and (RELATIVE_TOKEN.fullmatch(value) or _INTEGER_TOKEN.fullmatch(value)))
        or (fld.kind is FieldKind.STATUS and _WORD.fullmatch(value))
    )
    return value if bare else _quote(value)


_SYMBOL_TEXT = {condition: sym for sym, condition in _SYMBOL_CONDITIONS}
_WORD_TEXT = {
    C.CONTAINS: "contains",
    C.STARTS_WITH: "starts with",
    C.ENDS_WITH: "ends with",
    C.MATCHES_REGEX: "matches",
}


def _term_text(term: Term) -> str:
    fld = lookup_field(term.field)
    name = fld.text_name
    condition = term.condition
    if condition is C.IS_NULL:
        return f"{name} is null"
    if condition is C.IS_NOT_NULL:
        return f"{name} is not null"
    value = term.value or ""
    if condition is C.IN_DICTIONARY:
        return f"{name} in dictionary {value if _DICTIONARY_TOKEN.fullmatch(value) else _quote(value)}"
    if condition is C.BETWEEN:
        low, high = value.split(",", 1)
        return f"{name} between {_value_text(fld, low)} and {_value_text(fld, high)}"
    if condition is C.IN:
        items = value.split(",") if value != "" else []
        return f"{name} in ({', '.join(_value_text(fld, item) for item in items)})"
    operator = _SYMBOL_TEXT.get(condition) or _WORD_TEXT[condition]
    return f"{name} {operator} {_value_text(fld, value)}"


def _text(expr: Expr) -> str:
    match expr:
        case Term():
            return _term_text(expr)
        case Operator():
            return _operator_text(expr)
        case _:
            assert_never(expr)


def _operator_text(expr: Operator) -> str:
    match expr.op:
        case Op.NOT:
            child = expr.children[0]
            inner = _text(child)
            return f"not ({inner})" if isinstance(child, Operator) and child.op is not Op.NOT else f"not {inner}"
        case Op.AND:
            joiner = " and "
        case Op.OR:
            joiner = " or "
        case _:
            assert_never(expr.op)
    return joiner.join(
        f"({_text(child)})" if isinstance(child, Operator) and child.op is not Op.NOT else _text(child)
        for child in expr.children
    )


def to_text(expr: Expr) -> str:
    """The text syntax for an expression. Disabled items cannot be written in text and are left out
    (as they are when evaluating); the result parses back to `normalize(expr)`."""
    normal = normalize(expr)
    if isinstance(normal, Operator) and not normal.children:
        return "all"
    return _text(normal)


__all__ = ["parse", "to_text"]
