"""The streams' figures of /metrics that need the segment topology (docs/api.md, "Metrics"): each
subscriber's lag, the bytes from its effective cut to the tail that still exist — what `tidekeep
subscribers list` shows as unconsumed bytes, computed by the same code (subscriber_store.py)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from ..store import schema as t
from ..store.schema_subscribers import stream_subscribers
from .controller import StreamController
from .subscriber_store import SubscriberStore


@dataclass(frozen=True)
class SubscriberLag:
    stream: str
    reader_group: str
    lag_bytes: int


def subscriber_lags(controller: StreamController) -> list[SubscriberLag]:
    """Every subscriber of every stream, read in one transaction, by stream then reader group."""
    store = SubscriberStore(controller)
    result: list[SubscriberLag] = []
    with controller.db.read() as conn:
        subscribed = conn.execute(sa.select(t.streams.c.scope, t.streams.c.name).distinct()
                                  .join(stream_subscribers, stream_subscribers.c.stream_id == t.streams.c.id)
                                  .order_by(t.streams.c.scope, t.streams.c.name)).all()
        for scope, name in subscribed:
            state = controller.repository.load(conn, f"{scope}/{name}")
            result.extend(SubscriberLag(state.name, view.reader_group, view.unconsumed_bytes)
                          for view in store.views(conn, state))
    return result


__all__ = ["SubscriberLag", "subscriber_lags"]
