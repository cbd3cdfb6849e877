"""Holds of kind "stream" (target "scope/stream"), registered with the foundation (store/holds.py).

A held stream is never truncated, manually or by retention, nor deleted, nor its scope: the
controller's truncate, delete and delete_scope look the holds up inside their own write
transactions (`refuse_if_held`, `holds_under`) and refuse with HoldActive; the retention cycle
reports the hold as the reason it truncated nothing. Adding a hold locks the stream's row as a
truncation does, so a hold and a truncation of one stream serialise.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import NotFound
from ..names import split_stream_name
from ..store import schema as t
from ..store.holds import HoldKind, register_kind

STREAM_KIND = "stream"


def lock_held_stream(conn: Connection, target: object) -> str:
    """The stream `target` names, its row locked for the rest of the transaction; returns its
    canonical name. NotFound naming the missing scope or stream."""
    scope, name = split_stream_name(target)
    row = conn.execute(sa.select(t.streams.c.scope, t.streams.c.name).where(
        t.streams.c.scope == scope, t.streams.c.name == name).with_for_update()).one_or_none()
    if row is None:
        if conn.execute(sa.select(t.scopes.c.name).where(t.scopes.c.name == scope)).first() is None:
            raise NotFound(f"scope {scope!r} does not exist")
        raise NotFound(f"stream {target!r} does not exist")
    return f"{row.scope}/{row.name}"


register_kind(HoldKind(STREAM_KIND, lock_held_stream))

__all__ = ["STREAM_KIND", "lock_held_stream"]
