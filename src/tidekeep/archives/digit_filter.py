"""Which rows of a template-encoded archive can hold a regex's literal text followed by digits,
decided from their log types and numbers before any message is decoded (pure; numba).

A regex such as `duration\\(ns\\): [0-9]{10,}` or `latency_ms":\\d{3,}` asks for numbers of a
size: most rows whose log type holds the literal text hold a number too small. CLP compares such
numbers where they are encoded instead of decoding the messages; so does this. Like
template_search.py it gives a necessary condition only: every row it rules out cannot match, and
every row it keeps is decoded and matched exactly (search.py). docs/archives.md ("Search on the
encoded form") has the reasoning; in short:

- query.regex_digit_runs gives (run, n): every match holds the run followed at once by n or more
  ASCII digits. A run ending in a token character yields no test: its digits would go on a token.
- A digit after a non-token character starts a token, which holds a digit and so is a variable:
  in the log type a placeholder follows what the run became. The run's non-token characters are
  static text, escaped as log types escape it; each whole token of the run (one with a non-token
  character before it in the run) is static text or one placeholder, as the encoding's rules
  say of it; a token at the run's start may go on before the run, so it is the end of static
  text or a placeholder, either. Each way gives a *shape*: bytes and placeholders the log type
  holds right before the number's placeholder (`duration(ns): ` or a placeholder and `(ns): `).
- The number's placeholder: an integer, whose text starts with n digits only when it is at least
  10**(n-1) (0 for n = 1); a float, only when it is not negative and has n digits before its
  point; or a dictionary variable, which is kept without looking.
- Under ignore_case only the run's trailing non-token characters are a shape, and only when they
  are ASCII: RE2 folds no ASCII character that is not a token character, and folds letters.
- A row's leading timestamp text, when taken out of the message, is not in its log type: a row is
  kept when its timestamp format's text could hold the run followed by a digit, or could end with
  the start of the run (the rest of it then begins the log type), or ends in a non-token
  character.
- Damaged data (a number a placeholder does not have, float bits no float encodes to, a null log
  type) keeps its row, so decoding raises as it would have.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_bytes import one_array, string_bytes
from .compiled import compiled
from .decoding_kernel import float_bits_valid
from .query import Kind, Matcher, regex_digit_runs
from .template_encoding import DICTIONARY_PLACEHOLDER, ESCAPE, FLOAT_PLACEHOLDER, INT_PLACEHOLDER, is_variable
from .template_search import TOKEN_CHARACTERS

_ESCAPED_IN_LOGTYPES = b"\x11\x12\x13\\"  # in static text
_LONGEST_INT = 19  # digits of int64's widest values
_ALL_DIGITS_ZERO = re.compile("[0-9]")
_DIGIT_BYTES = frozenset(b"0123456789")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


ANY_PLACEHOLDER = -1  # in a shape: one placeholder byte, of any kind


@dataclass(frozen=True)
class DigitTest:
    """In every match, `run` comes right before at least `digits` digits; in the log type of a row
    that matches, one of the `shapes` comes right before the number's placeholder."""

    run: str
    digits: int
    shapes: tuple[tuple[int, ...], ...]


def digit_tests(matcher: Matcher) -> tuple[DigitTest, ...]:
    """The tests a query's matches must pass (none for a wildcard query or a regex without a
    literal run ending in a non-token character followed by digits)."""
    if matcher.kind is not Kind.REGEX:
        return ()
    tests = []
    for run, digits in regex_digit_runs(matcher.pattern):
        shapes: tuple[tuple[int, ...], ...]
        if matcher.ignore_case:
            trailing = run[_trailing_start(run):]
            shapes = (_escaped(trailing),) if trailing and trailing.isascii() else ()
        else:
            shapes = _shapes(run)
        if shapes:
            tests.append(DigitTest(run, digits, shapes))
    return tuple(tests)


def _trailing_start(text: str) -> int:
    """Where the text's trailing run of non-token characters begins."""
    start = len(text)
    while start > 0 and text[start - 1] not in TOKEN_CHARACTERS:
        start -= 1
    return start


def _escaped(text: str) -> tuple[int, ...]:
    """Static text as log types hold it."""
    out: list[int] = []
    for byte in text.encode():
        out.extend((ESCAPE, byte) if byte in _ESCAPED_IN_LOGTYPES else (byte,))
    return tuple(out)


