"""Streams listed with their sizes for a paged, sortable table (the dashboard's stream list): one
grouped query over the segments gives every stream's retained bytes and segment counts, so a page
of 10,000 streams costs a few queries and never one per stream.

A segment's `head` column moves with each truncation (controller.truncate), so a stream's retained
bytes are the sum of its segments' `tail - head`: the size between its head and tail cuts that
`describe` computes from the topology, without loading the segments."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from ..errors import InvalidInput
from ..store import schema as t
from .config import RetentionKind, StreamConfig
from .repository import StreamStatus

MAX_PAGE = 1000


class StreamSort(enum.StrEnum):
    """The columns a stream list sorts by; each ends with (scope, name), so the order is total."""

    NAME = "name"
    SCOPE = "scope"
    SEGMENTS = "segments"
    RETAINED = "retained"
    POLICY = "policy"
    STATE = "state"

    @classmethod
    def named(cls, text: str) -> StreamSort:
        try:
            return cls(text)
        except ValueError:
            raise InvalidInput(f"invalid sort {text!r}: use one of {', '.join(s.value for s in cls)}") from None


@dataclass(frozen=True)
class StreamQuery:
    """Which streams, in which order, from where: `after` is the sort key of the previous page's
    last row (`StreamRow.key`), so a page neither repeats nor skips a stream that stayed."""

    scope: str | None = None  # only this scope
    text: str | None = None  # only names containing this text (any case)
    sort: StreamSort = StreamSort.NAME
    descending: bool = False
    after: Sequence[str | int] | None = None
    limit: int = 50

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or isinstance(self.limit, bool) or not 1 <= self.limit <= MAX_PAGE:
            raise InvalidInput(f"invalid limit {self.limit!r}: must be 1 to {MAX_PAGE}")


@dataclass(frozen=True)
class StreamRow:
    scope: str
    name: str
    state: StreamStatus
    config: StreamConfig
    config_version: int
    current_epoch: int
    segments: int  # all the stream's segments, sealed ones too
    active_segments: int
    retained_bytes: int
    truncated_bytes: int
    events: int  # events in the chunks it keeps (a partly truncated chunk counts whole)
    key: tuple[str | int, ...]  # the row's sort key: the `after` of the page that follows

    @property
    def full_name(self) -> str:
        return f"{self.scope}/{self.name}"

    @property
    def policy_kind(self) -> str:
        return "none" if self.config.retention is None else self.config.retention.kind.value


@dataclass(frozen=True)
class StreamListing:
    rows: list[StreamRow]
    total: int  # streams matching the filter, over every page
    more: bool  # another page follows


def _policy_kind(config: ColumnElement[str]) -> ColumnElement[str]:
    # The config column holds StreamConfig.to_json, whose retention policy is the only object with
    # a "kind" key: matched as text, the kind sorts in the database on SQLite and PostgreSQL alike
    # (tests/streams/test_stream_listing.py checks it against to_json for every kind)
    cases = [(config.like(f'%"kind": "{kind.value}"%'), kind.value) for kind in RetentionKind]
    return sa.case(*cases, else_="none")


# sorts by a size: every stream's size must be known to order the page, so the grouped sizes join
# the streams; any other sort orders the streams alone and sizes only the page's (docs/benchmarks.md)
_SIZE_SORTS = frozenset({StreamSort.SEGMENTS, StreamSort.RETAINED})


def _sizes(stream_ids: list[int] | None = None) -> sa.Subquery:
    seg = t.segments.c
    query = (sa.select(seg.stream_id, sa.func.count().label("segments"),
                       sa.func.sum(sa.case((seg.sealed, 0), else_=1)).label("active"),
                       sa.func.sum(seg.tail - seg.head).label("retained"))
             .group_by(seg.stream_id))
    if stream_ids is not None:
        query = query.where(seg.stream_id.in_(stream_ids))
    return query.subquery("sizes")


def _stream_columns() -> list[ColumnElement[Any]]:
    s = t.streams.c
    return [s.id, s.scope, s.name, s.state, s.config, s.config_version, s.current_epoch, s.truncated_bytes,
            _policy_kind(s.config).label("policy")]


def _rows(with_sizes: bool) -> sa.Subquery:
    if not with_sizes:
        return sa.select(*_stream_columns()).subquery("rows")
    s, sizes = t.streams.c, _sizes()
    return (sa.select(*_stream_columns(),
                      sa.func.coalesce(sizes.c.segments, 0).label("segments"),
                      sa.func.coalesce(sizes.c.active, 0).label("active"),
                      sa.func.coalesce(sizes.c.retained, 0).label("retained"))
            .select_from(t.streams.outerjoin(sizes, sizes.c.stream_id == s.id)).subquery("rows"))


def _filters(columns: sa.ColumnCollection[str, ColumnElement[object]], query: StreamQuery) -> list[ColumnElement[bool]]:
    found: list[ColumnElement[bool]] = []
    if query.scope is not None:
        found.append(columns.scope == query.scope)
    if query.text:
        found.append(sa.func.lower(columns.name).contains(query.text.lower(), autoescape=True))
    return found


def _sort_columns(rows: sa.Subquery, sort: StreamSort) -> list[ColumnElement[Any]]:
    c = rows.c
    if sort is StreamSort.NAME:
        return [c.name, c.scope]
    if sort is StreamSort.SCOPE:
        return [c.scope, c.name]
    first = {StreamSort.SEGMENTS: "active", StreamSort.RETAINED: "retained", StreamSort.POLICY: "policy",
             StreamSort.STATE: "state"}[sort]
    return [c[first], c.scope, c.name]


def _after(columns: list[ColumnElement[Any]], key: Sequence[str | int], descending: bool) -> ColumnElement[bool]:
    """(columns) > key, lexicographically (< when descending), as plain comparisons every backend plans."""
    if len(key) != len(columns) or any(isinstance(v, bool) or not isinstance(v, (str, int)) for v in key):
        raise InvalidInput("invalid cursor: it belongs to another list")
    column, value = columns[0], key[0]
    beyond = column < value if descending else column > value
    if len(columns) == 1:
        return beyond
    return sa.or_(beyond, sa.and_(column == value, _after(columns[1:], key[1:], descending)))


def list_stream_rows(conn: Connection, query: StreamQuery) -> StreamListing:
    """One page of streams with their sizes (four queries: the page, the count, the page's sizes
    unless the sort needed them all, the page's events)."""
    rows = _rows(with_sizes=query.sort in _SIZE_SORTS)
    where = _filters(rows.c, query)
    order = _sort_columns(rows, query.sort)
    page = sa.select(rows).where(*where)
    if query.after is not None:
        page = page.where(_after(order, query.after, query.descending))
    page = page.order_by(*(c.desc() if query.descending else c.asc() for c in order)).limit(query.limit + 1)
    found = conn.execute(page).all()
    more = len(found) > query.limit
    found = found[:query.limit]
    total = conn.execute(sa.select(sa.func.count()).select_from(t.streams).where(
        *_filters(t.streams.c, query))).scalar_one()
    ids = [r.id for r in found]
    sizes = ({r.id: r._mapping for r in found} if query.sort in _SIZE_SORTS
             else {int(r.stream_id): r._mapping for r in conn.execute(sa.select(_sizes(ids)))})
    events = _events(conn, ids)
    keys = [tuple(r._mapping[c.name] for c in order) for r in found]
    return StreamListing([_row(r, sizes.get(r.id), events.get(r.id, 0), key)
                          for r, key in zip(found, keys, strict=True)], int(total), more)


def _events(conn: Connection, stream_ids: list[int]) -> dict[int, int]:
    if not stream_ids:
        return {}
    c = t.chunks.c
    query = (sa.select(c.stream_id, sa.func.sum(c.event_count)).where(c.stream_id.in_(stream_ids))
             .group_by(c.stream_id))
    return {int(sid): int(n or 0) for sid, n in conn.execute(query)}


def _row(row: sa.Row[object], sizes: Any, events: int, key: tuple[object, ...]) -> StreamRow:
    """`sizes`: the stream's segment counts and retained bytes (None: a stream without segments)."""
    m = row._mapping
    segments, active, retained = (0, 0, 0) if sizes is None else (
        sizes["segments"] or 0, sizes["active"] or 0, sizes["retained"] or 0)
    return StreamRow(m["scope"], m["name"], StreamStatus(m["state"]), StreamConfig.from_json(m["config"]),
                     int(m["config_version"]), int(m["current_epoch"]), int(segments), int(active),
                     int(retained), int(m["truncated_bytes"]), events,
                     tuple(v if isinstance(v, str) else int(v) for v in key))  # type: ignore[call-overload]


__all__ = ["StreamListing", "StreamQuery", "StreamRow", "StreamSort", "list_stream_rows"]
