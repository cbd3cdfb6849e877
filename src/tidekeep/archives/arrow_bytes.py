"""Arrow columns as numpy and the compiled kernels read them: one array per column, and the bytes
and offsets of a binary or string array."""
from __future__ import annotations

import numpy as np
import pyarrow as pa


def one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """A column as one array: its only chunk as it is, else its chunks combined (a dictionary
    column's dictionaries unified first, so it stays one dictionary array)."""
    if isinstance(column, pa.ChunkedArray):
        if column.num_chunks == 1:
            return column.chunk(0)
        if pa.types.is_dictionary(column.type):
            return column.unify_dictionaries().combine_chunks()
        return column.combine_chunks()
    return column


def string_bytes(array: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(bytes as uint8, int64 offsets rebased to 0) of a binary or string array's values, for the
    array's own slice of its buffers; zero-copy for the bytes. Other types are cast to binary.
    A null value reads as its (empty) slot."""
    kind = array.type
    large = pa.types.is_large_binary(kind) or pa.types.is_large_string(kind)
    if not (large or pa.types.is_binary(kind) or pa.types.is_string(kind)):
        array, large = array.cast(pa.large_binary()), True
    count = len(array)
    _, offset_buffer, data_buffer = array.buffers()
    if offset_buffer is None:
        return np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    offsets = np.frombuffer(offset_buffer, dtype=np.int64 if large else np.int32)[
        array.offset:array.offset + count + 1].astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.zeros(0, dtype=np.uint8) if data_buffer is None or end == start \
        else np.frombuffer(data_buffer, dtype=np.uint8)[start:end]
    return data, offsets - start
