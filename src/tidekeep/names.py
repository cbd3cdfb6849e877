"""Names of scopes, streams, writers and reader groups. Names become storage paths, so the rule is
strict: each part matches [A-Za-z0-9_-]{1,255}; a stream is named "scope/stream"."""

from __future__ import annotations

import re

from .errors import InvalidName

_PART = re.compile(r"[A-Za-z0-9_-]{1,255}")


def check_name(name: object, what: str = "name") -> str:
    if not isinstance(name, str):
        raise InvalidName(f"invalid {what} {name!r}: must be a string")
    if not _PART.fullmatch(name):
        if not name:
            reason = "is empty"
        elif len(name) > 255:
            reason = f"is {len(name)} characters long (at most 255)"
        else:
            bad = next(ch for ch in name if not _PART.fullmatch(ch))
            reason = f"contains {bad!r}"
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise InvalidName(f"invalid {what} {shown!r}: {reason}; use letters, digits, '_' and '-' (1-255)")
    return name


def split_stream_name(name: object) -> tuple[str, str]:
    """("scope", "stream") from "scope/stream", validating both parts."""
    if not isinstance(name, str) or name.count("/") != 1:
        shown = name if not isinstance(name, str) or len(name) <= 60 else name[:57] + "..."
        raise InvalidName(f"invalid stream name {shown!r}: expected 'scope/stream'")
    scope, stream = name.split("/")
    return check_name(scope, "scope name"), check_name(stream, "stream name")
