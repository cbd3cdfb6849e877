"""`tidekeep txn list|abort`: the transactions of transactional writers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..streams.documents import aborted_document, txn_record
from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_table, iso_utc, warn_files_left

if TYPE_CHECKING:
    from ..streams.txn_store import TransactionInfo

app = typer.Typer(help="Transactions of transactional writers.", no_args_is_help=True)


def emit_transactions(infos: list[TransactionInfo], stream: str | None) -> None:
    if not infos:
        emit("no transactions" + (f" on {stream}" if stream else ""))
        return
    emit_table(["ID", "STREAM", "WRITER", "STATE", "EVENTS", "CREATED", "LEASE EXPIRY", "ENDED"],
               [[i.id, i.stream, i.writer_id, i.state.value, i.events, iso_utc(i.created_ms),
                 iso_utc(i.lease_expiry_ms) if i.end_reason is None else "-",
                 i.end_reason or "-"] for i in infos])


@app.command("list")
def list_transactions(
    ctx: typer.Context,
    stream: Annotated[str | None, typer.Option("--stream", metavar="NAME", help="Only this stream")] = None,
    json_output: JsonFlag = False,
) -> None:
    """List transactions (open, committed and aborted), oldest first."""
    with open_client(ctx) as client:
        infos = client.transactions.list(stream)
    output(ctx, json_output).show([txn_record(i) for i in infos], lambda: emit_transactions(infos, stream))


@app.command("abort")
def abort(
    ctx: typer.Context,
    txn_id: Annotated[str, typer.Argument(metavar="TXN_ID", help="The transaction id (32 hex digits)")],
    json_output: JsonFlag = False,
) -> None:
    """Abort an open transaction and delete its staged events."""
    with open_client(ctx) as client:
        result = client.transactions.abort(txn_id)
    output(ctx, json_output).show(
        aborted_document(txn_id, result.aborted, result.files_left),
        f"aborted transaction {txn_id}" if result.aborted else f"transaction {txn_id} was already aborted")
    warn_files_left(result.files_left)
