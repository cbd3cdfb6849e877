"""The JSON documents of the stream family's operations: what `tidekeep ... --json` prints and what
the HTTP API answers for the same operation (docs/api.md), built in one place so the two stay equal.

Pure functions of the operations' results; the imports stay light (the CLI loads this module when
it starts, tests/cli/test_cli_startup.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..store.deletion import files_left_json
from ..units import iso_utc

if TYPE_CHECKING:
    from ..store.deletion import FileLeft
    from .cuts import StreamCut
    from .readergroup import Checkpoint
    from .retention import RetentionDecision
    from .rg_reset import ResetPlan
    from .subscriber_store import Subscriber
    from .txn_store import TransactionInfo
    from .watermark_store import WriterStatus
    from .watermarks import Watermark


def head_positions_to_cut(stream: str, stored: str | None) -> str | None:
    """The compact cut form of a head stored in the audit table as {"<segment id>": offset}."""
    if stored is None:
        return None
    from .model import segment_name

    positions: Mapping[str, int] = json.loads(stored)
    body = ",".join(f"{segment_name(int(seg))}={offset}" for seg, offset in sorted(positions.items(),
                                                                                   key=lambda kv: int(kv[0])))
    return f"{stream}:{body}"


def audit_document(entry: Mapping[str, Any]) -> dict[str, Any]:
    """An audit row as `tidekeep audit list --json` prints it and `GET /api/v1/audit` answers it: a
    truncation's heads in the compact cut form, the details parsed."""
    target = entry["target"]
    return {
        "id": entry["id"],
        "time": iso_utc(entry["time_ms"]),
        "time_ms": entry["time_ms"],
        "action": entry["action"],
        "target": target,
        "old_head": head_positions_to_cut(target, entry["old_head"]),
        "new_head": head_positions_to_cut(target, entry["new_head"]),
        "bytes_freed": entry["bytes_freed"],
        "reason": entry["reason"],
        "actor": entry["actor"],
        "details": None if entry["details"] is None else json.loads(entry["details"]),
        "hash": entry.get("row_hash"),  # its link in the audit chain (store/audit_chain.py)
    }


# ---- retention ---------------------------------------------------------------------------------------
def decision_document(decision: RetentionDecision, dry_run: bool) -> dict[str, Any]:
    """A retention decision (`retention preview` / `run`): the case, the cut, the reason and the set."""
    shown = decision.to_dict()
    for view in shown.get("subscribers", []):  # the age the text shows, as of the decision's time
        view["age_ms"] = None if view["updated_ms"] is None else decision.now_ms - view["updated_ms"]
    return dict(shown, dry_run=dry_run)


def history_record(entry: dict[str, Any]) -> dict[str, Any]:
    """One past truncation (`retention history`) from its audit row."""
    details = json.loads(entry["details"]) if entry.get("details") else {}
    return {"time": iso_utc(entry["time_ms"]), "time_ms": entry["time_ms"],
            "old_head": head_positions_to_cut(entry["target"], entry["old_head"]),
            "new_head": head_positions_to_cut(entry["target"], entry["new_head"]),
            "bytes_freed": entry["bytes_freed"], "reason": entry["reason"], "actor": entry["actor"],
            # consumption-based truncations: the case, the lower bound and the subscribers (audit details)
            "consumption": details.get("consumption")}


def subscriber_age_ms(sub: Subscriber, now_ms: int) -> int | None:
    return None if sub.updated_ms is None else max(now_ms - sub.updated_ms, 0)


def subscriber_json(sub: Subscriber, now_ms: int) -> dict[str, Any]:
    """One subscriber of a stream (`retention subscribers`): its bounds, their age and its lag."""
    return dict(sub.to_dict(), acknowledged_at=iso_utc(sub.updated_ms), age_ms=subscriber_age_ms(sub, now_ms))


# ---- reader groups -----------------------------------------------------------------------------------
def checkpoint_document(done: Checkpoint) -> dict[str, Any]:
    """A completed checkpoint of a reader group (`rg checkpoint`) with its cuts."""
    return {"name": done.name, "created": iso_utc(done.created_ms), "completed": iso_utc(done.completed_ms),
            "cuts": {stream: str(cut) for stream, cut in sorted(done.cuts.items())}}


def acknowledged_document(group: str, stored: Mapping[str, StreamCut]) -> dict[str, Any]:
    """The cuts a subscriber group acknowledged (`rg retention-cut`)."""
    return {"reader_group": group, "acknowledged": {s: str(c) for s, c in sorted(stored.items())}}


def reset_document(plan: ResetPlan, dry_run: bool, generation: int | None) -> dict[str, Any]:
    """A reader group reset (`rg reset`): the plan, and the new generation unless a dry run."""
    return {**plan.to_dict(), "dry_run": dry_run, "new_generation": generation}


# ---- watermarks --------------------------------------------------------------------------------------
def writer_state(status: WriterStatus) -> str:
    if status.mark.closed:
        return "closed: its last position bounds the next watermark's cut"
    if status.participating:
        return "participating"
    return "lagging: holds watermarks back" if status.active else "inactive: timed out, rejoins on its next note"


def writer_json(status: WriterStatus) -> dict[str, Any]:
    """One writer's last mark and its state (`watermark writers`)."""
    return dict(status.to_dict(), noted_at=iso_utc(status.mark.noted_ms), state=writer_state(status))


def computed_document(mark: Watermark | None, statuses: list[WriterStatus]) -> dict[str, Any]:
    """`watermark compute`: the watermark appended, or the writers that explain why none was."""
    return {"emitted": mark is not None, "watermark": None if mark is None else mark.to_dict(),
            "writers": [writer_json(s) for s in statuses]}


# ---- transactions ------------------------------------------------------------------------------------
def txn_record(info: TransactionInfo) -> dict[str, Any]:
    """One transaction (`txn list`)."""
    from .model import segment_name

    return {
        "id": info.id,
        "stream": info.stream,
        "writer_id": info.writer_id,
        "state": info.state.value,
        "created": iso_utc(info.created_ms),
        "lease_expiry": iso_utc(info.lease_expiry_ms),
        "commit_timestamp": info.commit_timestamp,
        "committed": iso_utc(info.committed_ms),
        "end_reason": info.end_reason,
        "events": info.events,
        "staged_chunks": info.staged_chunks,
        "positions": {segment_name(s): end for s, end in sorted(info.positions.items())},
    }


def aborted_document(txn_id: str, aborted: bool, files_left: tuple[FileLeft, ...] | list[FileLeft]) -> dict[str, Any]:
    """`txn abort`: whether this call aborted it, and the staged files it could not delete."""
    return {"id": txn_id, "aborted": aborted, "files_left": files_left_json(files_left)}
