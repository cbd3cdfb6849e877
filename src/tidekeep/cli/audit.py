"""`tidekeep audit list`: the audit trail, newest first."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..errors import InvalidInput
from ..names import split_stream_name
from ..streams.documents import audit_document
from .context import is_remote, open_client, open_remote, output
from .options import limit_option
from .output import emit, format_bytes

app = typer.Typer(help="The audit trail: every deletion, why, how much, by whom.", no_args_is_help=True)


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
