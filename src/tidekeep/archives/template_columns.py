"""Template encoding of a column of messages at once, vectorised (pure).

The same split as `template_encoding.encode_message`, message by message, but computed over the
column's UTF-8 bytes at once: every byte is classed with a lookup table, the runs of token bytes and
of delimiter bytes are found where the class changes (or a message begins), each token is classified
from running counts of digits, letters and hexadecimal digits, and each log type is joined back from
its runs. No Python code runs per message or per token. Messages are UTF-8 strings (as archives hold
them); every byte of a character outside ASCII is a delimiter, as in the byte rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .template_encoding import FLOAT_MAX_DIGITS, INT64_MAX, INT64_MIN


def _table(chars: bytes) -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    table[np.frombuffer(chars, dtype=np.uint8)] = True
    return table


# every byte's class, so one lookup classes the column's bytes for every count a token needs
_CODE_DIGIT, _CODE_HEX_LETTER, _CODE_LETTER, _CODE_DOT, _CODE_MINUS, _CODE_OTHER_TOKEN = 1, 2, 3, 4, 5, 6
_CODE = np.zeros(256, dtype=np.uint8)
_CODE[np.frombuffer(b"+_\\", dtype=np.uint8)] = _CODE_OTHER_TOKEN
_CODE[np.frombuffer(b"GHIJKLMNOPQRSTUVWXYZghijklmnopqrstuvwxyz", dtype=np.uint8)] = _CODE_LETTER
_CODE[np.frombuffer(b"abcdefABCDEF", dtype=np.uint8)] = _CODE_HEX_LETTER
_CODE[np.frombuffer(b"0123456789", dtype=np.uint8)] = _CODE_DIGIT
_CODE[ord(".")], _CODE[ord("-")] = _CODE_DOT, _CODE_MINUS
_SPECIAL = _table(b"\x11\x12\x13")  # placeholder bytes: escaped where they are static text
_INT64_MAX = str(INT64_MAX)
_INT64_MIN_DIGITS = str(-INT64_MIN)  # the digits of int64's minimum
_PLACEHOLDERS = pa.array(["", "\x11", "\x13", "\x12"], pa.string())  # by kind: shown as is, int, float, dictionary


@dataclass(frozen=True)
class EncodedColumn:
    """Per message: its log type, its numbers (int64 integers and float bits, in placeholder order)
    and its dictionary variables, as `template_encoding.EncodedMessage` has them."""

    logtypes: pa.Array  # binary
    numbers: pa.ListArray  # list<int64>
    dictionary: pa.ListArray  # list<binary>


def encode_column(messages: pa.Array) -> EncodedColumn:
    """Encode every message of a string array without nulls."""
    messages = messages.cast(pa.string())
    if messages.null_count:
        raise ValueError("messages to encode hold nulls")
    count = len(messages)
    _, offset_buffer, data_buffer = messages.buffers()
    offsets = np.zeros(1, dtype=np.int64) if offset_buffer is None else np.frombuffer(
        offset_buffer, dtype=np.int32)[messages.offset:messages.offset + count + 1].astype(np.int64)
    data = np.zeros(0, dtype=np.uint8) if data_buffer is None else np.frombuffer(data_buffer, dtype=np.uint8)
    data = data[offsets[0]:offsets[-1]]
    offsets = offsets - offsets[0]
    size = len(data)

    # runs: maximal stretches of one class inside one message
    code = _CODE[data]
    token_byte = code > 0  # every token byte has a class, every delimiter none
    starts_run = np.ones(size, dtype=bool)
    starts_run[1:] = token_byte[1:] != token_byte[:-1]
    starts_run[offsets[:-1][offsets[:-1] < size]] = True  # a message starts a run
    run_start = np.flatnonzero(starts_run)
    run_end = np.append(run_start[1:], size)
    run_message = np.searchsorted(offsets, run_start, side="right") - 1
    is_token = token_byte[run_start]

    # tokens: their class from running counts
    starts, ends = run_start[is_token], run_end[is_token]
    lengths = ends - starts

    token_runs = np.flatnonzero(is_token)

    def within(selected: np.ndarray) -> np.ndarray:
        """How many bytes of each token `selected` marks (a sum per run, read for the token runs)."""
        return np.add.reduceat(selected, run_start, dtype=np.int32)[token_runs] if size else np.zeros(0, np.int32)

    digits = within(code == _CODE_DIGIT)
    hex_letters = within(code == _CODE_HEX_LETTER)
    letters = hex_letters + within(code == _CODE_LETTER)
    hexes = digits + hex_letters
    dots, minuses = within(code == _CODE_DOT), within(code == _CODE_MINUS)
    first = data[starts]
    message_start = offsets[run_message[is_token]]
    after_equals = (starts > message_start) & (data[np.maximum(starts - 1, 0)] == ord("=")) & (letters > 0)
    variable = (digits > 0) | after_equals | ((hexes == lengths) & (lengths >= 2))

    negative = first == ord("-")
    body = lengths - negative
    body_first = data[np.minimum(starts + negative, size - 1)] if size else first  # no token when empty
    is_int = variable & (body >= 1) & (digits == body) & (minuses == negative) & (body <= 19) \
        & ((body == 1) | (body_first != ord("0"))) & ~(negative & (body == 1) & (body_first == ord("0")))
    is_float = variable & ~is_int & (dots == 1) & (digits == body - 1) & (minuses == negative) \
        & (digits <= FLOAT_MAX_DIGITS) & (data[np.maximum(ends - 1, 0)] != ord(".")) & (body >= 2)

    run_texts = pa.StringArray.from_buffers(len(run_start), pa.py_buffer(np.append(run_start, size).astype(np.int32)),
                                            pa.py_buffer(data.tobytes()))
    tokens = run_texts.filter(pa.array(is_token))
    nineteen = is_int & (body == 19)
    if nineteen.any():  # 19 digits may be beyond int64: same length, so text order is number order
        texts = pc.replace_substring(tokens.filter(pa.array(nineteen)), "-", "", max_replacements=1)
        limit = np.where(negative[nineteen], _INT64_MIN_DIGITS, _INT64_MAX)
        is_int[nineteen] = pc.less_equal(texts, pa.array(limit, pa.string())).to_numpy(zero_copy_only=False)
        is_float &= ~is_int
    is_dictionary = variable & ~is_int & ~is_float
    numeric = is_int | is_float

    numbers = np.zeros(len(tokens), dtype=np.int64)
    if is_int.any():
        numbers[is_int] = pc.cast(tokens.filter(pa.array(is_int)), pa.int64()).to_numpy()
    if is_float.any():
        numbers[is_float] = _float_bits(tokens.filter(pa.array(is_float)), negative[is_float])

    # the log type: each run as it is shown, joined per message
    shown = run_texts
    if (data == ord("\\")).any():  # first: the backslashes the next step adds are not doubled
        shown = pc.replace_substring(shown, "\\", "\\\\")
    if _SPECIAL[data].any():  # static placeholder bytes get a backslash
        shown = pc.replace_substring_regex(shown, "([\x11\x12\x13])", "\\\\\\1")
    kind = np.zeros(len(run_start), dtype=np.int8)  # 0: the run as it is shown
    kind[token_runs[is_int]], kind[token_runs[is_float]], kind[token_runs[is_dictionary]] = 1, 2, 3
    placeholders = _PLACEHOLDERS.take(pa.array(kind))
    shown = pc.if_else(pa.array(kind > 0), placeholders, shown)
    run_offsets = np.searchsorted(run_message, np.arange(count + 1), side="left").astype(np.int32)
    logtypes = pc.binary_join(pa.ListArray.from_arrays(pa.array(run_offsets), shown), "").cast(pa.binary())

    token_message = run_message[is_token]
    return EncodedColumn(logtypes, _lists(numbers[numeric], token_message[numeric], count, pa.int64()),
                         _lists(tokens.filter(pa.array(is_dictionary)).cast(pa.binary()),
                                token_message[is_dictionary], count, pa.binary()))


def _float_bits(floats: pa.Array, negative: np.ndarray) -> np.ndarray:
    """The 64-bit encodings of float tokens, as int64 (template_encoding.encode_float, column-wise)."""
    unsigned = pc.replace_substring(floats, "-", "", max_replacements=1)
    point = pc.find_substring(unsigned, ".").to_numpy(zero_copy_only=False).astype(np.uint64)
    length = pc.utf8_length(unsigned).to_numpy(zero_copy_only=False).astype(np.uint64)
    digits = pc.cast(pc.replace_substring(unsigned, ".", "", max_replacements=1), pa.uint64()).to_numpy()
    count, after = length - 1, length - point - 1  # digits, digits after the point
    bits = (digits << np.uint64(8)) | ((count - np.uint64(1)) << np.uint64(4)) | (after - np.uint64(1))
    bits |= np.where(negative, np.uint64(1 << 63), np.uint64(0))
    return bits.view(np.int64)


def _lists(values: np.ndarray | pa.Array, owners: np.ndarray, messages: int, kind: pa.DataType) -> pa.ListArray:
    """`values` (in message order) grouped into one list per message by their owners."""
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owners, minlength=messages))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, kind))


__all__ = ["EncodedColumn", "encode_column"]
