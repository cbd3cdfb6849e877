"""`tidekeep audit report`: every deletion of a time window per family, why and how many bytes, the
holds in force, signed with the audit chain's hash (docs/audit-reports.md).

The report is one document (store/audit_report.py, `report_document`), read from the workspace or
with --server from `GET /api/v1/audit/report`, then printed or written in the format asked for, so
both ways render the same bytes. What goes where:

- no --output: --format json (or --json) prints the document; --format csv prints the CSV, each
  cell's control characters escaped as every CLI line has them; no --format prints a summary for
  people; --format pdf is refused (a PDF is never written to a terminal or a pipe by accident).
- --output FILE: the report in --format (default json) goes to FILE, created owner-only with its
  exact text; stdout gets one line saying what was written, or with --json that as a document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import InvalidInput
from .context import is_remote, open_client, open_remote, output
from .output import emit, emit_json, emit_table, size_cell

FORMATS = ("csv", "json", "pdf")


def rendered(document: dict[str, Any], report_format: str) -> bytes:
    import json

    from ..store.audit_report_render import report_csv, report_pdf

    if report_format == "pdf":
        return report_pdf(document)
    if report_format == "csv":
        return report_csv(document).encode("utf-8")
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def emit_summary(document: dict[str, Any]) -> None:
    from ..store.audit_report_render import totals_line

    emit(f"{document['title']}: {document['since']} to {document['until']} (generated {document['generated']})")
    for family, totals in document["families"].items():
        emit(totals_line(family, totals))
    emit(totals_line("total", document["totals"]))
    signature = document["signature"]
    emit(f"signature: {signature['row_hash'] or '-'} (row {signature['row_id'] or '-'})")
    if document["deletions"]:
        emit_table(["TIME", "FAMILY", "ACTION", "TARGET", "BYTES", "WHY", "ACTOR", "WHAT"],
                   [[d["time"], d["family"], d["action"], d["target"], size_cell(d["bytes"]),
                     d["why"] + (f" ({d['rule']})" if d["rule"] else ""), d["actor"], d["what"]]
                    for d in document["deletions"]])
    emit(f"holds in force during the window: {len(document['holds'])}")
    if document["holds"]:
        emit_table(["ID", "KIND", "TARGET", "ADDED", "REMOVED", "REASON"],
                   [[h["id"], h["kind"], h["target"], h["added"] or "unknown", h["removed"] or "still in force",
                     h["reason"]] for h in document["holds"]])


def emit_csv(document: dict[str, Any]) -> None:
    import sys

    from ..printable import printable
    from ..store.audit_report_render import report_csv

    sys.stdout.buffer.write(report_csv(document, printable).encode("utf-8"))


def report(
    ctx: typer.Context,
    since: Annotated[str, typer.Option(
        "--since", metavar="TIME", help="The window's start, included: epoch ms or ISO-8601 (no zone: UTC)")],
    until: Annotated[str, typer.Option(
        "--until", metavar="TIME", help="The window's end, included: epoch ms or ISO-8601 (no zone: UTC)")],
    report_format: Annotated[str | None, typer.Option(
        "--format", metavar="csv|json|pdf", help="The report as CSV, JSON or PDF (pdf needs --output) "
        "[default: a summary for people; json with --output]")] = None,
    output_file: Annotated[Path | None, typer.Option(
        "--output", metavar="FILE", help="Write the report to FILE (owner-only) instead of stdout")] = None,
    json_output: Annotated[bool, typer.Option(
        "--json", help="Print the JSON report (with --output: what was written, as JSON)")] = False,
) -> None:
    """Every deletion from --since to --until, per family: what, why (policy, rule, subscriber
    bound, or manual with the actor), bytes, when; the holds in force; signed with the audit
    chain hash of the window's last row."""
    from ..store.audit_report import check_window
    from ..times import parse_time_ms

    since_ms = parse_time_ms(since, "--since")
    until_ms = parse_time_ms(until, "--until", round_up=True)
    check_window(since_ms, until_ms)
    if report_format is not None and report_format not in FORMATS:
        raise InvalidInput(f"invalid --format {report_format!r}: expected one of {', '.join(FORMATS)}")
    as_json = output(ctx, json_output).json
    if output_file is None and report_format == "pdf":
        raise InvalidInput("--format pdf needs --output FILE: a PDF is never printed")
    if output_file is None and report_format == "csv" and as_json:
        raise InvalidInput("--json prints the JSON report, not CSV: leave out --json, or write the CSV with "
                           "--output FILE")
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            document = remote.call("GET", "/audit/report", params={"since": since_ms, "until": until_ms})
    else:
        from ..store.audit_report import report_document

        with open_client(ctx) as client:
            document = report_document(client.audit_report(since_ms, until_ms))
    if output_file is not None:
        from ..store.audit_report_render import totals_line
        from ..store.private import write_private_bytes

        chosen = report_format or "json"
        write_private_bytes(output_file, rendered(document, chosen))
        written = {"output": str(output_file), "format": chosen, "families": document["families"],
                   "totals": document["totals"], "signature": document["signature"]}
        output(ctx, json_output).show(written, f"wrote the deletion report ({chosen}) to {output_file}: "
                                               f"{totals_line('total', document['totals'])}; signature "
                                               f"{document['signature']['row_hash'] or '-'}")
    elif report_format == "csv":
        emit_csv(document)
    elif report_format == "json" or as_json:
        emit_json(document)
    else:
        emit_summary(document)
