"""The archives area (docs/dashboard.md, "Archives"): datasets, a dataset's timeline with its expiry
line and its what-if retention forecast, searches and their paged results, the garbage collectors'
preview. Every read and action goes through the API's own route functions (api/routes/archives.py,
simulate.py) with the viewer as the caller, so the pages show what the API answers and start the
same jobs, with the same roles."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from ...api.routes.archives import (
    RESULTS_LIMIT_MAX,
    GcBody,
    ResultsLimit,
    SearchBody,
    SearchId,
    archive_order,
    gc_preview,
    gc_run,
    get_search,
    list_archives,
    search_results,
    start_search,
)
from ...api.routes.archives import cancel_search as api_cancel_search
from ...api.routes.simulate import SimulateBody, simulate
from ...api.routes.streams import Cursor, Limit
from ...api.state import Caller
from ...archives.expiry import is_expired, is_held, retention_ms
from ...archives.holds import ARCHIVE_KIND, DATASET_KIND
from ...archives.model import Archive
from ...errors import NotFound
from ...forecast import DEFAULT_DAYS
from ..archive_timeline import timeline
from ..auth import UNSCOPED_PAGES, Look, Operate, Viewer
from ..forecast_chart import forecast_chart, forecast_rows
from ..render import render

router = APIRouter(dependencies=UNSCOPED_PAGES)

ARCHIVES_PAGE = 50  # archives per page of a dataset's table
RESULTS_PAGE = 50  # results per page unless the search form or the URL says otherwise
RECENT_SEARCHES = 10
GC_JOB_KIND = "archive-gc"  # the kind api/routes/archives.py gc_run gives its job
Collectors = Literal["archive", "search_result", "both"]  # GcBody.which


def caller_of(viewer: Viewer) -> Caller:
    """The viewer as the API's caller: the same principal, client (auditing as the token) and state."""
    return Caller(viewer.principal, viewer.client, viewer.state)


def _retention(viewer: Viewer) -> int | None:
    minutes: int | None = viewer.client.workspace.settings["archive_output.retention_period"]
    return minutes


def _now(viewer: Viewer) -> int:
    return viewer.client.workspace.clock.now_ms()


def held_archives(viewer: Viewer, dataset: str, archives: list[Archive]) -> set[str]:
    """The ids of `archives` (of `dataset`) that a dataset or archive hold keeps, by the collector's
    rule (archives/expiry.py is_held). A records hold on an archive's catalog record also keeps it;
    the GC preview shows those."""
    held_datasets = {h.target for h in viewer.client.holds.list(DATASET_KIND, dataset)}
    held_ids = {h.target for h in viewer.client.holds.list(ARCHIVE_KIND)}
    return {a.id for a in archives if is_held(a, held_datasets, held_ids)}


# ---- datasets ----------------------------------------------------------------------------------------
@router.get("/archives", response_class=HTMLResponse)
def datasets(request: Request, viewer: Viewer = Look) -> HTMLResponse:
    retention = _retention(viewer)
    return render(request, "archives/datasets.html", viewer, area="archives",
                  datasets=viewer.client.archives.dataset_summaries(), retention_minutes=retention,
                  retention_ms=None if retention is None else retention_ms(retention),
                  searches=viewer.client.archives.jobs(limit=RECENT_SEARCHES))


@router.get("/archives/datasets/{dataset}", response_class=HTMLResponse)
def dataset(request: Request, dataset: str, viewer: Viewer = Look, limit: Limit = ARCHIVES_PAGE,
            cursor: Cursor = None) -> HTMLResponse:
    page = list_archives(dataset, caller_of(viewer), limit, cursor)  # NotFound for an unknown dataset
    archives = sorted(viewer.client.archives.list(dataset), key=archive_order)
    held = held_archives(viewer, dataset, archives)
    drawn = timeline(archives, _now(viewer), _retention(viewer), held)
    return render(request, "archives/dataset.html", viewer, area="archives", dataset=dataset, timeline=drawn,
                  rows=page.items, next_cursor=page.next_cursor, limit=limit, first=cursor is not None,
                  total=len(archives), held=held,
                  retention_ms=None if drawn.retention_minutes is None else retention_ms(drawn.retention_minutes))


@router.get("/archives/datasets/{dataset}/forecast", response_class=HTMLResponse)
def dataset_forecast(request: Request, dataset: str, viewer: Viewer = Look,
                     retention: Annotated[str | None, Query(max_length=64)] = None,
                     days: int = DEFAULT_DAYS) -> HTMLResponse:
    """What-if retention of the dataset (POST /api/v1/retention/simulate): which archives expire per
    day under the retention period and, with `retention`, under the proposed one, from the same now."""
    caller = caller_of(viewer)
    at = str(_now(viewer))
    forecasts = [("current retention", simulate(SimulateBody(dataset=dataset, days=days, at=at), Response(), caller))]
    if retention:
        proposed = simulate(SimulateBody(dataset=dataset, retention=retention, days=days, at=at), Response(), caller)
        forecasts.append((f"proposed ({proposed['proposal']['retention_minutes']} min)", proposed))
    return render(request, "fragments/forecast.html", viewer, forecasts=forecasts,
                  chart=forecast_chart(forecasts), rows=forecast_rows(forecasts))


