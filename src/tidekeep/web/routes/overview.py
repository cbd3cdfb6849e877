"""The overview: where the data is and what retention does next, across the three families."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from ..auth import Look, Viewer
from ..render import render

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, viewer: Viewer = Look) -> HTMLResponse:
    return render(request, "overview.html", viewer, area="overview")
