"""CSV downloads of the dashboard's lists (holds, audit): quoted by the csv module, streamed a
page of rows at a time (never the whole table in memory), and safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence

from fastapi.responses import StreamingResponse

# a spreadsheet runs a cell that starts with one of these as a formula (OWASP, "CSV Injection")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

Cell = str | int | float | None


def safe_cell(value: Cell) -> str:
    """The cell's text, with a leading apostrophe if a spreadsheet would read it as a formula."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)  # a negative number is a number, not a formula
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_lines(header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> Iterator[str]:
    """The header line, then one line per row, each cell made safe."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def line(cells: Sequence[Cell]) -> str:
        writer.writerow([safe_cell(c) for c in cells])
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    yield line(header)
    for row in rows:
        yield line(row)


def csv_response(filename: str, header: Sequence[str], rows: Iterable[Sequence[Cell]]) -> StreamingResponse:
    """A download of `rows` as `filename`, produced while it is sent."""
    return StreamingResponse(csv_lines(header, rows), media_type="text/csv; charset=utf-8",
                             headers={"Content-Disposition": f'attachment; filename="{filename}"'})


__all__ = ["FORMULA_STARTS", "csv_lines", "csv_response", "safe_cell"]
