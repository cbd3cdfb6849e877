"""The audit trail: filtered by action, actor, target and time, newest first, keyset-paged in the
store (store/audit.py `audit_page`, one query a page, as the API's audit route), and as CSV, read a
batch at a time while it is sent. Workspace-wide: unscoped tokens only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import HTMLResponse

from ...integers import INT64_MAX
from ...store.audit import AuditFilter
from ...streams.documents import audit_document
from ...times import parse_time_ms
from ..auth import UNSCOPED_PAGES, Look, Viewer
from ..csv_export import csv_response
from ..render import render

router = APIRouter(dependencies=UNSCOPED_PAGES)

PAGE_SIZE = 50
CSV_BATCH = 1000
CSV_HEADER = ("id", "time", "action", "target", "bytes_freed", "reason", "actor", "old_head", "new_head", "details")


@dataclass(frozen=True)
class AuditQuery:
    """The filter as the form and links carry it (times as typed: epoch ms or ISO-8601, UTC)."""

    action: str | None
    actor: str | None
    target: str | None
    since: str | None
    until: str | None

    def store_filter(self) -> AuditFilter:
        return AuditFilter(target=self.target, action=self.action, actor=self.actor,
                           since_ms=None if self.since is None else parse_time_ms(self.since, "since"),
                           until_ms=None if self.until is None else parse_time_ms(self.until, "until", round_up=True))

    def query_string(self, **extra: str) -> str:
        pairs = {"action": self.action, "actor": self.actor, "target": self.target, "since": self.since,
                 "until": self.until, **extra}
        return urlencode({k: v for k, v in pairs.items() if v})


def _given(value: str | None) -> str | None:
    return value.strip() or None if value is not None else None


Text = Annotated[str | None, Query(max_length=600)]


def audit_query(action: Text = None, actor: Text = None, target: Text = None, since: Text = None,
                until: Text = None) -> AuditQuery:
    return AuditQuery(_given(action), _given(actor), _given(target), _given(since), _given(until))


Filters = Depends(audit_query)
Cursor = Annotated[int | None, Query(ge=1, le=INT64_MAX, description="the last row id of the previous page")]


def audit_rows(viewer: Viewer, where: AuditFilter, limit: int,
               before: int | None) -> tuple[list[dict[str, Any]], int | None]:
    """One page of rows as the API documents them, newest first, and the cursor of the next page."""
    rows = viewer.client.audit_page(where, limit + 1, before)
    more = len(rows) > limit
    rows = rows[:limit]
    return [audit_document(r) for r in rows], int(rows[-1]["id"]) if more else None


@router.get("/audit", response_class=HTMLResponse)
def audit_page(request: Request, viewer: Viewer = Look, cursor: Cursor = None,
               query: AuditQuery = Filters) -> HTMLResponse:
    rows, after = audit_rows(viewer, query.store_filter(), PAGE_SIZE, cursor)
    return render(request, "audit/list.html", viewer, area="audit", rows=rows, query=query,
                  next_url=None if after is None else f"/audit?{query.query_string(cursor=str(after))}",
                  first_url=f"/audit?{query.query_string()}" if cursor is not None else None,
                  csv_url=f"/audit.csv?{query.query_string()}")


@router.get("/audit.csv")
def audit_csv(viewer: Viewer = Look, query: AuditQuery = Filters) -> Response:
    where = query.store_filter()  # a bad time is refused before the download starts

    def rows() -> Iterator[tuple[Any, ...]]:
        before = None
        while True:
            batch, before = audit_rows(viewer, where, CSV_BATCH, before)
            for d in batch:
                yield (d["id"], d["time"], d["action"], d["target"], d["bytes_freed"], d["reason"], d["actor"],
                       d["old_head"], d["new_head"], None if d["details"] is None else _json(d["details"]))
            if before is None:
                return

    return csv_response("audit.csv", CSV_HEADER, rows())


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
