"""The audit trail (the CLI's `tidekeep audit list`): filtered by target, action, actor and time,
newest first, paged by row id in the store (one keyset query a page)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, Response

from ...store.audit import AuditFilter
from ...streams.documents import audit_document
from ...times import parse_time_ms
from ..models import Page
from ..paging import DEFAULT_LIMIT, decode_id_cursor, encode_cursor
from ..state import UNSCOPED, Caller, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["audit"])

TimeBound = Annotated[str | None, Query(description="epoch milliseconds or an ISO-8601 time (no zone: UTC)")]


@router.get("/audit/anchor", summary="The audit chain's head (id, hash, time): keep it elsewhere as an anchor",
            dependencies=UNSCOPED)
def anchor(call: Caller = Reader) -> dict[str, Any]:
    return call.client.audit_head()


@router.get("/audit/verify", summary="Re-compute the audit chain: the first row changed, deleted or inserted, "
            "and whether an anchor is in the trail", dependencies=UNSCOPED)
def verify(call: Caller = Reader,
           anchor: Annotated[str | None, Query(description="a head kept elsewhere ('audit anchor'): prove the "
                                                           "trail up to it unchanged")] = None) -> dict[str, Any]:
    # the trail is the workspace's, not a scope's: a scoped token is refused (UNSCOPED)
    return call.client.audit_verify(anchor).to_dict()


@router.get("/audit", summary="The audit trail, newest first")
def list_audit(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
               target: Annotated[str | None, Query(description="only this target (a stream 'scope/name', ...)")]
               = None,
               action: Annotated[str | None, Query(description="only this action (truncate, hold_add, ...)")] = None,
               actor: Annotated[str | None, Query(description="only rows by this actor (a token's name)")] = None,
               since: TimeBound = None, until: TimeBound = None) -> Page[dict[str, Any]]:
    where = AuditFilter(target=target, action=action, actor=actor,
                        since_ms=None if since is None else parse_time_ms(since, "since"),
                        until_ms=None if until is None else parse_time_ms(until, "until", round_up=True),
                        # a scoped token sees the rows of its scope's streams only
                        target_prefix=None if call.principal.scope is None else f"{call.principal.scope}/")
    rows = call.client.audit_page(where, limit + 1, decode_id_cursor(cursor))
    more = len(rows) > limit
    rows = rows[:limit]
    return Page[dict[str, Any]](items=[audit_document(r) for r in rows],
                                next_cursor=encode_cursor(rows[-1]["id"]) if more else None)


# ---- deletion reports (docs/audit-reports.md) ----------------------------------------------------------
REPORT_TYPES = {"json": "application/json", "csv": "text/csv; charset=utf-8", "pdf": "application/pdf"}
SIGNATURE_HEADER = "X-Tidekeep-Signature"  # the report's signature (its JSON and PDF carry it too)


@router.get("/audit/report", summary="The deletions of a window per family, the holds in force, signed with the "
            "audit chain's hash (as `tidekeep audit report`)", response_model=None,
            responses={200: {"description": "the report as JSON, CSV or PDF (format)", "content": {
                "application/json": {"schema": {"type": "object"}}, "text/csv": {"schema": {"type": "string"}},
                "application/pdf": {"schema": {"type": "string", "format": "binary"}}}}})
def audit_report(*, call: Caller = Reader,
                 since: Annotated[str, Query(description="the window's start, included: epoch milliseconds or "
                                                         "ISO-8601 (no zone: UTC)")],
                 until: Annotated[str, Query(description="the window's end, included")],
                 format: Annotated[Literal["json", "csv", "pdf"], Query(description="json, csv or pdf")] = "json",
                 ) -> Response:
    from ...store.audit_report import report_document
    from ...store.audit_report_render import report_csv, report_pdf

    since_ms, until_ms = parse_time_ms(since, "since"), parse_time_ms(until, "until", round_up=True)
    # a scoped token's report covers its scope's streams only, as its audit list does
    document = report_document(call.client.audit_report(since_ms, until_ms, call.principal.scope))
    signature = document["signature"]["row_hash"]
    headers = {SIGNATURE_HEADER: signature} if signature else {}
    if format == "json":
        return JSONResponse(document, headers=headers)
    headers["Content-Disposition"] = f'attachment; filename="tidekeep-deletions-{since_ms}-{until_ms}.{format}"'
    body = report_csv(document).encode("utf-8") if format == "csv" else report_pdf(document)
    return Response(body, media_type=REPORT_TYPES[format], headers=headers)
