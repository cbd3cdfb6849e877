"""Size- and time-based retention: the pure decision (docs/retention.md).

Nothing here touches the store: the shell (retention_store.py) loads the stream's segments, head,
tail size and retention set, calls `decide`, and applies the result.

Definitions (docs/retention.md):
- retained(c) = tail_size - c.recording_size (SIZE, bytes) or now - c.recording_time (TIME, ms):
  what stays if the stream is truncated at retention-set cut c.
- Cmin = the record with the smallest retained >= min (truncate as far as possible, keep min).
- Cmax = the record with the largest retained within [min, max] (the oldest cut meeting both).
  Ties keep the older record, as Pravega's one pass in time order does.
The four rules (docs/design/streams.md) then pick the cut; a cut at, behind or overlapping the current head is never
taken (truncation is monotonic, so a manual truncation ahead of the chosen cut wins).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..store.deletion import FileLeft, files_left_json
from .config import RetentionKind, RetentionPolicy
from .cuts import CutOrder, Topology
from .model import Segment, segment_name
from .retention_reasons import Reason, Why, cut_text, render_reason
from .rule_codes import RuleCode

# the codes by their short names, as the rest of the package and the tests know them
NO_POLICY, EMPTY_SET, BELOW_MIN = RuleCode.NO_POLICY, RuleCode.EMPTY_SET, RuleCode.BELOW_MIN
NO_CMIN, NO_MAX, ABOVE_MAX = RuleCode.NO_CMIN, RuleCode.NO_MAX, RuleCode.ABOVE_MAX
BETWEEN_LIMITS, BEHIND_HEAD, HELD = RuleCode.BETWEEN_LIMITS, RuleCode.BEHIND_HEAD, RuleCode.HELD
CBR_WITHIN_LIMITS, CBR_BELOW_MIN = RuleCode.CBR_WITHIN_LIMITS, RuleCode.CBR_BELOW_MIN
CBR_ABOVE_MAX, CBR_OVERLAPS_MIN = RuleCode.CBR_ABOVE_MAX, RuleCode.CBR_OVERLAPS_MIN
CBR_OVERLAPS_MAX, CBR_NO_TRUNCATION = RuleCode.CBR_OVERLAPS_MAX, RuleCode.CBR_NO_TRUNCATION
CBR_RULES = (CBR_WITHIN_LIMITS, CBR_BELOW_MIN, CBR_ABOVE_MAX, CBR_OVERLAPS_MIN, CBR_OVERLAPS_MAX, CBR_NO_TRUNCATION)
RULES = (NO_POLICY, EMPTY_SET, BELOW_MIN, NO_CMIN, NO_MAX, ABOVE_MAX, BETWEEN_LIMITS, BEHIND_HEAD, *CBR_RULES)


@dataclass(frozen=True)
class RetentionRecord:
    """One retention-set entry: a tail cut recorded at `recording_time_ms`, whose
    `recording_size` is the absolute logical byte position of the cut since the stream was created
    (bytes already truncated still count, docs/retention.md)."""

    recording_time_ms: int
    recording_size: int
    positions: dict[int, int] = field(hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {"recording_time_ms": self.recording_time_ms, "recording_size": self.recording_size,
                "positions": {segment_name(s): o for s, o in sorted(self.positions.items())}}


@dataclass(frozen=True)
class SubscriberView:
    """What the decision needs to know of one subscriber of the stream (loaded by the shell)."""

    reader_group: str
    generation: int
    positions: dict[int, int] = field(hash=False)  # the effective cut: acknowledged, else the group's start cut
    acknowledged: bool  # False: nothing acknowledged yet, `positions` is the group's start cut
    updated_ms: int | None  # when the acknowledged cut was published
    unconsumed_bytes: int  # from the effective cut to the tail

    def to_dict(self) -> dict[str, Any]:
        return {"reader_group": self.reader_group, "generation": self.generation,
                "positions": {segment_name(s): o for s, o in sorted(self.positions.items())},
                "acknowledged": self.acknowledged, "updated_ms": self.updated_ms,
                "unconsumed_bytes": self.unconsumed_bytes}


@dataclass(frozen=True)
class RetainedRecord:
    record: RetentionRecord
    retained: int  # bytes (SIZE) or ms (TIME) left if truncated here


@dataclass(frozen=True)
class RetentionDecision:
    stream: str
    now_ms: int
    policy: RetentionPolicy | None
    rule: RuleCode
    why: Reason  # the facts the rule or case was chosen on; `reason` renders them
    cut: dict[int, int] | None  # positions to truncate at; None: no truncation
    cmin: RetentionRecord | None
    cmax: RetentionRecord | None
    retained: int | None  # bytes or ms left at the chosen cut (None when nothing is chosen)
    freed_bytes: int
    records: tuple[RetainedRecord, ...]
    chosen: RetentionRecord | None = None  # the record picked by the rules, even if then discarded
    stream_amount: int | None = None  # the stream's current amount as the rules saw it (bytes or ms)
    recorded: RetentionRecord | None = None  # the tail record this cycle added (or would add: preview)
    lower_bound: dict[int, int] | None = None  # the subscribers' lower bound LB (None: no subscriber)
    case: str | None = None  # docs/retention.md consumption case "i".."v" that applied, if any
    subscribers: tuple[SubscriberView, ...] = ()
    # set by a run whose truncation could not delete some chunk files after its commit (read-only
    # storage, permissions): the truncation stands; the sweep removes these files later
    files_left: tuple[FileLeft, ...] = ()

    @property
    def truncates(self) -> bool:
        return self.cut is not None

    @property
    def reason(self) -> str:
        """Why, in one sentence (retention_reasons.render_reason)."""
        return render_reason(self.why)

    def to_dict(self) -> dict[str, Any]:
        def rec(r: RetentionRecord | None) -> dict[str, Any] | None:
            return None if r is None else r.to_dict()

        return {
            "stream": self.stream,
            "now_ms": self.now_ms,
            "policy": None if self.policy is None else self.policy.to_dict(),
            "policy_text": None if self.policy is None else self.policy.describe(),
            "rule": self.rule.value,
            "reason": self.reason,
            "cut": None if self.cut is None else {segment_name(s): o for s, o in sorted(self.cut.items())},
            "cmin": rec(self.cmin),
            "cmax": rec(self.cmax),
            "chosen": rec(self.chosen),
            "retained": self.retained,
            "freed_bytes": self.freed_bytes,
            "stream_amount": self.stream_amount,
            "recorded": rec(self.recorded),
            "lower_bound": None if self.lower_bound is None else {
                segment_name(s): o for s, o in sorted(self.lower_bound.items())},
            "case": self.case,
            "subscribers": [v.to_dict() for v in self.subscribers],
            "records": [dict(r.record.to_dict(), retained=r.retained,
                             age_ms=self.now_ms - r.record.recording_time_ms) for r in self.records],
            "files_left": files_left_json(self.files_left),
        }


def retained_amount(record: RetentionRecord, kind: RetentionKind, tail_size: int, now_ms: int) -> int:
    if kind is RetentionKind.SIZE:
        return tail_size - record.recording_size
    return now_ms - record.recording_time_ms


@dataclass(frozen=True)
class RetentionStream:
    """What the decision knows of the stream: its segments (sealed ones with their final length), its
    head, and `tail_size`, the absolute logical size at its tail (bytes since the stream was created)."""

    topology: Topology
    head: Mapping[int, int]
    tail_size: int
    name: str = ""

    @staticmethod
    def of(segments: Mapping[int, Segment], head: Mapping[int, int], tail_size: int,
           name: str = "") -> RetentionStream:
        return RetentionStream(Topology(segments), head, tail_size, name)


@dataclass(frozen=True)
class Consumption:
    """The subscribers as the decision sees them: their lower bound LB (subscribers.lower_bound of
    their effective cuts) and each one's view, reported with the decision."""

    lower_bound: Mapping[int, int]
    subscribers: tuple[SubscriberView, ...] = ()


