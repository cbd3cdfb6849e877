"""Which rows of a template-encoded archive can match a wildcard query, decided from their log
types and variables, before any message is decoded (pure: pyarrow only).

The decision is a necessary condition, never a sufficient one: a row it rules out cannot match,
and every row it keeps is decoded and matched exactly (search.py), so results are what matching
the text gives. docs/archives.md ("Search on the encoded form") has the reasoning; in short:

- Every message that matches contains each literal run of the query (query.Matcher.literals).
- A run either starts inside the message's leading timestamp text, when that text was taken out
  (its first character must then be one a text of that `timestamp_format` can hold), or lies in
  what the log type and variables decode to.
- In the decoded text, a variable is always a whole token (a maximal run of token characters,
  template_encoding.py) and every other byte is the log type's static text. So the run's
  non-token characters are static text, and each of its runs of token characters is static text or
  lies inside one variable: inside a dictionary variable only, if it holds a character no number is
  written with. The log type must match that, with static text escaped as the log type escapes it.
- A run that is one run of token characters is also looked up in the row's dictionary variables:
  the row is kept when its log type holds the run as static text or one of its dictionary variables
  contains it.

Case-insensitive queries: RE2 folds `k` with the Kelvin sign and `s` with the long s, which are not
token characters, so a run is cut at those letters (and at characters outside ASCII) and each part
is tested. Regex queries are tested by the runs of plain characters at their top level
(query.regex_literals); a regex with none is decoded in full.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_bytes import one_array
from .query import Kind, Matcher
from .timestamp_text import text_characters

TOKEN_CHARACTERS = frozenset("+-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\\_")
NUMBER_CHARACTERS = frozenset("-.0123456789")  # all a number variable's text can hold
ANY_PLACEHOLDER = "[\\x{11}\\x{12}\\x{13}]"
DICTIONARY_PLACEHOLDER = "\\x{12}"
ESCAPED_IN_LOGTYPES = frozenset("\x11\x12\x13\\")
FOLDS_BEYOND_ASCII = frozenset("kKsS")
_RE2_SPECIAL = frozenset("\\.+*?()|[]{}^$")


# gives a row group's variables column and what finds the rows owning given values (None: each
# list holds its own row's values), for a filter that reads the variables only when it needs them
VariablesSource = Callable[[], tuple["pa.Array | pa.ChunkedArray", "Callable[[np.ndarray], np.ndarray] | None"]]


@dataclass(frozen=True)
class LiteralTest:
    """What one literal run of the query asks of a row."""

    literal: str
    logtype_pattern: str  # RE2 over a log type: the run's shape in static text and placeholders
    word: str | None  # the run, when it is one run of token characters not all number characters


@dataclass(frozen=True)
class TemplateFilter:
    tests: tuple[LiteralTest, ...]
    ignore_case: bool

    def candidates(self, formats: pa.Array | pa.ChunkedArray, logtypes: pa.Array | pa.ChunkedArray,
                   variables: pa.Array | pa.ChunkedArray | VariablesSource, *, among: np.ndarray | None = None,
                   variable_owners: Callable[[np.ndarray], np.ndarray] | None = None) -> np.ndarray:
        """A boolean mask: the rows (of those `among` selects; default all) that may match (False:
        cannot). Each test looks only at the distinct log types of the rows the tests before it
        kept. `variable_owners` gives the rows holding given values of the variables' values (by
        position); by default each list holds its row's values (a format 3 row group as read does
        not: archive_format.StoredRowGroup). `variables` may be a VariablesSource, called only
        when a test needs the variables (and then giving the owners too)."""
        logtype_values = _Distinct.of(one_array(logtypes))
        count = len(logtype_values.indices)
        keep = np.ones(count, dtype=bool) if among is None else among.copy()
        format_values, format_rows = _distinct(formats)  # a handful per row group
        variable_values: _Distinct | None = None
        owners = variable_owners
        for test in self.tests:
            if not keep.any():
                break
            if test.word is None:
                passes = logtype_values.hits(self._pattern_test(test.logtype_pattern), keep)
            else:
                if variable_values is None:
                    if callable(variables):
                        variables, owners = variables()
                    lists = one_array(variables)
                    variable_values = _Distinct.of(pc.list_flatten(lists))
                    if owners is None:  # each list holds its own row's values
                        owners = _ParentRows(lists)
                passes = logtype_values.hits(self._pattern_test(_static_pattern(test.word)), keep)
                holding = np.flatnonzero(variable_values.hits(
                    functools.partial(_holding, word=test.word, ignore_case=self.ignore_case), None))
                if len(holding):
                    assert owners is not None  # set with variable_values
                    passes[owners(holding)] = True
            passes |= self._may_start_in_timestamp(test.literal, format_values, format_rows, logtype_values, keep)
            keep &= passes
        return keep

    def _may_start_in_timestamp(self, literal: str, format_values: list[str], format_rows: np.ndarray,
                                logtypes: _Distinct, keep: np.ndarray) -> np.ndarray:
        """Rows (among those kept) where the run may begin inside the timestamp text taken out of
        the message: its first characters are ones a text of the row's format holds, and what
        follows them is all in that text or begins what the log type decodes to."""
        passes = np.zeros(len(format_rows), dtype=bool)
        for index, timestamp_format in enumerate(format_values):
            inside = _timestamp_prefix(literal, timestamp_format, self.ignore_case)
            if inside == 0:
                continue
            rows = (format_rows == index) & keep
            if inside == len(literal):
                passes |= rows
                continue
            if rows.any():
                passes |= rows & logtypes.hits(self._pattern_test(_rest_after_timestamp(literal, inside)), rows)
        return passes

    def _pattern_test(self, pattern: str) -> Callable[[pa.Array], np.ndarray]:
        return functools.partial(_matches, pattern=pattern, ignore_case=self.ignore_case)


class _ParentRows:
    """The row of each value of a list column whose lists hold their own rows' values."""

    def __init__(self, lists: pa.Array) -> None:
        self.rows = np.asarray(pc.list_parent_indices(lists).to_numpy(zero_copy_only=False), dtype=np.int64)

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        owners: np.ndarray = self.rows[positions]
        return owners


