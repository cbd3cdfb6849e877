"""Consumption-based retention, the pure decision (cases i-v, docs/design/streams.md#consumption): the
five cases on one retention set for SIZE and TIME, the cases of Pravega's tests
SMTT.consumptionBasedRetentionSizeLimitTest and ...TimeLimitTest (adapted where tidekeep's rules differ
from Pravega's code, docs/retention.md), a property test against a brute-force oracle, and min = 0."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.two_segments import S0, S1, rec, two_segments
from tidekeep.errors import InvalidInput
from tidekeep.streams.config import RetentionKind, RetentionPolicy
from tidekeep.streams.retention import (
    BEHIND_HEAD,
    BELOW_MIN,
    CBR_ABOVE_MAX,
    CBR_BELOW_MIN,
    CBR_NO_TRUNCATION,
    CBR_OVERLAPS_MAX,
    CBR_OVERLAPS_MIN,
    CBR_WITHIN_LIMITS,
    EMPTY_SET,
    NO_CMIN,
    NO_MAX,
    NO_POLICY,
    Consumption,
    RetentionRecord,
    RetentionStream,
    SubscriberView,
    decide,
)
from tidekeep.streams.subscribers import lower_bound

T0 = 1_700_000_000_000
MIN = 60_000


def cut(a: int, b: int) -> dict[int, int]:
    return {S0: a, S1: b}


# The retention set of the five cases: six records at one-minute steps, sizes 100 .. 600 (50 bytes per segment and
# step); the tail is the last one. SIZE retained: 500, 400, 300, 200, 100, 0. TIME at T0 + 10 min,
# ages 9, 8, 7, 6, 5, 4 minutes.
R = [rec(T0 + i * MIN, 50 * i, 50 * i) for i in range(1, 7)]
NOW = T0 + 10 * MIN
SIZE_POLICY = RetentionPolicy.by_size(150, 450)  # Cmin = R[3] (keeps 200), Cmax = R[1] (keeps 400)
TIME_POLICY = RetentionPolicy.by_time("5m", "8m")  # Cmin = R[4] (5 min old), Cmax = R[1] (8 min old)


def seed_decision(policy: RetentionPolicy, lb: dict[int, int], head: dict[int, int] | None = None):
    return decide(RetentionStream.of(two_segments(300, 300), head or cut(0, 0), 600, "s/q"), R, policy, NOW,
                  consumption=Consumption(lb))


# ---- the five cases, SIZE -------------------------------------------------------------------------------


def test_size_case_i_lb_within_the_limits_is_the_cut() -> None:
    d = seed_decision(SIZE_POLICY, cut(130, 120))  # keeps 600 - 250 = 350, within [150, 450]
    assert (d.case, d.rule, d.cut, d.retained, d.freed_bytes) == ("i", CBR_WITHIN_LIMITS, cut(130, 120), 350, 250)
    assert d.cmin == R[3] and d.cmax == R[1] and d.chosen is None and d.lower_bound == cut(130, 120)
    assert d.reason.startswith("case (i):") and "{0.0=130, 0.1=120}" in d.reason


def test_size_case_ii_lb_below_min_truncates_at_cmin() -> None:
    d = seed_decision(SIZE_POLICY, cut(260, 250))  # keeps 90 < 150; Cmin (200, 200) is before LB
    assert (d.case, d.rule, d.cut, d.retained, d.chosen) == ("ii", CBR_BELOW_MIN, R[3].positions, 200, R[3])
    assert "{0.0=200, 0.1=200}" in d.reason and "{0.0=260, 0.1=250}" in d.reason


def test_size_case_iii_lb_above_max_truncates_at_cmax() -> None:
    d = seed_decision(SIZE_POLICY, cut(20, 30))  # keeps 550 > 450; LB is before Cmax (100, 100)
    assert (d.case, d.rule, d.cut, d.retained, d.freed_bytes) == ("iii", CBR_ABOVE_MAX, R[1].positions, 400, 200)


def test_size_case_iv_lb_overlapping_cmin_takes_the_latest_cut_before_lb() -> None:
    d = seed_decision(SIZE_POLICY, cut(290, 180))  # keeps 130 < 150; ahead of Cmin in 0.0, behind in 0.1
    assert (d.case, d.rule, d.cut, d.retained) == ("iv", CBR_OVERLAPS_MIN, R[2].positions, 300)


def test_size_case_v_lb_overlapping_cmax_takes_the_first_cut_after_lb() -> None:
    # keeps 460 > 450 and overlaps Cmax (100, 100). Case (v): the first non-overlapping cut after LB,
    # (150, 150). Pravega's code has no overlap test for SIZE and truncates at its limitMax (100, 100),
    # which retains less than LB -- and drops 70 bytes of segment 0.1 the subscribers have not read.
    d = seed_decision(SIZE_POLICY, cut(110, 30))
    assert (d.case, d.rule, d.cut, d.retained) == ("v", CBR_OVERLAPS_MAX, R[2].positions, 300)


# ---- the five cases, TIME -------------------------------------------------------------------------------


def test_time_case_i_lb_between_cmax_and_cmin_is_the_cut() -> None:
    d = seed_decision(TIME_POLICY, cut(130, 170))  # after Cmax (100, 100), before Cmin (250, 250)
    assert (d.case, d.rule, d.cut, d.freed_bytes) == ("i", CBR_WITHIN_LIMITS, cut(130, 170), 300)
    assert d.cmin == R[4] and d.cmax == R[1]
    assert d.retained is None  # the age of data at LB is not recorded


def test_time_case_ii_lb_after_cmin_truncates_at_cmin() -> None:
    d = seed_decision(TIME_POLICY, cut(270, 260))
    assert (d.case, d.rule, d.cut, d.retained) == ("ii", CBR_BELOW_MIN, R[4].positions, 5 * MIN)


def test_time_case_iii_lb_before_cmax_truncates_at_cmax() -> None:
    d = seed_decision(TIME_POLICY, cut(20, 30))
    assert (d.case, d.rule, d.cut, d.retained) == ("iii", CBR_ABOVE_MAX, R[1].positions, 8 * MIN)


def test_time_case_iv_lb_overlapping_cmin_takes_the_latest_cut_before_lb() -> None:
    d = seed_decision(TIME_POLICY, cut(280, 180))  # R[3] (200, 200) is not before LB; R[2] (150, 150) is
    assert (d.case, d.rule, d.cut, d.retained) == ("iv", CBR_OVERLAPS_MIN, R[2].positions, 7 * MIN)


def test_time_case_v_lb_overlapping_cmax_takes_the_first_cut_after_lb() -> None:
    # Pravega's TIME code truncates at maxBound (the newest record at least max old, here R[0] (50, 50),
    # which LB is after: it would truncate at LB, keeping data 8+ minutes old). Case (v): the first
    # non-overlapping cut after LB, within the limits.
    d = seed_decision(TIME_POLICY, cut(110, 30))
    assert (d.case, d.rule, d.cut, d.retained) == ("v", CBR_OVERLAPS_MAX, R[2].positions, 7 * MIN)


# ---- unread data is dropped only when LB provably keeps more than max ------------------------------------


def test_time_lb_after_every_cut_older_than_max_is_kept_even_before_cmax() -> None:
    # Only R[0] (50, 50) was recorded more than 8 minutes ago. LB (70, 80) is after it and before Cmax
    # (100, 100): its data was written between the two recordings, 8 to 9 minutes ago -- perhaps exactly
    # 8, the max itself -- so nothing proves LB keeps more than max (docs/retention.md's worked example
    # has a wider gap). Truncating at Cmax would drop unread data without cause.
    d = seed_decision(TIME_POLICY, cut(70, 80))
    assert (d.case, d.rule, d.cut, d.retained, d.chosen) == ("i", CBR_WITHIN_LIMITS, cut(70, 80), None, None)
    assert "nothing proves the data at LB older than the maximum 8m" in d.reason
    assert "{0.0=50, 0.1=50}" in d.reason  # names the newest cut recorded more than max ago


def test_time_lb_at_the_newest_cut_older_than_max_is_kept() -> None:
    # LB exactly at R[0]: the data at LB is what was written after R[0] was recorded -- not provably old
    d = seed_decision(TIME_POLICY, cut(50, 50))
    assert (d.case, d.rule, d.cut) == ("i", CBR_WITHIN_LIMITS, cut(50, 50))


def test_time_lb_before_cmax_with_no_cut_older_than_max_is_kept() -> None:
    # max 10 minutes: no record is that old (the oldest is 9 minutes), so nothing is provably too old;
    # Cmax is R[0] and LB (20, 30) lies before it
    d = seed_decision(RetentionPolicy.by_time("5m", "10m"), cut(20, 30))
    assert d.cmax == R[0] and (d.case, d.rule, d.cut) == ("i", CBR_WITHIN_LIMITS, cut(20, 30))
    assert "no cut was recorded more than 10m ago" in d.reason


def test_time_lb_overlapping_cmin_and_cmax_without_proof_takes_a_cut_before_lb() -> None:
    # LB (280, 90) is after R[0], so not provably older than max; it overlaps Cmax (100, 100) and Cmin
    # (250, 250). Case (iv): the latest recorded cut at or before LB keeping at least min is R[0] -- it
    # keeps more than max, but every cut keeping less lies partly after LB, in unread data.
    d = seed_decision(TIME_POLICY, cut(280, 90))
    assert (d.case, d.rule, d.cut, d.retained) == ("iv", CBR_OVERLAPS_MIN, R[0].positions, 9 * MIN)


def test_size_lb_below_min_overlapping_cmin_never_goes_past_lb_for_the_max() -> None:
    # min 250, max 450: Cmin R[2] (150, 150) keeps 300, Cmax R[1] (100, 100) keeps 400; the stream holds
    # 600. LB (300, 99) keeps 201 < min and overlaps Cmin. Cmax lies after LB in segment 0.1 (100 > 99):
    # LB keeps less than the max, so the max gives no cause to drop that unread byte. The latest recorded
    # cut at or before LB keeping at least min is R[0] (keeps 500).
    d = seed_decision(RetentionPolicy.by_size(250, 450), cut(300, 99))
    assert (d.case, d.rule, d.cut, d.retained) == ("iv", CBR_OVERLAPS_MIN, R[0].positions, 500)
    # without any recorded cut at or before LB that keeps min, nothing is truncated (min 300: LB (300, 40)
    # keeps 260 and overlaps Cmin R[2]; R[0] (50, 50) is not at or before it)
    d = seed_decision(RetentionPolicy.by_size(300, 450), cut(300, 40))
    assert (d.case, d.rule, d.cut) == ("iv", CBR_NO_TRUNCATION, None)


def test_the_worked_example_of_the_docs() -> None:
    # docs/retention.md, "Worked example": records 9, 7, 6, 5, 4 minutes old; min 5 min, max 8 min
    records = [rec(NOW - age * MIN, 50 * i, 50 * i) for i, age in enumerate((9, 7, 6, 5, 4), start=1)]
    policy = RetentionPolicy.by_time("5m", "8m")

    def run(a: int, b: int, p: RetentionPolicy = policy):
        return decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), records, p, NOW,
                      consumption=Consumption(cut(a, b)))

    assert run(0, 0).cmin == records[3] and run(0, 0).cmax == records[1]
    assert (run(20, 30).case, run(20, 30).cut) == ("iii", cut(100, 100))
    assert (run(110, 30).case, run(110, 30).cut) == ("v", cut(150, 150))
    assert (run(70, 80).case, run(70, 80).cut) == ("i", cut(70, 80))
    assert (run(50, 50).case, run(50, 50).cut) == ("i", cut(50, 50))
    assert (run(230, 90).case, run(230, 90).cut) == ("iv", cut(50, 50))
    assert (run(220, 210).case, run(220, 210).cut) == ("ii", cut(200, 200))
    wider = RetentionPolicy.by_time("5m", "10m")
    assert all(run(a, b, wider).case == "i" for a, b in ((0, 0), (20, 30), (110, 30), (70, 80), (200, 200)))


def test_time_without_max_never_applies_iii_or_v() -> None:
    policy = RetentionPolicy.by_time("5m")
    assert seed_decision(policy, cut(20, 30)).case == "i"
    assert seed_decision(policy, cut(110, 30)).case == "i"
    assert seed_decision(policy, cut(280, 180)).case == "iv"


def test_size_without_max_never_applies_iii_or_v() -> None:
    d = seed_decision(RetentionPolicy.by_size(150), cut(20, 30))  # keeps 550: within [150, no max)
    assert (d.case, d.cut) == ("i", cut(20, 30))


def test_case_iv_without_a_cut_before_lb_truncates_nothing() -> None:
    # min 300: Cmin is (150, 150); LB (300, 45) keeps 255 < 300, overlaps it, and no record is before LB
    d = seed_decision(RetentionPolicy.by_size(300), cut(300, 45))
    assert (d.case, d.rule, d.cut, d.cmin) == ("iv", CBR_NO_TRUNCATION, None, R[2])
    assert "nothing is truncated" in d.reason


def test_a_case_choosing_a_cut_behind_the_head_truncates_nothing() -> None:
    d = seed_decision(SIZE_POLICY, cut(260, 250), head=cut(220, 220))  # (ii) picks Cmin (200, 200)
    assert d.rule == BEHIND_HEAD and d.case == "ii" and d.cut is None and d.chosen == R[3]
    d = seed_decision(SIZE_POLICY, cut(130, 120), head=cut(130, 120))  # (i) at LB, already the head
    assert d.rule == BEHIND_HEAD and d.case == "i" and d.cut is None and "at the current head" in d.reason


def test_stream_below_min_is_still_a_guard() -> None:
    d = seed_decision(RetentionPolicy.by_size(550), cut(20, 30), head=cut(50, 50))  # holds 500 < 550
    assert d.rule == BELOW_MIN and d.cut is None and d.lower_bound == cut(20, 30)


def test_time_stream_below_min_truncates_nothing() -> None:
    d = seed_decision(RetentionPolicy.by_time("20m"), cut(20, 30))  # the oldest record is 9 minutes old
    assert (d.rule, d.cut, d.case, d.lower_bound) == (BELOW_MIN, None, None, cut(20, 30))


# ---- Pravega's test SMTT.consumptionBasedRetentionSizeLimitTest (min 2, max 10) ----------------------------


B3_POLICY = RetentionPolicy.by_size(2, 10)


def b3(tail: tuple[int, int], records: list[RetentionRecord], subscribers: list[dict[int, int]],
       head: tuple[int, int]):
    segments = two_segments(*tail)
    lb = lower_bound(subscribers, segments)
    return decide(RetentionStream.of(segments, cut(*head), sum(tail)), records, B3_POLICY, T0 + 100,
                  consumption=Consumption(lb))


def test_pravegas_consumption_case_1_lb_within_the_limits() -> None:
    d = b3((2, 2), [rec(T0 + 1, 2, 2)], [cut(2, 1), cut(1, 2)], (0, 0))
    # LB (1, 1) keeps 2 bytes. No record keeps at least min (only the tail is recorded), but SIZE knows
    # exactly what LB keeps, so (i) needs no Cmin -- as Pravega's code, which truncates here too.
    assert d.lower_bound == cut(1, 1) and (d.case, d.cut, d.retained) == ("i", cut(1, 1), 2)


def test_pravegas_consumption_case_2_everything_consumed_but_no_cmin() -> None:
    d = b3((2, 2), [rec(T0 + 1, 2, 2)], [cut(2, 2), cut(2, 2)], (1, 1))
    assert (d.case, d.rule, d.cut) == ("ii", CBR_NO_TRUNCATION, None)  # keeps 0 < min, nothing keeps min


def test_pravegas_consumption_case_3_lb_below_min_truncates_at_cmin() -> None:
    records = [rec(T0 + 1, 2, 2), rec(T0 + 2, 2, 2), rec(T0 + 3, 10, 10)]
    d = b3((10, 10), records, [cut(10, 9), cut(10, 10)], (1, 1))  # LB (10, 9) keeps 1
    assert (d.case, d.rule, d.cut, d.chosen) == ("ii", CBR_BELOW_MIN, cut(2, 2), records[0])  # ties keep the older


def test_pravegas_consumption_case_4_lb_above_max_truncates_at_cmin_when_no_cut_is_within_the_limits() -> None:
    records = [rec(T0 + 3, 10, 10), rec(T0 + 4, 20, 20)]
    d = b3((20, 20), records, [cut(10, 9), cut(20, 20)], (2, 2))  # LB keeps 21 > 10; (10, 10) keeps 20
    assert d.cmax is None and (d.case, d.rule, d.cut, d.retained) == ("iii", CBR_ABOVE_MAX, cut(10, 10), 20)


def test_pravegas_consumption_case_5_lb_keeping_no_more_than_the_candidate_is_kept() -> None:
    records = [rec(T0 + 4, 20, 20), rec(T0 + 5, 30, 30)]
    d = b3((30, 30), records, [cut(21, 19), cut(30, 30)], (10, 10))  # LB keeps 20, so does (20, 20)
    # (20, 20) overlaps LB and frees nothing more; LB is as close to max and spares the subscribers. The
    # case is (v) (LB above max, overlapping the only max candidate); Pravega's code also keeps LB.
    assert (d.case, d.rule, d.cut, d.retained) == ("v", CBR_OVERLAPS_MAX, cut(21, 19), 20)


def test_pravegas_consumption_time_example_lb_keeping_more_than_max() -> None:
    # SMTT.consumptionBasedRetentionTimeLimitTest (min 1 ms, max 10 ms) ends with LB (22, 21) overlapping
    # Pravega's maxBound (21, 22), the newest record at least max old, and truncates there -- keeping
    # 12 ms, more than max. Here byte 21 of segment 0.1 lies at LB and before that cut, recorded 12 ms
    # ago: LB provably keeps more than max, and it lies before Cmax (30, 30) (case iii).
    now = T0 + 30
    records = [rec(T0 + 5, 10, 10), rec(T0 + 18, 21, 22), rec(T0 + 27, 30, 30), rec(T0 + 30, 40, 40)]
    segments = two_segments(40, 40)
    policy = RetentionPolicy.by_time(1, 10)
    d = decide(RetentionStream.of(segments, cut(10, 10), 80), records, policy, now,
               consumption=Consumption(cut(22, 21)))
    assert d.cmax == records[2] and (d.case, d.cut, d.retained) == ("iii", cut(30, 30), 3)
    assert "before {0.0=21, 0.1=22} was recorded 12ms ago" in d.reason
    # When that cut was recorded 9 ms ago instead, it is Cmax and proves nothing beyond max; the only
    # older cut (10, 10) lies before LB. Nothing proves the data at LB older than max, so LB -- before
    # Cmin (30, 30) -- is the cut, where the literal rule took (v) and dropped unread data.
    records[1] = rec(T0 + 21, 21, 22)
    d = decide(RetentionStream.of(segments, cut(10, 10), 80), records, policy, now,
               consumption=Consumption(cut(22, 21)))
    assert d.cmax == records[1] and (d.case, d.rule, d.cut) == ("i", CBR_WITHIN_LIMITS, cut(22, 21))
    assert "the newest such cut is {0.0=10, 0.1=10}" in d.reason


# ---- no subscribers: unchanged ----------------------------------------------------------------------------


def test_without_a_lower_bound_the_decision_is_the_size_time_one() -> None:
    for policy in (SIZE_POLICY, TIME_POLICY, RetentionPolicy.by_size(150)):
        plain = decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), R, policy, NOW)
        explicit = decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), R, policy, NOW, consumption=None)
        assert plain == explicit and plain.case is None and plain.lower_bound is None
        assert plain.to_dict() == explicit.to_dict()


def test_to_dict_names_lb_the_case_and_the_subscribers() -> None:
    views = (SubscriberView("fast", 2, cut(260, 250), True, NOW - 5, 90),
             SubscriberView("slow", 0, cut(130, 120), False, None, 350))
    d = decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), R, SIZE_POLICY, NOW,
               consumption=Consumption(cut(130, 120), views))
    data = json.loads(json.dumps(d.to_dict()))
    assert data["lower_bound"] == {"0.0": 130, "0.1": 120} and data["case"] == "i"
    assert data["rule"] == CBR_WITHIN_LIMITS and data["cut"] == {"0.0": 130, "0.1": 120}
    assert data["subscribers"][1] == {"reader_group": "slow", "generation": 0, "positions": {"0.0": 130, "0.1": 120},
                                      "acknowledged": False, "updated_ms": None, "unconsumed_bytes": 350}
    assert d.subscribers == views


def test_no_policy_and_empty_set_carry_the_lower_bound() -> None:
    d = decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), R, None, NOW,
               consumption=Consumption(cut(1, 1)))
    assert d.rule == NO_POLICY and d.cut is None and d.lower_bound == cut(1, 1)
    d = decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), [], SIZE_POLICY, NOW,
               consumption=Consumption(cut(1, 1)))
    assert d.rule == EMPTY_SET and d.cut is None


# ---- min = 0 ------------------------------------------------------------------------------------------------


def test_min_zero_is_a_valid_policy_and_negative_is_not() -> None:
    assert RetentionPolicy.by_size(0).min == 0 and RetentionPolicy.by_time(0, "1h").max == 3_600_000
    with pytest.raises(InvalidInput, match="min must not be negative, got -1"):
        RetentionPolicy(RetentionKind.SIZE, -1)
    with pytest.raises(InvalidInput, match="max 0 B is less than min 5 B"):
        RetentionPolicy.by_size(5, 0)


def test_min_zero_without_subscribers_truncates_at_the_newest_record() -> None:
    d = decide(RetentionStream.of(two_segments(300, 300), cut(0, 0), 600), R, RetentionPolicy.by_size(0), NOW)
    assert (d.rule, d.cmin, d.cut, d.retained) == (NO_MAX, R[5], R[5].positions, 0)


def test_min_zero_with_subscribers_is_a_message_queue() -> None:
    d = seed_decision(RetentionPolicy.by_size(0), cut(290, 180))  # keeps only what some subscriber has not read
    assert (d.case, d.cut, d.retained) == ("i", cut(290, 180), 130)
    # ... but at most max: LB keeps 130 > 100 and overlaps Cmax (250, 250); the first cut after LB within
    # the limits is the tail record itself
    d = seed_decision(RetentionPolicy.by_size(0, 100), cut(290, 180))
    assert (d.case, d.rule, d.cut, d.retained) == ("v", CBR_OVERLAPS_MAX, R[5].positions, 0)


# ---- property: against a brute-force oracle applying docs/design/streams.md#consumption per segment -------


def order(a: dict[int, int], b: dict[int, int]) -> str:
    if a == b:
        return "equal"
    if all(a[s] <= b[s] for s in a):
        return "before"
    if all(a[s] >= b[s] for s in a):
        return "after"
    return "overlaps"


@dataclass(frozen=True)
class Expected:
    rule: str
    case: str | None
    cut: dict[int, int] | None


def oracle(head, tail, records, policy, now, lb) -> Expected:  # the rules, literally
    if policy is None:
        return Expected(NO_POLICY, None, None)
    if not records:
        return Expected(EMPTY_SET, None, None)
    size = policy.kind is RetentionKind.SIZE
    total = sum(tail.values())

    def kept(positions: dict[int, int]) -> int:
        return total - sum(positions.values())

    def ret(r: RetentionRecord) -> int:
        return kept(r.positions) if size else now - r.recording_time_ms

    keeps_min = [r for r in records if ret(r) >= policy.min]
    cmin = min(keeps_min, key=lambda r: (ret(r), r.recording_time_ms), default=None)
    in_limits = [r for r in keeps_min if policy.max is not None and ret(r) <= policy.max]
    cmax = max(in_limits, key=lambda r: (ret(r), -r.recording_time_ms), default=None)
    amount = kept(head) if size else max([now - r.recording_time_ms for r in records
                                          if order(r.positions, head) in ("equal", "after")], default=0)
    if amount < policy.min:
        return Expected(BELOW_MIN, None, None)
    if cmin is None and not size:
        return Expected(NO_CMIN, None, None)
    within = [r for r in keeps_min if cmax is None or ret(r) <= policy.max]

    def overlaps_min() -> tuple[str, str, dict | None]:  # never past LB, whatever the stream holds
        before = [r for r in keeps_min if order(r.positions, lb) in ("before", "equal")]
        if before:
            return CBR_OVERLAPS_MIN, "iv", before[-1].positions
        return CBR_NO_TRUNCATION, "iv", None

    def overlaps_max() -> tuple[str, str, dict | None]:
        after = [r for r in (within if cmax is not None else [cmin]) if order(r.positions, lb) in ("after", "equal")]
        return CBR_OVERLAPS_MAX, "v", (after[0] if after else cmin).positions

    if size:
        r = kept(lb)
        if policy.max is not None and r > policy.max:
            if cmax is not None and order(lb, cmax.positions) in ("before", "equal"):
                rule, case, chosen = CBR_ABOVE_MAX, "iii", cmax.positions
            elif cmax is not None and order(lb, cmax.positions) == "overlaps":
                rule, case, chosen = overlaps_max()
            elif cmin is None or r <= ret(cmin):
                over = cmin is not None and order(lb, cmin.positions) == "overlaps"
                rule, case, chosen = (CBR_OVERLAPS_MAX, "v", lb) if over else (CBR_ABOVE_MAX, "iii", lb)
            elif order(lb, cmin.positions) in ("before", "equal"):
                rule, case, chosen = CBR_ABOVE_MAX, "iii", cmin.positions
            else:
                rule, case, chosen = CBR_OVERLAPS_MAX, "v", cmin.positions
        elif r < policy.min:
            if cmin is None:
                rule, case, chosen = CBR_NO_TRUNCATION, "ii", None
            elif order(cmin.positions, lb) in ("before", "equal"):
                rule, case, chosen = CBR_BELOW_MIN, "ii", cmin.positions
            else:
                rule, case, chosen = overlaps_min()
        else:
            rule, case, chosen = CBR_WITHIN_LIMITS, "i", lb
    else:
        # LB keeps more than max when a byte at LB lies before a cut recorded more than max ago
        proven = policy.max is not None and any(
            now - r.recording_time_ms > policy.max and any(lb[s] < r.positions[s] for s in lb) for r in records)
        target = cmax if cmax is not None else cmin
        vs_max = order(lb, target.positions) if proven else None
        if vs_max in ("before", "equal"):
            rule, case, chosen = CBR_ABOVE_MAX, "iii", target.positions
        elif vs_max == "overlaps":
            rule, case, chosen = overlaps_max()
        elif order(lb, cmin.positions) == "after":
            rule, case, chosen = CBR_BELOW_MIN, "ii", cmin.positions
        elif order(lb, cmin.positions) == "overlaps":
            rule, case, chosen = overlaps_min()
        else:
            rule, case, chosen = CBR_WITHIN_LIMITS, "i", lb
    if chosen is None:
        return Expected(rule, case, None)
    if order(chosen, head) != "after":
        return Expected(BEHIND_HEAD, case, None)
    return Expected(rule, case, dict(chosen))


@st.composite
def situations(draw: st.DrawFn):
    """A two-segment stream: records are tail cuts over time, the head is the start or a record, the
    lower bound is any cut between the head and the tail (sometimes anywhere)."""
    a = b = 0
    t = T0
    records = []
    for _ in range(draw(st.integers(0, 7)) or draw(st.integers(0, 7))):  # an empty set only now and then
        a += draw(st.integers(0, 60))
        b += draw(st.integers(0, 60))
        t += draw(st.integers(1, MIN))
        records.append(rec(t, a, b))
    tail = {S0: a + draw(st.integers(0, 40)), S1: b + draw(st.integers(0, 40))}
    head = cut(0, 0)
    if records and draw(st.booleans()):
        head = dict(draw(st.sampled_from(records)).positions)
    floor = head if draw(st.integers(0, 4)) else cut(0, 0)
    lb = {s: draw(st.integers(floor[s], tail[s])) for s in (S0, S1)}
    now = t + draw(st.integers(0, MIN))
    kind = draw(st.sampled_from([RetentionKind.SIZE, RetentionKind.TIME]))
    scale = 1 if kind is RetentionKind.SIZE else 1_000  # TIME limits in seconds, records minutes apart
    low = draw(st.integers(0, 200)) * scale
    high = draw(st.one_of(st.none(), st.integers(low // scale, 400).map(lambda x: x * scale)))
    policy = None if draw(st.integers(0, 19)) == 19 else RetentionPolicy(kind, low, high)
    return head, tail, records, policy, now, lb


@settings(max_examples=600, deadline=None)
@given(situations())
def test_decide_with_a_lower_bound_matches_the_oracle(situation) -> None:
    head, tail, records, policy, now, lb = situation
    d = decide(RetentionStream.of(two_segments(tail[S0], tail[S1]), head, sum(tail.values())), records, policy, now,
               consumption=Consumption(lb))
    want = oracle(head, tail, records, policy, now, lb)
    assert (d.rule, d.case, d.cut) == (want.rule, want.case, want.cut)
    assert d.lower_bound == lb


@settings(max_examples=600, deadline=None)
@given(situations())
def test_the_limits_and_the_subscribers_hold(situation) -> None:
    head, tail, records, policy, now, lb = situation
    total = sum(tail.values())
    d = decide(RetentionStream.of(two_segments(tail[S0], tail[S1]), head, total), records, policy, now,
               consumption=Consumption(lb))
    size = policy is not None and policy.kind is RetentionKind.SIZE
    if d.cut is None:
        assert d.freed_bytes == 0
    else:
        assert policy is not None
        # monotonic: strictly forward from the head
        assert all(d.cut[s] >= head[s] for s in head) and d.cut != head
        assert d.freed_bytes == sum(d.cut[s] - head[s] for s in head) > 0
        # never after LB unless the max forces it
        if order(d.cut, lb) not in ("before", "equal"):
            assert d.case in ("iii", "v")
        if size:
            assert d.retained == total - sum(d.cut.values()) >= policy.min  # never below min
        elif d.chosen is not None:
            assert d.retained == now - d.chosen.recording_time_ms >= policy.min
    if size and d.cmax is not None and all(lb[s] >= head[s] for s in head):
        # with a cut within the limits, what stays after the decision is at most max -- unless LB keeps
        # less than min and every such cut lies partly after LB (case iv: the max yields to unread data)
        stays = total - sum((d.cut or head).values())
        within = [r for r in records if policy.min <= total - sum(r.positions.values()) <= policy.max]  # type: ignore[operator]
        if d.case != "iv" or any(order(r.positions, lb) in ("before", "equal") for r in within):
            assert stays <= policy.max  # type: ignore[operator]
