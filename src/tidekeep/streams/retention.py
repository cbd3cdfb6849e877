"""Size- and time-based retention: the pure decision (docs/retention.md).

Nothing here touches the store: the shell (retention_store.py) loads the stream's segments, head,
tail size and retention set, calls `decide`, and applies the result.

Definitions (docs/retention.md):
- retained(c) = tail_size - c.recording_size (SIZE, bytes) or now - c.recording_time (TIME, ms):
  what stays if the stream is truncated at retention-set cut c.
- Cmin = the record with the smallest retained >= min (truncate as far as possible, keep min).
- Cmax = the record with the largest retained within [min, max] (the oldest cut meeting both).
  Ties keep the older record, as Pravega's one pass in time order does.
The rules (docs/retention.md) then pick the cut; a cut at, behind or overlapping the current head is never
taken (truncation is monotonic, so a manual truncation ahead of the chosen cut wins).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..store.deletion import FileLeft, files_left_json
from ..units import format_duration, format_size
from .config import RetentionKind, RetentionPolicy
from .cuts import CutOrder, compare_cuts, initial_cut, size_between
from .model import Segment, segment_name
from .rule_codes import RuleCode

# the rule codes by their short names (rule_codes.py)
NO_POLICY = RuleCode.NO_POLICY
EMPTY_SET = RuleCode.EMPTY_SET
BELOW_MIN = RuleCode.BELOW_MIN
NO_CMIN = RuleCode.NO_CMIN
NO_MAX = RuleCode.NO_MAX
ABOVE_MAX = RuleCode.ABOVE_MAX
BETWEEN_LIMITS = RuleCode.BETWEEN_LIMITS
BEHIND_HEAD = RuleCode.BEHIND_HEAD
HELD = RuleCode.HELD
CBR_WITHIN_LIMITS = RuleCode.CBR_WITHIN_LIMITS
CBR_BELOW_MIN = RuleCode.CBR_BELOW_MIN
CBR_ABOVE_MAX = RuleCode.CBR_ABOVE_MAX
CBR_OVERLAPS_MIN = RuleCode.CBR_OVERLAPS_MIN
CBR_OVERLAPS_MAX = RuleCode.CBR_OVERLAPS_MAX
CBR_NO_TRUNCATION = RuleCode.CBR_NO_TRUNCATION
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
    reason: str
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

    def to_dict(self) -> dict[str, Any]:
        def rec(r: RetentionRecord | None) -> dict[str, Any] | None:
            return None if r is None else r.to_dict()

        return {
            "stream": self.stream,
            "now_ms": self.now_ms,
            "policy": None if self.policy is None else self.policy.to_dict(),
            "policy_text": None if self.policy is None else self.policy.describe(),
            "rule": self.rule,
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


def _fmt(kind: RetentionKind, amount: int) -> str:
    return format_size(amount) if kind is RetentionKind.SIZE else format_duration(max(amount, 0))


def _ranges(segments: Mapping[int, Segment]) -> dict[int, tuple[float, float]]:
    return {s.id: (s.key_low, s.key_high) for s in segments.values()}


def stream_amount(
    segments: Mapping[int, Segment], head_positions: Mapping[int, int], tail_size: int,
    records: Sequence[RetentionRecord], kind: RetentionKind, now_ms: int,
) -> int:
    """How much the stream holds now, as the rules compare it with min and max. SIZE: exact bytes
    from the head to the tail. TIME: the age of the oldest record at or after the head, a lower bound
    on the age of the oldest data (the head's own write time is not recorded); 0 without such record."""
    if kind is RetentionKind.SIZE:
        return tail_size - size_between(initial_cut(segments.values()), head_positions, segments)
    ranges = _ranges(segments)
    ages = [now_ms - r.recording_time_ms for r in records
            if compare_cuts(r.positions, head_positions, ranges) in (CutOrder.EQUAL, CutOrder.AFTER)]
    return max(ages, default=0)


def decide(
    segments: Mapping[int, Segment],
    head_positions: Mapping[int, int],
    tail_size: int,
    records: Iterable[RetentionRecord],
    policy: RetentionPolicy | None,
    now_ms: int,
    *,
    stream: str = "",
    recorded: RetentionRecord | None = None,
    lower_bound: Mapping[int, int] | None = None,
    subscribers: Sequence[SubscriberView] = (),
) -> RetentionDecision:
    """The cut to truncate at (or none) and why. `segments` are all segments of the stream (sealed
    ones with their final length), `tail_size` the absolute size of the current tail, `records` the
    retention set in recording order (including a tail record this cycle adds). With a subscriber
    `lower_bound` (subscribers.lower_bound of `subscribers`' effective cuts) the consumption cases
    of docs/retention.md replace the size/time rules once the stream holds at least min and a Cmin exists."""
    ordered = sorted(records, key=lambda r: r.recording_time_ms)
    bound = None if lower_bound is None else dict(lower_bound)

    def result(rule: RuleCode, reason: str, **kw: Any) -> RetentionDecision:
        values: dict[str, Any] = dict(cut=None, cmin=None, cmax=None, retained=None, freed_bytes=0, records=(),
                                      chosen=None, stream_amount=None, case=None)
        values.update(kw)
        return RetentionDecision(stream, now_ms, policy, rule, reason, recorded=recorded, lower_bound=bound,
                                 subscribers=tuple(subscribers), **values)

    if policy is None:
        return result(NO_POLICY, "the stream has no retention policy")
    kind = policy.kind
    retained = tuple(RetainedRecord(r, retained_amount(r, kind, tail_size, now_ms)) for r in ordered)
    if not retained:
        return result(EMPTY_SET, "the retention set is empty: no cut has been recorded yet")
    cmin, cmax = candidates(retained, policy)
    amount = stream_amount(segments, head_positions, tail_size, ordered, kind, now_ms)
    common: dict[str, Any] = dict(cmin=None if cmin is None else cmin.record,
                                  cmax=None if cmax is None else cmax.record, records=retained, stream_amount=amount)
    minimum = _fmt(kind, policy.min)
    if amount < policy.min:
        return result(BELOW_MIN, f"the stream holds {_fmt(kind, amount)}, less than the minimum {minimum}", **common)
    if cmin is None and not (bound is not None and kind is RetentionKind.SIZE):
        return result(NO_CMIN, f"no recorded cut keeps at least the minimum {minimum}", **common)
    if bound is not None:
        choice = consumption_choice(segments, bound, tail_size, retained, cmin, cmax, policy, amount)
        return _apply(choice, segments, head_positions, result, common)
    assert cmin is not None
    if policy.max is None:
        chosen, rule = cmin, NO_MAX
        reason = f"no maximum: truncate as far as possible while keeping at least {minimum} (Cmin)"
    elif amount > policy.max:
        rule = ABOVE_MAX
        if cmax is not None:
            chosen = cmax
            reason = (f"the stream holds {_fmt(kind, amount)}, more than the maximum {_fmt(kind, policy.max)}: "
                      f"truncate at the oldest cut keeping between {minimum} and {_fmt(kind, policy.max)} (Cmax)")
        else:
            chosen = cmin
            reason = (f"the stream holds {_fmt(kind, amount)}, more than the maximum {_fmt(kind, policy.max)}, and "
                      f"no recorded cut keeps between the limits: truncate at Cmin, keeping at least {minimum}")
    else:
        chosen, rule = cmin, BETWEEN_LIMITS
        reason = (f"the stream holds {_fmt(kind, amount)}, between the minimum {minimum} and the maximum "
                  f"{_fmt(kind, policy.max)}: truncate at the cut closest to the minimum (Cmin)")
    order = compare_cuts(chosen.record.positions, head_positions, _ranges(segments))
    if order is not CutOrder.AFTER:
        where = {CutOrder.EQUAL: "at", CutOrder.BEFORE: "behind", CutOrder.OVERLAPS: "partly behind"}[order]
        return result(BEHIND_HEAD, f"the chosen cut ({rule}) is {where} the current head: a truncation ahead of "
                                   "it already happened, so nothing is truncated", chosen=chosen.record, **common)
    freed = size_between(head_positions, chosen.record.positions, segments)
    return result(rule, reason, cut=dict(chosen.record.positions), retained=chosen.retained, freed_bytes=freed,
                  chosen=chosen.record, **common)


# ---- consumption-based retention (docs/retention.md) ----------------------------------------------------


@dataclass(frozen=True)
class ConsumptionChoice:
    """What the consumption cases pick, before the head check."""

    case: str  # "i".."v"
    rule: RuleCode
    reason: str
    positions: dict[int, int] | None  # None: the case chooses no cut
    record: RetainedRecord | None  # the retention-set record chosen (None: LB itself, or nothing)
    retained: int | None  # bytes or ms left at the chosen cut (None: TIME at LB, whose age is not recorded)


def cut_text(positions: Mapping[int, int]) -> str:
    return "{" + ", ".join(f"{segment_name(s)}={o}" for s, o in sorted(positions.items())) + "}"


def time_proof_beyond_max(
    segments: Mapping[int, Segment], lb: Mapping[int, int], retained: Sequence[RetainedRecord], maximum: int,
) -> RetainedRecord | None:
    """TIME: the recorded cut that proves the data at LB older than `maximum`, or None if none does.

    The write time of the data at LB is not recorded; only the retention set says anything about it.
    A cut recorded more than `maximum` ago proves it when some data at or after LB lies before that
    cut: that data was written before the cut was recorded. A cut at or before LB proves nothing,
    because what follows it was written after it was recorded, at an unknown time (docs/retention.md,
    "How LB is judged"). Of several such cuts, the oldest (it proves the most); `retained` is in
    recording order."""
    for r in retained:
        if r.retained > maximum and size_between(lb, r.record.positions, segments) > 0:
            return r
    return None


def consumption_choice(
    segments: Mapping[int, Segment], lb: Mapping[int, int], tail_size: int, retained: Sequence[RetainedRecord],
    cmin: RetainedRecord | None, cmax: RetainedRecord | None, policy: RetentionPolicy, amount: int,
) -> ConsumptionChoice:
    """The consumption cases (i)-(v) of docs/retention.md for a stream that holds at least min.
    `retained` is the retention set in recording order with each record's retained amount. TIME needs
    a Cmin (the caller stops without one); SIZE knows exactly what LB keeps, so (i) and a LB above max
    need no recorded cut, and only the cases that need Cmin choose nothing without it.

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
    kind = policy.kind
    ranges = _ranges(segments)
    lb = dict(lb)
    shown_lb = cut_text(lb)
    minimum = _fmt(kind, policy.min)
    maximum = None if policy.max is None else _fmt(kind, policy.max)
    target_name = "Cmax" if cmax is not None else "Cmin (no recorded cut keeps within the limits)"
    keeps_min = [r for r in retained if r.retained >= policy.min]
    within = [r for r in keeps_min if cmax is None or r.retained <= policy.max]  # type: ignore[operator]

    def order(a: Mapping[int, int], b: Mapping[int, int]) -> CutOrder:
        return compare_cuts(a, b, ranges)

    def at_record(case: str, rule: RuleCode, record: RetainedRecord, why: str) -> ConsumptionChoice:
        return ConsumptionChoice(case, rule, f"case ({case}): {why} {cut_text(record.record.positions)}",
                                 dict(record.record.positions), record, record.retained)

    lb_retained: int | None = None
    if kind is RetentionKind.SIZE:
        lb_retained = tail_size - size_between(initial_cut(segments.values()), lb, segments)

    def at_lb(case: str, rule: RuleCode, why: str) -> ConsumptionChoice:
        return ConsumptionChoice(case, rule, f"case ({case}): {why}: truncate at LB {shown_lb}", lb, None, lb_retained)

    def overlaps_max(beyond: str) -> ConsumptionChoice:  # (v); only with a Cmin. `beyond`: why LB keeps > max
        assert cmin is not None
        options = within if cmax is not None else [cmin]
        later = [r for r in options if order(r.record.positions, lb) in (CutOrder.AFTER, CutOrder.EQUAL)]
        if later:
            return at_record("v", CBR_OVERLAPS_MAX, later[0], f"{beyond}, and overlaps {target_name}: truncate at "
                             "the earliest recorded cut at or after LB that keeps within the limits")
        return at_record("v", CBR_OVERLAPS_MAX, cmin, f"{beyond}, and overlaps {target_name}; no recorded cut at "
                         f"or after LB keeps at least {minimum}: truncate at Cmin")

    def overlaps_min(max_note: str) -> ConsumptionChoice:  # (iv)
        # never past LB: LB keeps less than min, so less than max, and the max is no cause to drop unread data
        earlier = [r for r in keeps_min if order(r.record.positions, lb) in (CutOrder.BEFORE, CutOrder.EQUAL)]
        if earlier:
            return at_record("iv", CBR_OVERLAPS_MIN, earlier[-1], f"LB {shown_lb} keeps less than the minimum "
                             f"{minimum} and overlaps Cmin{max_note}: truncate at the latest recorded cut at or "
                             "before LB that keeps at least the minimum")
        return ConsumptionChoice("iv", CBR_NO_TRUNCATION, f"case (iv): LB {shown_lb} keeps less than the minimum "
                                 f"{minimum} and overlaps Cmin{max_note}, and no recorded cut keeping at least the "
                                 "minimum is at or before it: nothing is truncated", None, None, None)

    def yields_note() -> str:
        """Why the max does not override the subscribers in (iv), when the stream holds more than it."""
        if policy.max is None or amount <= policy.max:
            return ""
        return (f" (the stream holds more than the maximum {maximum}, but LB does not keep more than it, so the "
                "maximum does not drop unread data)")

    if kind is RetentionKind.SIZE:
        assert lb_retained is not None
        keeps = _fmt(kind, lb_retained)
        if policy.max is not None and lb_retained > policy.max:
            beyond = f"LB {shown_lb} keeps {keeps}, more than the maximum {maximum}"
            if cmax is not None:
                where = order(lb, cmax.record.positions)
                if where is CutOrder.OVERLAPS:
                    return overlaps_max(beyond)
                if where is not CutOrder.AFTER:
                    return at_record("iii", CBR_ABOVE_MAX, cmax, f"{beyond}, and lies at or before Cmax: the "
                                     "maximum overrides the subscribers; truncate at Cmax")
            # no recorded cut keeps within the limits, so the max cannot be met: Cmin comes closest, unless
            # LB keeps no more than Cmin (then LB is as close and spares the subscribers)
            if cmin is None or lb_retained <= cmin.retained:
                case = "v" if cmin is not None and order(lb, cmin.record.positions) is CutOrder.OVERLAPS else "iii"
                return at_lb(case, CBR_ABOVE_MAX if case == "iii" else CBR_OVERLAPS_MAX,
                             f"LB keeps {keeps}, more than the maximum {maximum}, but no recorded cut keeps within "
                             "the limits and none keeps at least the minimum with less than LB")
            if order(lb, cmin.record.positions) in (CutOrder.BEFORE, CutOrder.EQUAL):
                return at_record("iii", CBR_ABOVE_MAX, cmin, f"{beyond}, and lies before Cmin, the cut closest to "
                                 "the maximum (none keeps within the limits): the maximum overrides the subscribers; "
                                 "truncate at Cmin")
            return at_record("v", CBR_OVERLAPS_MAX, cmin, f"{beyond}, and overlaps Cmin, the cut closest to the "
                             "maximum (none keeps within the limits): the maximum overrides the subscribers; "
                             "truncate at Cmin")
        if lb_retained < policy.min:
            if cmin is None:
                return ConsumptionChoice("ii", CBR_NO_TRUNCATION, f"case (ii): LB {shown_lb} keeps {keeps}, less "
                                         f"than the minimum {minimum}, and no recorded cut keeps at least the "
                                         "minimum: nothing is truncated", None, None, None)
            if order(cmin.record.positions, lb) in (CutOrder.BEFORE, CutOrder.EQUAL):
                return at_record("ii", CBR_BELOW_MIN, cmin, f"LB {shown_lb} keeps {keeps}, less than the minimum "
                                 f"{minimum}, and Cmin is at or before it: truncate at Cmin")
            return overlaps_min(yields_note())
        return at_lb("i", CBR_WITHIN_LIMITS, f"LB keeps {keeps}, within the limits")

    # TIME: the max side by proof, the min side by stream-cut order with Cmin
    assert cmin is not None
    unproven = ""  # why LB counts as within max (shown in case i)
    if policy.max is not None:
        proof = time_proof_beyond_max(segments, lb, retained, policy.max)
        if proof is not None:
            beyond = (f"LB {shown_lb} holds data written before {cut_text(proof.record.positions)} was recorded "
                      f"{_fmt(kind, proof.retained)} ago, so it keeps more than the maximum {maximum}")
            target = cmax if cmax is not None else cmin  # where the max forces the stream
            where = order(lb, target.record.positions)
            if where in (CutOrder.BEFORE, CutOrder.EQUAL):
                return at_record("iii", CBR_ABOVE_MAX, target, f"{beyond}, and lies at or before {target_name}: the "
                                 "maximum overrides the subscribers; truncate at it")
            if where is CutOrder.OVERLAPS:
                return overlaps_max(beyond)
            # LB after the target can only come from records out of recording order: judge it by min alone
        else:
            old = [r for r in retained if r.retained > policy.max]
            unproven = f"nothing proves the data at LB older than the maximum {maximum} " + (
                f"(no cut was recorded more than {maximum} ago)" if not old else
                f"(no data at LB lies before a cut recorded more than {maximum} ago; the newest such cut is "
                f"{cut_text(old[-1].record.positions)}, and what follows it was written later)")
    where = order(lb, cmin.record.positions)
    if where is CutOrder.AFTER:
        return at_record("ii", CBR_BELOW_MIN, cmin, f"LB {shown_lb} lies after Cmin, so it keeps less than the "
                         f"minimum {minimum}: truncate at Cmin")
    if where is CutOrder.OVERLAPS:
        return overlaps_min(yields_note())
    keeps_min_text = f"LB lies at or before Cmin, so it keeps at least the minimum {minimum}"
    if not unproven:
        return at_lb("i", CBR_WITHIN_LIMITS, keeps_min_text)
    return at_lb("i", CBR_WITHIN_LIMITS, f"{unproven}, so LB counts as within it and its unread data is kept; "
                 f"{keeps_min_text}")


def _apply(choice: ConsumptionChoice, segments: Mapping[int, Segment], head_positions: Mapping[int, int],
           result: Callable[..., RetentionDecision], common: dict[str, Any]) -> RetentionDecision:
    chosen = None if choice.record is None else choice.record.record
    if choice.positions is None:
        return result(choice.rule, choice.reason, case=choice.case, **common)
    order = compare_cuts(choice.positions, head_positions, _ranges(segments))
    if order is not CutOrder.AFTER:
        where = {CutOrder.EQUAL: "at", CutOrder.BEFORE: "behind", CutOrder.OVERLAPS: "partly behind"}[order]
        return result(BEHIND_HEAD, f"{choice.reason}; but that cut is {where} the current head, so nothing is "
                                   "truncated", chosen=chosen, case=choice.case, **common)
    freed = size_between(head_positions, choice.positions, segments)
    return result(choice.rule, choice.reason, cut=dict(choice.positions), retained=choice.retained,
                  freed_bytes=freed, chosen=chosen, case=choice.case, **common)


def prune(
    records: Iterable[RetentionRecord], truncation_positions: Mapping[int, int],
    ranges: Mapping[int, tuple[float, float]],
) -> list[RetentionRecord]:
    """The records that survive a truncation (docs/retention.md): find the latest record whose cut is at
    or before the truncation cut and drop it and every record recorded no later than it."""
    ordered = sorted(records, key=lambda r: r.recording_time_ms)
    last_at_or_before = None
    for r in ordered:
        if compare_cuts(r.positions, truncation_positions, ranges) in (CutOrder.EQUAL, CutOrder.BEFORE):
            last_at_or_before = r.recording_time_ms
    if last_at_or_before is None:
        return ordered
    return [r for r in ordered if r.recording_time_ms > last_at_or_before]


def should_record(records: Iterable[RetentionRecord], now_ms: int, frequency_ms: int) -> bool:
    """Record the tail cut only if the set is empty or its newest record is older than the
    frequency, strictly (docs/retention.md: 5 min later no, 30 min + 1 ms yes)."""
    newest = max((r.recording_time_ms for r in records), default=None)
    return newest is None or now_ms - newest > frequency_ms


__all__ = [
    "CBR_RULES",
    "RULES",
    "ConsumptionChoice",
    "RetainedRecord",
    "RetentionDecision",
    "RetentionRecord",
    "RuleCode",
    "SubscriberView",
    "candidates",
    "consumption_choice",
    "cut_text",
    "decide",
    "prune",
    "retained_amount",
    "should_record",
    "stream_amount",
    "time_proof_beyond_max",
]