@dataclass(frozen=True)
class Judged:
    """What the size/time rules saw: the policy, the retention set in recording order with each record's
    retained amount, the candidates Cmin and Cmax, and the stream's current amount."""

    stream: RetentionStream
    policy: RetentionPolicy
    retained: tuple[RetainedRecord, ...]
    cmin: RetainedRecord | None
    cmax: RetainedRecord | None
    amount: int

    @property
    def kind(self) -> RetentionKind:
        return self.policy.kind

    def reason(self, why: Why, /, **facts: Any) -> Reason:
        return Reason(why, self.kind, facts)


def candidates(
    retained: Sequence[RetainedRecord], policy: RetentionPolicy
) -> tuple[RetainedRecord | None, RetainedRecord | None]:
    """(Cmin, Cmax) in one pass in time order; strict comparisons keep the older record on ties."""
    cmin: RetainedRecord | None = None
    cmax: RetainedRecord | None = None
    for r in retained:
        if r.retained >= policy.min and (cmin is None or r.retained < cmin.retained):
            cmin = r
        if r.retained >= policy.min and (policy.max is None or r.retained <= policy.max) and (
                cmax is None or r.retained > cmax.retained):
            cmax = r
    if policy.max is None:
        cmax = None  # without a max there is no max candidate (Cmax would only repeat the oldest cut)
    return cmin, cmax


