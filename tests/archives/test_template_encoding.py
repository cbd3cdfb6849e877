"""Template encoding (archives/template_encoding.py): CLP's split of a message into a log type and
variables, checked against a byte-by-byte oracle written from the rules, and decoded back exactly."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tidekeep.archives.template_encoding import (
    INT64_MAX,
    INT64_MIN,
    CorruptEncoding,
    decode_float,
    decode_message,
    encode_float,
    encode_message,
)

TOKEN_BYTES = frozenset(b"+-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz\\_")
HEX = frozenset(b"0123456789abcdefABCDEF")
DIGITS = frozenset(b"0123456789")
LETTERS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")

# pieces that sit on the rules' edges, joined at random with random bytes
ADVERSARIAL = [
    b"-0", b"0", b"007", b"+5", b"1e5", b"2.5e-3", b"0x1F", b"1_000", b"9223372036854775807", b"9223372036854775808",
    b"-9223372036854775808", b"-9223372036854775809", b"123456789012345678901234567890", b".5", b"-.5", b"1.",
    b"1.2.3.4",
    b"00.10", b"-31.90", b"1234567890123456.7", b"123456789012345.6", b"0.0000000000000001", b"\x11", b"\x12", b"\x13",
    b"\\", b"\\\\", b"\\\x11", b"=", b"level=INFO", b"=x", b"INFO", b"cafe", b"be", b"face", b"\xc3\xa9", b"\xff",
    b"\x00", b" ", b"\n", b"\r\n", b"\t", b"-", b".", b"+", b"_", b"node-17", b"id.", b"a", b"\xe2\x82\xac12",
]
messages = st.one_of(
    st.binary(max_size=200),
    st.lists(st.one_of(st.sampled_from(ADVERSARIAL), st.binary(max_size=6)), max_size=30).map(b"".join),
)


def oracle(message: bytes) -> tuple[bytes, list[int], list[bytes]]:
    """The rules applied one byte at a time, without the module's regexes."""
    logtype, numbers, dictionary = bytearray(), [], []
    i = 0
    while i < len(message):
        if message[i] not in TOKEN_BYTES:
            logtype += b"\\" + message[i:i + 1] if message[i] in b"\x11\x12\x13\\" else message[i:i + 1]
            i += 1
            continue
        j = i
        while j < len(message) and message[j] in TOKEN_BYTES:
            j += 1
        token = message[i:j]
        before = message[i - 1] if i else None
        variable = any(c in DIGITS for c in token) or (before == ord("=") and any(c in LETTERS for c in token)) \
            or (len(token) >= 2 and all(c in HEX for c in token))
        if not variable:
            for c in token:
                logtype += b"\\" + bytes([c]) if c == ord("\\") else bytes([c])
        elif _oracle_is_int(token):
            logtype += b"\x11"
            numbers.append(int(token))
        elif _oracle_float(token) is not None:
            logtype += b"\x13"
            numbers.append(_oracle_float(token))  # type: ignore[arg-type]
        else:
            logtype += b"\x12"
            dictionary.append(token)
        i = j
    return bytes(logtype), numbers, dictionary


def _oracle_is_int(token: bytes) -> bool:
    """Digits with at most a leading minus, printed back the same by Python (no leading zero, no
    -0), within int64."""
    body = token[1:] if token.startswith(b"-") else token
    return bool(body) and all(c in DIGITS for c in body) and str(int(token)).encode() == token \
        and INT64_MIN <= int(token) <= INT64_MAX


def _oracle_float(token: bytes) -> int | None:
    sign = token.startswith(b"-")
    body = token[1:] if sign else token
    if body.count(b".") != 1:
        return None
    whole, fraction = body.split(b".")
    if not fraction or not all(c in DIGITS for c in whole + fraction) or len(whole + fraction) > 16:
        return None
    digits = whole + fraction
    unsigned = (sign << 63) | (int(digits) << 8) | ((len(digits) - 1) << 4) | (len(fraction) - 1)
    return unsigned - (1 << 64) if unsigned >= 1 << 63 else unsigned


