"""A deletion report's document (store/audit_report.py, `report_document`) as CSV or PDF.

Both read the document, not the report value, so a CLI going through the API (`--server`)
renders the answer it got exactly as the local command renders its own (docs/audit-reports.md).

- CSV: a header, then one row per deletion with its family, oldest first; the totals are the sums
  of the `bytes` column and the row counts, by family. Cells a spreadsheet would run as a formula
  get a leading apostrophe (as the dashboard's CSV downloads, web/csv_export.py).
- PDF (fpdf2, imported on first use so the CLI starts without it): the first page has the title,
  the window, the totals per family and overall in a large font, and the signature; the tables of
  deletions per family and of the holds follow. The PDF's built-in fonts cover Latin-1 only: any
  other character is shown as its \\uNNNN escape (the JSON and CSV carry the exact text).
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ..printable import printable
from .audit_report import TITLE

CSV_COLUMNS = ("family", "id", "time", "time_ms", "action", "target", "what", "why", "rule", "actor", "bytes",
               "reason", "row_hash")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # OWASP "CSV Injection"
BLOCKED_NOTE = ("Which deletions these holds blocked is not recorded: a deletion a hold refuses writes no audit "
                "row (docs/audit-reports.md).")
CELL_CHARS = 600  # at most 30 lines in the narrowest column: a row always fits on a page
_BEYOND_LATIN_1 = re.compile("[^\x00-\xff]")


def csv_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def report_csv(document: Mapping[str, Any], shown: Callable[[str], str] = str) -> str:
    """One CSV row per deletion (CSV_COLUMNS), CRLF line ends as RFC 4180 has them; `shown` maps each
    cell's text (the CLI's stdout escapes control characters with it)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for deletion in document["deletions"]:
        writer.writerow([shown(csv_cell(deletion[column])) for column in CSV_COLUMNS])
    return buffer.getvalue()


def totals_line(name: str, totals: Mapping[str, int]) -> str:
    """"streams: 3 deletions, 12,288 bytes": the first page's lines (an OCR test reads them back)."""
    return f"{name}: {totals['deletions']:,} deletions, {totals['bytes']:,} bytes"


def pdf_text(text: str) -> str:
    """Text the PDF's built-in fonts can show: control characters and anything beyond Latin-1 escaped."""
    return _BEYOND_LATIN_1.sub(lambda m: f"\\u{ord(m.group()):04x}", printable(text))


def pdf_cell(text: str) -> str:
    """A table cell's text, cut at CELL_CHARS so that no row is taller than a page (a reason may be
    long); the cut says how much more the JSON and CSV hold."""
    shown = pdf_text(text)
    if len(shown) <= CELL_CHARS:
        return shown
    return f"{shown[:CELL_CHARS]}... [{len(shown) - CELL_CHARS:,} more characters in the JSON and CSV]"


def _why(deletion: Mapping[str, Any]) -> str:
    rule = f" ({deletion['rule']})" if deletion["rule"] else ""
    return f"{deletion['why']}{rule}: {deletion['reason']}"


def _table(pdf: Any, widths: Sequence[float], header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    pdf.set_font("Helvetica", "", 7.5)
    with pdf.table(col_widths=tuple(widths), text_align="LEFT", line_height=3.6, first_row_as_headings=True,
                   repeat_headings=1) as table:
        for cells in (header, *rows):
            row = table.row()
            for cell in cells:
                row.cell(pdf_cell(cell))


def _heading(pdf: Any, text: str) -> None:
    pdf.set_font("Helvetica", "B", 13)
    pdf.cell(0, 9, pdf_text(text), new_x="LMARGIN", new_y="NEXT")


def report_pdf(document: Mapping[str, Any]) -> bytes:
    """The report as a PDF (A4 landscape); the module doc says what its pages show."""
    from fpdf import FPDF

    pdf = FPDF(orientation="L", unit="mm", format="A4")
    pdf.set_margins(10, 10, 10)
    pdf.set_auto_page_break(True, margin=10)
    pdf.set_title(TITLE)
    pdf.set_creator("tidekeep")
    # the generation time, not the rendering's: the same document renders to the same file
    pdf.set_creation_date(datetime.fromtimestamp(document["generated_ms"] / 1000, UTC))
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 28)
    pdf.cell(0, 16, TITLE, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 13)
    scope = document["scope"]
    covers = "streams, archives, catalog" if scope is None else f"the streams of scope {scope}"
    for line in (f"Window: {document['since']} to {document['until']} (both included)",
                 f"Generated: {document['generated']}", f"Covers: {covers}"):
        pdf.cell(0, 8, pdf_text(line), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 20)
    for family, totals in document["families"].items():
        pdf.cell(0, 11, totals_line(family, totals), new_x="LMARGIN", new_y="NEXT")
    pdf.cell(0, 11, totals_line("total", document["totals"]), new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    signature = document["signature"]
    pdf.set_font("Helvetica", "", 12)
    pdf.cell(0, 8, f"Holds in force during the window: {len(document['holds'])}", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(0, 8, "Signature: the audit chain hash (row_hash) of audit row "
             f"{signature['row_id'] if signature['row_id'] is not None else '- (the trail is empty)'}",
             new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Courier", "", 11)
    pdf.cell(0, 7, pdf_text(signature["row_hash"] or "-"), new_x="LMARGIN", new_y="NEXT")

    for family, totals in document["families"].items():
        pdf.add_page()
        _heading(pdf, totals_line(family, totals))
        rows = [[d["time"], d["target"], d["what"], _why(d), d["actor"], f"{d['bytes']:,}"]
                for d in document["deletions"] if d["family"] == family]
        if rows:
            _table(pdf, (36, 38, 78, 70, 30, 25), ("Time", "Target", "What", "Why", "Actor", "Bytes"), rows)
        else:
            pdf.set_font("Helvetica", "", 11)
            pdf.cell(0, 8, "no deletions in the window", new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    _heading(pdf, f"Holds in force during the window: {len(document['holds'])}")
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(0, 6, BLOCKED_NOTE, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)
    if document["holds"]:
        _table(pdf, (12, 18, 50, 55, 42, 42, 58), ("Id", "Kind", "Target", "Reason", "Added", "Removed", "Covers"),
               [[str(h["id"]), h["kind"], h["target"], h["reason"],
                 f"{h['added'] or 'unknown'} by {h['added_by'] or 'unknown'}",
                 f"{h['removed']} by {h['removed_by']}" if h["removed"] else "still in force", h["covers"]]
                for h in document["holds"]])
    return bytes(pdf.output())


__all__ = ["BLOCKED_NOTE", "CELL_CHARS", "CSV_COLUMNS", "csv_cell", "pdf_cell", "pdf_text", "report_csv",
           "report_pdf", "totals_line"]
