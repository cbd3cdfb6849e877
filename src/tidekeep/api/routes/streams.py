"""Scopes and streams: create, list, describe, update policy, seal, delete, scale/split/merge,
head and tail cuts, truncate, size between cuts (the CLI's `tidekeep scope` and `stream`)."""

from __future__ import annotations

import base64
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InvalidInput, NotFound
from ...store.deletion import files_left_json
from ...stream_handle import Stream
from ...streams.config import RetentionKind, RetentionPolicy, StreamConfig
from ...streams.controller import StreamInfo, TruncateResult
from ...streams.cuts import StreamCut
from ..etags import if_match_int, set_etag
from ..jobs import ProgressCallback
from ..models import Accepted, Page, PolicyBody, accepted
from ..paging import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor, page_of
from ..state import Admin, Caller, Operator, Reader

router = APIRouter(tags=["streams"])

Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="at most this many items")]
Cursor = Annotated[str | None, Query(description="next_cursor of the previous page")]


class StreamSummary(BaseModel):
    name: str
    state: str
    current_epoch: int
    created_ms: int
    config_version: int
    retention: dict[str, Any] | None
    retention_text: str | None
    timestamp_aggregation_timeout_ms: int


def summary(info: StreamInfo) -> StreamSummary:
    policy = info.config.retention
    return StreamSummary(name=info.name, state=info.state.value, current_epoch=info.current_epoch,
                         created_ms=info.created_ms, config_version=info.config_version,
                         retention=None if policy is None else policy.to_dict(),
                         retention_text=None if policy is None else policy.describe(),
                         timestamp_aggregation_timeout_ms=info.config.timestamp_aggregation_timeout_ms)


def policy_of(body: PolicyBody | None) -> RetentionPolicy | None:
    if body is None:
        return None
    if body.kind == RetentionKind.SIZE.value:
        return RetentionPolicy.by_size(body.min, body.max)
    return RetentionPolicy.by_time(body.min, body.max)


# ---- scopes ----------------------------------------------------------------------------------------
class ScopeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str


