"""The template decode of a column of messages, compiled (numba): one pass that checks each row's
parts fit and writes its message, after a piece of text of its own (the timestamp text, rendered
beforehand: timestamp_text.py). The rules are template_encoding's (`decode_message`);
template_columns.decode_column builds the Arrow arrays around it and checks the output is UTF-8.

One pass, into a buffer sized for the longest possible output (every integer 20 characters): the
buffer's pages beyond what is written are never touched, so the bound costs address space only.

Why compiled: a search decodes every row its encoded filter keeps (template_search.py), often most
rows of a row group; the numpy decode needed a dozen whole-column passes (docs/benchmarks.md,
"Search").
"""

from __future__ import annotations

import numpy as np

from .compiled import compiled
from .prefix_kernel import Prefixes
from .template_encoding import DICTIONARY_PLACEHOLDER, ESCAPE, FLOAT_PLACEHOLDER, INT_PLACEHOLDER

_DIGITS_MASK = np.uint64((1 << 54) - 1)
_POWERS_OF_TEN = 10 ** np.arange(17, dtype=np.uint64)  # a float has at most 16 digits
_MINUS_BYTE, _ZERO_BYTE, _DOT_BYTE = ord("-"), ord("0"), ord(".")
_LONGEST_NUMBER = 20  # "-9223372036854775808"; a float's text is at most 18 ("-" 16 digits ".")


@compiled(inline=True)
def _magnitude(value: np.int64) -> np.uint64:
    """|value| as uint64 (int64's minimum included)."""
    if value >= 0:
        return np.uint64(value)
    return np.uint64(-(value + 1)) + np.uint64(1)


@compiled(inline=True)
def _int_length(value: np.int64) -> int:
    magnitude = _magnitude(value)
    length = 1
    while magnitude >= np.uint64(10):
        magnitude //= np.uint64(10)
        length += 1
    return length + int(value < 0)


@compiled(inline=True)
def _float_parts(bits: np.uint64) -> tuple[int, np.uint64, int, int]:
    """(negative, digits, digit count, digits after the point) of float bits."""
    negative = int(bits >> np.uint64(63))
    digits = (bits >> np.uint64(8)) & _DIGITS_MASK
    count = int((bits >> np.uint64(4)) & np.uint64(0xF)) + 1
    after = int(bits & np.uint64(0xF)) + 1
    return negative, digits, count, after


@compiled(inline=True)
def _write_int(out: np.ndarray, at: int, value: np.int64) -> int:
    """Write `value` in decimal at out[at:]; where it ends."""
    if value < 0:
        out[at] = _MINUS_BYTE
        at += 1
    magnitude = _magnitude(value)
    end = at + _int_length(value) - int(value < 0)
    position = end - 1
    while True:
        out[position] = _ZERO_BYTE + np.uint8(magnitude % np.uint64(10))
        magnitude //= np.uint64(10)
        position -= 1
        if position < at:
            break
    return end


@compiled(inline=True)
def _write_float(out: np.ndarray, at: int, bits: np.uint64) -> int:
    """Write the float text of checked bits at out[at:]: the digits zero-padded to their count,
    the point before the last `after` of them; where it ends."""
    negative, digits, count, after = _float_parts(bits)
    if negative:
        out[at] = _MINUS_BYTE
        at += 1
    end = at + count + 1
    point = end - 1 - after
    position = end - 1
    while position >= at:
        if position == point:
            out[position] = _DOT_BYTE
        else:
            out[position] = _ZERO_BYTE + np.uint8(digits % np.uint64(10))
            digits //= np.uint64(10)
        position -= 1
    return end


