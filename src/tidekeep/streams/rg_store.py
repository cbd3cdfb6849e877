"""The shell of reader groups: load the group row, apply a pure transition from rg_state, write
it back with optimistic concurrency (`UPDATE ... WHERE version = :v`), retry on a lost race.

Segment topologies come from the stream controller in their own read just before the group row
is loaded; they only ever grow (new segments, larger tails, seals), so a topology a moment old
never makes a transition wrong, only a little late.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..errors import AlreadyExists, ConflictError, NotFound
from ..names import check_name
from ..store import schema_readergroups as rgt
from .config import RetentionType
from .controller import StreamController
from .model import Segment
from .rg_state import GroupState
from .subscriber_store import publish_checkpoint, register_group, unregister_group

AUTOMATIC = RetentionType.AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT

MAX_ATTEMPTS = 200  # a lost race costs one reload; this many in a row means something is wrong


@dataclass(frozen=True)
class GroupRow:
    id: int
    name: str
    config: dict[str, Any]
    generation: int
    version: int
    state: GroupState
    created_ms: int
    updated_ms: int
    subscriber_uid: str | None = None  # set by create and reset: the group's subscriber uid (None: NONE)


class ReaderGroupStore:
    def __init__(self, controller: StreamController) -> None:
        self.controller = controller
        self.db = controller.db
        self.clock = controller.clock

    def topologies(self, streams: Any) -> dict[str, dict[int, Segment]]:
        return {name: self.controller.state(name).segments for name in streams}

    # ---- rows ----------------------------------------------------------------------------------
    def create(self, name: str, config: Mapping[str, Any], state: GroupState) -> GroupRow:
        check_name(name, "reader group name")
        now = self.clock.now_ms()
        try:
            with self.db.write() as conn:
                if conn.execute(sa.select(rgt.reader_groups.c.id).where(rgt.reader_groups.c.name == name)).first():
                    raise AlreadyExists(f"reader group {name!r} already exists")
                conn.execute(sa.insert(rgt.reader_groups).values(
                    name=name, config=json.dumps(config), generation=0, version=0,
                    state=json.dumps(state.to_dict()), created_ms=now, updated_ms=now))
                # a subscribing group holds its streams from this very transaction on
                uid = register_group(conn, self.controller, name, config, 0, created=True)
        except sa.exc.IntegrityError:
            raise AlreadyExists(f"reader group {name!r} already exists") from None
        return dataclasses.replace(self.load(name), subscriber_uid=uid)

    def load(self, name: str) -> GroupRow:
        check_name(name, "reader group name")
        with self.db.read() as conn:
            row = conn.execute(sa.select(rgt.reader_groups).where(rgt.reader_groups.c.name == name)).one_or_none()
        if row is None:
            raise NotFound(f"reader group {name!r} does not exist")
        return GroupRow(row.id, row.name, json.loads(row.config), row.generation, row.version,
                        GroupState.from_dict(json.loads(row.state)), row.created_ms, row.updated_ms)

    def version(self, name: str) -> int:
        """The row's version, which every stored transition moves: one small read, for readers that
        watch the group between their syncs."""
        with self.db.read() as conn:
            version = conn.execute(sa.select(rgt.reader_groups.c.version).where(
                rgt.reader_groups.c.name == name)).scalar_one_or_none()
        if version is None:
            raise NotFound(f"reader group {name!r} does not exist")
        return int(version)

    def names(self) -> list[str]:
        with self.db.read() as conn:
            return list(conn.execute(sa.select(rgt.reader_groups.c.name).order_by(rgt.reader_groups.c.name)).scalars())

    def delete(self, name: str) -> None:
        check_name(name, "reader group name")
        with self.db.write() as conn:
            gone = conn.execute(sa.delete(rgt.reader_groups).where(rgt.reader_groups.c.name == name)).rowcount
            if gone:
                unregister_group(conn, name)
        if not gone:
            raise NotFound(f"reader group {name!r} does not exist")

    # ---- transitions ---------------------------------------------------------------------------
    def update(self, name: str, transition: Callable[[GroupRow, dict[str, dict[int, Segment]]], GroupState],
               new_config: Mapping[str, Any] | None = None, bump_generation: bool = False) -> GroupRow:
        """Apply `transition` (pure: row and topologies in, new state out) until it lands on the
        version it was computed from. Typed errors raised by the transition pass through unchanged.
        A transition that returns the row's own state object changes nothing: no write, no new
        version (so readers watching the version are not woken), and the row is returned as loaded."""
        for attempt in range(MAX_ATTEMPTS):
            row = self.load(name)
            config = dict(new_config) if new_config is not None else row.config
            topologies = self.topologies(config["streams"])
            state = transition(row, topologies)
            if state is row.state and new_config is None and not bump_generation:
                return row
            now = self.clock.now_ms()
            values: dict[str, Any] = dict(state=json.dumps(state.to_dict()), version=row.version + 1, updated_ms=now)
            if new_config is not None:
                values["config"] = json.dumps(config)
            if bump_generation:
                values["generation"] = row.generation + 1
            generation = values.get("generation", row.generation)
            uid = None
            with self.db.write() as conn:
                won = conn.execute(sa.update(rgt.reader_groups).where(
                    rgt.reader_groups.c.id == row.id, rgt.reader_groups.c.version == row.version,
                ).values(**values)).rowcount
                if won and bump_generation:
                    uid = register_group(conn, self.controller, name, config, generation, created=False)
                elif won and RetentionType(config["retention_type"]) is AUTOMATIC:
                    self._publish_completed(conn, row, state, now)
            if won:
                return GroupRow(row.id, row.name, config, generation, row.version + 1, state, row.created_ms, now,
                                uid)
            time.sleep(min(0.001 * (attempt + 1), 0.02))  # back off a little: another reader just wrote
        raise ConflictError(f"reader group {name!r}: gave up after {MAX_ATTEMPTS} concurrent updates in a row")

    def _publish_completed(self, conn: Any, before: GroupRow, after: GroupState, now: int) -> None:
        """The transition just completed checkpoints (they are in `after` but not in `before`): the
        latest of them is the group's acknowledgement, published in this same transaction, so a
        checkpoint is published exactly once and never after a later one."""
        known = {c.name for c in before.state.completed}
        fresh = [c for c in after.completed if c.name not in known]
        if fresh:
            publish_checkpoint(conn, self.controller, before.name, before.generation, fresh[-1].cuts, now)
