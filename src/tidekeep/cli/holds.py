"""`tidekeep hold add|list|remove`: legal holds. A held stream is never truncated; catalog records
matching a held expression are neither logically deleted nor purged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag, int_argument
from .output import emit, emit_table, iso_utc

if TYPE_CHECKING:
    from ..holds import Hold

# the kinds holds.HOLD_KINDS accepts, written out: the holds module loads the metadata store's schema,
# which `--help` must not import (docs/cli.md, "Start-up time"); tests/cli/test_cli_startup.py checks they agree
HOLD_KIND_NAMES = ("stream", "records", "dataset", "archive")
KINDS = ", ".join(HOLD_KIND_NAMES)

app = typer.Typer(help="Legal holds: a held stream is never truncated; held catalog records are never deleted.",
                  no_args_is_help=True)


def hold_record(hold: Hold) -> dict[str, Any]:
    return {**hold.to_dict(), "created": iso_utc(hold.created_ms)}


def emit_holds(held: list[dict[str, Any]]) -> None:
    """`held`: `hold_record`s."""
    if not held:
        emit("no holds")
        return
    emit_table(["ID", "KIND", "TARGET", "CREATED", "BY", "REASON"],
               [[h["id"], h["kind"], h["target"], iso_utc(h["created_ms"]), h["created_by"], h["reason"]]
                for h in held])


@app.command("add")
def add(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(metavar="KIND", help=f"What is held: {KINDS}")],
    target: Annotated[str, typer.Argument(metavar="TARGET", help=(
        "What to hold: a stream 'scope/stream', for records a catalog expression like 'feed = \"X\"', "
        "an archive dataset name, or an archive id"))],
    reason: Annotated[str, typer.Option("--reason", metavar="TEXT", help="Why (required; audited)")],
    json_output: JsonFlag = False,
) -> None:
    """Put a legal hold on a target: its data is not deleted until the hold is removed."""
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            hold = remote.call("POST", "/holds", json={"kind": kind, "target": target, "reason": reason})
    else:
        with open_client(ctx) as client:
            hold_id = client.holds.add(kind, target, reason)
            hold = hold_record(next(h for h in client.holds.list(kind) if h.id == hold_id))
    output(ctx, json_output).show(hold,
                                  f"hold {hold['id']} added on {hold['kind']} {hold['target']} ({hold['reason']})")


@app.command("list")
def list_holds(
    ctx: typer.Context,
    kind: Annotated[str | None, typer.Option("--kind", metavar="KIND", help=f"Only this kind: {KINDS}")] = None,
    target: Annotated[str | None, typer.Option("--target", metavar="TARGET", help="Only this target")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Active holds, oldest first."""
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            held = remote.items("/holds", {"kind": kind, "target": target})
    else:
        with open_client(ctx) as client:
            held = [hold_record(h) for h in client.holds.list(kind, target)]
    output(ctx, json_output).show(held, lambda: emit_holds(held))


@app.command("remove")
def remove(
    ctx: typer.Context,
    hold_id: Annotated[int, int_argument("ID", "The hold's id (see `tidekeep hold list`)")],
    json_output: JsonFlag = False,
) -> None:
    """Remove a hold (audited); the target's data may be deleted again."""
    if is_remote(ctx):
        from ..store.holds import check_hold_id

        check_hold_id(hold_id)  # the local command's line, not the API's for its path parameter
        with open_remote(ctx) as remote:
            hold = remote.call("DELETE", f"/holds/{hold_id}")
    else:
        with open_client(ctx) as client:
            hold = hold_record(client.holds.remove(hold_id))
    output(ctx, json_output).show(hold, f"hold {hold['id']} removed from {hold['kind']} {hold['target']}")
