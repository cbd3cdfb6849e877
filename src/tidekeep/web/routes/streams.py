"""The streams area: the list (filtered, sorted and paged in the metadata store, streams/listing.py)
and one stream's page — epochs and segments, head and tail, policy, retained size over time,
truncations, subscribers, watermark lag — with its actions: a retention preview, a what-if
forecast of the policy and of a proposed one, truncate (operator) and a hold (legal), the same
operations and documents as the API's routes (api/routes/streams.py, retention.py, simulate.py,
holds.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...api.paging import decode_cursor, encode_cursor
from ...api.routes.streams import cut_of, truncated_document
from ...errors import InvalidInput
from ...forecast import DEFAULT_DAYS, check_days
from ...streams.config import RetentionKind, RetentionPolicy
from ...streams.documents import decision_document, history_record, subscriber_json
from ...streams.listing import StreamQuery, StreamSort
from ..auth import LegalAction, Look, Operate, Viewer
from ..forecast_chart import forecast_chart, forecast_rows
from ..render import environment, render
from ..retained_series import chart_spec, retained_series
from ..stream_diagram import stream_diagram

router = APIRouter()

PAGE = 50
HISTORY = 50  # truncations shown in the table
HISTORY_FOR_CHART = 500  # truncations the retained-size chart walks back through
SEGMENT_ROWS = 500  # rows of the segment table (the diagram shows every segment)
STREAM = "/streams/{scope}/{stream}"
TEXT = Annotated[str | None, Query(max_length=255)]


def _key_of(cursor: str | None) -> list[Any] | None:
    if cursor is None or cursor == "":
        return None
    key = decode_cursor(cursor)
    if not isinstance(key, list):
        raise InvalidInput("invalid cursor: it belongs to another list")
    return key


def _htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


@router.get("/streams", response_class=HTMLResponse)
def stream_list(request: Request, viewer: Viewer = Look, q: TEXT = None, scope: TEXT = None,
                sort: str = "name", order: str = "asc", cursor: TEXT = None) -> Response:
    if order not in ("asc", "desc"):
        raise InvalidInput(f"invalid order {order!r}: use asc or desc")
    principal = viewer.principal
    chosen = scope or None
    if chosen is not None:
        principal.require_scope(chosen)
    query = StreamQuery(scope=chosen or principal.scope, text=q or None, sort=StreamSort.named(sort),
                        descending=order == "desc", after=_key_of(cursor), limit=PAGE)
    listing = viewer.client.stream_listing(query)
    filters = {k: v for k, v in (("q", q), ("scope", chosen)) if v}
    ordered = {**filters, "sort": sort, "order": order}
    next_url = ("?" + urlencode({**ordered, "cursor": encode_cursor(list(listing.rows[-1].key))})
                if listing.more else None)
    return render(request, "streams/list.html", viewer, area="streams", listing=listing,
                  scopes=[s for s in viewer.client.list_scopes() if principal.sees_scope(s)],
                  q=q or "", scope=chosen or "", sort=sort, order=order, base_query=urlencode(filters),
                  next_url=next_url, first_url="?" + urlencode(ordered) if cursor else None)


@router.get(STREAM, response_class=HTMLResponse)
def stream_page(request: Request, scope: str, stream: str, viewer: Viewer = Look) -> Response:
    client = viewer.client
    name = f"{scope}/{stream}"
    handle = client.stream(name)
    state = handle.state()  # NotFound: the 404 page
    now = client.clock.now_ms()
    described = handle.describe()  # with the chunks, which the state does not hold
    truncations = handle.retention.history(HISTORY_FOR_CHART + 1)
    complete = len(truncations) <= HISTORY_FOR_CHART
    truncations = truncations[:HISTORY_FOR_CHART]
    series = retained_series(handle.retention.records(), truncations, described["written_bytes"],
                             state.truncated_bytes, now, state.info.created_ms, complete)
    latest = handle.watermarks.latest()
    subscribers = sorted((subscriber_json(s, now) for s in handle.subscribers()), key=lambda d: str(d["reader_group"]))
    return render(request, "streams/stream.html", viewer, area="streams", scope=scope, stream=stream, name=name,
                  state=state, described=described, policy=state.info.config.retention,
                  diagram=stream_diagram(state.segments.values(), state.info.current_epoch),
                  segment_rows=described["segments"][:SEGMENT_ROWS],
                  chart=chart_spec(series, environment.filters["time"]),
                  history=[history_record(e) for e in truncations[:HISTORY]], subscribers=subscribers,
                  watermark=None if latest is None else latest.to_dict(),
                  watermark_lag_ms=None if latest is None else max(now - latest.lower_time_ms, 0),
                  holds=client.holds.list("stream", name), now=now, hold_added=None)


@router.get(STREAM + "/preview", response_class=HTMLResponse)
def retention_preview(request: Request, scope: str, stream: str, viewer: Viewer = Look) -> Response:
    """What a retention cycle would do now (GET /api/v1/.../retention/preview): the case, the cut, the reason."""
    handle = viewer.client.stream(f"{scope}/{stream}")
    decision = handle.retention.preview()
    cut = None if decision.cut is None else str(handle.state().cut(decision.cut))
    return render(request, "streams/fragments/preview.html", viewer, scope=scope, stream=stream,
                  decision=decision_document(decision, dry_run=True), cut=cut)


@router.get(STREAM + "/forecast", response_class=HTMLResponse)
def retention_forecast(request: Request, scope: str, stream: str, viewer: Viewer = Look,
                       kind: Literal["", "size", "time"] = "", low: TEXT = None, high: TEXT = None,
                       days: int = DEFAULT_DAYS) -> Response:
    """What-if retention (POST /api/v1/retention/simulate): the stream's forecast under its policy
    and, with `kind` and `low` (and `high`), under the proposed one, from the same now."""
    handle = viewer.client.stream(f"{scope}/{stream}")
    days = check_days(days)
    now = viewer.client.clock.now_ms()
    forecasts = [("current policy", handle.retention.simulate(None, now, days).forecast().to_dict())]
    if kind:
        if not low:
            raise InvalidInput("the proposed policy needs its minimum")
        maker = RetentionPolicy.by_size if kind == RetentionKind.SIZE.value else RetentionPolicy.by_time
        proposed = handle.retention.simulate(maker(low, high or None), now, days).forecast().to_dict()
        forecasts.append((f"proposed ({proposed['proposal']['policy_text']})", proposed))
    return render(request, "fragments/forecast.html", viewer, forecasts=forecasts,
                  chart=forecast_chart(forecasts), rows=forecast_rows(forecasts))


@router.post(STREAM + "/truncate", response_class=HTMLResponse)
def truncate(request: Request, scope: str, stream: str, cut: Annotated[str, Form(min_length=1, max_length=20_000)],
             reason: Annotated[str, Form(max_length=1000)] = "manual truncation (dashboard)",
             viewer: Viewer = Operate) -> Response:
    """Move the head to `cut` (a cut, or "tail"), as POST /api/v1/.../truncate; a hold refuses it (423)."""
    if not reason.strip():
        raise InvalidInput("the reason must not be empty")
    handle = viewer.client.stream(f"{scope}/{stream}")
    result = truncated_document(handle.truncate(cut_of(handle, cut), reason))
    if not _htmx(request):
        return RedirectResponse(f"/streams/{scope}/{stream}", status_code=303)
    response = render(request, "streams/fragments/truncated.html", viewer, result=result)
    response.headers["HX-Trigger"] = "stream-changed"
    return response


@router.post(STREAM + "/holds", response_class=HTMLResponse)
def add_hold(request: Request, scope: str, stream: str, reason: Annotated[str, Form(max_length=1000)],
             viewer: Viewer = LegalAction) -> Response:
    """Hold the stream (as POST /api/v1/holds with kind "stream"): nothing truncates or deletes it."""
    name = f"{scope}/{stream}"
    hold_id = viewer.client.holds.add("stream", name, reason)
    if not _htmx(request):
        return RedirectResponse(f"/streams/{scope}/{stream}", status_code=303)
    return render(request, "streams/fragments/holds.html", viewer, scope=scope, stream=stream,
                  holds=viewer.client.holds.list("stream", name), hold_added=hold_id)
