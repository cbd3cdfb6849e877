"""What storage holds versus what the metadata references, read straight from the store."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store import schema as t


def stored_files(client: tk.Client) -> set[str]:
    """Every chunk file under the streams directory, as paths relative to the storage root."""
    return {f.path for f in client.workspace.storage.list_files("streams")}


def referenced_paths(client: tk.Client) -> set[str]:
    """Every path a committed chunk row refers to."""
    with client.workspace.db.read() as conn:
        return set(conn.execute(sa.select(t.chunks.c.path)).scalars())


def chunk_rows(client: tk.Client, stream: str | None = None) -> list[Any]:
    """Committed chunk rows (of one stream, or all), in segment and offset order."""
    query = sa.select(t.chunks).order_by(t.chunks.c.segment_id, t.chunks.c.base_offset)
    with client.workspace.db.read() as conn:
        if stream is not None:
            query = query.where(t.chunks.c.stream_id == client.stream(stream).state().stream_id)
        return list(conn.execute(query))


def event_count(client: tk.Client) -> int:
    """Committed events in the whole store (one cheap query; used for polling)."""
    with client.workspace.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.coalesce(sa.func.sum(t.chunks.c.event_count), 0))).scalar_one())
