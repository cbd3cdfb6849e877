"""`tidekeep stream ...` with --server: each command's record fetched through the API
(api/routes/streams.py) in the shape the local command's --json prints, so cli/streams.py renders
both the same way."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ..names import split_stream_name
from ..units import iso_utc
from .remote import Remote


def stream_path(name: str) -> str:
    scope, stream = split_stream_name(name)
    return f"/scopes/{quote(scope, safe='')}/streams/{quote(stream, safe='')}"


def info_record(summary: dict[str, Any]) -> dict[str, Any]:
    """cli/streams.py `info_record` of the API's stream summary."""
    return {"name": summary["name"], "state": summary["state"], "current_epoch": summary["current_epoch"],
            "created": iso_utc(summary["created_ms"]), "created_ms": summary["created_ms"],
            "retention": summary["retention_text"],
            "timestamp_aggregation_timeout_ms": summary["timestamp_aggregation_timeout_ms"]}


def create(remote: Remote, name: str, segments: int, retention: dict[str, Any] | None,
           aggregation_timeout: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The new stream's info record and its description."""
    scope, stream = split_stream_name(name)
    summary = remote.call("POST", f"/scopes/{quote(scope, safe='')}/streams",
                          json={"name": stream, "segments": segments, "retention": retention,
                                "timestamp_aggregation_timeout": aggregation_timeout})
    return info_record(summary), describe(remote, name)


def list_streams(remote: Remote, scope: str | None) -> list[dict[str, Any]]:
    path = "/streams" if scope is None else f"/scopes/{quote(scope, safe='')}/streams"
    return [info_record(s) for s in remote.items(path)]


def describe(remote: Remote, name: str) -> dict[str, Any]:
    described: dict[str, Any] = remote.call("GET", stream_path(name))
    return described


def update_retention(remote: Remote, name: str, retention: dict[str, Any] | None) -> str | None:
    """Set the policy (the watermark timeout stays); the policy's text as the server describes it."""
    summary = remote.call("PUT", stream_path(name), json={"retention": retention})
    text: str | None = summary["retention_text"]
    return text


def scaled(remote: Remote, name: str, verb: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The new segments of a scale, split or merge: [{segment, epoch, key_range}]."""
    new_segments: list[dict[str, Any]] = remote.call("POST", f"{stream_path(name)}/{verb}", json=body)["new_segments"]
    return new_segments


def seal(remote: Remote, name: str) -> bool:
    return bool(remote.call("POST", f"{stream_path(name)}/seal")["sealed"])


def delete(remote: Remote, name: str, force: bool) -> dict[str, Any]:
    answer: dict[str, Any] = remote.call("DELETE", stream_path(name), params={"force": str(force).lower()})
    return answer


def truncate(remote: Remote, name: str, cut: str, reason: str) -> dict[str, Any]:
    answer: dict[str, Any] = remote.call("POST", f"{stream_path(name)}/truncate", json={"cut": cut, "reason": reason})
    return answer


def cut(remote: Remote, name: str, end: str) -> tuple[str, str]:
    """The stream's `head` or `tail` cut: its compact form, and its JSON form with key ranges."""
    import json

    answer = remote.call("GET", f"{stream_path(name)}/{end}")
    return str(answer["cut"]), json.dumps(answer["json"], separators=(",", ":"))


def compact(remote: Remote, name: str, target_size: str | None, show_progress: bool) -> dict[str, Any]:
    body = None if target_size is None else {"target_size": target_size}
    started = remote.call("POST", f"{stream_path(name)}/compact", json=body)
    return dict(remote.job(started, f"compacting {name}", show_progress, unit="groups"))
