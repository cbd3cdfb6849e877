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

from .arrow_bytes import string_bytes
from .decoding_kernel import decode_messages
from .encoding_kernel import split_messages
from .prefix_kernel import Prefixes
from .template_encoding import (
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

Column: TypeAlias = "pa.Array | pa.ChunkedArray"


def decode_column(logtypes: Column, numbers: Column, dictionary: Column, prefixes: Prefixes | None = None) -> pa.Array:
    """The messages (a string array) that `encode_column` split into these parts: message i is
    `decode_message(logtypes[i], numbers[i], dictionary[i])` as UTF-8, after its piece of
    `prefixes` when given (the timestamp texts: archive_format.decode_messages).

    Log types may be binary or string (large or not, dictionary-encoded or not), numbers lists (or
    large lists) of int64 and dictionary variables lists of binary or string; chunked arrays are
    combined, sliced arrays read where their slice is. Raises CorruptEncoding naming the first row
    whose parts fit no message or decode to bytes that are not UTF-8 (damaged data: the rows where
    `decode_message` raises, and `\\` before any byte is accepted as it accepts it), ValueError for
    nulls or columns of different lengths, TypeError for columns of other types."""
    logtypes, numbers, dictionary = _one_array(logtypes), _whole(numbers), _whole(dictionary)
    count = len(logtypes)
    if len(numbers) != count or len(dictionary) != count:
        raise ValueError(f"{count} log types, {len(numbers)} number lists and {len(dictionary)} dictionary lists")
    if logtypes.null_count or numbers.null_count or dictionary.null_count:
        raise ValueError("encoded messages to decode hold nulls")
    if isinstance(logtypes, pa.DictionaryArray):  # each distinct log type is read where it is
        data, offsets = string_bytes(logtypes.dictionary)
        logtype_of = logtypes.indices.to_numpy().astype(np.int64)
        if len(logtype_of) and not 0 <= logtype_of.min() <= logtype_of.max() < len(logtypes.dictionary):
            raise ValueError("log type indices outside their dictionary")
    else:
        data, offsets = string_bytes(logtypes)
        logtype_of = np.arange(count, dtype=np.int64)
    number_offsets, number_values = _list_parts(numbers)
    dictionary_offsets, dictionary_values = _list_parts(dictionary)
    if number_values.null_count or dictionary_values.null_count:
        raise ValueError("encoded messages to decode hold null variables")
    if not pa.types.is_int64(number_values.type):
        raise TypeError(f"numbers must be lists of int64, not of {number_values.type}")
    dictionary_text, dictionary_text_offsets = string_bytes(dictionary_values)
    if prefixes is not None and len(prefixes.width) != count:
        raise ValueError(f"{count} log types but {len(prefixes.width)} prefixes")
    output, output_offsets, damaged = decode_messages(
        data, offsets, logtype_of, number_offsets, number_values.to_numpy(), dictionary_offsets, dictionary_text,
        dictionary_text_offsets, Prefixes.empty(count) if prefixes is None else prefixes)
    if damaged >= 0:
        _raise_for_row(damaged, logtypes, numbers, dictionary)
    return _strings(output_offsets, output, logtypes, numbers, dictionary)


def _one_array(column: Column) -> pa.Array:
    """`column` as one array: one chunk as it is (a dictionary array stays one, its values read
    in place), several combined with their dictionaries undone; a dictionary holding nulls undone."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks != 1:
            return _whole(column)
        column = column.chunk(0)
    return _dense(column) if isinstance(column, pa.DictionaryArray) and column.dictionary.null_count else column


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
