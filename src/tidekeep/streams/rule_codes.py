"""The rule codes of a retention decision: which of the rules (docs/retention.md) chose the cut or
kept the stream whole. Stable: they are logged, written to the audit trail and shown by the CLI and
in `--json`, as their values. A `StrEnum`, so a code is its text wherever text is expected."""

from __future__ import annotations

from enum import StrEnum


class RuleCode(StrEnum):
    NO_POLICY = "no-policy"
    EMPTY_SET = "empty-set"
    BELOW_MIN = "below-min"
    NO_CMIN = "no-cmin"
    NO_MAX = "no-max"
    ABOVE_MAX = "above-max"
    BETWEEN_LIMITS = "between-limits"
    BEHIND_HEAD = "behind-head"
    HELD = "held"  # only in previews: a legal hold blocks the truncation the rules chose
    # consumption-based retention (docs/retention.md, cases i-v), when the decision gets a subscriber lower bound
    CBR_WITHIN_LIMITS = "cbr-within-limits"  # (i)
    CBR_BELOW_MIN = "cbr-below-min"  # (ii)
    CBR_ABOVE_MAX = "cbr-above-max"  # (iii)
    CBR_OVERLAPS_MIN = "cbr-overlaps-min"  # (iv)
    CBR_OVERLAPS_MAX = "cbr-overlaps-max"  # (v)
    CBR_NO_TRUNCATION = "cbr-no-truncation"  # a case that chooses no cut


__all__ = ["RuleCode"]
