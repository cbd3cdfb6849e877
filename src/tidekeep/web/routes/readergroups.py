"""Reader groups: the list (filtered by scope) and a group's page with its readers, segment
assignments, positions and checkpoints. The documents and the scope checks are the API's
(api/routes/readergroups.py): a group is reached when the token reaches every stream it reads.

A group belongs to no scope of its own; its page's address names a scope it reads (the first of
its streams' scopes on the list), so a scoped token is refused by the address alone."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from ...api.routes.readergroups import describe_group, list_checkpoints, visible_groups
from ...errors import NotFound
from ..auth import Look, Viewer
from ..render import render

router = APIRouter()


def scopes_of(streams: list[str]) -> list[str]:
    """The scopes of a group's streams ("scope/name"), sorted, once each."""
    return sorted({s.split("/", 1)[0] for s in streams})


@router.get("/readergroups", response_class=HTMLResponse)
def group_list(request: Request, viewer: Viewer = Look,
               scope: Annotated[str | None, Query(max_length=255)] = None) -> HTMLResponse:
    groups = visible_groups(viewer.caller())
    chosen = scope or None
    rows = [{"name": g.name, "streams": g.streams, "scopes": scopes_of(g.streams)} for g in groups]
    all_scopes = sorted({s for r in rows for s in r["scopes"]})
    if chosen is not None:
        rows = [r for r in rows if chosen in r["scopes"]]
    return render(request, "readergroups/list.html", viewer, area="readergroups", rows=rows, scope=chosen,
                  scopes=all_scopes)


@router.get("/readergroups/{scope}/{group}", response_class=HTMLResponse)
def group_page(request: Request, scope: str, group: str, viewer: Viewer = Look) -> HTMLResponse:
    described = describe_group(group, viewer.caller())
    if scope not in scopes_of(list(described["streams"])):
        raise NotFound(f"reader group {group!r} reads no stream of scope {scope!r}")
    checkpoints = list_checkpoints(group, viewer.caller())
    return render(request, "readergroups/group.html", viewer, area="readergroups", scope=scope, group=described,
                  checkpoints=checkpoints)