def stream_amount(stream: RetentionStream, records: Sequence[RetentionRecord], kind: RetentionKind,
                  now_ms: int) -> int:
    """How much the stream holds now, as the rules compare it with min and max. SIZE: exact bytes
    from the head to the tail. TIME: the age of the oldest record at or after the head, a lower bound
    on the age of the oldest data (the head's own write time is not recorded); 0 without such record."""
    if kind is RetentionKind.SIZE:
        return stream.tail_size - stream.topology.size_at(stream.head)
    ages = [now_ms - r.recording_time_ms for r in records
            if stream.topology.compare(r.positions, stream.head) in (CutOrder.EQUAL, CutOrder.AFTER)]
    return max(ages, default=0)


@dataclass(frozen=True)
class Choice:
    """What the rules (or the consumption cases) pick, before the head check: the rule, the consumption
    case if one applied, the positions (None: no cut), the record chosen (None: LB itself, or nothing),
    the amount left there (None: TIME at LB, whose age is not recorded) and why."""

    rule: RuleCode
    reason: Reason
    positions: dict[int, int] | None = None
    record: RetainedRecord | None = None
    retained: int | None = None
    case: str | None = None


WHERE = {CutOrder.EQUAL: "at", CutOrder.BEFORE: "behind", CutOrder.OVERLAPS: "partly behind"}


def decide(
    stream: RetentionStream,
    records: Iterable[RetentionRecord],
    policy: RetentionPolicy | None,
    now_ms: int,
    *,
    recorded: RetentionRecord | None = None,
    consumption: Consumption | None = None,
) -> RetentionDecision:
    """The cut to truncate at (or none) and why. `records` is the retention set in recording order
    (including a tail record this cycle adds, `recorded`). With `consumption` (the subscribers' lower
    bound) the consumption cases of docs/retention.md replace the size/time rules once the stream
    holds at least min and a Cmin exists."""
    ordered = sorted(records, key=lambda r: r.recording_time_ms)
    bound = None if consumption is None else dict(consumption.lower_bound)
    base = RetentionDecision(stream.name, now_ms, policy, NO_POLICY, Reason(Why.NO_POLICY), None, None, None, None, 0,
                             (), recorded=recorded, lower_bound=bound,
                             subscribers=() if consumption is None else tuple(consumption.subscribers))
    if policy is None:
        return base
    kind = policy.kind
    retained = tuple(RetainedRecord(r, retained_amount(r, kind, stream.tail_size, now_ms)) for r in ordered)
    if not retained:
        return dataclasses.replace(base, rule=EMPTY_SET, why=Reason(Why.EMPTY_SET, kind))
    cmin, cmax = candidates(retained, policy)
    judged = Judged(stream, policy, retained, cmin, cmax, stream_amount(stream, ordered, kind, now_ms))
    seen = dataclasses.replace(base, cmin=None if cmin is None else cmin.record,
                               cmax=None if cmax is None else cmax.record, records=retained,
                               stream_amount=judged.amount)
    if judged.amount < policy.min:
        return dataclasses.replace(seen, rule=BELOW_MIN, why=judged.reason(
            Why.BELOW_MIN, amount=judged.amount, minimum=policy.min))
    if cmin is None and not (bound is not None and kind is RetentionKind.SIZE):
        return dataclasses.replace(seen, rule=NO_CMIN, why=judged.reason(Why.NO_CMIN, minimum=policy.min))
    if bound is not None:
        return applied(consumption_choice(judged, bound), stream, seen)
    return applied(rules_choice(judged), stream, seen)


