"""Template encoding of a column of messages at once (pure).

`encode_column` gives the same split as `template_encoding.encode_message`, message by message,
computed over the column's UTF-8 bytes by the compiled loop of encoding_kernel.py, whose outputs
become the Arrow arrays without a copy. No Python code runs per message or per token. Messages are
UTF-8 strings (as archives hold them); every byte of a character outside ASCII is a delimiter, as
in the byte rules.

`decode_column` inverts it the same way: the positions of the log types' backslashes and
placeholder bytes are found at once (which backslashes escape follows from their parity in a run),
each message is cut into static pieces and variable texts (integers printed by Arrow, floats laid
out from their bits with numpy, dictionary variables as stored), and the output bytes are filled by
two masked copies, static bytes and variable texts, the mask repeated from the segments' lengths.
Damaged parts raise `CorruptEncoding` in exactly the rows where `decode_message` does, and where a
message decodes to bytes that are not UTF-8, naming the first such row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NoReturn, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrow_bytes import string_bytes
from .encoding_kernel import split_messages
from .template_encoding import (
    DICTIONARY_PLACEHOLDER,
    ESCAPE,
    FLOAT_MAX_DIGITS,
    FLOAT_PLACEHOLDER,
    INT_PLACEHOLDER,
    CorruptEncoding,
    decode_message,
)

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class EncodedColumn:
    """Per message: its log type, its numbers (int64 integers and float bits, in placeholder order)
    and its dictionary variables, as `template_encoding.EncodedMessage` has them."""

    logtypes: pa.Array  # binary
    numbers: pa.ListArray  # list<int64>
    dictionary: pa.ListArray  # list<binary>


def encode_column(messages: pa.Array) -> EncodedColumn:
    """Encode every message of a string array without nulls (the compiled loop of
    encoding_kernel.py; past 2 GiB of log types or variables the arrays are large ones)."""
    messages = messages.cast(pa.string()) if not pa.types.is_large_string(messages.type) else messages
    if messages.null_count:
        raise ValueError("messages to encode hold nulls")
    data, offsets = string_bytes(messages)
    (logtype_offsets, logtype_data, number_counts, numbers, variable_counts, variable_offsets,
     variable_data) = split_messages(data, offsets)
    count = len(messages)
    logtypes = _binary_array(count, logtype_offsets, logtype_data)
    variables = _binary_array(len(variable_offsets) - 1, variable_offsets, variable_data)
    return EncodedColumn(logtypes, _lists(number_counts, pa.array(numbers, pa.int64())),
                         _lists(variable_counts, variables))


def _binary_array(count: int, offsets: np.ndarray, data: np.ndarray) -> pa.Array:
    if offsets[-1] <= _INT32_MAX:
        return pa.BinaryArray.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                                pa.py_buffer(data)])
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), count, [None, pa.py_buffer(offsets),
                                                                       pa.py_buffer(data)])


def _lists(counts: np.ndarray, values: pa.Array) -> pa.Array:
    """`values` (in message order) as one list per message of `counts[i]` values."""
    offsets = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if offsets[-1] <= _INT32_MAX:
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), pa.int32()), values)
    return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), values)


# decoding
_POWERS_OF_TEN = 10 ** np.arange(FLOAT_MAX_DIGITS + 1, dtype=np.uint64)  # 10**0 .. 10**16
_FLOAT_DIGITS_MASK = np.uint64((1 << 54) - 1)

Column: TypeAlias = "pa.Array | pa.ChunkedArray"


def decode_column(logtypes: Column, numbers: Column, dictionary: Column) -> pa.Array:
    """The messages (a string array) that `encode_column` split into these parts: message i is
    `decode_message(logtypes[i], numbers[i], dictionary[i])` as UTF-8.

    Log types may be binary or string (large or not, dictionary-encoded or not), numbers lists (or
    large lists) of int64 and dictionary variables lists of binary or string; chunked arrays are
    combined, sliced arrays read where their slice is. Raises CorruptEncoding naming the first row
    whose parts fit no message or decode to bytes that are not UTF-8 (damaged data: the rows where
    `decode_message` raises, and `\\` before any byte is accepted as it accepts it), ValueError for
    nulls or columns of different lengths, TypeError for columns of other types."""
    logtypes, numbers, dictionary = _whole(logtypes), _whole(numbers), _whole(dictionary)
    count = len(logtypes)
    if len(numbers) != count or len(dictionary) != count:
        raise ValueError(f"{count} log types, {len(numbers)} number lists and {len(dictionary)} dictionary lists")
    if logtypes.null_count or numbers.null_count or dictionary.null_count:
        raise ValueError("encoded messages to decode hold nulls")
    data, offsets = string_bytes(logtypes)
    number_offsets, number_values = _list_parts(numbers)
    dictionary_offsets, dictionary_values = _list_parts(dictionary)
    if number_values.null_count or dictionary_values.null_count:
        raise ValueError("encoded messages to decode hold null variables")
    if not pa.types.is_int64(number_values.type):
        raise TypeError(f"numbers must be lists of int64, not of {number_values.type}")
    values = number_values.to_numpy()

    events, event_rows, damaged = _scan(offsets, data)
    kinds = data[events]
    numeric = (kinds == INT_PLACEHOLDER) | (kinds == FLOAT_PLACEHOLDER)
    damaged |= np.bincount(event_rows[numeric], minlength=count) != np.diff(number_offsets)
    damaged |= np.bincount(event_rows[kinds == DICTIONARY_PLACEHOLDER], minlength=count) != np.diff(dictionary_offsets)
    _mark_bad_floats(damaged, event_rows[numeric], kinds[numeric] == FLOAT_PLACEHOLDER, number_offsets, values)
    if damaged.any():
        _raise_for_row(int(np.argmax(damaged)), logtypes, numbers, dictionary)

    # every row's parts fit: the numeric placeholders take the numbers in order, and so do the dictionary ones
    numeric_kinds = kinds[numeric]
    is_int, is_float = numeric_kinds == INT_PLACEHOLDER, numeric_kinds == FLOAT_PLACEHOLDER
    int_text, int_offsets = string_bytes(pc.cast(pa.array(values[is_int], pa.int64()), pa.string()))
    float_text, float_lengths = _float_texts(values[is_float])
    dictionary_text, dictionary_text_offsets = string_bytes(dictionary_values)
    texts = {INT_PLACEHOLDER: (np.diff(int_offsets), int_text), FLOAT_PLACEHOLDER: (float_lengths, float_text),
             DICTIONARY_PLACEHOLDER: (np.diff(dictionary_text_offsets), dictionary_text)}
    text_lengths = np.zeros(len(events), dtype=np.int64)  # an escape's text is empty
    for kind, (lengths, _) in texts.items():
        text_lengths[kinds == kind] = lengths

    is_text, segment_lengths, row_segments = _segments(offsets, events, event_rows, text_lengths)
    output_offsets = np.concatenate([[0], np.cumsum(segment_lengths)])[row_segments]
    if len(events):
        # the variables' texts in placeholder order (each kind's texts are in that order already) ...
        text_kinds = np.repeat(kinds, text_lengths)
        all_texts = np.empty(len(text_kinds), dtype=np.uint8)
        for kind, (_, text) in texts.items():
            if len(text):
                all_texts[text_kinds == kind] = text
        # ... and the static bytes between them
        output_is_text = np.repeat(is_text, segment_lengths)
        output = np.empty(len(output_is_text), dtype=np.uint8)
        static = np.ones(len(data), dtype=bool)
        static[events] = False
        output[~output_is_text] = data[static]
        output[output_is_text] = all_texts
    else:  # no escape and no placeholder: the log types are the messages
        output = data
    return _strings(output_offsets, output, logtypes, numbers, dictionary)


def _whole(column: Column) -> pa.Array:
    """`column` as one array, dictionary encoding undone (a chunk's dictionary is decoded once)."""
    if isinstance(column, pa.ChunkedArray):
        chunks = [_dense(chunk) for chunk in column.chunks]
        if not chunks:
            kind = column.type
            return pa.array([], kind.value_type if pa.types.is_dictionary(kind) else kind)
        return chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)
    return _dense(column)


