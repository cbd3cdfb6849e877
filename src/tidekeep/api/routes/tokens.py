"""Tokens through the API (admin only, and only an unscoped admin): list, create (the token is in
the response once), revoke. The same operations as `tidekeep token`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict

from ...store.tokens import Role, TokenInfo
from ..models import Page
from ..paging import DEFAULT_LIMIT, MAX_LIMIT, page_of
from ..state import UNSCOPED, Admin, Caller

router = APIRouter(tags=["tokens"], dependencies=UNSCOPED)


class TokenOut(BaseModel):
    id: int
    name: str
    role: Role
    scope: str | None
    created_ms: int
    created_by: str
    revoked_ms: int | None


class CreatedToken(TokenOut):
    token: str  # shown once: only its hash is kept


class CreateTokenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    role: Role
    scope: str | None = None


def _out(info: TokenInfo) -> dict[str, Any]:
    return info.to_dict()


@router.get("/tokens", summary="List tokens (never their secrets)")
def list_tokens(call: Caller = Admin,
                limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
                cursor: Annotated[str | None, Query()] = None,
                revoked: Annotated[bool, Query(description="include revoked tokens")] = False) -> Page[TokenOut]:
    items, after = page_of(call.state.tokens.list(include_revoked=revoked), lambda t: t.id, cursor, limit)
    return Page[TokenOut](items=[TokenOut(**_out(t)) for t in items], next_cursor=after)


@router.post("/tokens", status_code=201, summary="Create a token; the response holds it, once")
def create_token(body: CreateTokenBody, response: Response, call: Caller = Admin) -> CreatedToken:
    info, text = call.client_tokens().create(body.name, body.role, body.scope)
    response.headers["Cache-Control"] = "no-store"
    return CreatedToken(**_out(info), token=text)


@router.delete("/tokens/{name}", summary="Revoke a token: every later request with it gets 401")
def revoke_token(name: str, call: Caller = Admin) -> TokenOut:
    return TokenOut(**_out(call.client_tokens().revoke(name)))