@dataclass(frozen=True)
class _Distinct:
    """A column as its distinct values and each element's index among them: a dictionary array's
    own dictionary and indices, or a plain array's values each standing for itself."""

    values: pa.Array
    indices: np.ndarray

    @classmethod
    def of(cls, array: pa.Array) -> _Distinct:
        if isinstance(array, pa.DictionaryArray):
            return cls(array.dictionary, np.asarray(array.indices.to_numpy(zero_copy_only=False), dtype=np.int64))
        return cls(array, np.arange(len(array), dtype=np.int64))

    def hits(self, test: Callable[[pa.Array], np.ndarray], among: np.ndarray | None) -> np.ndarray:
        """Per element, whether its value passes `test` (a mask over values). Only the values of
        the elements `among` selects (None: all) are tested; every other element is False."""
        if among is None or among.all():
            passed = test(self.values)
        else:
            used = np.zeros(len(self.values), dtype=bool)
            used[self.indices[among]] = True
            chosen = np.flatnonzero(used)
            passed = np.zeros(len(self.values), dtype=bool)
            if len(chosen):
                passed[chosen] = test(self.values.take(pa.array(chosen)))
        return passed[self.indices] if len(passed) else np.zeros(len(self.indices), dtype=bool)


def template_filter(matcher: Matcher) -> TemplateFilter | None:
    """The filter for a query; None when it cannot rule any row out (decode every row)."""
    if matcher.kind is Kind.ALL or not matcher.literals:
        return None
    tests = [_literal_test(piece) for literal in matcher.literals
             for piece in _comparable_pieces(literal, matcher.ignore_case)]
    return TemplateFilter(tuple(tests), matcher.ignore_case) if tests else None