def rules_choice(judged: Judged) -> Choice:
    """The size/time rules for a stream that holds at least min and has a Cmin."""
    policy, cmin, cmax, amount = judged.policy, judged.cmin, judged.cmax, judged.amount
    assert cmin is not None
    if policy.max is None:
        chosen, rule, why = cmin, NO_MAX, judged.reason(Why.NO_MAX, minimum=policy.min)
    elif amount > policy.max:
        rule = ABOVE_MAX
        limits = dict(amount=amount, minimum=policy.min, maximum=policy.max)
        if cmax is not None:
            chosen, why = cmax, judged.reason(Why.ABOVE_MAX_AT_CMAX, **limits)
        else:
            chosen, why = cmin, judged.reason(Why.ABOVE_MAX_AT_CMIN, **limits)
    else:
        chosen, rule = cmin, BETWEEN_LIMITS
        why = judged.reason(Why.BETWEEN_LIMITS, amount=amount, minimum=policy.min, maximum=policy.max)
    return Choice(rule, why, dict(chosen.record.positions), chosen, chosen.retained)


def applied(choice: Choice, stream: RetentionStream, seen: RetentionDecision) -> RetentionDecision:
    """The decision from a choice: no cut, a cut at or behind the head (nothing to truncate: a truncation
    ahead of it already happened), or the cut and the bytes it frees."""
    chosen = None if choice.record is None else choice.record.record
    if choice.positions is None:
        return dataclasses.replace(seen, rule=choice.rule, why=choice.reason, case=choice.case)
    order = stream.topology.compare(choice.positions, stream.head)
    if order is not CutOrder.AFTER:
        if choice.case is None:
            why = Reason(Why.BEHIND_HEAD, choice.reason.kind, {"rule": choice.rule, "where": WHERE[order]})
        else:
            why = Reason(Why.CHOSEN_BEHIND_HEAD, choice.reason.kind, {"inner": choice.reason, "where": WHERE[order]})
        return dataclasses.replace(seen, rule=BEHIND_HEAD, why=why, chosen=chosen, case=choice.case)
    freed = stream.topology.size_between(stream.head, choice.positions)
    return dataclasses.replace(seen, rule=choice.rule, why=choice.reason, cut=dict(choice.positions),
                               retained=choice.retained, freed_bytes=freed, chosen=chosen, case=choice.case)


# ---- consumption-based retention (docs/retention.md) ----------------------------------------------------


def time_proof_beyond_max(
    topology: Topology, lb: Mapping[int, int], retained: Sequence[RetainedRecord], maximum: int,
) -> RetainedRecord | None:
    """TIME: the recorded cut that proves the data at LB older than `maximum`, or None if none does.

    The write time of the data at LB is not recorded; only the retention set says anything about it.
    A cut recorded more than `maximum` ago proves it when some data at or after LB lies before that
    cut: that data was written before the cut was recorded. A cut at or before LB proves nothing,
    because what follows it was written after it was recorded, at an unknown time (docs/retention.md,
    "How LB is judged"). Of several such cuts, the oldest (it proves the most); `retained` is in
    recording order."""
    for r in retained:
        if r.retained > maximum and topology.size_between(lb, r.record.positions) > 0:
            return r
    return None