@compiled()
def _decode(data: np.ndarray, offsets: np.ndarray, logtype_of: np.ndarray, number_offsets: np.ndarray,
            numbers: np.ndarray, valid_floats: np.ndarray, dictionary_offsets: np.ndarray, text: np.ndarray,
            text_offsets: np.ndarray, pieces: np.ndarray, piece_at: np.ndarray, piece_width: np.ndarray,
            out: np.ndarray, out_offsets: np.ndarray) -> int:
    """Write each row's piece and message into `out`, where each starts into `out_offsets`. Returns
    -1, or the first row whose parts do not fit (a dangling escape, a placeholder without its value,
    a value left over, float bits no float encodes to), stopping there."""
    bits_of = numbers.view(np.uint64)
    position = 0
    for row in range(len(logtype_of)):
        out_offsets[row] = position
        start, width = piece_at[row], piece_width[row]
        out[position:position + width] = pieces[start:start + width]
        position += width
        number_at, number_end = number_offsets[row], number_offsets[row + 1]
        dictionary_at, dictionary_end = dictionary_offsets[row], dictionary_offsets[row + 1]
        at, end = offsets[logtype_of[row]], offsets[logtype_of[row] + 1]
        while at < end:
            byte = data[at]
            if byte == ESCAPE:
                if at + 1 == end:
                    return row
                out[position] = data[at + 1]
                position += 1
                at += 2
                continue
            if byte in (INT_PLACEHOLDER, FLOAT_PLACEHOLDER):
                if number_at == number_end:
                    return row
                if byte == INT_PLACEHOLDER:
                    position = _write_int(out, position, numbers[number_at])
                else:
                    if not valid_floats[number_at]:
                        return row
                    position = _write_float(out, position, bits_of[number_at])
                number_at += 1
            elif byte == DICTIONARY_PLACEHOLDER:
                if dictionary_at == dictionary_end:
                    return row
                value_start, value_end = text_offsets[dictionary_at], text_offsets[dictionary_at + 1]
                out[position:position + value_end - value_start] = text[value_start:value_end]
                position += value_end - value_start
                dictionary_at += 1
            else:
                out[position] = byte
                position += 1
            at += 1
        if number_at != number_end or dictionary_at != dictionary_end:
            return row
    out_offsets[len(logtype_of)] = position
    return -1


def float_bits_valid(numbers: np.ndarray) -> np.ndarray:
    """Per int64 value, whether some float encodes to it (template_encoding.decode_float's checks).
    numpy, not compiled: kernels of other modules take its result, since numba's on-disk cache
    does not notice a change to a compiled function of another module that a kernel calls."""
    bits = numbers.view(np.uint64)
    digits = (bits >> np.uint64(8)) & _DIGITS_MASK
    count = ((bits >> np.uint64(4)) & np.uint64(0xF)).astype(np.int64) + 1
    after = (bits & np.uint64(0xF)).astype(np.int64) + 1
    valid: np.ndarray = (((bits >> np.uint64(62)) & np.uint64(1)) == 0) & (after <= count) \
        & (digits < _POWERS_OF_TEN[count])
    return valid


def decode_messages(data: np.ndarray, offsets: np.ndarray, logtype_of: np.ndarray, number_offsets: np.ndarray,
                    numbers: np.ndarray, dictionary_offsets: np.ndarray, text: np.ndarray, text_offsets: np.ndarray,
                    prefixes: Prefixes) -> tuple[np.ndarray, np.ndarray, int]:
    """Decode rows: row i's log type is value logtype_of[i] of the log types (`data`, `offsets`;
    a dictionary's values, or one per row), its numbers are `numbers[number_offsets[i]:...]` and its
    dictionary variables the values `dictionary_offsets[i]:...` of those whose bytes are `text`,
    `text_offsets`; its message comes after its piece of `prefixes`. Returns (bytes, int64
    offsets, -1), or (empty, empty, the first row whose parts do not fit)."""
    count = len(logtype_of)
    bound = int(np.diff(offsets)[logtype_of].sum()) + _LONGEST_NUMBER * len(numbers) \
        + int(text_offsets[-1] - text_offsets[0]) + int(prefixes.width.sum())
    out = np.empty(bound, dtype=np.uint8)
    out_offsets = np.empty(count + 1, dtype=np.int64)
    damaged = _decode(data, offsets, logtype_of, number_offsets, numbers, float_bits_valid(numbers), dictionary_offsets,
                      text, text_offsets, prefixes.pieces, prefixes.at, prefixes.width, out, out_offsets)
    if damaged >= 0:
        return np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.int64), damaged
    return out[:out_offsets[-1]], out_offsets, -1


__all__ = ["decode_messages", "float_bits_valid"]
