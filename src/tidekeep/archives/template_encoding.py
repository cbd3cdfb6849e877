"""A log message as a log type and variables, exactly as CLP splits it (pure: bytes in, bytes out).

docs/archives.md ("Template encoding") has the rationale; the rules, which decoding depends on:

- **Tokens** are maximal runs of the bytes ``+ - . 0-9 A-Z a-z _ \\``; every other byte is a
  delimiter, every byte from 0x80 up included (a multi-byte UTF-8 character is static text).
- A token is a **variable** when it holds an ASCII digit, or follows ``=`` and holds an ASCII
  letter (``level=INFO``), or is at least two hexadecimal digits (``cafe``); other tokens are
  static text. Punctuation stays in its token: ``id.`` and ``id`` differ.
- A variable is an **integer** when it is ``0`` or ``-?[1-9][0-9]*`` within int64 (so ``-0``,
  ``007``, ``+5`` and 20-digit numbers are not), a **float** when it is ``-?[0-9]*\\.[0-9]+`` with at
  most 16 digits (no exponent, no trailing point), else a **dictionary** variable kept as its bytes.
- A float is encoded in 64 bits that keep its exact text: sign (1 bit), a zero bit, its digits as
  one integer (54 bits), the digit count minus one (4 bits) and the digits after the point minus
  one (4 bits). ``2.5`` is 0x1910; ``-31.90`` is 0x80000000000C7631 as an unsigned value.
- The **log type** is the message with each variable replaced by a placeholder byte: 0x11 an
  integer, 0x12 a dictionary variable, 0x13 a float. In static text the bytes 0x11, 0x12, 0x13 and
  ``\\`` are escaped with a ``\\``, so a placeholder in a log type is always one.

`decode_message(encode_message(m))` is `m` for every byte string (tests/archives/test_template_encoding.py).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import TidekeepError

INT_PLACEHOLDER = 0x11
DICTIONARY_PLACEHOLDER = 0x12
FLOAT_PLACEHOLDER = 0x13
ESCAPE = 0x5C  # "\"
_PLACEHOLDERS = bytes([INT_PLACEHOLDER, DICTIONARY_PLACEHOLDER, FLOAT_PLACEHOLDER])

_TOKEN = re.compile(rb"[-+.0-9A-Za-z\\_]+")
_DIGIT = re.compile(rb"[0-9]")
_LETTER = re.compile(rb"[A-Za-z]")
_HEX = re.compile(rb"[0-9a-fA-F]{2,}")
_INT = re.compile(rb"0|-?[1-9][0-9]*")
_FLOAT = re.compile(rb"-?[0-9]*\.[0-9]+")
_TO_ESCAPE = re.compile(rb"[\x11\x12\x13\\]")

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_MAX_DIGITS = 16
_DIGITS_BITS = 54
_U64 = 2**64 - 1


class CorruptEncoding(TidekeepError):
    """A log type and its variables that no message encodes to (damaged archive data)."""


@dataclass(frozen=True)
class EncodedMessage:
    """A message as its log type, the integers and float bits of its numeric variables (in the
    order of their placeholders, as int64 values) and its dictionary variables (in order)."""

    logtype: bytes
    numbers: tuple[int, ...]
    dictionary: tuple[bytes, ...]


def encode_float(token: bytes) -> int | None:
    """The float encoding of `token` as a signed int64, or None when it is not an encodable float."""
    if not _FLOAT.fullmatch(token):
        return None
    negative = token[:1] == b"-"
    whole, _, fraction = token[1:].partition(b".") if negative else token.partition(b".")
    digits = whole + fraction
    if len(digits) > FLOAT_MAX_DIGITS:
        return None
    bits = (int(digits) << 8) | ((len(digits) - 1) << 4) | (len(fraction) - 1)
    return (bits | 1 << 63) - 2**64 if negative else bits


def decode_float(value: int) -> bytes:
    """The exact text of a float encoded by `encode_float`. Raises CorruptEncoding for bits no
    float encodes to."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise CorruptEncoding(f"float bits {value} are outside int64")
    bits = value & _U64
    negative = bool(bits >> 63)
    digits = (bits >> 8) & ((1 << _DIGITS_BITS) - 1)
    count = ((bits >> 4) & 0xF) + 1
    after = (bits & 0xF) + 1
    if bits >> 62 & 1 or after > count or digits >= 10**count:
        raise CorruptEncoding(f"float bits {bits:#x} encode no float")
    text = str(digits).rjust(count, "0")
    return (b"-" if negative else b"") + text[:count - after].encode() + b"." + text[count - after:].encode()