def consumption_choice(judged: Judged, lb: Mapping[int, int]) -> Choice:
    """The consumption cases (i)-(v) of docs/retention.md for a stream that holds at least min.
    TIME needs a Cmin (the caller stops without one); SIZE knows exactly what LB keeps, so (i) and a
    LB above max need no recorded cut, and only the cases that need Cmin choose nothing without it.

    The one rule every path keeps: a cut that is not at or before LB -- one that drops data some
    subscriber has not read -- is chosen only when LB keeps more than max by the policy's own
    measure. SIZE: the exact bytes from LB to the tail. TIME: the age of the data at LB, which is
    provably more than max only through a recorded cut (`time_proof_beyond_max`); where nothing proves
    it, LB counts as within max, truncation stops at or before LB and the max yields. Against min,
    TIME places LB by stream-cut order with Cmin (LB at or before Cmin keeps everything written since
    Cmin was recorded, so at least min).

    The max side is examined first: the max overrides the subscribers. Where no record keeps within
    the limits, the max forces Cmin instead of Cmax (as in the size/time rules). Beyond the literal
    cases, so that the limits hold whenever a recorded cut can meet them without dropping unread data
    for nothing (priority: min, then the subscribers, then max unless LB itself keeps more than max):
    (iv) takes the latest recorded cut at or before LB that keeps at least min, or nothing; (v) only
    takes records within the limits, and falls back to Cmin when none is at or after LB."""
    cases = ConsumptionCases(judged, dict(lb))
    return cases.size() if judged.kind is RetentionKind.SIZE else cases.time()


