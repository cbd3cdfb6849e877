"""`tidekeep token create|list|revoke`: the HTTP API's tokens (docs/api.md, "Tokens and roles").
A token is printed once, when it is created; the workspace keeps only a slow hash of it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .context import load, output, require_workspace
from .options import JsonFlag
from .output import emit, emit_table, iso_utc

if TYPE_CHECKING:
    from ..store.tokens import TokenInfo, TokenStore

ROLE_NAMES = ("viewer", "operator", "legal", "admin")  # store/tokens.py Role, written out for --help

app = typer.Typer(help="Tokens of the HTTP API: create (shown once), list, revoke.", no_args_is_help=True)


def token_record(info: TokenInfo) -> dict[str, Any]:
    return {**info.to_dict(), "created": iso_utc(info.created_ms),
            "revoked": None if info.revoked_ms is None else iso_utc(info.revoked_ms)}


@contextlib.contextmanager
def _with_tokens(ctx: typer.Context) -> Iterator[TokenStore]:
    from ..store.house import open_workspace
    from ..store.tokens import TokenStore

    settings = load(ctx)
    require_workspace(settings)
    workspace = open_workspace(settings)
    try:
        yield TokenStore(workspace.db, workspace.audit)
    finally:
        workspace.close()


@app.command("create")
def create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The token's name: the actor of what it changes")],
    role: Annotated[str, typer.Option("--role", metavar="ROLE", help=f"One of {', '.join(ROLE_NAMES)}")],
    scope: Annotated[str | None, typer.Option(
        "--scope", metavar="SCOPE", help="Limit the token to this scope's streams")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Create a token and print it once: it is not stored, only its argon2id hash is."""
    with _with_tokens(ctx) as tokens:
        info, token = tokens.create(name, role, scope)

    def text() -> None:  # the token alone on stdout, for `TOKEN=$(tidekeep token create ...)`
        emit(token)
        typer.echo(f"token {info.name!r} created with role {info.role.value}"
                   + (f", limited to scope {info.scope}" if info.scope else "")
                   + ": it is shown only now; keep it in a secret store", err=True)

    output(ctx, json_output).show({**token_record(info), "token": token}, text)


@app.command("list")
def list_tokens(
    ctx: typer.Context,
    revoked: Annotated[bool, typer.Option("--revoked", help="Include revoked tokens")] = False,
    json_output: JsonFlag = False,
) -> None:
    """The tokens: name, role, scope, when created and by whom (never the token itself)."""
    with _with_tokens(ctx) as tokens:
        listed = tokens.list(include_revoked=revoked)

    def text() -> None:
        if not listed:
            emit("no tokens")
            return
        emit_table(["NAME", "ROLE", "SCOPE", "CREATED", "BY", "REVOKED"],
                   [[t.name, t.role.value, t.scope or "*", iso_utc(t.created_ms), t.created_by,
                     "" if t.revoked_ms is None else iso_utc(t.revoked_ms)] for t in listed])

    output(ctx, json_output).show([token_record(t) for t in listed], text)


@app.command("revoke")
def revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The token's name")],
    json_output: JsonFlag = False,
) -> None:
    """Revoke a token (audited): every later request with it gets 401."""
    with _with_tokens(ctx) as tokens:
        info = tokens.revoke(name)
    output(ctx, json_output).show(token_record(info), f"token {info.name!r} revoked")
