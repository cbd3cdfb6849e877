"""string_bytes: the bytes and offsets of each kind of Arrow string array, slices and nulls included."""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tidekeep.archives.arrow_bytes import one_array, string_bytes

values = st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=12)
kinds = st.sampled_from([pa.string(), pa.large_string(), pa.binary(), pa.large_binary()])


@given(values, kinds, st.data())
def test_each_value_is_its_slice_of_the_bytes(texts: list[str | None], kind: pa.DataType, data: st.DataObject) -> None:
    encoded = [None if t is None else t.encode() for t in texts]
    column = pa.array(encoded if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) else texts, kind)
    start = data.draw(st.integers(0, len(texts)))
    length = data.draw(st.integers(0, len(texts) - start))
    piece = column.slice(start, length)
    raw, offsets = string_bytes(piece)
    assert offsets.dtype.name == "int64" and raw.dtype.name == "uint8"
    assert len(offsets) == length + 1 and offsets[0] == 0 and offsets[-1] == len(raw)
    got = [bytes(raw[offsets[i]:offsets[i + 1]]) for i in range(length)]
    assert got == [b"" if v is None else v for v in encoded[start:start + length]]


@pytest.mark.parametrize("array", [pa.array([], pa.string()), pa.array([None, None], pa.string()),
                                   pa.array(["", ""], pa.large_string())])
def test_no_bytes_at_all(array: pa.Array) -> None:
    raw, offsets = string_bytes(array)
    assert len(raw) == 0 and offsets.tolist() == [0] * (len(array) + 1)


def test_a_dictionary_array_is_read_as_its_values() -> None:
    raw, offsets = string_bytes(pa.array(["ab", "c", "ab"]).dictionary_encode())
    assert bytes(raw) == b"abcab" and offsets.tolist() == [0, 2, 3, 5]


def test_one_array_keeps_a_dictionary_column_one_dictionary_array() -> None:
    chunks = pa.chunked_array([pa.array(["a", "b"]).dictionary_encode(), pa.array(["b", "c"]).dictionary_encode()])
    combined = one_array(chunks)
    assert isinstance(combined, pa.DictionaryArray) and combined.to_pylist() == ["a", "b", "b", "c"]
    assert combined.dictionary.to_pylist() == ["a", "b", "c"]  # unified: no value twice
    single = pa.chunked_array([pa.array([1, 2])])
    assert one_array(single) is not single and one_array(single).to_pylist() == [1, 2]
    plain = pa.array(["x"])
    assert one_array(plain) is plain
