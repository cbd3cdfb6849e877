"""The column-wise template encoding and decoding (archives/template_columns.py) give, message for
message, what the message-by-message ones give (archives/template_encoding.py), damaged parts included."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tidekeep.archives.prefix_kernel import Prefixes
from tidekeep.archives.template_columns import EncodedColumn, decode_column, encode_column
from tidekeep.archives.template_encoding import CorruptEncoding, decode_message, encode_message

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
# tokens around 2**16 bytes, where a token's packed per-byte counts would carry into the next count
@example(["a" * 65535 + "1", "f" * 65535, "=" + "g" * 65535, "b" * 65534 + ".", "-" + "a" * 65534])
@example(["x " + "a" * 65536 + "1", "1" * 65536, "0." + "1" * 65540, "=" + "g" * 65536 + " 12 .5", "f" * 65536,
          "." * 65536 + "5", "e" * 65537 + "g"])
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


def decoded(encoded: EncodedColumn) -> pa.Array:
    return decode_column(encoded.logtypes, encoded.numbers, encoded.dictionary)


@given(messages)
@example([])
@example([""])
@example(PIECES)
@example([" ".join(PIECES), "/".join(PIECES), "=".join(PIECES)])
@example(["\\\\\x11", "\\", "a\\", "\x13\\\x12", "-.5 .5 0.0000000000000001 1234567890123456.7 -0.0"])
def test_the_column_decoding_inverts_the_column_encoding(column: list[str]) -> None:
    messages_array = pa.array(column, pa.string())
    encoded = encode_column(messages_array)
    got = decoded(encoded)
    assert got.type == pa.string() and got.equals(messages_array)
    for i in range(len(column)):
        one = decode_message(encoded.logtypes[i].as_py(), encoded.numbers[i].as_py(), encoded.dictionary[i].as_py())
        assert got[i].as_py().encode() == one
    # a slice of a longer array, and the encoded arrays themselves sliced
    longer = pa.array(["x=1 a\\\x11", *column, "b 2.5 \\"], pa.string())
    assert decoded(encode_column(longer.slice(1, len(column)))).equals(messages_array)
    parts = encode_column(longer)
    assert decode_column(parts.logtypes.slice(1, len(column)), parts.numbers.slice(1, len(column)),
                         parts.dictionary.slice(1, len(column))).equals(messages_array)
    # the large and string types
    assert decode_column(encoded.logtypes.cast(pa.large_binary()), encoded.numbers.cast(pa.large_list(pa.int64())),
                         encoded.dictionary.cast(pa.large_list(pa.large_string()))).equals(messages_array)


def test_dictionary_encoded_and_chunked_columns_decode() -> None:
    column = ["Task 1234 finished in 2.5 s on host node-17", "Task 7 finished in -0.25 s on host node-3", "",
              "C:\\Users\\bob \x11 x", "Task 8 finished in 3.0 s on host db", "C:\\Users\\bob \x11 x"]
    expected = pa.array(column, pa.string())
    encoded = encode_column(expected)
    logtypes = pc.dictionary_encode(encoded.logtypes)
    assert len(logtypes.dictionary) == 3
    assert decode_column(logtypes, encoded.numbers, encoded.dictionary).equals(expected)
    assert decode_column(logtypes.slice(2, 3), encoded.numbers.slice(2, 3),
                         encoded.dictionary.slice(2, 3)).equals(expected.slice(2, 3))

    def chunked(array: pa.Array, *cuts: int) -> pa.ChunkedArray:
        bounds = [0, *cuts, len(array)]
        return pa.chunked_array([array[a:b] for a, b in itertools.pairwise(bounds)], array.type)

    # chunks with dictionaries of their own, as a parquet read gives them
    dictionary_chunks = pa.chunked_array([pc.dictionary_encode(encoded.logtypes[:2]),
                                          pc.dictionary_encode(encoded.logtypes[2:])])
    got = decode_column(dictionary_chunks, chunked(encoded.numbers, 1, 4), chunked(encoded.dictionary, 3))
    assert got.equals(expected)
    assert decode_column(chunked(encoded.logtypes.cast(pa.string()), 5), encoded.numbers,
                         chunked(encoded.dictionary, 1, 1)).equals(expected)
    empty = pa.chunked_array([], pa.dictionary(pa.int32(), pa.binary()))
    assert decode_column(empty, pa.chunked_array([], pa.list_(pa.int64())),
                         pa.chunked_array([], pa.list_(pa.binary()))).equals(pa.array([], pa.string()))


def test_empty_and_null_columns() -> None:
    assert decoded(encode_column(pa.array([], pa.string()))).equals(pa.array([], pa.string()))
    with pytest.raises(ValueError, match="nulls"):
        decode_column(pa.array([b"x", None]), pa.array([[], []], pa.list_(pa.int64())),
                      pa.array([[], []], pa.list_(pa.binary())))
    with pytest.raises(ValueError, match="2 log types, 1 number lists"):
        decode_column(pa.array([b"x", b"y"]), pa.array([[]], pa.list_(pa.int64())),
                      pa.array([[], []], pa.list_(pa.binary())))
    with pytest.raises(ValueError, match="null variables"):
        decode_column(pa.array([b"\x11"]), pa.array([[None]], pa.list_(pa.int64())),
                      pa.array([[]], pa.list_(pa.binary())))


def columns(rows: list[tuple[bytes, list[int], list[bytes]]]) -> tuple[pa.Array, pa.Array, pa.Array]:
    return (pa.array([row[0] for row in rows], pa.binary()), pa.array([row[1] for row in rows], pa.list_(pa.int64())),
            pa.array([row[2] for row in rows], pa.list_(pa.binary())))


GOOD = (b"a \x11 \x13 \x12 \\\\ \\\x11", [5, 0x1910], [b"node-1"])


@pytest.mark.parametrize(("logtype", "numbers", "dictionary", "message"), [
    (b"\x11", [], [], "more numeric placeholders"),
    (b"\x13 \x11", [0x1910], [], "more numeric placeholders"),
    (b"\x12", [], [], "more dictionary placeholders"),
    (b"x", [1], [], "fewer placeholders than values"),
    (b"x", [], [b"a"], "fewer placeholders than values"),
    (b"\\\x11", [1], [], "fewer placeholders than values"),  # an escaped placeholder is static text
    (b"a \\", [], [], "ends in an escape"),
    (b"a \\\\\\", [], [], "ends in an escape"),
    (b"\x13", [1 << 62], [], "encode no float"),
    (b"\x13", [0x501], [], "encode no float"),  # 2 digits after the point of 1
    (b"\x13", [0xA00], [], "encode no float"),  # 10 is 2 digits, not 1
    (b"\x13", [(0x8000000000000000 | 10**16 << 8 | 0xF0) - 2**64], [], "encode no float"),
    (b"\xff \x12", [], [b"a"], "not UTF-8"),
    (b"\x12", [], [b"\xc3"], "not UTF-8"),
    (b"\xc3\x12", [], [b"a"], "not UTF-8"),
])
def test_corrupt_parts_are_named(logtype: bytes, numbers: list[int], dictionary: list[bytes], message: str) -> None:
    with pytest.raises(CorruptEncoding, match=f"^row 1: .*{message}"):
        decode_column(*columns([GOOD, (logtype, numbers, dictionary), GOOD, (b"\x11", [], [])]))
    # a single message decodes (or not) as decode_message decodes it
    if message != "not UTF-8":
        with pytest.raises(CorruptEncoding, match=message):
            decode_message(logtype, numbers, dictionary)


def test_a_character_split_between_parts_decodes() -> None:
    """UTF-8 is checked per message, not per part: static text and a variable can each hold half a
    character (encode_column never splits one, damaged data can)."""
    assert decode_column(*columns([(b"\\\xc3\x12", [], [b"\xa9"]), GOOD])).to_pylist()[0] == "\u00e9"


def test_the_first_damaged_row_is_named() -> None:
    rows = [GOOD, GOOD, (b"\x11", [], []), (b"\xff", [], []), (b"a \\", [], [])]
    with pytest.raises(CorruptEncoding, match=r"^row 2: "):
        decode_column(*columns(rows))
    with pytest.raises(CorruptEncoding, match=r"^row 1: .*not UTF-8"):  # before the misfit parts of row 2
        decode_column(*columns([GOOD, (b"\xff", [], []), *rows[2:]]))
    with pytest.raises(CorruptEncoding, match=r"^row 0: "):  # counted in the slice
        decode_column(*(part.slice(2) for part in columns(rows)))


def test_an_escape_of_a_plain_byte_decodes_as_decode_message_does() -> None:
    """decode_message copies the byte after any escape, and so does decode_column (encode_message
    only escapes 0x11-0x13 and backslash, but the decoders accept any)."""
    logtype = b"\\x \\\x11\\9"
    assert decode_message(logtype, [], []) == b"x \x119"
    assert decode_column(*columns([(logtype, [], [])])).to_pylist() == ["x \x119"]


BYTES = st.one_of(st.sampled_from(b"\x11\x12\x13\\a.\xc3\xa9\xff"), st.integers(0, 255))
NUMBERS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0x1910, 0x501, 0xA00, 1 << 62, -1, 0]))
DAMAGE = st.sampled_from(["set byte", "insert byte", "delete byte", "add number", "drop number", "add variable",
                          "drop variable"])


def first_damaged_row(rows: list[tuple[bytes, list[int], list[bytes]]]) -> int | None:
    """The first row decode_message rejects or decodes to bytes that are not UTF-8."""
    for i, (logtype, numbers, dictionary) in enumerate(rows):
        try:
            decode_message(logtype, numbers, dictionary).decode()
        except (CorruptEncoding, UnicodeDecodeError):
            return i
    return None


@given(messages.filter(bool), st.data())
def test_damaged_parts_decode_or_raise_as_the_message_decoding_does(column: list[str], data: st.DataObject) -> None:
    encoded = encode_column(pa.array(column, pa.string()))
    rows = [(logtype, list(numbers), list(dictionary)) for logtype, numbers, dictionary
            in zip(encoded.logtypes.to_pylist(), encoded.numbers.to_pylist(), encoded.dictionary.to_pylist(),
                   strict=True)]
    for _ in range(data.draw(st.integers(1, 4))):
        row = data.draw(st.integers(0, len(rows) - 1))
        logtype, numbers, dictionary = rows[row]
        damage = data.draw(DAMAGE)
        if damage.endswith("byte") and damage != "insert byte" and not logtype:
            continue
        if damage == "set byte":
            at = data.draw(st.integers(0, len(logtype) - 1))
            logtype = logtype[:at] + bytes([data.draw(BYTES)]) + logtype[at + 1:]
        elif damage == "insert byte":
            at = data.draw(st.integers(0, len(logtype)))
            logtype = logtype[:at] + bytes([data.draw(BYTES)]) + logtype[at:]
        elif damage == "delete byte":
            at = data.draw(st.integers(0, len(logtype) - 1))
            logtype = logtype[:at] + logtype[at + 1:]
        elif damage == "add number":
            numbers.insert(data.draw(st.integers(0, len(numbers))), data.draw(NUMBERS))
        elif damage == "add variable":
            dictionary.insert(data.draw(st.integers(0, len(dictionary))), data.draw(st.binary(max_size=3)))
        elif damage == "drop number" and numbers:
            numbers.pop(data.draw(st.integers(0, len(numbers) - 1)))
        elif damage == "drop variable" and dictionary:
            dictionary.pop(data.draw(st.integers(0, len(dictionary) - 1)))
        rows[row] = (logtype, numbers, dictionary)
    first = first_damaged_row(rows)
    if first is None:
        got = decode_column(*columns(rows))
        assert got.to_pylist() == [decode_message(*row).decode() for row in rows]
    else:
        with pytest.raises(CorruptEncoding, match=f"^row {first}: "):
            decode_column(*columns(rows))


FLOAT_BITS = [0x1910, 0x510, 0xA31, 0x80000000000C7631 - 2**64, 0x8000000000000500 - 2**64, 0x501]  # the last: none


def placeholders(logtype: bytes) -> list[int]:
    """The placeholder bytes of a log type, in order (an escaped one is static text)."""
    found, i = [], 0
    while i < len(logtype):
        if logtype[i] == ord("\\"):
            i += 2
            continue
        if logtype[i] in b"\x11\x12\x13":
            found.append(logtype[i])
        i += 1
    return found


@st.composite
def parts(draw: st.DrawFn) -> tuple[bytes, list[int], list[bytes]]:
    """A log type of the bytes decoding looks at, with the variables its placeholders take (mostly)."""
    logtype = b"".join(draw(st.lists(st.sampled_from([b"\x11", b"\x12", b"\x13", b"\\", b"a", b"\xc3\xa9", b"\xc3"]),
                                     max_size=8)))
    found = placeholders(logtype)
    numbers = [draw(st.sampled_from(FLOAT_BITS) if kind == 0x13 else NUMBERS) for kind in found if kind != 0x12]
    dictionary = [draw(st.sampled_from([b"", b"x", b"\xc3\xa9", b"\xa9", b"\\"])) for kind in found if kind == 0x12]
    if draw(st.integers(0, 4)) == 0:  # and now and then a value too many or too few
        numbers = draw(st.lists(NUMBERS, max_size=3))
    if draw(st.integers(0, 4)) == 0:
        dictionary = draw(st.lists(st.sampled_from([b"x", b"\xa9"]), max_size=3))
    return logtype, numbers, dictionary

@given(messages, st.data())
def test_messages_decode_after_their_prefixes(column: list[str], data: st.DataObject) -> None:
    """Each message is written after its own piece, wherever the pieces lie (as timestamp texts are
    rendered one format after another)."""
    encoded = encode_column(pa.array(column, pa.string()))
    texts = data.draw(st.lists(st.text(st.characters(max_codepoint=127), min_size=1, max_size=6).map(str.encode),
                               min_size=len(column), max_size=len(column)))
    order = data.draw(st.permutations(range(len(column))))
    got = decode_column(pc.dictionary_encode(encoded.logtypes), encoded.numbers, encoded.dictionary,
                        prefixes_of(texts, order))
    assert got.to_pylist() == [text.decode() + message for text, message in zip(texts, column, strict=True)]


def prefixes_of(texts: list[bytes], order: list[int]) -> Prefixes:
    """Prefixes whose pieces lie in `order` (a permutation of the rows), not row order."""
    at, pieces, position = [0] * len(texts), [], 0
    for row in order:
        at[row] = position
        pieces.append(texts[row])
        position += len(texts[row])
    return Prefixes(np.frombuffer(b"".join(pieces), dtype=np.uint8), np.array(at, dtype=np.int64),
                    np.array([len(t) for t in texts], dtype=np.int64))


@given(st.lists(parts(), min_size=1, max_size=8), st.data())
@example([(b"\\", [], []), (b"\\\x11", [], [])], None)  # a run of backslashes does not go on into the next row
@example([(b"\x11\\", [1], []), (b"\\", [], [])], None)
@example([(b"\x11 \x11 \x11 \x11", [-(2**63), 2**63 - 1, -10, 9], []),
          (b"\x13\x13", [0x510, 0x8000000000000500 - 2**64], [])], None)
def test_arbitrary_parts_decode_or_raise_as_the_message_decoding_does(
        rows: list[tuple[bytes, list[int], list[bytes]]], data: st.DataObject | None) -> None:
    """Log types made of the bytes decoding looks at, with any numbers and variables; log types
    dictionary-encoded (as an archive's are read) decode alike, and so do rows after prefixes."""
    first = first_damaged_row(rows)
    logtypes, numbers, dictionary = columns(rows)
    texts = [b""] * len(rows) if data is None else \
        data.draw(st.lists(st.binary(max_size=5).map(lambda b: bytes(c & 0x7F for c in b)),
                           min_size=len(rows), max_size=len(rows)))
    order = list(range(len(rows))) if data is None else data.draw(st.permutations(range(len(rows))))
    for form in (logtypes, pc.dictionary_encode(logtypes)):
        for prefixes in (None, prefixes_of(texts, order)):
            if first is None:
                expected = [decode_message(*row).decode() for row in rows]
                if prefixes is not None:
                    expected = [text.decode() + message for text, message in zip(texts, expected, strict=True)]
                assert decode_column(form, numbers, dictionary, prefixes).to_pylist() == expected
            else:
                with pytest.raises(CorruptEncoding, match=f"^row {first}: "):
                    decode_column(form, numbers, dictionary, prefixes)


def test_a_log_type_dictionary_with_a_null_or_an_index_outside_it_is_refused() -> None:
    numbers, dictionary = pa.array([[], []], pa.list_(pa.int64())), pa.array([[], []], pa.list_(pa.binary()))
    with_null = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int32()), pa.array([b"x", None]))
    with pytest.raises(ValueError, match="hold nulls"):
        decode_column(with_null, numbers, dictionary)
    outside = pa.DictionaryArray.from_arrays(pa.array([0, 2], pa.int32()), pa.array([b"x", b"y"]), safe=False)
    with pytest.raises(ValueError, match="outside their dictionary"):
        decode_column(outside, numbers, dictionary)


def test_a_large_column_encodes_as_its_parts() -> None:
    """A column of over 16 MiB encodes exactly as its pieces do: no state of one message (output
    positions, sized from a bounding pass) leaks into the next."""
    rng = random.Random(5)
    column = pa.array([" ".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 30))) for _ in range(180_000)],
                      pa.string())
    assert pc.sum(pc.binary_length(column)).as_py() > 16 << 20  # two blocks at least
    whole = encode_column(column)
    parts = [encode_column(column.slice(start, 60_000)) for start in range(0, len(column), 60_000)]
    assert whole.logtypes.equals(pa.concat_arrays([p.logtypes for p in parts]))
    assert whole.numbers.equals(pa.concat_arrays([p.numbers for p in parts]))
    assert whole.dictionary.equals(pa.concat_arrays([p.dictionary for p in parts]))
