"""Reader groups: create, list, describe, reset, delete, checkpoints, a subscriber group's
acknowledged cuts and the group's time window (the CLI's `tidekeep rg`).

A reader group belongs to no scope of its own: a scoped token reaches a group only when every
stream the group reads lies in the token's scope (docs/api.md, "Reader groups")."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InvalidInput, NotFound
from ...streams.config import RetentionType
from ...streams.cuts import StreamCut
from ...streams.documents import acknowledged_document, checkpoint_document, reset_document
from ...streams.readergroup import CheckpointTimeout, ReaderGroup, ReaderGroupConfig
from ...streams.rg_reset import ResetTarget, apply_reset, plan_reset
from ..models import Page
from ..paging import DEFAULT_LIMIT, page_of
from ..state import Caller, Operator, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["reader groups"])

GROUPS = "/reader-groups"
MAX_CHECKPOINT_WAIT_S = 60.0


class GroupSummary(BaseModel):
    name: str
    streams: list[str]


class StreamBounds(BaseModel):
    """Where the group starts and ends in one stream (null: the head; no end)."""

    model_config = ConfigDict(extra="forbid")
    start: str | None = None
    end: str | None = None


class CreateGroupBody(BaseModel):
    """`streams`: names read from their heads, or {stream: start cut} (a cut, or null for the head),
    or {stream: {start, end}}."""

    model_config = ConfigDict(extra="forbid")
    name: str
    streams: list[str] | dict[str, StreamBounds | str | None] = Field(min_length=1)
    retention_type: str = Field("NONE", description="NONE | MANUAL_RELEASE_AT_USER_STREAMCUT | "
                                                    "AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")
    checkpoint_interval: str | int | None = Field(None, description="automatic checkpoints, e.g. \"30s\"")
    max_outstanding_checkpoints: int = Field(3, ge=1, le=1000)
    skip_truncated: bool = False

    def stream_names(self) -> list[str]:
        return list(self.streams)

    def config(self) -> ReaderGroupConfig:
        streams: list[str] | dict[str, tuple[str | None, str | None]]
        if isinstance(self.streams, list):
            streams = list(self.streams)
        else:
            streams = {name: (b.start, b.end) if isinstance(b, StreamBounds) else (b, None)
                       for name, b in self.streams.items()}
        return ReaderGroupConfig(streams=streams, retention_type=RetentionType.named(self.retention_type),
                                 automatic_checkpoint_interval=self.checkpoint_interval,
                                 max_outstanding_checkpoints=self.max_outstanding_checkpoints,
                                 skip_truncated=self.skip_truncated)


class ResetBody(BaseModel):
    """`to`: head, tail, cut (with `cuts`, one per stream) or checkpoint (with `checkpoint`); left
    out, it is "cut" when cuts are given and "checkpoint" when a checkpoint is."""

    model_config = ConfigDict(extra="forbid")
    to: Literal["head", "tail", "cut", "checkpoint"] | None = None
    cuts: list[str] | None = None
    checkpoint: str | None = None
    force: bool = Field(False, description="reset even while readers are online")
    dry_run: bool = Field(False, description="show the new positions; change nothing")

    def target(self) -> ResetTarget:
        to = self.to or ("cut" if self.cuts else "checkpoint" if self.checkpoint is not None else None)
        if to is None:
            raise InvalidInput("say where to reset to: to = head, tail, cut (with cuts) "
                               "or checkpoint (with checkpoint)")
        if to != "cut" and self.cuts:
            raise InvalidInput(f"cuts are given only with to = cut, not to = {to}")
        if to != "checkpoint" and self.checkpoint is not None:
            raise InvalidInput(f"checkpoint is given only with to = checkpoint, not to = {to}")
        if to == "cut":
            if not self.cuts:
                raise InvalidInput("to = cut needs the cuts: one per stream of the group")
            return ResetTarget.to_cuts(self.cuts)
        if to == "checkpoint":
            if self.checkpoint is None:
                raise InvalidInput("to = checkpoint needs the checkpoint's name")
            return ResetTarget.to_checkpoint(self.checkpoint)
        return ResetTarget.head() if to == "head" else ResetTarget.tail()


class CheckpointBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    wait: float = Field(30.0, ge=0, le=MAX_CHECKPOINT_WAIT_S,
                        description="seconds to wait for the online readers to pass it (then 202: pending)")


class RetentionCutBody(BaseModel):
    """Acknowledged cuts of a MANUAL_RELEASE_AT_USER_STREAMCUT group, one per stream (compact or JSON)."""

    model_config = ConfigDict(extra="forbid")
    cuts: list[str] = Field(min_length=1)


def group_of(call: Caller, name: str) -> ReaderGroup:
    """The group's handle, after checking the token reaches every stream it reads."""
    group = call.client.reader_group(name)
    for stream in group.config["streams"]:
        call.principal.require_stream(stream)
    return group


