"""`tidekeep txn list|abort`: the transactions of transactional writers."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..store.deletion import files_left_json
from ..streams.model import segment_name
from ..streams.txn_store import TransactionInfo
from .context import open_client
from .output import emit, emit_json, emit_table, iso_utc, warn_files_left

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]


def txn_record(info: TransactionInfo) -> dict[str, Any]:
    return {
        "id": info.id,
        "stream": info.stream,
        "writer_id": info.writer_id,
        "state": info.state.value,
        "created": iso_utc(info.created_ms),
        "lease_expiry": iso_utc(info.lease_expiry_ms),
        "commit_timestamp": info.commit_timestamp,
        "committed": iso_utc(info.committed_ms),
        "end_reason": info.end_reason,
        "events": info.events,
        "staged_chunks": info.staged_chunks,
        "positions": {segment_name(s): end for s, end in sorted(info.positions.items())},
    }


def register(app: typer.Typer) -> None:
    @app.command("list")
    def list_transactions(
        ctx: typer.Context,
        stream: Annotated[str | None, typer.Option("--stream", metavar="NAME", help="Only this stream")] = None,
        json_output: JsonFlag = False,
    ) -> None:
        """List transactions (open, committed and aborted), oldest first."""
        with open_client(ctx) as client:
            infos = client.list_transactions(stream)
        if json_output:
            emit_json([txn_record(i) for i in infos])
        elif not infos:
            emit("no transactions" + (f" on {stream}" if stream else ""))
        else:
            emit_table(["ID", "STREAM", "WRITER", "STATE", "EVENTS", "CREATED", "LEASE EXPIRY", "ENDED"],
                       [[i.id, i.stream, i.writer_id, i.state.value, i.events, iso_utc(i.created_ms),
                         iso_utc(i.lease_expiry_ms) if i.end_reason is None else "-",
                         i.end_reason or "-"] for i in infos])

    @app.command("abort")
    def abort(
        ctx: typer.Context,
        txn_id: Annotated[str, typer.Argument(metavar="TXN_ID", help="The transaction id (32 hex digits)")],
        json_output: JsonFlag = False,
    ) -> None:
        """Abort an open transaction and delete its staged events."""
        with open_client(ctx) as client:
            result = client.abort_transaction(txn_id)
        if json_output:
            emit_json({"id": txn_id, "aborted": result.aborted, "files_left": files_left_json(result.files_left)})
        else:
            emit(f"aborted transaction {txn_id}" if result.aborted else f"transaction {txn_id} was already aborted")
        warn_files_left(result.files_left)
