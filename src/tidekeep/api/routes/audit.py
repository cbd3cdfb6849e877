"""The audit trail (the CLI's `tidekeep audit list`): filtered by target, action, actor and time,
newest first, paged by row id in the store (one keyset query a page)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query

from ...store.audit import AuditFilter
from ...streams.model import segment_name
from ...times import parse_time_ms
from ...units import iso_utc
from ..models import Page
from ..paging import DEFAULT_LIMIT, decode_id_cursor, encode_cursor
from ..state import Caller, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["audit"])

TimeBound = Annotated[str | None, Query(description="epoch milliseconds or an ISO-8601 time (no zone: UTC)")]


def head_cut(stream: str, stored: str | None) -> str | None:
    """A truncation's head, stored as {"<segment id>": offset}, in the compact cut form."""
    if stored is None:
        return None
    positions: Mapping[str, int] = json.loads(stored)
    body = ",".join(f"{segment_name(int(seg))}={offset}"
                    for seg, offset in sorted(positions.items(), key=lambda kv: int(kv[0])))
    return f"{stream}:{body}"


def audit_record(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A row as `tidekeep audit list --json` prints it."""
    target = entry["target"]
    return {"id": entry["id"], "time": iso_utc(entry["time_ms"]), "time_ms": entry["time_ms"],
            "action": entry["action"], "target": target,
            "old_head": head_cut(target, entry["old_head"]), "new_head": head_cut(target, entry["new_head"]),
            "bytes_freed": entry["bytes_freed"], "reason": entry["reason"], "actor": entry["actor"],
            "details": None if entry["details"] is None else json.loads(entry["details"])}


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
    return Page[dict[str, Any]](items=[audit_record(r) for r in rows],
                                next_cursor=encode_cursor(rows[-1]["id"]) if more else None)
