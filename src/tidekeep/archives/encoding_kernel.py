"""The template split of a column of messages, compiled (numba): one pass over the column's UTF-8
bytes per output size, then one that fills the outputs. The rules are template_encoding's; this is
their loop, compiled to machine code so ingest encodes at hundreds of MB/s per core
(docs/benchmarks.md, "Ingest"). template_columns.encode_column builds the Arrow arrays around it.

Why two passes: the outputs' sizes (log type bytes, numbers, dictionary variables) are only known
once every token is classed, and buffers sized for the worst case would be many times the input.
"""

from __future__ import annotations

import numpy as np

from .compiled import compiled
from .template_encoding import DICTIONARY_PLACEHOLDER, ESCAPE, FLOAT_MAX_DIGITS, FLOAT_PLACEHOLDER, INT_PLACEHOLDER

# a byte's class: 0 a delimiter, else a token byte (digit, hex letter, other letter, dot, minus, other)
_DIGIT, _HEX_LETTER, _LETTER, _DOT, _MINUS, _OTHER_TOKEN = 1, 2, 3, 4, 5, 6
CLASSES = np.zeros(256, dtype=np.uint8)
CLASSES[np.frombuffer(b"+_\\", dtype=np.uint8)] = _OTHER_TOKEN
CLASSES[np.frombuffer(b"GHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz", dtype=np.uint8)] = _LETTER
CLASSES[np.frombuffer(b"abcdefABCDEF", dtype=np.uint8)] = _HEX_LETTER
CLASSES[np.frombuffer(b"0123456789", dtype=np.uint8)] = _DIGIT
CLASSES[ord(".")], CLASSES[ord("-")] = _DOT, _MINUS

# per byte, its class counted in one 16-bit field of a uint64 (digit, hex letter, other letter,
# dot), so one sum over a token's bytes counts all four; a token of 2**16 bytes or more could carry
# over, so those are counted byte by byte
_FIELD_SHIFTS = np.zeros(max(_DIGIT, _HEX_LETTER, _LETTER, _DOT, _MINUS, _OTHER_TOKEN) + 1, dtype=np.uint64)
_FIELD_SHIFTS[[_DIGIT, _HEX_LETTER, _LETTER, _DOT]] = [0, 16, 32, 48]
_COUNTED = np.isin(CLASSES, [_DIGIT, _HEX_LETTER, _LETTER, _DOT])
COUNTS = np.where(_COUNTED, np.uint64(1) << _FIELD_SHIFTS[CLASSES], np.uint64(0)).astype(np.uint64)
_PACKED_LIMIT = 1 << 16
_FIELD = np.uint64(0xFFFF)

_STATIC, _INT, _FLOAT, _DICTIONARY = 0, 1, 2, 3


_MAX_INT_DIGITS = 19  # int64's widest magnitude; 19 digits may still be past it
_INT64_MAX_MAGNITUDE = np.uint64(2**63 - 1)
_INT64_MIN_MAGNITUDE = np.uint64(2**63)
_SIGN_BIT = np.uint64(1 << 63)
_MINUS_BYTE, _ZERO_BYTE, _DOT_BYTE, _EQUALS_BYTE = ord("-"), ord("0"), ord("."), ord("=")


@compiled(inline=True)
def _token_end(data: np.ndarray, start: int, message_end: int, classes: np.ndarray,
               counts: np.ndarray) -> tuple[int, np.uint64]:
    """Where the token starting at `start` ends, and its class counts packed as COUNTS packs them."""
    end = start
    packed = np.uint64(0)
    while end < message_end and classes[data[end]] != 0:
        packed += counts[data[end]]
        end += 1
    return end, packed


@compiled(inline=True)
def _class_of(data: np.ndarray, start: int, end: int, message_start: int, classes: np.ndarray,
              packed: np.uint64) -> tuple[int, np.int64 | int]:
    """The kind of the token data[start:end] and, for a number, its int64 value (float bits)."""
    if end - start < _PACKED_LIMIT:
        digits, hex_letters = int(packed & _FIELD), int((packed >> np.uint64(16)) & _FIELD)
        letters, dots = int((packed >> np.uint64(32)) & _FIELD), int(packed >> np.uint64(48))
    else:  # a field could have carried into the next: counted one byte at a time
        digits = hex_letters = letters = dots = 0
        for at in range(start, end):
            kind = classes[data[at]]
            digits += kind == _DIGIT
            hex_letters += kind == _HEX_LETTER
            letters += kind == _LETTER
            dots += kind == _DOT
    length = end - start
    all_letters = hex_letters + letters
    after_equals = start > message_start and data[start - 1] == _EQUALS_BYTE and all_letters > 0
    if not (digits > 0 or after_equals or (digits + hex_letters == length and length >= 2)):
        return _STATIC, 0
    negative = data[start] == _MINUS_BYTE
    body_start = start + 1 if negative else start
    body = end - body_start
    if body >= 1 and digits == body and body <= _MAX_INT_DIGITS:
        leading_zero = data[body_start] == _ZERO_BYTE
        if (body == 1 or not leading_zero) and not (negative and body == 1 and leading_zero):
            magnitude = np.uint64(0)
            for at in range(body_start, end):
                magnitude = magnitude * np.uint64(10) + np.uint64(data[at] - _ZERO_BYTE)
            if not negative and magnitude <= _INT64_MAX_MAGNITUDE:
                return _INT, np.int64(magnitude)
            if negative and magnitude <= _INT64_MIN_MAGNITUDE:
                return _INT, -np.int64(magnitude - np.uint64(1)) - 1  # -2**63 too, without overflow
    if dots == 1 and digits == body - 1 and digits <= FLOAT_MAX_DIGITS and data[end - 1] != _DOT_BYTE and body >= 2:
        value = np.uint64(0)
        after = 0
        seen_point = False
        for at in range(body_start, end):
            byte = data[at]
            if byte == _DOT_BYTE:
                seen_point = True
            else:
                value = value * np.uint64(10) + np.uint64(byte - _ZERO_BYTE)
                if seen_point:
                    after += 1
        bits = (value << np.uint64(8)) | (np.uint64(digits - 1) << np.uint64(4)) | np.uint64(after - 1)
        if negative:
            bits |= _SIGN_BIT
        return _FLOAT, np.int64(bits)  # the same 64 bits, read as int64 (numba's cast wraps)
    return _DICTIONARY, 0


