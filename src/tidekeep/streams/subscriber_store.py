"""Subscribers of consumption-based retention on the metadata store (the shell).

A reader group whose retention type is not NONE subscribes to each of its streams: one row in
`stream_subscribers` per (stream, group), written in the same transaction as the group change
(create, reset, delete; rg_store.py calls `register_group` / `unregister_group`). A subscriber
holds its stream at its *effective cut*: the latest acknowledged cut, or the group's start cut
while it has acknowledged nothing (docs/retention.md: never truncate data a subscriber has not read).

Acknowledgements arrive two ways, both checked and applied under the subscriber row's lock:
- MANUAL_RELEASE_AT_USER_STREAMCUT: `SubscriberStore.publish` (ReaderGroup.update_retention_stream_cut);
- AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT: `publish_checkpoint`, called by rg_store in the very
  transaction whose transition completed the checkpoint, so it is published exactly once.

Reset rule (docs/reader-groups.md, "Subscribers"): an acknowledgement A says "data before A is no
longer needed". After a reset to start cut S that stays true only if A is at or before S, so A is
kept then (as Pravega keeps it), and dropped otherwise: the group would re-read data behind A, and
a kept A would both let retention delete it and refuse the group's next acknowledgements as moving
backwards.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import InvalidInput, InvalidStreamCut, NotFound, StaleGeneration
from ..faults import pause_point
from ..names import check_name
from ..store.schema_readergroups import reader_groups
from ..store.schema_subscribers import stream_subscribers as subs
from .config import RetentionType
from .controller import StreamController
from .cuts import CutOrder, StreamCut
from .repository import StreamState
from .retention import SubscriberView
from .subscribers import unconsumed_bytes

log = logging.getLogger("tidekeep.subscribers")



@dataclass(frozen=True)
class Subscriber:
    stream: str
    reader_group: str
    retention_type: RetentionType
    generation: int
    positions: dict[int, int] | None  # the acknowledged cut; None: nothing acknowledged yet
    start_positions: dict[int, int]  # the group's start cut, which holds the stream until then
    updated_ms: int | None  # when `positions` was published
    unconsumed_bytes: int = 0  # from the effective cut (clamped to the head) to the tail
    stream_uid: str | None = None  # the stream's incarnation, carried by the cuts `to_dict` shows

    @property
    def effective(self) -> dict[int, int]:
        return dict(self.positions) if self.positions is not None else dict(self.start_positions)

    @property
    def acknowledged(self) -> bool:
        return self.positions is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stream": self.stream, "reader_group": self.reader_group, "retention_type": self.retention_type.value,
            "generation": self.generation,
            "acknowledged": None if self.positions is None else self._cut(self.positions),
            "acknowledged_ms": self.updated_ms,
            "start": self._cut(self.start_positions),
            "effective": self._cut(self.effective),
            "unconsumed_bytes": self.unconsumed_bytes,
        }


    def _cut(self, positions: Mapping[int, int]) -> str:
        return str(StreamCut(self.stream, positions, uid=self.stream_uid))


def _retention_type(config_json: str) -> RetentionType:
    return RetentionType(json.loads(config_json)["retention_type"])


# ---- registration (called by rg_store inside the group's write transaction) ---------------------------


def register_group(conn: Connection, controller: StreamController, group: str, config: Mapping[str, Any],
                   generation: int, created: bool) -> str | None:
    """Make the group's subscriber rows match its (new) config and generation. Returns the group's
    subscriber uid (None for a NONE group)."""
    rows = {r.stream_id: r for r in conn.execute(
        sa.select(subs).where(subs.c.reader_group == group).order_by(subs.c.stream_id).with_for_update())}
    if created and rows:  # left over by nothing we know of; a new group is a new subscriber
        conn.execute(sa.delete(subs).where(subs.c.reader_group == group))
        rows = {}
    if RetentionType(config["retention_type"]) is RetentionType.NONE:
        if rows:
            conn.execute(sa.delete(subs).where(subs.c.reader_group == group))
            log.info("reader group %s is no longer a subscriber", group)
        return None
    uid = next(iter(rows.values())).group_uid if rows else uuid.uuid4().hex
    kept: set[int] = set()
    for stream, bounds in sorted(config["streams"].items()):
        state = controller.repository.load(conn, stream)
        start = {int(k): v for k, v in bounds["start"].items()}
        kept.add(state.stream_id)
        old = rows.get(state.stream_id)
        if old is None:
            conn.execute(sa.insert(subs).values(stream_id=state.stream_id, reader_group=group, group_uid=uid,
                                                generation=generation, positions=None,
                                                start_positions=dict(start), updated_ms=None))
            continue
        acknowledged = old.positions
        keep = acknowledged is not None and _all_known(state, acknowledged) and state.topology().at_or_before(
            acknowledged, start)
        conn.execute(sa.update(subs).where(subs.c.stream_id == state.stream_id, subs.c.reader_group == group).values(
            generation=generation, start_positions=dict(start),
            positions=old.positions if keep else None, updated_ms=old.updated_ms if keep else None))
    gone = [sid for sid in rows if sid not in kept]
    if gone:
        conn.execute(sa.delete(subs).where(subs.c.reader_group == group, subs.c.stream_id.in_(gone)))
    return uid


def unregister_group(conn: Connection, group: str) -> None:
    conn.execute(sa.delete(subs).where(subs.c.reader_group == group))


def _all_known(state: StreamState, positions: Mapping[int, int]) -> bool:
    return all(seg in state.segments for seg in positions)


def publish_checkpoint(conn: Connection, controller: StreamController, group: str, generation: int,
                       cuts: Mapping[str, Mapping[int, int]], now_ms: int) -> list[str]:
    """AUTOMATIC groups: a checkpoint just completed in this transaction; its cut becomes the
    acknowledgement of every stream the group subscribes to. A cut that would not move forward
    (which a completed checkpoint of the current generation never is) is left out. Returns the
    streams published."""
    published = []
    states = []
    for stream in cuts:
        try:
            states.append(controller.repository.load(conn, stream))
        except NotFound:
            continue  # deleted meanwhile: its rows went with it
    # rows are locked in ascending stream id, the order every writer of them uses (no deadlock on PostgreSQL)
    for state in sorted(states, key=lambda st: st.stream_id):
        stream, positions = state.name, cuts[state.name]
        row = conn.execute(sa.select(subs).where(subs.c.stream_id == state.stream_id,
                                                 subs.c.reader_group == group).with_for_update()).one_or_none()
        if row is None or row.generation != generation or not _all_known(state, positions):
            continue  # re-created stream, or a reset in between: not this subscription's checkpoint
        previous = row.positions
        if previous is not None and (not _all_known(state, previous) or state.topology().compare(
                positions, previous) not in (CutOrder.EQUAL, CutOrder.AFTER)):
            log.warning("reader group %s: checkpoint cut of %s is not at or after its acknowledgement; kept the "
                        "acknowledgement", group, stream)
            continue
        conn.execute(sa.update(subs).where(subs.c.stream_id == state.stream_id, subs.c.reader_group == group)
                     .values(positions=dict(positions), updated_ms=now_ms))
        published.append(stream)
    return published


# ---- the store -------------------------------------------------------------------------------------


class SubscriberStore:
    def __init__(self, controller: StreamController) -> None:
        self.controller = controller
        self.db = controller.db

    def views(self, conn: Connection, state: StreamState) -> list[SubscriberView]:
        """The stream's subscribers as the retention decision sees them, read on `conn` (the retention
        cycle's own transaction), by reader group name."""
        rows = conn.execute(sa.select(subs).where(subs.c.stream_id == state.stream_id)
                            .order_by(subs.c.reader_group)).all()
        tail = state.tail()
        result = []
        for r in rows:
            acknowledged = r.positions
            start = r.start_positions
            assert start is not None
            effective = acknowledged if acknowledged is not None else start
            result.append(SubscriberView(
                reader_group=r.reader_group, generation=r.generation, positions=dict(effective),
                acknowledged=acknowledged is not None, updated_ms=r.updated_ms if acknowledged is not None else None,
                unconsumed_bytes=unconsumed_bytes(effective, state.head, tail, state.topology())))
        return result

    def list(self, stream: str) -> list[Subscriber]:
        """The stream's subscribers by reader group name (NotFound for an unknown stream)."""
        with self.db.read() as conn:
            state = self.controller.repository.load(conn, stream)
            rows = conn.execute(sa.select(subs, reader_groups.c.config).join(
                reader_groups, reader_groups.c.name == subs.c.reader_group).where(
                subs.c.stream_id == state.stream_id).order_by(subs.c.reader_group)).all()
        return [self._subscriber(state, r) for r in rows]

    def for_group(self, group: str) -> dict[str, Subscriber]:
        """stream -> the group's subscription of it (empty for a NONE group)."""
        with self.db.read() as conn:
            found = conn.execute(sa.select(reader_groups.c.config).where(reader_groups.c.name == group)).first()
            if found is None:
                raise NotFound(f"reader group {group!r} does not exist")
            result = {}
            for stream in sorted(json.loads(found.config)["streams"]):
                try:
                    state = self.controller.repository.load(conn, stream)
                except NotFound:
                    continue
                row = conn.execute(sa.select(subs, reader_groups.c.config).join(
                    reader_groups, reader_groups.c.name == subs.c.reader_group).where(
                    subs.c.stream_id == state.stream_id, subs.c.reader_group == group)).one_or_none()
                if row is not None:
                    result[stream] = self._subscriber(state, row)
        return result

    @staticmethod
    def _subscriber(state: StreamState, row: Any) -> Subscriber:
        acknowledged = row.positions
        start = row.start_positions
        assert start is not None
        effective = acknowledged if acknowledged is not None else start
        return Subscriber(state.name, row.reader_group, _retention_type(row.config), row.generation, acknowledged,
                          start, row.updated_ms if acknowledged is not None else None,
                          unconsumed_bytes(effective, state.head, state.tail(), state.topology()), state.info.uid)

    def identity(self, group: str) -> tuple[int, str | None]:
        """The group's generation and subscriber uid, read together (what a handle remembers)."""
        check_name(group, "reader group name")
        with self.db.read() as conn:
            row = conn.execute(sa.select(reader_groups.c.generation).where(reader_groups.c.name == group)).first()
            if row is None:
                raise NotFound(f"reader group {group!r} does not exist")
            uid = conn.execute(sa.select(subs.c.group_uid).where(subs.c.reader_group == group).limit(1)).scalar()
        return row.generation, uid

    # ---- manual acknowledgement --------------------------------------------------------------------
    def publish(self, group: str, known_uid: str | None, known_generation: int,
                cuts: Mapping[str, StreamCut | str | Mapping[int, int]]) -> dict[str, StreamCut]:
        """MANUAL groups: store `cuts` ({stream: cut}) as the group's acknowledgements, all or nothing.
        Checks per stream, in order: the stream exists, the group subscribes to it, the handle's
        generation is current, the cut is a valid complete cut of that stream, and it is at or
        after the previous acknowledgement."""
        check_name(group, "reader group name")
        if not isinstance(cuts, Mapping) or not cuts:
            raise InvalidInput("update_retention_stream_cut needs a non-empty {stream: cut} map")
        if not all(isinstance(s, str) for s in cuts):
            raise InvalidInput("update_retention_stream_cut: stream names must be strings")
        # first pass, outside the write transaction: checking event boundaries reads chunk files
        checked: dict[str, tuple[StreamState, dict[int, int]]] = {}
        with self.db.read() as conn:
            self._check_group(conn, group)
        for stream in sorted(cuts):
            with self.db.read() as conn:
                state = self.controller.repository.load(conn, stream)
                self._check_row(conn, state, group, known_uid, known_generation, lock=False)
            checked[stream] = (state, self.controller.to_positions(state, cuts[stream]))
        log.debug("reader group %s: acknowledgements checked, storing them", group)
        # everything checked above is checked again under the row locks: a reset may land in between
        pause_point("subscribers.publish.before_write")
        now = self.controller.clock.now_ms()
        result = {}
        with self.db.write() as conn:
            self._check_group(conn, group)
            # rows are locked in ascending stream id, the order every writer of them uses
            for stream, (seen, positions) in sorted(checked.items(), key=lambda kv: kv[1][0].stream_id):
                state = self.controller.repository.load(conn, stream)
                if state.info.uid != seen.info.uid:
                    raise InvalidStreamCut(f"stream {stream!r} was re-created while the cut was being checked")
                row = self._check_row(conn, state, group, known_uid, known_generation, lock=True)
                previous = row.positions
                if previous is not None:
                    order = state.topology().compare(positions, previous)
                    if order in (CutOrder.BEFORE, CutOrder.OVERLAPS):
                        how = "is before" if order is CutOrder.BEFORE else "is partly before"
                        raise InvalidStreamCut(
                            f"retention stream cut {state.shown(positions)} of reader group {group} moves backwards: "
                            f"it {how} its previous acknowledgement {state.shown(previous)}")
                conn.execute(sa.update(subs).where(subs.c.stream_id == state.stream_id,
                                                   subs.c.reader_group == group)
                             .values(positions=dict(positions), updated_ms=now))
                result[stream] = state.cut(positions)
        log.info("reader group %s acknowledged %s", group, ", ".join(str(c) for c in result.values()))
        return result

    @staticmethod
    def _check_group(conn: Connection, group: str) -> None:
        row = conn.execute(sa.select(reader_groups.c.config).where(reader_groups.c.name == group)).first()
        if row is None:
            raise NotFound(f"reader group {group!r} does not exist")
        kind = _retention_type(row.config)
        if kind is not RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT:
            raise InvalidInput(f"reader group {group!r} has retention type {kind}: only "
                               f"{RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT} groups publish "
                               "retention stream cuts by hand")

    @staticmethod
    def _check_row(conn: Connection, state: StreamState, group: str, known_uid: str | None, known_generation: int,
                   lock: bool) -> Any:
        query = sa.select(subs).where(subs.c.stream_id == state.stream_id, subs.c.reader_group == group)
        row = conn.execute(query.with_for_update() if lock else query).one_or_none()
        if row is None:
            raise NotFound(f"reader group {group!r} is not a subscriber of stream {state.name!r}")
        if row.group_uid != known_uid:
            raise StaleGeneration(f"reader group {group!r} was re-created since this handle loaded it; "
                                  f"load it again with client.reader_group({group!r})")
        if row.generation != known_generation:
            raise StaleGeneration(f"reader group {group!r} is at generation {row.generation}, this handle knows "
                                  f"generation {known_generation} (reset meanwhile); load it again")
        return row


__all__ = ["Subscriber", "SubscriberStore", "publish_checkpoint", "register_group", "unconsumed_bytes",
           "unregister_group"]