@router.get("/scopes", summary="List scopes")
def list_scopes(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Page[str]:
    scopes = [s for s in call.client.list_scopes() if call.principal.sees_scope(s)]
    items, after = page_of(sorted(scopes), lambda s: s, cursor, limit)
    return Page[str](items=items, next_cursor=after)


@router.post("/scopes", status_code=201, summary="Create a scope")
def create_scope(body: ScopeBody, response: Response, call: Caller = Admin) -> dict[str, Any]:
    call.principal.require_unscoped("creating a scope")
    created = call.client.create_scope(body.name)
    if not created:
        response.status_code = 200
    return {"name": body.name, "created": created}


@router.delete("/scopes/{scope}", summary="Delete an empty scope")
def delete_scope(scope: str, call: Caller = Admin) -> dict[str, Any]:
    call.principal.require_scope(scope)
    call.client.delete_scope(scope)
    return {"name": scope, "deleted": True}


# ---- streams ---------------------------------------------------------------------------------------
class CreateStreamBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(description="the stream's name within the scope")
    segments: int = Field(1, ge=1, le=10_000)
    retention: PolicyBody | None = None
    timestamp_aggregation_timeout: str | int = "60s"


class UpdateStreamBody(BaseModel):
    """The stream's new config: its retention policy (null: none) and watermark timeout."""

    model_config = ConfigDict(extra="forbid")
    retention: PolicyBody | None = None
    timestamp_aggregation_timeout: str | int | None = None


@router.get("/streams", summary="List the streams of every scope the token reaches")
def list_all_streams(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Page[StreamSummary]:
    try:
        return stream_page(call, call.principal.scope, cursor, limit)  # a scoped token sees its own scope
    except NotFound:  # the token's scope has no stream yet
        return Page[StreamSummary](items=[], next_cursor=None)


@router.get("/scopes/{scope}/streams", summary="List a scope's streams")
def list_streams(scope: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
                 cursor: Cursor = None) -> Page[StreamSummary]:
    call.principal.require_scope(scope)
    return stream_page(call, scope, cursor, limit)


def stream_page(call: Caller, scope: str | None, cursor: str | None, limit: int) -> Page[StreamSummary]:
    """A keyset page in (scope, name) order, read in the store: the cursor is the last stream's
    [scope, name] (a name as text does not sort as the pair: "a-b/x" < "a/y" but ("a", …) < ("a-b", …))."""
    after = None
    if cursor is not None:
        key = decode_cursor(cursor)
        if not (isinstance(key, list) and len(key) == 2 and all(isinstance(part, str) for part in key)):
            raise InvalidInput("invalid cursor: it belongs to another list")
        after = (key[0], key[1])
    infos = call.client.list_streams(scope, after=after, limit=limit + 1)
    shown = infos[:limit]
    following = encode_cursor(shown[-1].name.split("/", 1)) if shown and len(infos) > limit else None
    return Page[StreamSummary](items=[summary(i) for i in shown], next_cursor=following)


@router.post("/scopes/{scope}/streams", status_code=201, summary="Create a stream (and its scope, if new)")
def create_stream(scope: str, body: CreateStreamBody, response: Response, call: Caller = Operator) -> StreamSummary:
    name = call.stream(scope, body.name)
    config = StreamConfig(segments=body.segments, retention=policy_of(body.retention),
                          timestamp_aggregation_timeout=body.timestamp_aggregation_timeout)
    info = call.client.create_stream(name, config)
    set_etag(response, info.config_version)
    response.headers["Location"] = f"/api/v1/scopes/{scope}/streams/{body.name}"
    return summary(info)


@router.get("/scopes/{scope}/streams/{stream}", summary="Describe a stream: epochs, segments, head, tail, size")
def describe_stream(scope: str, stream: str, response: Response, call: Caller = Reader) -> dict[str, Any]:
    described = call.client.stream(call.stream(scope, stream)).describe()
    set_etag(response, described["config_version"])
    return described


@router.put("/scopes/{scope}/streams/{stream}", summary="Update a stream's retention policy and watermark timeout")
def update_stream(scope: str, stream: str, body: UpdateStreamBody, response: Response, call: Caller = Operator,
                  if_match: Annotated[str | None, Header(description="the ETag read before: a stale edit gets 412")]
                  = None) -> StreamSummary:
    handle = call.client.stream(call.stream(scope, stream))
    expected = if_match_int(if_match)
    current = handle.state().info.config  # the rest of the config stays as stored
    timeout = body.timestamp_aggregation_timeout
    config = StreamConfig(segments=current.segments, retention=policy_of(body.retention),
                          timestamp_aggregation_timeout=current.timestamp_aggregation_timeout_ms
                          if timeout is None else timeout)
    info = handle.update(config, expected)
    set_etag(response, info.config_version)
    return summary(info)


@router.post("/scopes/{scope}/streams/{stream}/seal", summary="Seal a stream: it takes no more writes")
def seal_stream(scope: str, stream: str, call: Caller = Operator) -> dict[str, Any]:
    sealed = call.client.stream(call.stream(scope, stream)).seal()
    return {"stream": f"{scope}/{stream}", "sealed": sealed}


@router.delete("/scopes/{scope}/streams/{stream}", summary="Delete a sealed stream and its data")
def delete_stream(scope: str, stream: str, call: Caller = Operator,
                  force: Annotated[bool, Query(description="seal an active stream first")] = False) -> dict[str, Any]:
    result = call.client.stream(call.stream(scope, stream)).delete(force=force)
    return {"stream": result.stream, "bytes_freed": result.bytes_freed, "sealed_first": result.sealed_first,
            "files_left": files_left_json(result.files_left)}


# ---- scaling ---------------------------------------------------------------------------------------
class ScaleBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    seal: list[str | int] = Field(min_length=1, description="segments to seal (\"epoch.number\" or ids)")
    new_ranges: list[tuple[float, float]] = Field(min_length=1, description="key ranges [low, high) replacing them")


class SplitBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    segment: str | int
    parts: int = Field(2, ge=2, le=1000)


class MergeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    segments: list[str | int] = Field(min_length=2)


def _scaled(name: str, segments: list[Any]) -> dict[str, Any]:
    from ...streams.model import segment_name

    return {"stream": name, "epoch": segments[0].epoch if segments else None,
            "new_segments": [{"segment": segment_name(s.id), "epoch": s.epoch, "key_range": [s.key_low, s.key_high]}
                             for s in segments]}


@router.post("/scopes/{scope}/streams/{stream}/scale", summary="Seal segments and add new ones over their key ranges")
def scale_stream(scope: str, stream: str, body: ScaleBody, call: Caller = Operator) -> dict[str, Any]:
    name = call.stream(scope, stream)
    return _scaled(name, call.client.stream(name).scale(body.seal, body.new_ranges))


@router.post("/scopes/{scope}/streams/{stream}/split", summary="Split a segment into equal parts")
def split_segment(scope: str, stream: str, body: SplitBody, call: Caller = Operator) -> dict[str, Any]:
    name = call.stream(scope, stream)
    return _scaled(name, call.client.stream(name).split(body.segment, body.parts))


@router.post("/scopes/{scope}/streams/{stream}/merge", summary="Merge adjacent segments into one")
def merge_segments(scope: str, stream: str, body: MergeBody, call: Caller = Operator) -> dict[str, Any]:
    name = call.stream(scope, stream)
    return _scaled(name, call.client.stream(name).merge(body.segments))


# ---- cuts and truncation ---------------------------------------------------------------------------
def cut_of(handle: Stream, text: str) -> StreamCut | str:
    """"head", "tail", or a cut in compact or JSON form (validated against the stream by the client)."""
    keyword = text.strip().lower()
    if keyword == "head":
        return handle.head_cut()
    if keyword == "tail":
        return handle.tail_cut()
    return text


def cut_document(cut: StreamCut) -> dict[str, Any]:
    """A cut in compact form (`cut`) and in JSON form with key ranges (`json`, as
    `tidekeep stream head --json` prints it)."""
    return {"cut": str(cut), "json": cut.to_dict()}


@router.get("/scopes/{scope}/streams/{stream}/head", summary="The stream's head cut")
def head_cut(scope: str, stream: str, call: Caller = Reader) -> dict[str, Any]:
    return cut_document(call.client.stream(call.stream(scope, stream)).head_cut())


@router.get("/scopes/{scope}/streams/{stream}/tail", summary="The stream's tail cut")
def tail_cut(scope: str, stream: str, call: Caller = Reader) -> dict[str, Any]:
    return cut_document(call.client.stream(call.stream(scope, stream)).tail_cut())


@router.get("/scopes/{scope}/streams/{stream}/size", summary="Logical bytes between two cuts")
def size_between(scope: str, stream: str, call: Caller = Reader,
                 start: Annotated[str, Query(alias="from", description="a cut, or 'head'")] = "head",
                 end: Annotated[str, Query(alias="to", description="a cut, or 'tail'")] = "tail") -> dict[str, Any]:
    handle = call.client.stream(call.stream(scope, stream))
    return {"from": start, "to": end, "size_bytes": handle.size_between(cut_of(handle, start), cut_of(handle, end))}


class TruncateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cut: str = Field(description="the new head: a stream cut (as `stream head`/`tail` print it), or 'tail'")
    reason: str = "manual truncation"


# ---- writing events -----------------------------------------------------------------------------------
MAX_EVENTS_PER_REQUEST = 10_000


class EventBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    data: str = Field(description="the payload: text (UTF-8) or, with encoding base64, its bytes in base64")
    routing_key: str | None = Field(None, description="events with one key are read in the order written")


class WriteEventsBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    events: list[EventBody] = Field(min_length=1, max_length=MAX_EVENTS_PER_REQUEST)
    encoding: Literal["utf-8", "base64"] = "utf-8"
    writer_id: str | None = Field(None, description="the writer's id (default api-<token name>); a request "
                                  "fences an earlier writer of the same id, as a new Writer does")


@router.post("/scopes/{scope}/streams/{stream}/events", status_code=201,
             summary="Write events: committed, durable and readable when the answer comes")
def write_events(scope: str, stream: str, body: WriteEventsBody, call: Caller = Operator) -> dict[str, Any]:
    name = call.stream(scope, stream)
    payloads = [payload_of(event.data, body.encoding, i) for i, event in enumerate(body.events)]
    writer_id = body.writer_id or f"api-{call.principal.name}"
    handle = call.client.stream(name)
    with handle.writer(writer_id) as writer:
        written = writer.write_many(payloads, [event.routing_key for event in body.events])
    return {"stream": name, "writer_id": writer_id, "events": written, "tail": str(handle.tail_cut())}


def payload_of(data: str, encoding: str, index: int) -> bytes:
    if encoding == "utf-8":
        return data.encode()
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise InvalidInput(f"events[{index}].data: not base64") from None


@router.post("/scopes/{scope}/streams/{stream}/truncate", summary="Truncate the stream at a cut (audited)")
def truncate(scope: str, stream: str, body: TruncateBody, call: Caller = Operator) -> dict[str, Any]:
    if not body.reason.strip():
        raise InvalidInput("the reason must not be empty")
    handle = call.client.stream(call.stream(scope, stream))
    return truncated_document(handle.truncate(cut_of(handle, body.cut), body.reason))


class CompactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target_size: int | str | None = Field(
        default=None, description="merge adjacent chunks below this size (bytes or e.g. '8MiB'); "
                                  "default: the setting chunks.target_size")


@router.post("/scopes/{scope}/streams/{stream}/compact", status_code=202,
             summary="Compact the stream's small chunks (a job; result: chunks before and after)")
def compact(scope: str, stream: str, response: Response, call: Caller = Operator,
            body: CompactBody | None = None) -> Accepted:
    handle = call.client.stream(call.stream(scope, stream))
    handle.state()  # an unknown stream is a 404 and a bad size a 422 now, not a failed job
    target = handle.compaction_target(None if body is None else body.target_size)

    def work(progress: ProgressCallback) -> dict[str, Any]:
        return handle.compact(target, progress=lambda done, total: progress(done, total, "groups merged")).to_dict()

    return accepted(response, call.state.jobs.submit("stream-compact", call.principal.name, work,
                                                     call.principal.scope).id)


def truncated_document(result: TruncateResult) -> dict[str, Any]:
    """A truncation's result: the heads before and after, what it freed (the dashboard shows the same)."""
    return {"stream": result.stream, "old_head": str(result.old_head), "new_head": str(result.new_head),
            "bytes_freed": result.bytes_freed, "chunks_deleted": result.chunks_deleted,
            "files_left": files_left_json(result.files_left)}
