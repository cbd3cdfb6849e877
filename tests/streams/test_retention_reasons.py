"""Retention decisions return facts; their text is rendered once (docs/retention.md, "Facts first,
text once"), and the topology value that the decision measures cuts with."""

from __future__ import annotations

import string
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.two_segments import S0, S1, rec, two_segments
from tidekeep.streams.config import RetentionKind, RetentionPolicy
from tidekeep.streams.retention import (
    ABOVE_MAX,
    BEHIND_HEAD,
    Consumption,
    RetentionDecision,
    RetentionStream,
    decide,
)
from tidekeep.streams.retention_reasons import Reason, Why, describe_decision, render_reason

T0 = 1_700_000_000_000
MIN = 60_000


@st.composite
def decisions(draw: st.DrawFn) -> tuple[RetentionDecision, RetentionPolicy | None]:
    """A decision over a two-segment stream: records are tail cuts over time, the head any cut at or
    before the tail, and half the time a subscribers' lower bound at or after the head."""
    a = b = 0
    t = T0
    records = []
    for _ in range(draw(st.integers(0, 6))):
        a += draw(st.integers(0, 60))
        b += draw(st.integers(0, 60))
        t += draw(st.integers(1, 3 * MIN))
        records.append(rec(t, a, b))
    tail = {S0: a + draw(st.integers(0, 40)), S1: b + draw(st.integers(0, 40))}
    head = {S0: draw(st.integers(0, tail[S0])), S1: draw(st.integers(0, tail[S1]))}
    kind = draw(st.sampled_from([RetentionKind.SIZE, RetentionKind.TIME]))
    scale = 1 if kind is RetentionKind.SIZE else MIN // 20
    low = draw(st.integers(0, 200)) * scale
    high = draw(st.one_of(st.none(), st.integers(low // scale, 400).map(lambda x: x * scale)))
    policy = None if draw(st.integers(0, 9)) == 0 else RetentionPolicy(kind, low, high)
    consumption = None
    if draw(st.booleans()):
        consumption = Consumption({S0: draw(st.integers(head[S0], tail[S0])),
                                   S1: draw(st.integers(head[S1], tail[S1]))})
    stream = RetentionStream.of(two_segments(tail[S0], tail[S1]), head, sum(tail.values()), "s/x")
    now = t + draw(st.integers(0, 3 * MIN))
    return decide(stream, records, policy, now, consumption=consumption), policy


def nodes(reason: Reason) -> Iterator[Reason]:
    yield reason
    for value in reason.facts.values():
        if isinstance(value, Reason):
            yield from nodes(value)


def placeholders(why: Why) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(why.value) if name}


@settings(max_examples=500, deadline=None)
@given(decisions())
def test_the_reason_is_rendered_from_facts_that_are_the_decisions_own(drawn) -> None:
    d, policy = drawn
    assert d.reason == render_reason(d.why) == str(d.why) == d.to_dict()["reason"]
    for node in nodes(d.why):
        assert set(node.facts) == placeholders(node.why), node  # every fact is shown, nothing is missing
        assert node.kind is (None if policy is None else policy.kind)
        if "minimum" in node.facts:
            assert policy is not None and node.facts["minimum"] == policy.min
        if "maximum" in node.facts:
            assert policy is not None and node.facts["maximum"] == policy.max
        if "amount" in node.facts:
            assert node.facts["amount"] == d.stream_amount
        if "lb" in node.facts:
            assert node.facts["lb"] == d.lower_bound
    if d.cut is not None and d.case is not None:  # a case names its cut: a record's or LB itself
        assert d.why.facts.get("cut", d.why.facts.get("lb")) == d.cut
    elif d.cut is not None:  # a size/time rule truncates at the record it chose
        assert d.chosen is not None and d.cut == d.chosen.positions
    if d.case is not None:
        assert d.lower_bound is not None
        top = d.why.facts["inner"] if d.rule == BEHIND_HEAD else d.why
        assert render_reason(top).startswith(f"case ({d.case}): ")
    if d.rule == BEHIND_HEAD and d.case is None:
        assert d.why.why is Why.BEHIND_HEAD and d.why.facts["rule"] in {"no-max", "above-max", "between-limits"}


def test_amounts_render_by_the_policys_kind_and_cuts_by_segment_name() -> None:
    size = Reason(Why.BELOW_MIN, RetentionKind.SIZE, {"amount": 1536, "minimum": 2048})
    time = Reason(Why.BELOW_MIN, RetentionKind.TIME, {"amount": -5, "minimum": 300_000})
    assert render_reason(size) == "the stream holds 1536 B, less than the minimum 2 KiB"
    assert render_reason(time) == "the stream holds 0ms, less than the minimum 5m"  # an age is never negative
    lb = Reason(Why.SIZE_WITHIN_LIMITS, RetentionKind.SIZE, {"keeps": 10, "lb": {S1: 7, S0: 3}})
    assert render_reason(lb) == "case (i): LB keeps 10 B, within the limits: truncate at LB {0.0=3, 0.1=7}"


def test_the_service_line_says_what_was_truncated_or_why_nothing_was() -> None:
    stream = RetentionStream.of(two_segments(300, 300), {S0: 0, S1: 0}, 600, "s/x")
    records = [rec(T0, 100, 50), rec(T0 + MIN, 200, 200)]
    truncated = decide(stream, records, RetentionPolicy.by_size(150, 500), T0 + MIN)
    assert truncated.rule == ABOVE_MAX and truncated.cut == {S0: 100, S1: 50}
    assert describe_decision("s/x", truncated) == (
        "truncated s/x at {0.0:100,0.1:50}: rule=above-max freed_bytes=150 reason=the stream holds 600 B, more "
        "than the maximum 500 B: truncate at the oldest cut keeping between 150 B and 500 B (Cmax)")
    kept = decide(stream, records, None, T0 + MIN)
    assert describe_decision("s/x", kept) == (
        "kept s/x (nothing to truncate): rule=no-policy reason=the stream has no retention policy")
