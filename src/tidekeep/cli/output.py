"""Printing for the CLI: JSON documents, aligned plain-text tables, times and cut forms.

Text output is plain and never wrapped, so it stays greppable in pipes and CI logs; `--json`
output is the stable machine interface. Every human line goes through `emit` (or `emit_warning`),
which escapes control characters (see printable.py): one call prints exactly one line, whatever
text a user put into a name, reason or payload.

`Output` is the one object a command prints its result through: text for people, or the JSON
document instead. The root chooses it (`tidekeep --json ...`); a command's own `--json` flag asks for
the JSON one too (context.output).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..printable import json_safe, printable
from ..store.deletion import LEFT_FOR_SWEEP, FileLeft, describe_files_left
from ..units import human_size, iso_utc  # noqa: F401 - iso_utc re-exported: every CLI module prints times with it


def emit(text: str = "") -> None:
    """One line of human output on stdout, encoded as UTF-8 whatever the locale says; control
    characters in it are escaped, so it stays one line."""
    sys.stdout.buffer.write(printable(text).encode("utf-8") + b"\n")


def emit_document(text: str) -> None:
    """A document that is several lines by design (an exported YAML or JSON file): each of its
    lines is printed as `emit` prints one."""
    for line in text.split("\n"):
        emit(line)


def emit_warning(text: str) -> None:
    """One `warning: ...` line on stderr (UTF-8): the command succeeded, with something to know."""
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stderr.buffer.write(f"warning: {printable(' '.join(text.split()))}\n".encode())
    sys.stderr.flush()


def warn_files_left(files: Sequence[FileLeft], left_for: str = LEFT_FOR_SWEEP) -> None:
    """The committed operation could not delete some files: say so on stderr (the exit code stays 0,
    as the operation did happen); `--json` output carries them as `files_left`."""
    if files:
        emit_warning(describe_files_left(files, left_for))


def emit_json(document: Any) -> None:
    """One JSON document on stdout (indented, UTF-8); strings are exact (JSON escapes)."""
    sys.stdout.buffer.write(json_safe(json.dumps(document, indent=2, ensure_ascii=False)).encode("utf-8") + b"\n")


def emit_json_line(document: Any) -> None:
    """One JSON document on one line, for streams of records (JSON Lines)."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"))
    sys.stdout.buffer.write(json_safe(text).encode("utf-8") + b"\n")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is not padded. Cells are
    escaped before they are measured, so a control character can neither break a row nor its
    alignment."""
    cells = [[printable(str(h)) for h in headers]] + [
        ["" if c is None else printable(str(c)) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        padded = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])] + [row[-1]]
        lines.append((indent + "  ".join(padded)).rstrip())
    return lines


def emit_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> None:
    for line in table(headers, rows, indent):
        emit(line)


def fields(pairs: Sequence[tuple[str, Any]]) -> None:
    """"label   value" lines with the values aligned."""
    width = max(len(label) for label, _ in pairs)
    for label, value in pairs:
        emit(f"{label.ljust(width)}  {value}")


def format_bytes(n: int) -> str:
    """Exact byte count with a human form beside it, for sentences: "12,288 bytes (12.0 KiB)"."""
    exact = f"{n:,} bytes"
    return exact if n < 1024 else f"{exact} ({human_size(n)})"


def size_cell(n: int | str | None) -> str:
    """A byte count in a table cell: human-readable ("12.0 KiB"); `--json` has the exact number.
    An absent count stays an empty cell."""
    return "" if n is None or n == "" else human_size(int(n))


def key_range(low: float, high: float) -> str:
    # repr keeps the exact float, so a range can be pasted back into `stream scale --range`
    return f"[{low!r}, {high!r})"


@dataclass(frozen=True)
class Output:
    """Where a command's result goes: lines of text, or one JSON document (`json`)."""

    json: bool = False

    def show(self, document: Any, text: str | Callable[[], None]) -> None:
        """The result: `document` as JSON, or else `text`, one line or a function printing lines."""
        if self.json:
            emit_json(document)
        elif isinstance(text, str):
            emit(text)
        else:
            text()

    def line(self, document: Any, text: str) -> None:
        """One item of a stream of results: a JSON line, or a line of text."""
        if self.json:
            emit_json_line(document)
        else:
            emit(text)