# ---- searches ----------------------------------------------------------------------------------------
@router.get("/archives/search", response_class=HTMLResponse)
def search_form(request: Request, viewer: Viewer = Look, dataset: str | None = None) -> HTMLResponse:
    return render(request, "archives/search_form.html", viewer, area="archives",
                  datasets=viewer.client.archives.datasets(), chosen=dataset, page_size=RESULTS_PAGE,
                  page_size_max=RESULTS_LIMIT_MAX)


def _bound(text: str) -> str | None:
    return text.strip() or None


@router.post("/archives/searches")
def submit_search(request: Request, dataset: Annotated[str, Form()] = "", query: Annotated[str, Form()] = "",
                  begin: Annotated[str, Form()] = "", end: Annotated[str, Form()] = "",
                  regex: Annotated[bool, Form()] = False, ignore_case: Annotated[bool, Form()] = False,
                  page_size: Annotated[int, Form(ge=1, le=RESULTS_LIMIT_MAX)] = RESULTS_PAGE,
                  viewer: Viewer = Operate) -> Response:
    """Start a search as POST /api/v1/archives/searches does (operator), then go to its page."""
    body = SearchBody(dataset=dataset, query=query, regex=regex, ignore_case=ignore_case, begin=_bound(begin),
                      end=_bound(end))
    accepted = start_search(body, Response(), caller_of(viewer))
    target = f"/archives/searches/{accepted.search}?limit={page_size}"
    if request.headers.get("hx-request") == "true":
        return Response(status_code=200, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)


def _search_context(viewer: Viewer, search_id: int, limit: int, cursor: str | None) -> dict[str, Any]:
    """The search job (with its progress while this server runs it) and a page of its results,
    as GET /api/v1/archives/searches/{id}[/results] answer them."""
    caller = caller_of(viewer)
    record = get_search(search_id, caller)
    page = None if record.results_expired_ms is not None else search_results(search_id, caller, limit, cursor)
    if page is not None:
        record = page.search
    return {"search": record, "results": page, "limit": limit, "cursor": cursor,
            "running": record.state == "RUNNING"}


@router.get("/archives/searches/{search_id}", response_class=HTMLResponse)
def search_page(request: Request, search_id: SearchId, viewer: Viewer = Look,
                limit: ResultsLimit = RESULTS_PAGE, cursor: Cursor = None) -> HTMLResponse:
    return render(request, "archives/search.html", viewer, area="archives",
                  **_search_context(viewer, search_id, limit, cursor))


@router.get("/archives/searches/{search_id}/live", response_class=HTMLResponse)
def search_live(request: Request, search_id: SearchId, viewer: Viewer = Look,
                limit: ResultsLimit = RESULTS_PAGE, cursor: Cursor = None) -> HTMLResponse:
    """The polled part of a search's page: progress, then the results once it has ended."""
    return render(request, "archives/fragments/search_live.html", viewer,
                  **_search_context(viewer, search_id, limit, cursor))


@router.post("/archives/searches/{search_id}/cancel", response_class=HTMLResponse)
def cancel_search(request: Request, search_id: SearchId, viewer: Viewer = Operate) -> HTMLResponse:
    api_cancel_search(search_id, caller_of(viewer))
    return render(request, "archives/fragments/search_live.html", viewer,
                  **_search_context(viewer, search_id, RESULTS_PAGE, None))


# ---- garbage collectors ------------------------------------------------------------------------------
@router.get("/archives/gc", response_class=HTMLResponse)
def gc_page(request: Request, viewer: Viewer = Look) -> HTMLResponse:
    preview = gc_preview(caller_of(viewer))  # GET /api/v1/archives/gc/preview
    archives = preview["archives"]
    protected = []
    if archives["enabled"] and archives["held_back_by_job"] is not None:
        # past now − retention but not before the safe expiry: what the running search keeps
        horizon = archives["now_ms"] - retention_ms(archives["retention_minutes"])
        protected = [a for a in viewer.client.archives.list()
                     if is_expired(a.end_ts, horizon) and not is_expired(a.end_ts, archives["expiry_ms"])]
    return render(request, "archives/gc.html", viewer, area="archives", preview=preview, protected=protected)


@router.post("/archives/gc", response_class=HTMLResponse)
def gc_start(request: Request, which: Annotated[Collectors, Form()] = "both",
             viewer: Viewer = Operate) -> HTMLResponse:
    """Run the collectors once, as POST /api/v1/archives/gc does (operator): a job, polled below."""
    accepted = gc_run(Response(), caller_of(viewer), GcBody(which=which))
    return render(request, "archives/fragments/gc_job.html", viewer, job=viewer.state.jobs.get(accepted.job))


@router.get("/archives/gc/jobs/{job_id}", response_class=HTMLResponse)
def gc_job(request: Request, job_id: str, viewer: Viewer = Look) -> HTMLResponse:
    job = viewer.state.jobs.get(job_id)
    if job.kind != GC_JOB_KIND:
        raise NotFound(f"no garbage collection job {job_id!r}")
    return render(request, "archives/fragments/gc_job.html", viewer, job=job)


__all__ = ["router"]
