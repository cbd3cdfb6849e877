"""Retention cycles on the metadata store (the shell around streams/retention.py).

A cycle: record the tail cut if due (docs/retention.md), decide (pure), truncate through the stream
controller (so the truncation is audited with the rule and honours legal holds), prune the set
(docs/retention.md). `preview` runs the same decision without changing anything.

Consumption-based retention (docs/retention.md): the subscribers' views are loaded in the same transaction as
the head, the tail and the retention set; with at least one subscriber the decision also gets their
lower bound LB, and a truncation it causes is audited with the subscribers, LB and the case.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import ConflictError, InvalidInput, InvalidStreamCut
from ..faults import fault_point, pause_point
from ..store import schema as t
from ..store.fencing import LeaseFence, check_fence
from ..store.holds import Hold, holds_on
from ..store.schema_retention import retention_set
from .controller import StreamController
from .cuts import CutOrder
from .model import segment_name
from .repository import StreamState
from .retention import (
    BEHIND_HEAD,
    Consumption,
    RetentionDecision,
    RetentionRecord,
    RetentionStream,
    SubscriberView,
    decide,
    held,
    prune,
    record_due,
)
from .retention_reasons import cycle_reason
from .subscriber_store import SubscriberStore
from .subscribers import lower_bound, upper_bound

log = logging.getLogger("tidekeep.retention")


def tail_record(state: StreamState, now_ms: int) -> RetentionRecord:
    """The stream's tail cut as a retention record: its size counts every byte ever written before
    it, sealed segments included (docs/retention.md)."""
    tail = state.tail()
    return RetentionRecord(now_ms, state.topology().size_at(tail), tail)


def _check_now(now: int | None) -> None:
    if now is not None and (not isinstance(now, int) or isinstance(now, bool) or now < 0):
        raise InvalidInput(f"invalid time {now!r}: expected milliseconds since the epoch")


@dataclass(frozen=True)
class CycleInputs:
    """One read of what a retention cycle decides on (RetentionManager.inputs)."""

    state: StreamState
    records: list[RetentionRecord]  # the retention set, oldest first
    holds: list[Hold]  # the holds on the stream, oldest first
    views: list[SubscriberView]  # its subscribers


class RetentionManager:
    def __init__(self, controller: StreamController, settings_frequency_ms: int) -> None:
        self.controller = controller
        self.frequency_ms = settings_frequency_ms
        self.subscribers = SubscriberStore(controller)

    # ---- storage -------------------------------------------------------------------------------
    @staticmethod
    def _load(conn: Connection, stream_id: int) -> list[RetentionRecord]:
        rows = conn.execute(sa.select(retention_set).where(retention_set.c.stream_id == stream_id)
                            .order_by(retention_set.c.recording_time_ms)).all()
        return [RetentionRecord(r.recording_time_ms, r.recording_size,
                                dict(r.positions)) for r in rows]

    def records(self, stream: str) -> list[RetentionRecord]:
        """The stream's retention set, oldest first."""
        with self.controller.db.read() as conn:
            state = self.controller.repository.load(conn, stream)
            return self._load(conn, state.stream_id)

    @staticmethod
    def _due(records: list[RetentionRecord], now_ms: int, frequency_ms: int) -> bool:
        return record_due(records, now_ms, frequency_ms)

    def inputs(self, stream: str) -> CycleInputs:
        """What a cycle decides on, read in one transaction: the stream, its retention set, the holds
        on it and its subscribers (what `preview` and what-if retention start from)."""
        with self.controller.db.read() as conn:
            state = self.controller.repository.load(conn, stream)
            return CycleInputs(state, self._load(conn, state.stream_id), holds_on(conn, "stream", stream),
                               self.subscribers.views(conn, state))

    # ---- the operations ------------------------------------------------------------------------
    def preview(self, stream: str, now: int | None = None) -> RetentionDecision:
        """What a cycle would do at `now` (default: the client's clock). Changes nothing."""
        _check_now(now)
        now_ms = self.controller.clock.now_ms() if now is None else now
        found = self.inputs(stream)
        state, records, holds, views = found.state, found.records, found.holds, found.views
        policy = state.info.config.retention
        recorded = None
        if policy is not None and self._due(records, now_ms, self.frequency_ms):
            recorded = tail_record(state, now_ms)
            records.append(recorded)
        decision = self._decide(state, records, now_ms, recorded, views)
        if decision.truncates and holds:
            # a run would be refused (HoldActive): the preview says so instead of promising bytes
            return held(decision, holds[0].id, holds[0].reason)
        return decision

    def run(self, stream: str, now: int | None = None, actor: str | None = None,
            fence: LeaseFence | None = None) -> RetentionDecision:
        """One retention cycle at `now` (default: the client's clock). With a `fence` (the service's
        lease on the stream), every write of the cycle — the tail record, the truncation, the pruning
        — is refused with LeaseLost once another process has taken the lease over (store/fencing.py)."""
        _check_now(now)
        now_ms = self.controller.clock.now_ms() if now is None else now
        recorded: RetentionRecord | None = None
        for attempt in range(1, SUBSCRIBER_ATTEMPTS + 1):
            state, records, views, added = self._load_for_cycle(stream, now_ms, fence)
            recorded = added or recorded  # a retried cycle keeps reporting the record its first attempt added
            decision = self._decide(state, records, now_ms, recorded, views)
            if decision.cut is None:
                break
            refused: InvalidStreamCut | None = None
            # tests: a subscriber appears, or the lease is taken over, between decision and truncation
            pause_point("retention.before_truncate")
            guard = fenced(fence, subscribers_unchanged(stream, views, self.subscribers))
            try:
                result = self.controller.truncate(stream, state.cut(decision.cut),
                                                  reason=cycle_reason(decision.rule, decision.reason), actor=actor,
                                                  details=retention_details(decision, state), guard=guard)
                moved = result.new_head != result.old_head
                if result.files_left:  # the truncate logged them; the run's result names them too
                    decision = dataclasses.replace(decision, files_left=result.files_left)
            except SubscribersChanged:
                if attempt == SUBSCRIBER_ATTEMPTS:
                    raise
                continue  # decide again with the subscribers as they are now
            except InvalidStreamCut as exc:
                moved, refused = False, exc  # normally: the head is already past the chosen cut
            if not moved:
                # another truncation (manual, or a concurrent cycle) reached or passed the chosen cut since
                # we read the head: it wins; decide again against the new head, which reports it
                state = self.controller.state(stream)
                decision = self._decide(state, records, now_ms, recorded, views)
                if decision.cut is not None:
                    raise refused or InvalidStreamCut(f"retention of {stream}: the chosen cut could not be applied")
            else:
                log.debug("retention truncated %s: rule %s, %d bytes freed (%s)", stream, decision.rule,
                          decision.freed_bytes, decision.reason)
                # a crash here leaves the set unpruned: the next cycle finds the chosen cut at the head
                # (behind-head) and prunes then, so no truncation is repeated or lost
                fault_point("retention.after_truncate")
            break
        # after a truncation at (or a head already past) the chosen cut, every record at or before it can
        # never be chosen again (docs/retention.md). A truncation at the subscribers' lower bound prunes by
        # the cut itself: LB is no record, and a queue that always truncates at LB would otherwise
        # never prune its retention set
        if decision.cut is not None:
            self._prune(stream, state, decision.cut, fence)
        elif decision.chosen is not None and decision.rule == BEHIND_HEAD and state.topology().at_or_before(
                decision.chosen.positions, state.head):
            self._prune(stream, state, decision.chosen.positions, fence)
        return decision

    def _load_for_cycle(self, stream: str, now_ms: int, fence: LeaseFence | None = None) -> tuple[
            StreamState, list[RetentionRecord], list[SubscriberView], RetentionRecord | None]:
        """The stream, its retention set (with the tail recorded if due) and its subscribers, read in one
        transaction. Returns the record added, if any."""
        with self.controller.db.write() as conn:
            # the stream row lock serialises cycles of one stream (and orders them with truncations)
            state = self.controller.repository.load(conn, stream, lock=True)
            check_fence(conn, fence)
            policy = state.info.config.retention
            records = self._load(conn, state.stream_id)
            views = self.subscribers.views(conn, state)
            recorded = None
            if policy is not None and self._due(records, now_ms, self.frequency_ms):
                recorded = tail_record(state, now_ms)
                conn.execute(sa.insert(retention_set).values(
                    stream_id=state.stream_id, recording_time_ms=recorded.recording_time_ms,
                    recording_size=recorded.recording_size, positions=recorded.positions))
                records.append(recorded)
        return state, records, views, recorded

    def _prune(self, stream: str, state: StreamState, positions: dict[int, int],
               fence: LeaseFence | None = None) -> None:
        with self.controller.db.write() as conn:
            current = self.controller.repository.load(conn, stream, lock=True)
            check_fence(conn, fence)
            if current.info.uid != state.info.uid:
                return  # re-created meanwhile: the new stream has its own set
            records = self._load(conn, current.stream_id)
            keep = {r.recording_time_ms for r in prune(records, positions, current.topology())}
            doomed = [r.recording_time_ms for r in records if r.recording_time_ms not in keep]
            if doomed:
                conn.execute(sa.delete(retention_set).where(retention_set.c.stream_id == current.stream_id,
                                                            retention_set.c.recording_time_ms.in_(doomed)))

    def _decide(self, state: StreamState, records: list[RetentionRecord], now_ms: int,
                recorded: RetentionRecord | None, views: list[SubscriberView]) -> RetentionDecision:
        topology = state.topology()
        stream = RetentionStream(topology, state.head, topology.size_at(state.tail()), state.name)
        consumption = None  # no subscriber: plain size/time retention
        if views:
            bound = clamp_to_head(lower_bound([v.positions for v in views], state.segments), state)
            consumption = Consumption(bound, tuple(views))
        return decide(stream, records, state.info.config.retention, now_ms, recorded=recorded,
                      consumption=consumption)

    def history(self, stream: str, limit: int = 50, before_id: int | None = None) -> list[dict[str, Any]]:
        """Past truncations of the stream (retention and manual), newest first, from the audit table;
        with `before_id`, only those older than the audit row of that id (the next page)."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise InvalidInput(f"invalid limit {limit!r}: must be an integer >= 1")
        if before_id is not None and (not isinstance(before_id, int) or isinstance(before_id, bool)):
            raise InvalidInput(f"invalid before_id {before_id!r}: must be an audit row id")
        self.controller.state(stream)  # NotFound for an unknown stream
        query = sa.select(t.audit).where(t.audit.c.target == stream, t.audit.c.action == "truncate")
        if before_id is not None:
            query = query.where(t.audit.c.id < before_id)
        with self.controller.db.read() as conn:
            rows = conn.execute(query.order_by(t.audit.c.id.desc()).limit(limit)).all()
        return [dict(r._mapping) for r in rows]

    def streams_with_policy(self) -> list[str]:
        return [s.name for s in self.controller.list_streams() if s.config.retention is not None]


SUBSCRIBER_ATTEMPTS = 3  # decisions made again when subscribers change between a decision and its truncation


class SubscribersChanged(ConflictError):
    """A subscriber appeared, was reset or re-created between a retention decision and its truncation."""


Guard = Callable[[Connection, StreamState], None]  # StreamController.truncate's guard: raises to refuse


def subscribers_unchanged(stream: str, seen: list[SubscriberView], store: SubscriberStore) -> Guard:
    """A truncation guard: every current subscriber must be one the decision saw (same group, same
    generation) with a cut at or after the one it saw. Acknowledgements only move forward, so they
    never refuse; a new subscriber, a reset or a re-created group starting earlier does (its data
    might be what the decision is about to truncate)."""
    known = {(v.reader_group, v.generation): v.positions for v in seen}

    def guard(conn: Connection, state: StreamState) -> None:
        topology = state.topology()
        for view in store.views(conn, state):
            before = known.get((view.reader_group, view.generation))
            if before is None or topology.compare(view.positions, before) not in (CutOrder.EQUAL, CutOrder.AFTER):
                raise SubscribersChanged(f"retention of {stream}: subscriber {view.reader_group} changed since "
                                         "the decision; deciding again")

    return guard


def fenced(fence: LeaseFence | None, guard: Guard) -> Guard:
    """A truncation guard that first checks the lease the decision was made under (no-op without a
    fence): the check runs under the stream lock inside the truncating transaction, so a controller
    whose lease was taken over since its decision truncates nothing."""
    if fence is None:
        return guard

    def checked(conn: Connection, state: StreamState) -> None:
        check_fence(conn, fence)
        guard(conn, state)

    return checked


def clamp_to_head(bound: dict[int, int], state: StreamState) -> dict[int, int]:
    """The lower bound as the decision must see it. Once the maximum has forced a truncation past a
    subscriber that stopped acknowledging, LB lies behind the head; measured from LB, what it "keeps"
    would count bytes already gone, and every later cycle would truncate again (case iii) although
    the stream holds no more than the maximum. Data behind the head is gone for every subscriber, so
    the bound is the head where LB lies behind it: the later of the two at every routing key
    (`upper_bound`, also across a scale between the two cuts)."""
    return upper_bound([bound, state.head], state.segments)


def retention_details(decision: RetentionDecision, state: StreamState) -> dict[str, Any]:
    """The audit details of a retention cycle's truncation: `retention` marks it as one (with the
    rule that chose the cut), so a deletion report never takes it from its reason text alone
    (store/audit_report.py), and the subscribers when they shaped it."""
    return {"retention": {"rule": decision.rule}, **(consumption_details(decision, state) or {})}


def consumption_details(decision: RetentionDecision, state: StreamState) -> dict[str, Any] | None:
    """The audit details of a truncation the subscribers' lower bound shaped (None for plain size/time
    retention): the case, LB, and every subscriber with its cut, whether that cut allowed the truncation
    (the chosen cut is at or before it) or the maximum overrode it (cases iii and v), and what it had
    not consumed."""
    if decision.case is None or decision.cut is None:
        return None
    topology = state.topology()
    subscribers = []
    for view in decision.subscribers:
        order = topology.compare(decision.cut, view.positions)
        subscribers.append({
            "reader_group": view.reader_group, "generation": view.generation,
            "cut": {segment_name(s): o for s, o in sorted(view.positions.items())},
            "acknowledged": view.acknowledged, "updated_ms": view.updated_ms,
            "unconsumed_bytes": view.unconsumed_bytes,
            "allowed": order in (CutOrder.BEFORE, CutOrder.EQUAL)})
    lb = decision.lower_bound or {}
    return {"consumption": {"case": decision.case, "rule": decision.rule,
                            "lower_bound": {segment_name(s): o for s, o in sorted(lb.items())},
                            "subscribers": subscribers}}


__all__ = ["CycleInputs", "RetentionManager", "SubscribersChanged", "clamp_to_head", "consumption_details", "fenced",
           "retention_details", "subscribers_unchanged", "tail_record"]