def _dense(array: pa.Array) -> pa.Array:
    """A dictionary array's values, once per row (its dictionary is not decoded per row, only copied)."""
    return array.dictionary.take(array.indices) if isinstance(array, pa.DictionaryArray) else array


def _list_parts(lists: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The offsets (int64, from 0) of a list array's lists and the values they cover."""
    if not (pa.types.is_list(lists.type) or pa.types.is_large_list(lists.type)):
        raise TypeError(f"expected a list array, not {lists.type}")
    offsets = lists.offsets.to_numpy().astype(np.int64)  # already for the array's slice
    return offsets - offsets[0], lists.values.slice(offsets[0], offsets[-1] - offsets[0])


def _scan(offsets: np.ndarray, data: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The positions of the log types' escapes and placeholders (the bytes decoding removes), their
    rows, and the rows that end in an escape. Only backslashes and placeholder bytes are looked at:
    in a run of backslashes the first, third, ... escape the byte after them, so parity decides."""
    candidates = np.flatnonzero(((data - np.uint8(INT_PLACEHOLDER)) < 3) | (data == ESCAPE))  # 0x11-0x13 or \\
    rows = np.searchsorted(offsets, candidates, side="right") - 1
    backslash = data[candidates] == ESCAPE
    damaged = np.zeros(len(offsets) - 1, dtype=bool)
    if not backslash.any():  # the common case: every candidate is a placeholder
        return candidates, rows, damaged
    follows = np.zeros(len(candidates), dtype=bool)  # right after the previous candidate, in the same row
    follows[1:] = (candidates[1:] == candidates[:-1] + 1) & (rows[1:] == rows[:-1])
    run_start = backslash.copy()
    run_start[1:] &= ~(follows[1:] & backslash[:-1])
    index = np.arange(len(candidates))
    in_run = index - np.maximum.accumulate(np.where(run_start, index, 0))
    escape = backslash & (in_run % 2 == 0)
    escaped = np.zeros(len(candidates), dtype=bool)
    escaped[1:] = escape[:-1] & follows[1:]  # an escaped byte that is not a candidate is static text anyway
    removed = escape | (~backslash & ~escaped)
    damaged[rows[escape & (candidates + 1 == offsets[rows + 1])]] = True
    return candidates[removed], rows[removed], damaged


def _mark_bad_floats(damaged: np.ndarray, rows: np.ndarray, is_float: np.ndarray, number_offsets: np.ndarray,
                     values: np.ndarray) -> None:
    """Mark the rows (among those whose counts fit) whose float placeholders take bits that encode
    no float. `rows` and `is_float` are per numeric placeholder, in order."""
    before = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=len(damaged)))])
    at = number_offsets[rows] + np.arange(len(rows)) - before[rows]  # the number each placeholder takes
    checked = is_float & ~damaged[rows]
    damaged[rows[checked][_bad_float_bits(values[at[checked]])]] = True


def _float_fields(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sign, digits, digit count and digits after the point of float encodings (the module docstring
    of template_encoding has the layout)."""
    bits = values.view(np.uint64)
    negative = (bits >> np.uint64(63)).astype(bool)
    digits = (bits >> np.uint64(8)) & _FLOAT_DIGITS_MASK
    count = ((bits >> np.uint64(4)) & np.uint64(0xF)).astype(np.int64) + 1
    after = (bits & np.uint64(0xF)).astype(np.int64) + 1
    return negative, digits, count, after


def _bad_float_bits(values: np.ndarray) -> np.ndarray:
    """Which values no float encodes to (template_encoding.decode_float's checks)."""
    _, digits, count, after = _float_fields(values)
    bad: np.ndarray = ((values.view(np.uint64) >> np.uint64(62)) & np.uint64(1)).astype(bool) \
        | (after > count) | (digits >= _POWERS_OF_TEN[count])
    return bad


def _float_texts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The texts of valid float encodings (template_encoding.decode_float, column-wise): their bytes
    one after another and their lengths. Each float is laid out in 18 columns (sign, then its 16
    digits zero-padded with the point put in) and only the columns it shows are kept."""
    negative, digits, count, after = _float_fields(values)
    padded = pc.utf8_lpad(pc.cast(pa.array(digits, pa.uint64()), pa.string()), FLOAT_MAX_DIGITS, "0")
    places = string_bytes(padded)[0].reshape(len(values), FLOAT_MAX_DIGITS)  # digits < 10**16: 16 wide
    width = FLOAT_MAX_DIGITS + 2
    column = np.arange(width)
    point = (width - 1 - after)[:, None]  # the point's column
    pad = np.zeros((len(values), 1), dtype=np.uint8)
    before_point, after_point = np.hstack([places, pad]), np.hstack([pad, places])
    laid_out = np.empty((len(values), width), dtype=np.uint8)
    laid_out[:, 0] = ord("-")
    laid_out[:, 1:] = np.where(column[1:] < point, before_point,
                               np.where(column[1:] == point, np.uint8(ord(".")), after_point))
    shown = column >= (width - 1 - count)[:, None]
    shown[:, 0] = negative
    return laid_out[shown], negative + count + 1


def _segments(offsets: np.ndarray, events: np.ndarray, event_rows: np.ndarray,
              text_lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every row as its segments in output order: a static piece, then per event (an escape or a
    placeholder) the event's text (an escape's is empty) and the static piece after it. Returns
    whether each segment is a text, each segment's length and, per row boundary, the index of its
    first segment."""
    count, events_count = len(offsets) - 1, len(events)
    rows = np.arange(count)
    before = np.searchsorted(event_rows, np.arange(count + 1))  # events in the rows before
    piece_starts = np.empty(count + events_count, dtype=np.int64)  # a row's pieces are its events + 1
    piece_ends = np.empty(count + events_count, dtype=np.int64)
    event_index = np.arange(events_count)
    piece_starts[rows + before[:-1]], piece_starts[event_index + event_rows + 1] = offsets[:-1], events + 1
    piece_ends[event_index + event_rows], piece_ends[rows + before[1:]] = events, offsets[1:]
    piece_rows = np.repeat(rows, np.diff(before) + 1)
    is_text = np.zeros(count + 2 * events_count, dtype=bool)
    lengths = np.empty(count + 2 * events_count, dtype=np.int64)
    lengths[2 * np.arange(count + events_count) - piece_rows] = piece_ends - piece_starts
    at = 2 * event_index + event_rows + 1
    lengths[at], is_text[at] = text_lengths, True
    return is_text, lengths, 2 * before + np.arange(count + 1)


def _strings(offsets: np.ndarray, data: np.ndarray, logtypes: pa.Array, numbers: pa.Array,
             dictionary: pa.Array) -> pa.Array:
    """The decoded messages as a string array (large_string past 2 GiB), checked to be UTF-8."""
    count = len(offsets) - 1
    if offsets[-1] <= _INT32_MAX:
        messages = pa.StringArray.from_buffers(count, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
    else:
        messages = pa.LargeStringArray.from_buffers(count, pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        messages.validate(full=True)
    except pa.ArrowInvalid:
        _raise_for_row(_first_invalid(messages), logtypes, numbers, dictionary)
    return messages


def _first_invalid(messages: pa.Array) -> int:
    """The first row of a string array that is not UTF-8 (some is): a bisection on prefixes."""
    valid, invalid = 0, len(messages)  # the prefix of `valid` rows is UTF-8, that of `invalid` rows is not
    while invalid - valid > 1:
        middle = (valid + invalid) // 2
        try:
            messages.slice(0, middle).validate(full=True)
            valid = middle
        except pa.ArrowInvalid:
            invalid = middle
    return invalid - 1


def _raise_for_row(row: int, logtypes: pa.Array, numbers: pa.Array, dictionary: pa.Array) -> NoReturn:
    """Raise CorruptEncoding for `row`, the first row found damaged, with what `decode_message` says
    of it (so both decoders word it alike). When its parts fit no message, a row before it can still
    decode to bytes that are not UTF-8: the rows before are decoded first (only on this error path),
    so the first damaged row of either kind is named."""
    if row:
        decode_column(logtypes.slice(0, row), numbers.slice(0, row), dictionary.slice(0, row))
    logtype, dictionary_values = logtypes[row].as_py(), dictionary[row].as_py()
    as_bytes = [value.encode() if isinstance(value, str) else value for value in dictionary_values]
    try:
        decoded = decode_message(logtype.encode() if isinstance(logtype, str) else logtype, numbers[row].as_py(),
                                 as_bytes)
    except CorruptEncoding as error:
        raise CorruptEncoding(f"row {row}: {error}") from None
    try:
        decoded.decode()
    except UnicodeDecodeError:
        raise CorruptEncoding(f"row {row}: the message decodes to bytes that are not UTF-8") from None
    raise CorruptEncoding(f"row {row}: its parts fit no message")  # not reached: the checks agree with decode_message


__all__ = ["EncodedColumn", "decode_column", "encode_column"]
