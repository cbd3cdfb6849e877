"""The overview: where the data is and what retention does next, across the three families.

A scoped token sees its scope's figures only (its streams' bytes, their deletions, its holds, its
jobs); the workspace-wide ones (archives, catalog, the schedule, leases) need an unscoped token,
as the API's /metrics does."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse

from ...api.routes.jobs import visible_to
from ...store.holds import HoldFilter, active_holds_summary
from ...store.overview_queries import (
    FAMILIES,
    HOUR_MS,
    deletions_by_hour,
    failed_catalog_runs,
    held_by_owner,
    retained_bytes,
    service_leases,
    stream_bytes,
)
from ...units import iso_utc
from ..auth import Look, Viewer
from ..recent import Recent
from ..render import render
from ..schedule import next_runs

router = APIRouter()

WINDOW_HOURS = 24
NEWEST_HOLDS = 5
FAILED_SHOWN = 10


def deletions_chart(viewer: Viewer, now_ms: int) -> dict[str, Any]:
    """The chart of the last 24 hours' deleting audit rows: one bar group per hour (the current
    hour last, so far), one dataset per family."""
    first = now_ms // HOUR_MS * HOUR_MS - (WINDOW_HOURS - 1) * HOUR_MS
    prefix = None if viewer.unscoped else f"{viewer.principal.scope}/"
    counts = deletions_by_hour(viewer.client.workspace.db, first, now_ms, prefix)
    hours = [first + i * HOUR_MS for i in range(WINDOW_HOURS)]
    families = FAMILIES if viewer.unscoped else ("streams",)
    return {"type": "bar", "labels": [iso_utc(h)[11:16] for h in hours], "xTitle": "hour (UTC)",
            "total": sum(counts.values()), "yTitle": "deletions (audit rows)", "since_ms": first, "until_ms": now_ms,
            "datasets": [{"label": family, "data": [counts.get((h, family), 0) for h in hours]}
                         for family in families]}


def recent_bytes(app: FastAPI, viewer: Viewer) -> Recent[dict[str, int]]:
    """The server's workspace-wide retained bytes, read at most every api.metrics_interval."""
    found: Recent[dict[str, int]] | None = getattr(app.state, "retained_bytes", None)
    if found is None:
        workspace = viewer.state.workspace
        found = app.state.retained_bytes = Recent(lambda: retained_bytes(workspace.db), workspace.clock,
                                                  workspace.settings["api.metrics_interval"])
    return found


@router.get("/", response_class=HTMLResponse)
def overview(request: Request, viewer: Viewer = Look) -> HTMLResponse:
    db, now_ms = viewer.client.workspace.db, viewer.state.workspace.clock.now_ms()
    scope = viewer.principal.scope
    holds_seen = HoldFilter(target_prefix=None if scope is None else f"{scope}/",
                            kind=None if scope is None else "stream")
    hold_count, newest_holds = active_holds_summary(db, holds_seen, NEWEST_HOLDS)
    caller = viewer.caller()
    failed_jobs = [j for j in viewer.state.jobs.list() if j.state == "failed" and visible_to(caller, j)]
    workspace: dict[str, Any] = {}
    if viewer.unscoped:
        figures, read_ms = recent_bytes(request.app, viewer).get()
        workspace = {"bytes": figures, "bytes_read_ms": read_ms,
                     "runs": next_runs(db, viewer.client.workspace.settings, now_ms),
                     "failed_runs": failed_catalog_runs(db, FAILED_SHOWN), "leases": service_leases(db),
                     "stream_leases": held_by_owner(db, now_ms)}
    return render(request, "overview.html", viewer, area="overview", now_ms=now_ms,
                  scope_bytes=None if scope is None else stream_bytes(db, scope),
                  chart=deletions_chart(viewer, now_ms), hold_count=hold_count, newest_holds=newest_holds,
                  failed_jobs=failed_jobs[:FAILED_SHOWN], workspace=workspace)