def visible_groups(call: Caller) -> list[GroupSummary]:
    """Every reader group the caller reaches (a scoped token: those reading only its scope), by name."""
    summaries = []
    for name in sorted(call.client.list_reader_groups()):
        try:
            streams = sorted(call.client.reader_group(name).config["streams"])
        except NotFound:  # deleted since it was listed
            continue
        if call.principal.scope is None or all(s.split("/")[0] == call.principal.scope for s in streams):
            summaries.append(GroupSummary(name=name, streams=streams))
    return summaries


@router.get(GROUPS, summary="List reader groups (a scoped token: those reading only its scope)")
def list_groups(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Page[GroupSummary]:
    items, after = page_of(visible_groups(call), lambda g: g.name, cursor, limit)
    return Page[GroupSummary](items=items, next_cursor=after)


@router.post(GROUPS, status_code=201, summary="Create a reader group at its start cuts (default: the heads)")
def create_group(body: CreateGroupBody, response: Response, call: Caller = Operator) -> dict[str, Any]:
    for stream in body.stream_names():
        call.principal.require_stream(stream)
    described = call.client.create_reader_group(body.name, body.config()).describe()
    response.headers["Location"] = f"/api/v1{GROUPS}/{body.name}"
    return described


@router.get(GROUPS + "/{name}", summary="Describe a reader group: readers, assignments, positions, subscriptions")
def describe_group(name: str, call: Caller = Reader) -> dict[str, Any]:
    return group_of(call, name).describe()


@router.delete(GROUPS + "/{name}", summary="Delete a reader group (stream data is untouched)")
def delete_group(name: str, call: Caller = Operator) -> dict[str, Any]:
    group_of(call, name)
    call.client.delete_reader_group(name)
    return {"deleted": name}


@router.post(GROUPS + "/{name}/reset", summary="Move a reader group to new positions (a new generation)")
def reset_group(name: str, body: ResetBody, call: Caller = Operator) -> dict[str, Any]:
    target = body.target()
    group = group_of(call, name)
    plan = plan_reset(group, target)
    generation = None if body.dry_run else apply_reset(group, plan, allow_online_readers=body.force)
    return reset_document(plan, body.dry_run, generation)


# ---- checkpoints -----------------------------------------------------------------------------------
@router.get(GROUPS + "/{name}/checkpoints", summary="The group's completed checkpoints (with cuts) and pending ones")
def list_checkpoints(name: str, call: Caller = Reader) -> dict[str, Any]:
    group = group_of(call, name)
    return {"reader_group": name, "completed": [checkpoint_document(c) for c in group.checkpoints()],
            "pending": group.pending_checkpoints()}


@router.post(GROUPS + "/{name}/checkpoints", status_code=201,
             summary="Initiate a checkpoint and wait for the online readers to pass it",
             responses={202: {"description": "still pending after `wait` seconds: poll GET .../checkpoints"}})
def initiate_checkpoint(name: str, body: CheckpointBody, response: Response, call: Caller = Operator) -> dict[str, Any]:
    handle = group_of(call, name).initiate_checkpoint(body.name)
    response.headers["Location"] = f"/api/v1{GROUPS}/{name}/checkpoints"
    try:
        return checkpoint_document(handle.wait(body.wait))
    except CheckpointTimeout:
        response.status_code = 202
        return {"name": body.name, "created": None, "completed": None, "cuts": {}}


# ---- consumption-based retention -------------------------------------------------------------------
@router.post(GROUPS + "/{name}/retention-cut",
             summary="Acknowledge consumption: data before each cut may go (MANUAL_RELEASE_AT_USER_STREAMCUT)")
def acknowledge(name: str, body: RetentionCutBody, call: Caller = Operator) -> dict[str, Any]:
    by_stream: dict[str, StreamCut] = {}
    for text in body.cuts:
        cut = StreamCut.parse(text)
        if cut.stream in by_stream:
            raise InvalidInput(f"two cuts given for stream {cut.stream}: give one per stream")
        call.principal.require_stream(cut.stream)
        by_stream[cut.stream] = cut
    stored = group_of(call, name).update_retention_stream_cut(by_stream)
    return acknowledged_document(name, stored)


# ---- watermarks ------------------------------------------------------------------------------------
@router.get(GROUPS + "/{name}/window", summary="The time window (watermarks) at the group's position, per stream")
def time_window(name: str, call: Caller = Reader) -> dict[str, Any]:
    group = group_of(call, name)
    windows = group.time_windows()
    return {"reader_group": name, "generation": group.generation,
            "streams": {stream: window.to_dict() for stream, window in windows.items()}}
