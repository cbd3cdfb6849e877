"""Text from users made safe to print on a terminal: control characters become visible escapes.

Names, reasons, payloads and error messages that echo input can hold characters a terminal acts on
instead of showing: a newline or carriage return starts a fake line, ESC starts an escape sequence
(colours, cursor moves, a cleared screen), C1 controls do the same on some terminals, the Unicode
line and paragraph separators break lines, and bidi overrides reorder what is shown. Human output
shows each of them as an escape (`\\n`, `\\x1b`, `\\u202e`), so one value always prints as what it
is, on the line it belongs to; `--json` output keeps the exact text (docs/cli.md).
"""

from __future__ import annotations

import logging
import re

# C0 controls, DEL and C1 controls; the line and paragraph separators; the bidi embeddings,
# overrides, isolates and marks; lone surrogates (undecodable bytes of a command line argument)
_BEYOND_C0 = "\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
UNSAFE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
# JSON escapes C0 controls in strings itself, and its own line breaks (indentation) must stay
_UNSAFE_IN_JSON = re.compile(f"[{_BEYOND_C0}]")

_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_char(char: str) -> str:
    """The visible form of one unsafe character: \\n, \\r, \\t, \\xNN or \\uNNNN."""
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every unsafe character escaped; safe text comes back unchanged (so escaping
    twice changes nothing). Backslashes are left as they are: human output is for reading, and
    `--json` is the exact form (docs/cli.md)."""
    return UNSAFE.sub(lambda match: escape_char(match.group()), text)


def json_safe(text: str) -> str:
    """JSON text with the unsafe characters JSON does not escape itself (DEL, C1, separators, bidi)
    written as \\uNNNN escapes: the same JSON value, exact for a parser, inert on a terminal. Valid
    because such characters can only occur inside JSON strings, where \\uNNNN means the character."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


class PrintableFormatter(logging.Formatter):
    """Log lines whose message (which may quote names, queries or errors from users) has its control
    characters escaped, so one record is one line; a traceback after it keeps its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))