class ConsumptionCases:
    """The case analysis of `consumption_choice` for one decision: the shared facts once, a method per
    branch (docs/retention.md, cases i-v)."""

    def __init__(self, judged: Judged, lb: dict[int, int]) -> None:
        self.judged = judged
        self.policy = judged.policy
        self.topology = judged.stream.topology
        self.lb = lb
        self.cmin, self.cmax = judged.cmin, judged.cmax
        self.keeps_min = [r for r in judged.retained if r.retained >= self.policy.min]
        self.within = [r for r in self.keeps_min
                       if self.cmax is None or r.retained <= self.policy.max]  # type: ignore[operator]
        self.target = judged.reason(Why.TARGET_CMAX if self.cmax is not None else Why.TARGET_CMIN)
        self.lb_retained: int | None = None
        if judged.kind is RetentionKind.SIZE:
            self.lb_retained = judged.stream.tail_size - self.topology.size_at(lb)

    def reason(self, why: Why, /, **facts: Any) -> Reason:
        return self.judged.reason(why, **facts)

    def at_record(self, case: str, rule: RuleCode, record: RetainedRecord, why: Why, /, **facts: Any) -> Choice:
        reason = self.reason(why, **facts, cut=record.record.positions)
        return Choice(rule, reason, dict(record.record.positions), record, record.retained, case)

    def at_lb(self, case: str, rule: RuleCode, why: Why, /, **facts: Any) -> Choice:
        return Choice(rule, self.reason(why, **facts, lb=self.lb), self.lb, None, self.lb_retained, case)

    def nothing(self, case: str, why: Why, /, **facts: Any) -> Choice:
        return Choice(CBR_NO_TRUNCATION, self.reason(why, **facts), case=case)

    def overlaps_max(self, beyond: Reason) -> Choice:  # (v); only with a Cmin. `beyond`: why LB keeps > max
        assert self.cmin is not None
        options = self.within if self.cmax is not None else [self.cmin]
        later = [r for r in options if self.topology.compare(r.record.positions, self.lb) in (CutOrder.AFTER,
                                                                                              CutOrder.EQUAL)]
        if later:
            return self.at_record("v", CBR_OVERLAPS_MAX, later[0], Why.OVERLAPS_MAX_LATER, beyond=beyond,
                                  target=self.target)
        return self.at_record("v", CBR_OVERLAPS_MAX, self.cmin, Why.OVERLAPS_MAX_CMIN, beyond=beyond,
                              target=self.target, minimum=self.policy.min)

    def overlaps_min(self) -> Choice:  # (iv)
        # never past LB: LB keeps less than min, so less than max, and the max is no cause to drop unread data
        note = self.yields_note()
        earlier = [r for r in self.keeps_min if self.topology.at_or_before(r.record.positions, self.lb)]
        if earlier:
            return self.at_record("iv", CBR_OVERLAPS_MIN, earlier[-1], Why.OVERLAPS_MIN_EARLIER, lb=self.lb,
                                  minimum=self.policy.min, note=note)
        return self.nothing("iv", Why.OVERLAPS_MIN_NONE, lb=self.lb, minimum=self.policy.min, note=note)

    def yields_note(self) -> Reason:
        """Why the max does not override the subscribers in (iv), when the stream holds more than it."""
        if self.policy.max is None or self.judged.amount <= self.policy.max:
            return self.reason(Why.NO_NOTE)
        return self.reason(Why.MAX_YIELDS, maximum=self.policy.max)

    def size(self) -> Choice:
        policy, cmin, cmax, lb = self.policy, self.cmin, self.cmax, self.lb
        keeps = self.lb_retained
        assert keeps is not None
        if policy.max is not None and keeps > policy.max:
            beyond = self.reason(Why.BEYOND_SIZE, lb=lb, keeps=keeps, maximum=policy.max)
            if cmax is not None:
                where = self.topology.compare(lb, cmax.record.positions)
                if where is CutOrder.OVERLAPS:
                    return self.overlaps_max(beyond)
                if where is not CutOrder.AFTER:
                    return self.at_record("iii", CBR_ABOVE_MAX, cmax, Why.SIZE_ABOVE_MAX_AT_CMAX, beyond=beyond)
            # no recorded cut keeps within the limits, so the max cannot be met: Cmin comes closest, unless
            # LB keeps no more than Cmin (then LB is as close and spares the subscribers)
            if cmin is None or keeps <= cmin.retained:
                overlapping = cmin is not None and self.topology.compare(lb, cmin.record.positions) is CutOrder.OVERLAPS
                case = "v" if overlapping else "iii"
                return self.at_lb(case, CBR_OVERLAPS_MAX if overlapping else CBR_ABOVE_MAX, Why.SIZE_ABOVE_MAX_AT_LB,
                                  case=case, keeps=keeps, maximum=policy.max)
            if self.topology.at_or_before(lb, cmin.record.positions):
                return self.at_record("iii", CBR_ABOVE_MAX, cmin, Why.SIZE_ABOVE_MAX_BEFORE_CMIN, beyond=beyond)
            return self.at_record("v", CBR_OVERLAPS_MAX, cmin, Why.SIZE_ABOVE_MAX_OVERLAPS_CMIN, beyond=beyond)
        if keeps < policy.min:
            if cmin is None:
                return self.nothing("ii", Why.SIZE_BELOW_MIN_NONE, lb=lb, keeps=keeps, minimum=policy.min)
            if self.topology.at_or_before(cmin.record.positions, lb):
                return self.at_record("ii", CBR_BELOW_MIN, cmin, Why.SIZE_BELOW_MIN_AT_CMIN, lb=lb, keeps=keeps,
                                      minimum=policy.min)
            return self.overlaps_min()
        return self.at_lb("i", CBR_WITHIN_LIMITS, Why.SIZE_WITHIN_LIMITS, keeps=keeps)

    def time(self) -> Choice:
        """TIME: the max side by proof, the min side by stream-cut order with Cmin."""
        policy, cmin, lb = self.policy, self.cmin, self.lb
        assert cmin is not None
        unproven: Reason | None = None  # why LB counts as within max (shown in case i)
        if policy.max is not None:
            proof = time_proof_beyond_max(self.topology, lb, self.judged.retained, policy.max)
            if proof is not None:
                beyond = self.reason(Why.BEYOND_TIME, lb=lb, proof=proof.record.positions, age=proof.retained,
                                     maximum=policy.max)
                target = self.cmax if self.cmax is not None else cmin  # where the max forces the stream
                where = self.topology.compare(lb, target.record.positions)
                if where in (CutOrder.BEFORE, CutOrder.EQUAL):
                    return self.at_record("iii", CBR_ABOVE_MAX, target, Why.TIME_ABOVE_MAX, beyond=beyond,
                                          target=self.target)
                if where is CutOrder.OVERLAPS:
                    return self.overlaps_max(beyond)
                # LB after the target can only come from records out of recording order: judge it by min alone
            else:
                old = [r for r in self.judged.retained if r.retained > policy.max]
                unproven = (self.reason(Why.UNPROVEN_NONE_OLD, maximum=policy.max) if not old else
                            self.reason(Why.UNPROVEN_NEWEST_OLD, maximum=policy.max, newest=old[-1].record.positions))
        where = self.topology.compare(lb, cmin.record.positions)
        if where is CutOrder.AFTER:
            return self.at_record("ii", CBR_BELOW_MIN, cmin, Why.TIME_AFTER_CMIN, lb=lb, minimum=policy.min)
        if where is CutOrder.OVERLAPS:
            return self.overlaps_min()
        if unproven is None:
            return self.at_lb("i", CBR_WITHIN_LIMITS, Why.TIME_WITHIN_LIMITS, minimum=policy.min)
        return self.at_lb("i", CBR_WITHIN_LIMITS, Why.TIME_WITHIN_UNPROVEN, unproven=unproven, minimum=policy.min)