@given(messages)
@example(b"Task 1234 finished in 2.5 s on host node-17")
@example(b"C:\\Users\\bob\\f2.txt C:\\Users x")
@example(b"")
@example(b" ".join(ADVERSARIAL))
@example(b"/".join(ADVERSARIAL))
def test_encoding_follows_the_rules_and_decodes_to_every_byte(message: bytes) -> None:
    encoded = encode_message(message)
    assert (encoded.logtype, list(encoded.numbers), list(encoded.dictionary)) == oracle(message)
    assert decode_message(encoded.logtype, encoded.numbers, encoded.dictionary) == message


def test_reference_examples() -> None:
    encoded = encode_message(b"Task 1234 finished in 2.5 s on host node-17")
    assert encoded.logtype == b"Task \x11 finished in \x13 s on host \x12"
    assert encoded.numbers == (1234, 0x1910) and encoded.dictionary == (b"node-17",)
    assert encode_message(b"C:\\Users x").logtype == b"C:\\\\Users x"  # a static backslash is escaped
    assert encode_message(b"C:\\Users\\bob\\f2.txt").dictionary == (b"\\Users\\bob\\f2.txt",)
    assert encode_message(b"level=INFO id.").dictionary == (b"INFO",)  # `id.` is static: no digit, not hex
    assert encode_message(b"caf\xc3\xa9").dictionary == (b"caf",)  # bytes >= 0x80 are delimiters; caf is hex
    assert encode_message(b"be a ab").dictionary == (b"be", b"ab")  # two hex digits are enough, one is not
    for token in (b"-0", b"007", b"+5", b"1e5", b"0x1F", b"9223372036854775808", b"1.", b"1.2.3.4",
                  b"12345678901234567.0", b"1" * 5000, b"-" + b"9" * 5000):
        # thousands of digits: a dictionary variable, not the error int() raises past 4300 digits
        assert encode_message(token).dictionary == (token,), token[:30]


@pytest.mark.parametrize(("text", "bits"), [
    (b"2.5", 0x1910), (b"0.5", 0x510), (b"00.10", 0xA31), (b"-31.90", 0x80000000000C7631 - 2**64),
    (b"-.5", 0x8000000000000500 - 2**64), (b".5", 0x500), (b"1234567890123456.0", None), (b"123456789012345.6", None),
])
def test_float_bits(text: bytes, bits: int | None) -> None:
    if bits is None and len(text.replace(b".", b"").lstrip(b"-")) > 16:
        assert encode_float(text) is None
        return
    expected = _oracle_float(text) if bits is None else bits
    assert encode_float(text) == expected
    assert decode_float(expected) == text  # type: ignore[arg-type]


@given(st.binary(max_size=40), st.lists(st.integers(min_value=-(2**70), max_value=2**70), max_size=6),
       st.lists(st.binary(max_size=5), max_size=6))
def test_parts_that_fit_no_message_are_a_typed_error(logtype: bytes, numbers: list[int],
                                                     dictionary: list[bytes]) -> None:
    """Damaged data decodes to bytes or raises CorruptEncoding, never another error."""
    try:
        decoded = decode_message(logtype, numbers, dictionary)
    except CorruptEncoding:
        return
    assert isinstance(decoded, bytes)


@pytest.mark.parametrize(("logtype", "numbers", "dictionary", "message"), [
    (b"a \\", [], [], "ends in an escape"),
    (b"\x11", [], [], "more numeric placeholders"),
    (b"\x12", [], [], "more dictionary placeholders"),
    (b"x", [1], [], "fewer placeholders than values"),
    (b"\x13", [1 << 62], [], "encode no float"),
    (b"\x11", [2**63], [], "outside int64"),
])
def test_corrupt_parts_are_named(logtype: bytes, numbers: list[int], dictionary: list[bytes], message: str) -> None:
    with pytest.raises(CorruptEncoding, match=message):
        decode_message(logtype, numbers, dictionary)
