"""ETags and If-Match for what people edit (stream policies, catalog rules, holds): an edit whose
If-Match names an older version fails with 412 and changes nothing (docs/api.md, "Editing")."""

from __future__ import annotations

from fastapi import Response

from ..errors import InvalidInput


def etag(version: object) -> str:
    return f'"{version}"'


def set_etag(response: Response, version: object) -> None:
    response.headers["ETag"] = etag(version)


def if_match_version(header: str | None) -> str | None:
    """The version an If-Match header names (None: no header, or "*", which matches any version)."""
    if header is None or header.strip() == "*":
        return None
    text = header.strip()
    if text.startswith("W/"):
        raise InvalidInput("If-Match takes a strong ETag as the server sent it, not a weak one")
    if "," in text or len(text) < 2 or not (text.startswith('"') and text.endswith('"')):
        raise InvalidInput(f"invalid If-Match {header[:60]!r}: expected one ETag as the server sent it, like \"3\"")
    return text[1:-1]


def if_match_int(header: str | None) -> int | None:
    version = if_match_version(header)
    if version is None:
        return None
    if not version.isdigit():
        raise InvalidInput(f"invalid If-Match {header!r}: this resource's versions are whole numbers")
    return int(version)