def prune(
    records: Iterable[RetentionRecord], truncation_positions: Mapping[int, int], topology: Topology,
) -> list[RetentionRecord]:
    """The records that survive a truncation (docs/retention.md): find the latest record whose cut is at
    or before the truncation cut and drop it and every record recorded no later than it."""
    ordered = sorted(records, key=lambda r: r.recording_time_ms)
    last_at_or_before = None
    for r in ordered:
        if topology.at_or_before(r.positions, truncation_positions):
            last_at_or_before = r.recording_time_ms
    if last_at_or_before is None:
        return ordered
    return [r for r in ordered if r.recording_time_ms > last_at_or_before]


def should_record(records: Iterable[RetentionRecord], now_ms: int, frequency_ms: int) -> bool:
    """Record the tail cut only if the set is empty or its newest record is older than the
    frequency, strictly (docs/retention.md: 5 min later no, 30 min + 1 ms yes)."""
    newest = max((r.recording_time_ms for r in records), default=None)
    return newest is None or now_ms - newest > frequency_ms


def record_due(records: Sequence[RetentionRecord], now_ms: int, frequency_ms: int) -> bool:
    """Whether a cycle at `now_ms` records the tail: `should_record`, and only after the newest record
    (a record is only ever appended after it, as Pravega's addReferenceToStreamCutIfLatest)."""
    newest = max((r.recording_time_ms for r in records), default=None)
    return should_record(records, now_ms, frequency_ms) and (newest is None or now_ms > newest)


def held(decision: RetentionDecision, hold_id: int, hold_reason: str) -> RetentionDecision:
    """The decision as a preview reports it on a held stream: a run would be refused (HoldActive), so
    no cut and no bytes; the reason names the hold and says what would happen without it."""
    why = Reason(Why.HELD, decision.why.kind, {"hold": hold_id, "hold_reason": hold_reason, "inner": decision.why})
    return dataclasses.replace(decision, rule=HELD, cut=None, freed_bytes=0, why=why)


__all__ = [
    "CBR_RULES",
    "RULES",
    "Choice",
    "Consumption",
    "ConsumptionCases",
    "Judged",
    "RetainedRecord",
    "RetentionDecision",
    "RetentionRecord",
    "RetentionStream",
    "RuleCode",
    "SubscriberView",
    "candidates",
    "consumption_choice",
    "cut_text",
    "decide",
    "held",
    "prune",
    "record_due",
    "retained_amount",
    "rules_choice",
    "should_record",
    "stream_amount",
    "time_proof_beyond_max",
]
