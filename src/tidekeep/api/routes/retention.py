"""Size and time retention of a stream: preview, run, history, the retention set and the
subscribers that hold the stream back (the CLI's `tidekeep retention`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...errors import InvalidInput
from ...integers import INT64_MAX
from ...streams.documents import decision_document, history_record, subscriber_json
from ...times import parse_time_ms
from ...units import parse_duration_ms
from ..models import Page
from ..paging import DEFAULT_LIMIT, decode_cursor, encode_cursor, page_of
from ..state import Caller, Operator, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["retention"])

STREAM = "/scopes/{scope}/streams/{stream}"


def decision_time(text: str, now_ms: int) -> int:
    """`at`: "+DURATION" from now (e.g. +2h), or a time (epoch ms or ISO-8601), as `retention preview --at`."""
    stripped = text.strip()
    if stripped.startswith("+"):
        return now_ms + parse_duration_ms(stripped[1:])
    return parse_time_ms(stripped, "at")


@router.get(STREAM + "/retention/preview",
            summary="What a retention cycle would do now: the set, Cmin, Cmax, the case, the cut and the reason")
def preview(scope: str, stream: str, call: Caller = Reader,
            at: Annotated[str | None, Query(description="decide as of: +DURATION from now, ISO-8601 or epoch ms")]
            = None) -> dict[str, Any]:
    handle = call.client.stream(call.stream(scope, stream))
    now = None if at is None else decision_time(at, call.client.clock.now_ms())
    return decision_document(handle.retention.preview(now), dry_run=True)


@router.post(STREAM + "/retention/run", summary="Run one retention cycle now (a truncation is audited)")
def run(scope: str, stream: str, call: Caller = Operator) -> dict[str, Any]:
    return decision_document(call.client.stream(call.stream(scope, stream)).retention.run(), dry_run=False)


@router.get(STREAM + "/retention/history", summary="Past truncations of the stream, newest first")
def history(scope: str, stream: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
            cursor: Cursor = None) -> Page[dict[str, Any]]:
    handle = call.client.stream(call.stream(scope, stream))
    entries = handle.retention.history(limit + 1, before_id=_before_id(cursor))
    more = len(entries) > limit
    entries = entries[:limit]
    return Page[dict[str, Any]](items=[history_record(e) for e in entries],
                                next_cursor=encode_cursor(entries[-1]["id"]) if more else None)


def _before_id(cursor: str | None) -> int | None:
    """The audit row id a history cursor names (the last entry of the page before)."""
    if cursor is None:
        return None
    before = decode_cursor(cursor)
    if not isinstance(before, int) or isinstance(before, bool) or not 0 <= before <= INT64_MAX:
        raise InvalidInput("invalid cursor: it belongs to another list")
    return before


@router.get(STREAM + "/retention/records", summary="The stream's retention set: recorded tail cuts, oldest first")
def records(scope: str, stream: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
            cursor: Cursor = None) -> Page[dict[str, Any]]:
    found = call.client.stream(call.stream(scope, stream)).retention.records()
    documents = [r.to_dict() for r in found]
    items, after = page_of(documents, lambda r: [r["recording_time_ms"], r["recording_size"]], cursor, limit)
    return Page[dict[str, Any]](items=items, next_cursor=after)


@router.get(STREAM + "/subscribers",
            summary="The reader groups that hold the stream back: acknowledged cut, its age, unconsumed bytes")
def subscribers(scope: str, stream: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
                cursor: Cursor = None) -> Page[dict[str, Any]]:
    found = call.client.stream(call.stream(scope, stream)).subscribers()
    now = call.client.clock.now_ms()
    documents = sorted((subscriber_json(s, now) for s in found), key=lambda d: str(d["reader_group"]))
    items, after = page_of(documents, lambda d: d["reader_group"], cursor, limit)
    return Page[dict[str, Any]](items=items, next_cursor=after)