def _shapes(run: str) -> tuple[tuple[int, ...], ...]:
    """What log types can hold for the run (the module docstring), when it ends in a non-token
    character; else none."""
    if _trailing_start(run) == len(run):
        return ()
    shape: list[int] = []  # built from the end, each piece reversed
    end = len(run)
    while end > 0:
        start = _trailing_start(run[:end])
        if start < end:  # non-token characters
            shape.extend(reversed(_escaped(run[start:end])))
            end = start
            continue
        while start > 0 and run[start - 1] in TOKEN_CHARACTERS:
            start -= 1
        token = run[start:end].encode()
        if start == 0:  # may go on before the run: the end of static text, or a variable
            variable = tuple(reversed([*shape, ANY_PLACEHOLDER]))
            if _DIGIT_BYTES.isdisjoint(token):
                return tuple(reversed([*shape, *reversed(_escaped(run[:end]))])), variable
            return (variable,)
        if is_variable(token, run[start - 1].encode()[-1]):
            shape.append(ANY_PLACEHOLDER)
        else:
            shape.extend(reversed(_escaped(run[start:end])))
        end = start
    return (tuple(reversed(shape)),)


def digit_candidates(tests: tuple[DigitTest, ...], formats: pa.Array | pa.ChunkedArray,
                     logtypes: pa.Array | pa.ChunkedArray, numbers: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean mask: the rows (timestamp formats, log types and numbers in row order) that pass
    every test (False: cannot match)."""
    count = len(logtypes)
    keep = np.ones(count, dtype=bool)
    if not tests or not count:
        return keep
    logtype_values, logtype_of = _distinct(logtypes)
    data, offsets = string_bytes(logtype_values)
    number_lists = one_array(numbers)
    number_offsets = number_lists.offsets.to_numpy().astype(np.int64)
    values = np.asarray(number_lists.values.to_numpy(zero_copy_only=False), dtype=np.int64)
    valid_floats = float_bits_valid(values)
    format_values, format_of = _distinct(formats)
    for test in tests:
        shapes = np.array([byte for shape in test.shapes for byte in shape], dtype=np.int16)
        shape_offsets = np.cumsum([0, *(len(shape) for shape in test.shapes)]).astype(np.int64)
        place_offsets = np.zeros(len(offsets), dtype=np.int64)
        _count_places(data, offsets, shapes, shape_offsets, place_offsets[1:])
        np.cumsum(place_offsets, out=place_offsets)
        kinds = np.empty(place_offsets[-1], dtype=np.uint8)
        ordinals = np.empty(place_offsets[-1], dtype=np.int64)
        _fill_places(data, offsets, shapes, shape_offsets, place_offsets, kinds, ordinals)
        smallest = -1 if test.digits > _LONGEST_INT else 0 if test.digits == 1 else 10 ** (test.digits - 1)
        passing = np.empty(count, dtype=bool)
        _rows_passing(logtype_of, place_offsets, kinds, ordinals, number_offsets, values, valid_floats, smallest,
                      test.digits, passing)
        in_format = [text is not None and _may_hold(text, test.run) for text in format_values.to_pylist()]
        keep &= passing | np.array([*in_format, False])[format_of]
    return keep


def _may_hold(timestamp_format: str, run: str) -> bool:
    """Whether the text of a timestamp format (timestamp_text.py: `OFFSET|SHAPE`, every field digit
    `0` in the shape and a syslog month `Mmm`) could hold the run followed by a digit, or end with
    the run's start (compared with every digit as `0`, case folded), or ends in a character that
    is not a token character."""
    shape = timestamp_format.partition("|")[2]
    if shape[-1:] not in TOKEN_CHARACTERS:
        return True
    texts = [_ALL_DIGITS_ZERO.sub("0", shape.replace("Mmm", month)).casefold() for month in _MONTHS] \
        if "Mmm" in shape else [_ALL_DIGITS_ZERO.sub("0", shape).casefold()]
    wanted = _ALL_DIGITS_ZERO.sub("0", run).casefold()
    return any(wanted + "0" in text or any(text.endswith(wanted[:end]) for end in range(1, len(wanted)))
               for text in texts)


def _distinct(column: pa.Array | pa.ChunkedArray) -> tuple[pa.Array, np.ndarray]:
    """The column's values, each once, and each row's as an index into them; a null row, or one
    whose value is null, as one past the last."""
    array = one_array(column)
    if not pa.types.is_dictionary(array.type):
        array = pc.dictionary_encode(array)
    count = len(array.dictionary)
    indices = np.asarray(pc.fill_null(array.indices, count).to_numpy(zero_copy_only=False), dtype=np.int64)
    if array.dictionary.null_count:
        null_values = np.append(np.asarray(array.dictionary.is_null().to_numpy(zero_copy_only=False)), True)
        indices[null_values[indices]] = count
    return array.dictionary, indices


@compiled(inline=True)
def _is_placeholder(byte: np.uint8) -> bool:
    return byte in (INT_PLACEHOLDER, FLOAT_PLACEHOLDER, DICTIONARY_PLACEHOLDER)


@compiled(inline=True)
def _follows(data: np.ndarray, start: int, at: int, shapes: np.ndarray, shape_offsets: np.ndarray) -> bool:
    """Whether data[start:at] ends with one of the shapes."""
    for shape in range(len(shape_offsets) - 1):
        first, last = shape_offsets[shape], shape_offsets[shape + 1]
        width = last - first
        if at - start < width:
            continue
        same = True
        for k in range(width):
            wanted, byte = shapes[first + k], data[at - width + k]
            same = _is_placeholder(byte) if wanted == ANY_PLACEHOLDER else byte == wanted
            if not same:
                break
        if same:
            return True
    return False


@compiled()
def _count_places(data: np.ndarray, offsets: np.ndarray, shapes: np.ndarray, shape_offsets: np.ndarray,
                  counts: np.ndarray) -> None:
    """Per log type, its placeholders right after a shape."""
    for value in range(len(offsets) - 1):
        start, end = offsets[value], offsets[value + 1]
        found = 0
        at = start
        while at < end:
            if data[at] == ESCAPE:
                at += 2
                continue
            if _is_placeholder(data[at]) and _follows(data, start, at, shapes, shape_offsets):
                found += 1
            at += 1
        counts[value] = found


@compiled()
def _fill_places(data: np.ndarray, offsets: np.ndarray, shapes: np.ndarray, shape_offsets: np.ndarray,
                 place_offsets: np.ndarray, kinds: np.ndarray, ordinals: np.ndarray) -> None:
    """Those placeholders' kinds and, for numbers, their number's place among the log type's."""
    for value in range(len(offsets) - 1):
        start, end = offsets[value], offsets[value + 1]
        place = place_offsets[value]
        numeric = 0
        at = start
        while at < end:
            byte = data[at]
            if byte == ESCAPE:
                at += 2
                continue
            if _is_placeholder(byte):
                if _follows(data, start, at, shapes, shape_offsets):
                    kinds[place] = byte
                    ordinals[place] = numeric
                    place += 1
                if byte != DICTIONARY_PLACEHOLDER:
                    numeric += 1
            at += 1


@compiled()
def _rows_passing(logtype_of: np.ndarray, place_offsets: np.ndarray, kinds: np.ndarray, ordinals: np.ndarray,
                  number_offsets: np.ndarray, numbers: np.ndarray, valid_floats: np.ndarray, smallest: int,
                  digits: int, passing: np.ndarray) -> None:
    """Per row: does one of its log type's places hold a dictionary variable, an integer of at
    least `smallest` (-1: none is enough), a float not negative with `digits` digits before its
    point, or a number the row does not have or no float encodes to? A row without a log type
    passes too (decoding reports what is damaged)."""
    bits_of = numbers.view(np.uint64)
    without = len(place_offsets) - 1
    for row in range(len(logtype_of)):
        value = logtype_of[row]
        found = value == without
        place = 0 if found else place_offsets[value]
        end = 0 if found else place_offsets[value + 1]
        while not found and place < end:
            at = number_offsets[row] + ordinals[place]
            if kinds[place] == DICTIONARY_PLACEHOLDER or at >= number_offsets[row + 1]:
                found = True
            elif kinds[place] == INT_PLACEHOLDER:
                found = smallest >= 0 and numbers[at] >= smallest
            else:
                bits = bits_of[at]
                whole = int((bits >> np.uint64(4)) & np.uint64(0xF)) - int(bits & np.uint64(0xF))
                found = not valid_floats[at] or ((bits >> np.uint64(63)) == 0 and whole >= digits)
            place += 1
        passing[row] = found


__all__ = ["DigitTest", "digit_candidates", "digit_tests"]
