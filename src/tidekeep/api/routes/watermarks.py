"""A stream's watermarks and the writer marks behind them (the CLI's `tidekeep watermark`); a reader
group's time window is under the group (routes/readergroups.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InvalidInput, NotFound
from ...integers import INT64_MAX
from ...streams.documents import computed_document, writer_json
from ...times import parse_time_ms
from ..models import Page
from ..paging import DEFAULT_LIMIT, decode_cursor, encode_cursor, page_of
from ..state import Caller, Operator, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["watermarks"])

WATERMARKS = "/scopes/{scope}/streams/{stream}/watermarks"
COMPUTED_BY = "api"  # who computed a watermark (the service names its owner id, the CLI "cli")


class NoteBody(BaseModel):
    """A writer mark: `writer` has reached `time` (epoch ms or ISO-8601, no zone: UTC) at `position`
    (a cut; default: after the writer's last committed event)."""

    model_config = ConfigDict(extra="forbid")
    writer: str
    time: int | str = Field(description="the writer's time: epoch milliseconds or ISO-8601")
    position: str | None = None


def _after_revision(cursor: str | None) -> int | None:
    """The revision a watermark cursor names (the last of the page before)."""
    if cursor is None:
        return None
    after = decode_cursor(cursor)
    if not isinstance(after, int) or isinstance(after, bool) or not 0 <= after <= INT64_MAX:
        raise InvalidInput("invalid cursor: it belongs to another list")
    return after


@router.get(WATERMARKS, summary="A stream's watermarks, oldest first (paged by revision)")
def list_watermarks(scope: str, stream: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
                    cursor: Cursor = None) -> Page[dict[str, Any]]:
    handle = call.client.stream(call.stream(scope, stream))
    marks = handle.watermarks.list(_after_revision(cursor), limit + 1)
    more = len(marks) > limit
    marks = marks[:limit]
    return Page[dict[str, Any]](items=[m.to_dict() for m in marks],
                                next_cursor=encode_cursor(marks[-1].revision) if more else None)


@router.get(WATERMARKS + "/latest", summary="A stream's newest watermark (404 while it has none)")
def latest_watermark(scope: str, stream: str, call: Caller = Reader) -> dict[str, Any]:
    name = call.stream(scope, stream)
    mark = call.client.stream(name).watermarks.latest()
    if mark is None:
        raise NotFound(f"stream {name} has no watermarks yet")
    return mark.to_dict()


@router.get(WATERMARKS + "/writers", summary="Each writer's last mark and whether it holds watermarks back")
def writers(scope: str, stream: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
            cursor: Cursor = None) -> Page[dict[str, Any]]:
    statuses = call.client.stream(call.stream(scope, stream)).watermarks.writers()
    documents = sorted((writer_json(s) for s in statuses), key=lambda d: str(d["writer_id"]))
    items, after = page_of(documents, lambda d: d["writer_id"], cursor, limit)
    return Page[dict[str, Any]](items=items, next_cursor=after)


@router.post(WATERMARKS + "/compute", summary="Compute and append the stream's next watermark now")
def compute(scope: str, stream: str, call: Caller = Operator) -> dict[str, Any]:
    handle = call.client.stream(call.stream(scope, stream))
    mark = handle.watermarks.compute(owner=COMPUTED_BY)
    return computed_document(mark, [] if mark is not None else handle.watermarks.writers())


@router.post(WATERMARKS + "/notes", status_code=201, summary="Record a writer mark (for writers outside tidekeep)")
def note(scope: str, stream: str, body: NoteBody, call: Caller = Operator) -> dict[str, Any]:
    handle = call.client.stream(call.stream(scope, stream))
    return handle.watermarks.note(body.writer, parse_time_ms(body.time, "time"), body.position).to_dict()
