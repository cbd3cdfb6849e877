"""The catalog's records, keyset-paged on the id (the store's paged query the API's records list
uses: `WHERE id > cursor ORDER BY id LIMIT n`, never OFFSET and never a count of the table), and a
record's explain page (the explain document of the API and `tidekeep catalog explain`)."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from ...api.paging import decode_id_cursor, encode_cursor
from ...api.routes.catalog import RecordId, now_of, record_document
from ...catalog.records import Status
from ..auth import UNSCOPED_PAGES, Look, Viewer
from ..render import render

router = APIRouter(dependencies=UNSCOPED_PAGES)

PAGE_SIZE = 50
Filter = Annotated[str | None, Query(max_length=255)]
STATUSES = tuple(s.name for s in Status)


@router.get("/catalog/records", response_class=HTMLResponse)
def records_page(request: Request, viewer: Viewer = Look, feed: Filter = None, type: Filter = None,
                 status: Filter = None, cursor: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    # an empty field of the filter form means "any"
    filters = {"feed": feed or None, "type": type or None, "status": status or None}
    found = viewer.client.catalog.records(**filters, limit=PAGE_SIZE + 1, after_id=decode_id_cursor(cursor or None))
    shown = found[:PAGE_SIZE]
    query = {k: v for k, v in filters.items() if v is not None}
    next_url = None
    if len(found) > PAGE_SIZE and shown[-1].id is not None:
        next_url = "/catalog/records?" + urlencode(query | {"cursor": encode_cursor(shown[-1].id)})
    first_url = "/catalog/records" + (f"?{urlencode(query)}" if query else "") if cursor else None
    return render(request, "catalog/records.html", viewer, area="catalog", filters=filters, statuses=STATUSES,
                  records=[record_document(r) for r in shown], next_url=next_url, first_url=first_url)


@router.get("/catalog/records/{record_id}", response_class=HTMLResponse)
def explain_page(request: Request, record_id: RecordId, viewer: Viewer = Look,
                 now: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    """Why the record is kept or deleted, as of `now` (epoch ms or ISO-8601; default the server's now)."""
    catalog = viewer.client.catalog
    record = record_document(catalog.get(record_id))
    explanation = catalog.explain(record_id, now_ms=now_of(now or None)).to_dict()
    return render(request, "catalog/explain.html", viewer, area="catalog", record=record, explain=explanation)
