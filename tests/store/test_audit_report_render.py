"""A deletion report rendered (store/audit_report_render.py): the CSV's rows sum to the report's
totals per family and keep spreadsheets from running a cell; the PDF's first page, turned into an
image by poppler's `pdftoppm` and read back by `tesseract`, shows the title and every total.

Without pdftoppm or tesseract (Debian's poppler-utils and tesseract-ocr) the PDF test skips, except
in CI (CI=true or TIDEKEEP_TEST_REQUIRE_BROWSER=1), where it fails: .ci/run installs both."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.helpers.dashboard import browser_required

import tidekeep as tk
from tidekeep.printable import printable
from tidekeep.store.audit import AuditEntry
from tidekeep.store.audit_report import TITLE, report_document
from tidekeep.store.audit_report_render import (
    CELL_CHARS,
    CSV_COLUMNS,
    pdf_cell,
    pdf_text,
    report_csv,
    report_pdf,
    totals_line,
)

T0 = 1_700_000_000_000
MIN = 60_000


@pytest.fixture
def reported(tmp_path: Path) -> Iterator[tk.Client]:
    """Real truncations (one with a reason a spreadsheet would run), a hold, and rows of the other
    families' deletions with sizes of many digits."""
    client = tk.connect(home=tmp_path / "ws", clock=tk.ManualClock(T0), settings={"writer.linger": 0}, create=True)
    for name, reason in (("ops/a", "=HYPERLINK(\"http://x\")"), ("ops/b", "line one\nline two \x1b[31m"),
                         ("ops/c", "café ☃ manual")):
        client.create_stream(name)
        with client.stream(name).writer("w") as writer:
            writer.write_many([b"z" * 700] * 5)
        client.clock.advance(MIN)  # type: ignore[attr-defined]
        client.stream(name).truncate(client.stream(name).tail_cut(), reason=reason)
    client.holds.add("stream", "ops/a", "litigation 2024-117")
    with client.workspace.db.write() as conn:
        for action, target, size in (("archive_expire", "archives/web", 987_654_321),
                                     ("search_results_expire", "search/4", 45_678),
                                     ("catalog_purge", "catalog", 3_141_592), ("catalog_delete", "catalog", 0),
                                     ("sweep", "streams", 999)):
            client.workspace.audit.append(conn, AuditEntry(action, target, f"{action} by test", size,
                                                           time_ms=T0 + 5 * MIN))
    yield client
    client.close()


def document_of(client: tk.Client) -> dict[str, Any]:
    return report_document(client.audit_report(T0, T0 + 10 * MIN))


def test_the_csv_rows_sum_to_the_totals_of_each_family(reported: tk.Client) -> None:
    document = document_of(reported)
    rows = list(csv.DictReader(io.StringIO(report_csv(document), newline="")))
    assert tuple(rows[0]) == CSV_COLUMNS
    sums: dict[str, dict[str, int]] = {}
    for row in rows:
        family = sums.setdefault(row["family"], {"deletions": 0, "bytes": 0})
        family["deletions"] += 1
        family["bytes"] += int(row["bytes"])
    assert sums == {f: t for f, t in document["families"].items() if t["deletions"]}
    assert document["totals"] == {"deletions": 7, "bytes": sum(t["bytes"] for t in sums.values())}
    assert [int(r["id"]) for r in rows] == [d["id"] for d in document["deletions"]]
    reasons = {r["target"]: r["reason"] for r in rows if r["family"] == "streams"}
    # exact text, except that a cell a spreadsheet would run as a formula starts with an apostrophe
    assert reasons == {"ops/a": "'=HYPERLINK(\"http://x\")", "ops/b": "line one\nline two \x1b[31m",
                       "ops/c": "café ☃ manual"}
    assert all(len(r["row_hash"]) == 64 for r in rows)
    shown = report_csv(document, printable)  # as the CLI prints it on stdout
    assert "\x1b" not in shown and "line one\\nline two \\x1b[31m" in shown


def test_pdf_text_escapes_what_the_pdf_fonts_cannot_show() -> None:
    assert pdf_text("café ☃\n\x1b") == "café \\u2603\\n\\x1b"
    assert pdf_cell("☃" * CELL_CHARS) == "\\u2603" * (CELL_CHARS // 6) + (
        f"... [{CELL_CHARS * 5:,} more characters in the JSON and CSV]")


def test_the_longest_names_and_reasons_still_render(reported: tk.Client) -> None:
    """A row of the longest target and a long reason fits on a page (fpdf2 refuses a taller row)."""
    name = "s/" + "n" * 222  # the longest stream name
    reported.create_stream(name)
    with reported.stream(name).writer("w") as writer:
        writer.write(b"x")
    reported.stream(name).truncate(reported.stream(name).tail_cut(), reason="why " * 2000)
    reported.holds.add("stream", name, "because " * 1000)
    document = report_document(reported.audit_report(T0, reported.clock.now_ms()))
    assert any(d["target"] == name for d in document["deletions"])
    assert report_pdf(document).startswith(b"%PDF-")


def require_tools(*names: str) -> None:
    missing = [name for name in names if shutil.which(name) is None]
    if missing:
        message = f"no {', '.join(missing)} (apt-get install poppler-utils tesseract-ocr; .ci/run does)"
        if browser_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def first_page_text(pdf: bytes, where: Path) -> str:
    """The first page at 200 dpi as PNG (pdftoppm), read by tesseract; whitespace made single spaces."""
    (where / "report.pdf").write_bytes(pdf)
    subprocess.run(["pdftoppm", "-f", "1", "-l", "1", "-r", "200", "-png", "-singlefile", str(where / "report.pdf"),
                    str(where / "page")], check=True, capture_output=True, timeout=120)
    assert (where / "page.png").stat().st_size > 0
    done = subprocess.run(["tesseract", str(where / "page.png"), "stdout"], check=True, capture_output=True,
                          text=True, timeout=120)
    return " ".join(done.stdout.split())


def test_the_pdfs_first_page_shows_the_title_and_the_totals(reported: tk.Client, tmp_path: Path) -> None:
    require_tools("pdftoppm", "tesseract")
    document = document_of(reported)
    pdf = report_pdf(document)
    assert pdf.startswith(b"%PDF-") and pdf == report_pdf(document)  # the same document, the same bytes
    text = first_page_text(pdf, tmp_path)
    assert TITLE in text, text
    lines = [totals_line(family, totals) for family, totals in document["families"].items()]
    lines.append(totals_line("total", document["totals"]))
    assert document["families"]["archives"]["bytes"] == 987_654_321 + 45_678  # many digits to read
    for line in lines:
        assert " ".join(line.split()) in text, (line, text)
    # the deletions' own tables start on the next page
    assert "HYPERLINK" not in text
