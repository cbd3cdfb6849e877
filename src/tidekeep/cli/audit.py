"""`tidekeep audit list|verify|anchor`: the audit trail newest first, its hash chain checked, its head."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import AuditTrailBroken, InvalidInput
from ..names import split_stream_name
from ..store.audit_chain import check_anchor
from ..store.private import write_private_text
from ..streams.documents import audit_document
from . import audit_report
from .context import is_remote, open_client, open_remote, output
from .options import limit_option
from .output import emit, fields, format_bytes, iso_utc

app = typer.Typer(help="The audit trail: every deletion, why, how much, by whom.", no_args_is_help=True)
# `audit report` lives in its own module (cli/audit_report.py): the deletion report of a window
app.command("report")(audit_report.report)


def emit_verdict(verdict: dict[str, Any]) -> None:
    """`verdict`: ChainVerdict.to_dict(), as `audit verify --json` prints it."""
    broken, head = verdict["broken"], verdict["head"]
    if broken is None:
        emit(f"audit trail verified: {verdict['rows']} row(s), chain unbroken up to row {verdict['last_id']}")
    else:
        emit(f"audit trail BROKEN ({broken['kind']}) at row {broken['row_id']}: {broken['message']}")
        emit(f"    verified before it: {verdict['rows']} row(s), up to row {verdict['last_id']}")
    fields([("head", "none" if head is None else f"row {head['id']} {head['hash']}"),
            ("last verified hash", verdict["last_hash"])])
    if verdict["anchor"] is not None:
        emit(f"anchor {verdict['anchor']}: " + ("not in the verified trail: a row at or before it was changed, "
                                                "deleted or reordered" if verdict["anchor_id"] is None else
                                                f"row {verdict['anchor_id']}: the trail up to it is unchanged"))


@app.command("verify")
def verify(
    ctx: typer.Context,
    anchor: Annotated[str | None, typer.Option(
        "--anchor", metavar="HASH", help="A head hash kept elsewhere ('audit anchor'): prove the trail up to it "
        "unchanged")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON document")] = False,
) -> None:
    """Re-compute the audit trail's hash chain and name the first row that was changed, deleted or
    inserted out of order. Exits 19 when the chain is broken or the anchor is not in it."""
    if anchor is not None:
        check_anchor(anchor)  # refused before any reading, with or without --server
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            verdict = remote.call("GET", "/audit/verify", params={"anchor": anchor})
    else:
        with open_client(ctx) as client:
            verdict = client.audit_verify(anchor).to_dict()
    output(ctx, json_output).show(verdict, lambda: emit_verdict(verdict))
    if not verdict["ok"]:
        raise typer.Exit(AuditTrailBroken.exit_code)


@app.command("anchor")
def anchor_command(
    ctx: typer.Context,
    output_file: Annotated[Path | None, typer.Option(
        "--output", metavar="FILE", help="Also write the head to FILE (JSON, owner-only)")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON document")] = False,
) -> None:
    """The audit chain's head: the last row's id, hash and time. Keep it elsewhere; later
    'audit verify --anchor HASH' proves the trail up to it unchanged."""
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            head = remote.call("GET", "/audit/anchor")
    else:
        with open_client(ctx) as client:
            head = client.audit_head()
    if output_file is not None:
        write_private_text(output_file, json.dumps(head) + "\n")
    time_text = "-" if head["time_ms"] is None else iso_utc(head["time_ms"])
    output(ctx, json_output).show(head, f"{head['hash']}  row {head['id']}  {time_text}")


def emit_entries(records: list[dict[str, Any]], stream: str | None) -> None:
    if not records:
        emit("no audit entries" + (f" for {stream}" if stream else ""))
    for r in records:
        emit(f"{r['time']}  {r['action']}  {r['target']}  freed {format_bytes(r['bytes_freed'])}  "
             f"by {r['actor']}  ({r['reason']})")
        if r["old_head"] is not None or r["new_head"] is not None:
            emit(f"    head {r['old_head'] or '-'} -> {r['new_head'] or '-'}")


@app.command("list")
def list_entries(
    ctx: typer.Context,
    stream: Annotated[str | None, typer.Option("--stream", metavar="NAME", help="Only this stream")] = None,
    limit: Annotated[int, limit_option("At most N entries")] = 100,
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON array")] = False,
) -> None:
    """What was deleted, when, why, how many bytes, and by which process; newest first."""
    if limit < 1:
        raise InvalidInput(f"invalid --limit {limit}: must be 1 or more")
    if stream is not None:
        split_stream_name(stream)  # a deleted stream still has its audit entries, so no existence check
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            # the API's audit rows are these records already (GET /api/v1/audit, newest first)
            records = remote.items("/audit", {"target": stream}, limit)
    else:
        with open_client(ctx) as client:
            records = [audit_document(e) for e in client.audit(stream, limit)]
    output(ctx, json_output).show(records, lambda: emit_entries(records, stream))
