"""The column-wise template encoding (archives/template_columns.py) gives, message for message,
what the message-by-message encoding gives (archives/template_encoding.py)."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from tidekeep.archives.template_columns import encode_column
from tidekeep.archives.template_encoding import decode_message, encode_message

PIECES = ["-0", "0", "007", "+5", "1e5", "0x1F", "9223372036854775807", "9223372036854775808",
          "-9223372036854775808", "-9223372036854775809", "1234567890123456789", "12345678901234567890", ".5", "-.5",
          "1.", "1.2.3.4", "00.10", "-31.90", "1234567890123456.7", "123456789012345.6", "\x11", "\x12", "\x13", "\\",
          "=", "level=INFO", "=x", "cafe", "be", "caf\u00e9", "\u20ac12", " ", "\n", "\t", "-", ".", "_", "node-17",
          "id.", "a", "é", "=="]
texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)  # no lone surrogates: Arrow strings are UTF-8
messages = st.lists(st.one_of(texts, st.lists(st.one_of(st.sampled_from(PIECES), texts.map(lambda t: t[:4])),
                                              max_size=12).map("".join)), max_size=30)


@given(messages)
@example([])
@example([""])
@example(PIECES)
@example([" ".join(PIECES), "/".join(PIECES), "=".join(PIECES)])
def test_the_column_encoding_is_the_message_encoding(column: list[str]) -> None:
    encoded = encode_column(pa.array(column, pa.string()))
    assert len(encoded.logtypes) == len(column)
    for i, message in enumerate(column):
        one = encode_message(message.encode())
        got = (encoded.logtypes[i].as_py(), tuple(encoded.numbers[i].as_py()), tuple(encoded.dictionary[i].as_py()))
        assert got == (one.logtype, one.numbers, one.dictionary), message
        assert decode_message(*got) == message.encode()
    # a slice of a longer array (an offset into shared buffers) encodes the same
    sliced = encode_column(pa.array(["x=1 a", *column, "b 2.5"], pa.string()).slice(1, len(column)))
    assert sliced.logtypes.equals(encoded.logtypes) and sliced.numbers.equals(encoded.numbers) \
        and sliced.dictionary.equals(encoded.dictionary)
