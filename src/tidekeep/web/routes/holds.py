"""Legal holds: the active ones and the released ones (their "hold_remove" audit rows), filtered and
paged on the server, as CSV too; adding and removing with the API's role (legal) and its scope rules
(api/routes/holds.py, whose route functions do the work)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from ...api.routes.holds import HoldBody, add_hold, remove_hold
from ...integers import INT64_MAX
from ...store.holds import HOLD_KINDS, HoldFilter, active_holds_page, released_holds_page
from ..auth import LegalAction, Look, Viewer
from ..csv_export import csv_response
from ..render import render

router = APIRouter()

PAGE_SIZE = 50
CSV_BATCH = 500
State = Literal["active", "released"]
CSV_HEADER = ("state", "hold", "kind", "target", "reason", "time", "by")


@dataclass(frozen=True)
class HoldQuery:
    """The list's filter as the page's form and links carry it."""

    kind: str | None
    target: str | None
    text: str | None
    state: State

    def filter_for(self, viewer: Viewer) -> HoldFilter:
        # a scoped token sees the stream holds of its scope only (api/routes/holds.py `visible`)
        if viewer.unscoped:
            return HoldFilter(kind=self.kind, target=self.target, text=self.text)
        return HoldFilter(kind="stream", target=self.target, text=self.text,
                          target_prefix=f"{viewer.principal.scope}/")

    def hidden_from(self, viewer: Viewer) -> bool:
        """A scoped viewer asking for holds of another kind than stream: none it may see."""
        return not viewer.unscoped and self.kind not in (None, "stream")

    def query_string(self, **extra: str) -> str:
        pairs = {"kind": self.kind or "", "target": self.target or "", "q": self.text or "", "state": self.state}
        return urlencode({k: v for k, v in {**pairs, **extra}.items() if v})


def _blank_is_none(value: str | None) -> str | None:
    return value if value else None


def hold_query(kind: Annotated[str | None, Query()] = None, target: Annotated[str | None, Query()] = None,
               q: Annotated[str | None, Query(max_length=600)] = None,
               state: Annotated[State, Query()] = "active") -> HoldQuery:
    return HoldQuery(_blank_is_none(kind), _blank_is_none(target), _blank_is_none(q), state)


Filters = Depends(hold_query)
Cursor = Annotated[int | None, Query(ge=1, le=INT64_MAX, description="the last row id of the previous page")]


def _row(state: str, hold: int, kind: str, target: str, reason: str, time_ms: int, by: str) -> dict[str, Any]:
    return {"state": state, "hold": hold, "kind": kind, "target": target, "reason": reason, "time_ms": time_ms,
            "by": by}


def hold_rows(viewer: Viewer, query: HoldQuery, limit: int,
              cursor: int | None) -> tuple[list[dict[str, Any]], int | None]:
    """One page of rows (active: oldest first; released: newest first) and the cursor of the next."""
    if query.hidden_from(viewer):
        return [], None
    db, where = viewer.client.workspace.db, query.filter_for(viewer)
    if query.state == "active":
        holds = active_holds_page(db, where, limit + 1, cursor)
        rows = [_row("active", h.id, h.kind, h.target, h.reason, h.created_ms, h.created_by) for h in holds]
        keys = [h.id for h in holds]
    else:
        released = released_holds_page(db, where, limit + 1, cursor)
        rows = []
        for entry in released:
            details = json.loads(entry["details"] or "{}")
            rows.append(_row("released", int(details.get("hold", 0)), str(details.get("kind", "")), entry["target"],
                             entry["reason"], entry["time_ms"], entry["actor"]))
        keys = [int(e["id"]) for e in released]
    more = len(rows) > limit
    return rows[:limit], keys[limit - 1] if more else None


@router.get("/holds", response_class=HTMLResponse)
def holds_page(request: Request, viewer: Viewer = Look, cursor: Cursor = None, query: HoldQuery = Filters,
               added: Cursor = None, removed: Cursor = None) -> HTMLResponse:
    rows, after = hold_rows(viewer, query, PAGE_SIZE, cursor)
    notice = (f"Hold {added} added." if added is not None else f"Hold {removed} removed." if removed is not None
              else None)
    return render(request, "holds/list.html", viewer, area="holds", rows=rows, query=query, kinds=HOLD_KINDS,
                  next_url=None if after is None else f"/holds?{query.query_string(cursor=str(after))}",
                  first_url=f"/holds?{query.query_string()}" if cursor is not None else None,
                  csv_url=f"/holds.csv?{query.query_string()}", may_change=viewer.may("legal"), notice=notice)


@router.get("/holds.csv")
def holds_csv(viewer: Viewer = Look, query: HoldQuery = Filters) -> Response:
    def rows() -> Iterator[tuple[Any, ...]]:
        cursor = None
        while True:
            batch, cursor = hold_rows(viewer, query, CSV_BATCH, cursor)
            for r in batch:
                yield (r["state"], r["hold"], r["kind"], r["target"], r["reason"], r["time_ms"], r["by"])
            if cursor is None:
                return

    return csv_response(f"holds-{query.state}.csv", CSV_HEADER, rows())


def _done(request: Request, target: str) -> Response:
    """After a change: an htmx request is sent on by htmx, a plain form by the browser."""
    if request.headers.get("hx-request") == "true":
        return Response(status_code=204, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


@router.post("/holds")
def add(request: Request, kind: Annotated[str, Form(max_length=32)], target: Annotated[str, Form(max_length=600)],
        reason: Annotated[str, Form(max_length=10_000)], viewer: Viewer = LegalAction) -> Response:
    added = add_hold(HoldBody(kind=kind, target=target, reason=reason), Response(), viewer.caller())
    return _done(request, f"/holds?added={added['id']}")


@router.post("/holds/{hold_id}/remove")
def remove(request: Request, hold_id: Annotated[int, Path(ge=1, le=INT64_MAX)],
           viewer: Viewer = LegalAction) -> Response:
    removed = remove_hold(hold_id, viewer.caller())
    return _done(request, f"/holds?removed={removed['id']}")