@compiled(inline=True)
def _escaped(byte: int) -> bool:
    return byte == ESCAPE or INT_PLACEHOLDER <= byte <= FLOAT_PLACEHOLDER


@compiled()
def _bounds(data: np.ndarray, offsets: np.ndarray, classes: np.ndarray) -> tuple[int, int]:
    """(tokens, bytes to escape) of all messages: the sizes the outputs cannot exceed."""
    tokens = escapes = 0
    for message in range(len(offsets) - 1):
        at, message_end = offsets[message], offsets[message + 1]
        in_token = False
        while at < message_end:
            byte = data[at]
            token_byte = classes[byte] != 0
            tokens += token_byte and not in_token
            escapes += _escaped(byte)
            in_token = token_byte
            at += 1
    return tokens, escapes


@compiled()
def _split(data: np.ndarray, offsets: np.ndarray, classes: np.ndarray, counts: np.ndarray,
           logtype_offsets: np.ndarray, logtype_data: np.ndarray, number_counts: np.ndarray, numbers: np.ndarray,
           variable_counts: np.ndarray, variable_offsets: np.ndarray,
           variable_data: np.ndarray) -> tuple[int, int, int, int]:
    """Split every message into the outputs (sized from `_bounds`); returns how much of each it
    filled: log type bytes, numbers, dictionary variables and their bytes."""
    logtype_at = number_at = variable_at = variable_byte_at = 0
    for message in range(len(offsets) - 1):
        message_start, message_end = offsets[message], offsets[message + 1]
        numbers_before, variables_before = number_at, variable_at
        at = message_start
        while at < message_end:
            byte = data[at]
            if classes[byte] == 0:  # a delimiter: static text
                if _escaped(byte):
                    logtype_data[logtype_at] = ESCAPE
                    logtype_at += 1
                logtype_data[logtype_at] = byte
                logtype_at += 1
                at += 1
                continue
            end, packed = _token_end(data, at, message_end, classes, counts)
            kind, value = _class_of(data, at, end, message_start, classes, packed)
            if kind == _STATIC:
                for inside in range(at, end):
                    if data[inside] == ESCAPE:  # the only escaped byte a token can hold
                        logtype_data[logtype_at] = ESCAPE
                        logtype_at += 1
                    logtype_data[logtype_at] = data[inside]
                    logtype_at += 1
            elif kind == _DICTIONARY:
                logtype_data[logtype_at] = DICTIONARY_PLACEHOLDER
                logtype_at += 1
                variable_data[variable_byte_at:variable_byte_at + end - at] = data[at:end]
                variable_byte_at += end - at
                variable_at += 1
                variable_offsets[variable_at] = variable_byte_at
            else:
                logtype_data[logtype_at] = INT_PLACEHOLDER if kind == _INT else FLOAT_PLACEHOLDER
                logtype_at += 1
                numbers[number_at] = value
                number_at += 1
            at = end
        logtype_offsets[message + 1] = logtype_at
        number_counts[message] = number_at - numbers_before
        variable_counts[message] = variable_at - variables_before
    return logtype_at, number_at, variable_at, variable_byte_at


def split_messages(data: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                                   np.ndarray, np.ndarray, np.ndarray]:
    """Every message data[offsets[i]:offsets[i+1]] (uint8 bytes, int64 offsets from 0) split into
    its log type and variables: (log type offsets, log type bytes, numbers per message, the numbers,
    dictionary variables per message, their offsets, their bytes); offsets are int64 from 0.

    The outputs are first made as big as they can get (a placeholder is never longer than its
    token, so log types are at most the text plus its escapes) and then cut to what was filled."""
    count = len(offsets) - 1
    tokens, escapes = _bounds(data, offsets, CLASSES)
    logtype_offsets = np.zeros(count + 1, dtype=np.int64)
    logtype_data = np.empty(len(data) + escapes, dtype=np.uint8)
    number_counts = np.empty(count, dtype=np.int32)
    numbers = np.empty(tokens, dtype=np.int64)
    variable_counts = np.empty(count, dtype=np.int32)
    variable_offsets = np.zeros(tokens + 1, dtype=np.int64)
    variable_data = np.empty(len(data), dtype=np.uint8)
    logtype_bytes, number_total, variable_total, variable_bytes = _split(
        data, offsets, CLASSES, COUNTS, logtype_offsets, logtype_data, number_counts, numbers, variable_counts,
        variable_offsets, variable_data)
    return (logtype_offsets, logtype_data[:logtype_bytes], number_counts, numbers[:number_total], variable_counts,
            variable_offsets[:variable_total + 1], variable_data[:variable_bytes])


__all__ = ["CLASSES", "split_messages"]