def _comparable_pieces(literal: str, ignore_case: bool) -> list[str]:
    """The parts of a literal run whose characters match only the same ASCII character (any case):
    with ignore_case, `k`, `s` and characters outside ASCII may match a character that is no token
    character, so the run is cut there; each part is still in every matching message."""
    if not ignore_case:
        return [literal]
    pieces, current = [], []
    for char in literal:
        if char.isascii() and char not in FOLDS_BEYOND_ASCII:
            current.append(char)
        elif current:
            pieces.append("".join(current))
            current = []
    if current:
        pieces.append("".join(current))
    return pieces


def _literal_test(literal: str) -> LiteralTest:
    parts: list[str] = []
    runs = _runs(literal)
    for is_word, text in runs:
        if not is_word:
            parts.append(_static_pattern(text))
            continue
        placeholder = ANY_PLACEHOLDER if set(text) <= NUMBER_CHARACTERS else DICTIONARY_PLACEHOLDER
        parts.append(f"(?:{_static_pattern(text)}|{placeholder})")
    word = None
    if len(runs) == 1 and runs[0][0] and not set(literal) <= NUMBER_CHARACTERS:
        word = literal
    return LiteralTest(literal, "".join(parts), word)


def _runs(text: str) -> list[tuple[bool, str]]:
    """Maximal runs of token characters (True) and of other characters (False)."""
    runs: list[tuple[bool, str]] = []
    for char in text:
        is_word = char in TOKEN_CHARACTERS
        if runs and runs[-1][0] == is_word:
            runs[-1] = (is_word, runs[-1][1] + char)
        else:
            runs.append((is_word, char))
    return runs


def _static_pattern(text: str) -> str:
    """RE2 for `text` as a log type holds it as static text (its escapes added)."""
    out = []
    for char in text:
        if char in ESCAPED_IN_LOGTYPES:
            out.append("\\\\")
        if char in _RE2_SPECIAL:
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{{{ord(char):02x}}}")
        else:
            out.append(char)
    return "".join(out)


def _matches(values: pa.Array, pattern: str, ignore_case: bool) -> np.ndarray:
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    text = values if pa.types.is_string(values.type) or pa.types.is_large_string(values.type) \
        else values.cast(pa.string())
    found = pc.match_substring_regex(text, pattern, ignore_case=ignore_case)
    return np.asarray(pc.fill_null(found, False).to_numpy(zero_copy_only=False), dtype=bool)


def _distinct(formats: pa.Array | pa.ChunkedArray) -> tuple[list[str], np.ndarray]:
    """The distinct non-null timestamp formats and each row's index among them (-1: null)."""
    array = one_array(formats)
    if not isinstance(array, pa.DictionaryArray):
        array = pc.dictionary_encode(array)
    values = array.dictionary.to_pylist()
    rows = np.asarray(pc.fill_null(array.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    return values, rows


def _holding(values: pa.Array, word: str, ignore_case: bool) -> np.ndarray:
    """Which values contain `word`."""
    if len(values) == 0:
        return np.zeros(0, dtype=bool)
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        values = values.cast(pa.string())
    found = pc.match_substring(values, word, ignore_case=ignore_case)
    return np.asarray(pc.fill_null(found, False).to_numpy(zero_copy_only=False), dtype=bool)


@functools.lru_cache(maxsize=4096)
def _rest_after_timestamp(literal: str, inside: int) -> str:
    """The pattern of log types that begin with what is left of `literal` when its first k
    characters (1 <= k <= inside) are the end of the timestamp text. Cached: a search asks for the
    same one in every row group."""
    return "^(?:" + "|".join(_literal_test(literal[k:]).logtype_pattern for k in range(1, inside + 1)) + ")"


@functools.lru_cache(maxsize=4096)
def _timestamp_prefix(literal: str, timestamp_format: str, ignore_case: bool) -> int:
    """How many of the run's first characters a timestamp text of this format can hold."""
    allowed = text_characters(timestamp_format)
    if ignore_case:
        allowed = frozenset(char.lower() for char in allowed)
    count = 0
    for char in literal:
        if (char.lower() if ignore_case else char) not in allowed:
            break
        count += 1
    return count


__all__ = ["LiteralTest", "TemplateFilter", "template_filter"]
