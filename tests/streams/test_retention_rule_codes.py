"""Rule codes are one enum (streams/rule_codes.py): every decision names its rule as a RuleCode, and
the code is its stable text in --json, logs and audit reasons."""

from __future__ import annotations

import json

from helpers.two_segments import S0, S1, rec, two_segments
from tidekeep.streams.config import RetentionPolicy
from tidekeep.streams.retention import CBR_RULES, RULES, RetentionStream, decide
from tidekeep.streams.rule_codes import RuleCode

T0 = 1_700_000_000_000
MIN = 60_000
SIZES = [rec(T0 + i * MIN, 50 * i, 50 * i) for i in range(1, 7)]  # sizes 100, 200, ..., 600; tail 600


def test_the_rule_tuples_are_the_enum_members() -> None:
    assert set(RULES) | {RuleCode.HELD} == set(RuleCode)  # HELD is set by previews, not by decide
    assert all(isinstance(rule, RuleCode) for rule in RULES)
    assert all(rule.value.startswith("cbr-") for rule in CBR_RULES)


def test_every_decision_names_a_rule_code_written_as_its_text() -> None:
    policies = [None, RetentionPolicy.by_size(700, None), RetentionPolicy.by_size(250, None),
                RetentionPolicy.by_size(100, 250), RetentionPolicy.by_size(350, 450)]
    seen = set()
    for policy in policies:
        for records in ([], SIZES):
            d = decide(RetentionStream.of(two_segments(300, 300), {S0: 0, S1: 0}, 600), records, policy, T0 + 10 * MIN)
            assert isinstance(d.rule, RuleCode)
            assert json.loads(json.dumps(d.to_dict()))["rule"] == d.rule.value
            assert f"{d.rule}" == d.rule.value  # logs and audit reasons format it
            seen.add(d.rule)
    assert {RuleCode.NO_POLICY, RuleCode.EMPTY_SET, RuleCode.BELOW_MIN, RuleCode.NO_MAX} <= seen
