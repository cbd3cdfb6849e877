"""Cursor paging of lists (docs/api.md, "Lists"): a page holds at most `limit` items and
`next_cursor`, an opaque token for the page after it (None on the last page). The cursor encodes
the sort key of the page's last item, so a list that changes between pages neither repeats nor
skips an item that stayed."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ..errors import InvalidInput
from ..integers import INT64_MAX

MAX_LIMIT = 1000
DEFAULT_LIMIT = 100
T = TypeVar("T")


def encode_cursor(key: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(key, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> Any:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
    except (ValueError, UnicodeError):
        raise InvalidInput(f"invalid cursor {cursor[:40]!r}: pass next_cursor of the previous page as it is") from None


def page_of(items: Sequence[T], key: Callable[[T], Any], cursor: str | None, limit: int) -> tuple[list[T], str | None]:
    """One page of `items`, which are sorted ascending by `key` (a JSON-able, comparable value)."""
    start = 0
    if cursor is not None:
        after = decode_cursor(cursor)
        try:
            start = next((i for i, item in enumerate(items) if _after(key(item), after)), len(items))
        except TypeError:
            raise InvalidInput("invalid cursor: it belongs to another list") from None
    chosen = list(items[start:start + limit])
    more = start + limit < len(items)
    return chosen, encode_cursor(key(chosen[-1])) if more and chosen else None


def _after(value: Any, after: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(after, list):
        return list(value) > after
    return bool(value > after)


def decode_id_cursor(cursor: str | None) -> int | None:
    """The row id a keyset-paged list's cursor encodes (None: no cursor, the first page)."""
    if cursor is None:
        return None
    key = decode_cursor(cursor)
    if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key <= INT64_MAX:
        raise InvalidInput("invalid cursor: it belongs to another list")
    return key