def is_variable(token: bytes, before: int | None) -> bool:
    """Whether a whole token is a variable, given the byte before it (None at the start)."""
    return bool(_DIGIT.search(token)) or (before == 0x3D and bool(_LETTER.search(token))) \
        or bool(_HEX.fullmatch(token))


def _escaped(static: bytes) -> bytes:
    return _TO_ESCAPE.sub(rb"\\\g<0>", static)


def encode_message(message: bytes) -> EncodedMessage:
    """Split `message` into its log type and variables (the module docstring's rules)."""
    logtype: list[bytes] = []
    numbers: list[int] = []
    dictionary: list[bytes] = []
    static_from = 0
    for match in _TOKEN.finditer(message):
        token, start = match.group(), match.start()
        if not is_variable(token, message[start - 1] if start else None):
            continue
        logtype.append(_escaped(message[static_from:start]))
        static_from = match.end()
        # at most 20 bytes ("-" and 19 digits) can be an int64; int() of thousands of digits raises
        if len(token) <= 20 and _INT.fullmatch(token) and INT64_MIN <= (number := int(token)) <= INT64_MAX:
            logtype.append(b"\x11")
            numbers.append(number)
        elif (bits := encode_float(token)) is not None:
            logtype.append(b"\x13")
            numbers.append(bits)
        else:
            logtype.append(b"\x12")
            dictionary.append(token)
    logtype.append(_escaped(message[static_from:]))
    return EncodedMessage(b"".join(logtype), tuple(numbers), tuple(dictionary))


def decode_message(logtype: bytes, numbers: Sequence[int], dictionary: Sequence[bytes]) -> bytes:
    """The message `encode_message` split into these parts. Raises CorruptEncoding when the parts do
    not fit each other (a placeholder without its value, a value left over, a dangling escape)."""
    out: list[bytes] = []
    number_at = dictionary_at = 0
    static_from = 0
    i, end = 0, len(logtype)
    while i < end:
        byte = logtype[i]
        if byte == ESCAPE:
            if i + 1 == end:
                raise CorruptEncoding("a log type ends in an escape")
            out.append(logtype[static_from:i])
            static_from = i + 1  # the escaped byte is copied with the static text after it
            i += 2
            continue
        if byte in _PLACEHOLDERS:
            out.append(logtype[static_from:i])
            static_from = i + 1
            if byte == DICTIONARY_PLACEHOLDER:
                if dictionary_at == len(dictionary):
                    raise CorruptEncoding("a log type has more dictionary placeholders than values")
                out.append(dictionary[dictionary_at])
                dictionary_at += 1
            else:
                if number_at == len(numbers):
                    raise CorruptEncoding("a log type has more numeric placeholders than values")
                value = numbers[number_at]
                number_at += 1
                if byte == INT_PLACEHOLDER:
                    if not INT64_MIN <= value <= INT64_MAX:
                        raise CorruptEncoding(f"integer {value} is outside int64")
                    out.append(str(value).encode())
                else:
                    out.append(decode_float(value))
        i += 1
    out.append(logtype[static_from:])
    if number_at != len(numbers) or dictionary_at != len(dictionary):
        raise CorruptEncoding("a log type has fewer placeholders than values")
    return b"".join(out)


__all__ = ["DICTIONARY_PLACEHOLDER", "FLOAT_PLACEHOLDER", "INT_PLACEHOLDER", "CorruptEncoding", "EncodedMessage",
           "decode_float", "decode_message", "encode_float", "encode_message", "is_variable"]
