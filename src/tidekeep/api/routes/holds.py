"""Legal holds: list, add, read and remove (the CLI's `tidekeep hold`). A hold never changes, so
its ETag is its id: `If-Match` on DELETE makes sure the hold removed is the one that was read."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ...errors import PermissionDenied, StaleVersion
from ...holds import Hold
from ...integers import INT64_MAX
from ...names import split_stream_name
from ...units import iso_utc
from ..auth import Principal
from ..etags import if_match_version, set_etag
from ..models import Page
from ..paging import DEFAULT_LIMIT, page_of
from ..state import Caller, Legal, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["holds"])

HoldId = Annotated[int, Path(ge=1, le=INT64_MAX, description="the hold's id")]


class HoldBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str = Field(description="stream, records, dataset or archive")
    target: str = Field(description="a stream 'scope/name', a catalog expression, a dataset name or an archive id")
    reason: str = Field(description="why (required; audited)")


def hold_record(hold: Hold) -> dict[str, Any]:
    """A hold as `tidekeep hold add --json` prints it."""
    return {**hold.to_dict(), "created": iso_utc(hold.created_ms)}


def visible(principal: Principal, hold: Hold) -> bool:
    """A scoped token sees the stream holds of its scope only: every other kind spans scopes."""
    if principal.scope is None:
        return True
    return hold.kind == "stream" and hold.target.split("/", 1)[0] == principal.scope


def require_visible(principal: Principal, hold: Hold) -> None:
    if not visible(principal, hold):
        raise PermissionDenied(f"token {principal.name!r} is limited to scope {principal.scope!r}: hold {hold.id} "
                               f"({hold.kind} {hold.target}) lies outside it")


@router.get("/holds", summary="Active holds, oldest first")
def list_holds(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
               kind: Annotated[str | None, Query(description="only this kind")] = None,
               target: Annotated[str | None, Query(description="only this target")] = None) -> Page[dict[str, Any]]:
    held = [h for h in call.client.holds.list(kind, target) if visible(call.principal, h)]
    items, after = page_of(held, lambda h: h.id, cursor, limit)
    return Page[dict[str, Any]](items=[hold_record(h) for h in items], next_cursor=after)


@router.post("/holds", status_code=201, summary="Put a legal hold on a target (audited)")
def add_hold(body: HoldBody, response: Response, call: Caller = Legal) -> dict[str, Any]:
    if call.principal.scope is not None:
        if body.kind != "stream":
            raise PermissionDenied(f"token {call.principal.name!r} is limited to scope {call.principal.scope!r}: "
                                   f"it may hold streams of that scope only, not a {body.kind!r} target")
        call.principal.require_scope(split_stream_name(body.target)[0])
    hold_id = call.client.holds.add(body.kind, body.target, body.reason)
    hold = call.client.holds.get(hold_id)
    set_etag(response, hold.id)
    response.headers["Location"] = f"/api/v1/holds/{hold.id}"
    return hold_record(hold)


@router.get("/holds/{hold_id}", summary="One hold (its ETag is its id)")
def get_hold(hold_id: HoldId, response: Response, call: Caller = Reader) -> dict[str, Any]:
    hold = call.client.holds.get(hold_id)
    require_visible(call.principal, hold)
    set_etag(response, hold.id)
    return hold_record(hold)


@router.delete("/holds/{hold_id}", summary="Remove a hold (audited); returns it as it was")
def remove_hold(hold_id: HoldId, call: Caller = Legal,
                if_match: Annotated[str | None, Header(description="the hold's ETag as read: another gets 412")]
                = None) -> dict[str, Any]:
    expected = if_match_version(if_match)
    require_visible(call.principal, call.client.holds.get(hold_id))
    if expected is not None and expected != str(hold_id):
        raise StaleVersion(f"If-Match names hold {expected}, not hold {hold_id}: nothing was removed", str(hold_id))
    return hold_record(call.client.holds.remove(hold_id))
