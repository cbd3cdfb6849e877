"""Transactions of transactional writers: list and abort (the CLI's `tidekeep txn`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...streams.documents import aborted_document, txn_record
from ..models import Page
from ..paging import DEFAULT_LIMIT, page_of
from ..state import Caller, Operator, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["transactions"])


@router.get("/transactions", summary="Transactions (open, committed, aborted), oldest first")
def list_transactions(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
                      stream: Annotated[str | None, Query(description="only this stream (scope/stream)")] = None,
                      ) -> Page[dict[str, Any]]:
    if stream is not None:
        call.principal.require_stream(stream)
    infos = [i for i in call.client.transactions.list(stream) if call.principal.sees_scope(i.stream.split("/")[0])]
    items, after = page_of(infos, lambda i: [i.created_ms, i.id], cursor, limit)
    return Page[dict[str, Any]](items=[txn_record(i) for i in items], next_cursor=after)


@router.post("/transactions/{txn_id}/abort", summary="Abort an open transaction and delete its staged events")
def abort(txn_id: str, call: Caller = Operator) -> dict[str, Any]:
    call.principal.require_stream(call.client.transactions.info(txn_id).stream)
    result = call.client.transactions.abort(txn_id)
    return aborted_document(txn_id, result.aborted, result.files_left)
