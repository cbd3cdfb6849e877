"""The audit hash chain's verifier (store/audit_chain.py), as a pure function of rows: a trail tampered
with in one way is caught at the first row that differs from the trail as written — an oracle that
compares rows by equality alone, knowing nothing of hashes — and an untouched trail verifies, with
every row's hash an anchor that proves it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.errors import InvalidInput
from tidekeep.store.audit_chain import GENESIS, ChainHead, ChainVerdict, ChainVerifier, check_anchor, link_hash

FIELDS = ("time_ms", "action", "target", "old_head", "new_head", "bytes_freed", "reason", "actor", "details")

contents = st.fixed_dictionaries({
    "time_ms": st.integers(0, 2**62),
    "action": st.sampled_from(["truncate", "hold_add", "archive_expire", "catalog_delete"]),
    "target": st.text(max_size=12),
    "old_head": st.none() | st.text(max_size=8),
    "new_head": st.none() | st.text(max_size=8),
    "bytes_freed": st.integers(0, 2**62),
    "reason": st.text(max_size=20),
    "actor": st.text(min_size=1, max_size=8),
    "details": st.none() | st.dictionaries(st.text(max_size=4), st.integers(), max_size=3).map(json.dumps),
})


def chained(contents: list[dict[str, Any]], first_id: int = 1, step: int = 1) -> tuple[list[dict[str, Any]], ChainHead]:
    """Rows as store/audit.py writes them (ids `step` apart: a migrated trail has gaps), and the head."""
    rows, last = [], GENESIS
    for index, content in enumerate(contents):
        row = {**content, "id": first_id + index * step}
        row_hash = link_hash(last, row)
        rows.append({**row, "prev_hash": last, "row_hash": row_hash})
        last = row_hash
    return rows, ChainHead(rows[-1]["id"] if rows else 0, last)


def verify(rows: list[dict[str, Any]], head: ChainHead | None, anchor: str | None = None) -> ChainVerdict:
    verifier = ChainVerifier(anchor)
    for row in rows:
        if not verifier.feed(row):
            break
    return verifier.verdict(head)


@dataclass(frozen=True)
class Tampering:
    name: str
    rows: list[dict[str, Any]]


@st.composite
def tampered(draw: st.DrawFn) -> tuple[list[dict[str, Any]], ChainHead, Tampering]:
    written, head = chained(draw(st.lists(contents, min_size=2, max_size=8)), first_id=draw(st.integers(1, 50)),
                            step=2)
    rows = [dict(r) for r in written]
    i = draw(st.integers(0, len(rows) - 1))
    kind = draw(st.sampled_from(["edit", "edit_hash", "delete", "swap", "insert", "append", "move_id"]))
    if kind == "edit":
        field = draw(st.sampled_from(FIELDS))
        value = draw(contents)[field]
        if value == rows[i][field]:
            value = (value or 0) + 1 if isinstance(value, int) else f"{value}x"
        rows[i][field] = value
    elif kind == "edit_hash":
        column = draw(st.sampled_from(["prev_hash", "row_hash"]))
        rows[i][column] = draw(st.sampled_from([None, GENESIS, "f" * 64]))
        if rows[i][column] == written[i][column]:
            rows[i][column] = "e" * 64
    elif kind == "delete":
        del rows[i]
    elif kind == "swap":
        j = draw(st.integers(0, len(rows) - 1).filter(lambda j: j != i))
        # the contents change places, hashes and all; the ids stay where they were
        a, b = sorted((i, j))
        rows[a], rows[b] = {**rows[b], "id": rows[a]["id"]}, {**rows[a], "id": rows[b]["id"]}
        if all(rows[a][f] == written[a][f] for f in FIELDS):
            rows[a]["reason"] += "x"  # the same content twice: make the swap visible
    elif kind == "move_id":
        rows[i]["id"] += 1  # into the gap after it: the order is the same, the row is not
    else:
        # a forged row chained properly to the row before it, in the id gap after row i (or at the end)
        at = len(rows) - 1 if kind == "append" else i
        forged = {**draw(contents), "id": rows[at]["id"] + 1}
        row_hash = link_hash(rows[at]["row_hash"], forged)
        rows.insert(at + 1, {**forged, "prev_hash": rows[at]["row_hash"], "row_hash": row_hash})
    return written, head, Tampering(kind, rows)


def first_difference(written: list[dict[str, Any]], rows: list[dict[str, Any]]) -> int | None:
    """The oracle: the position of the first row that is not the row written there (by equality)."""
    for position, row in enumerate(rows):
        if position >= len(written) or row != written[position]:
            return position
    return None if len(rows) == len(written) else len(rows)


@settings(max_examples=400, deadline=None)
@given(tampered())
def test_tampering_is_caught_at_the_first_row_that_differs(case: tuple[list[dict[str, Any]], ChainHead, Tampering]
                                                          ) -> None:
    written, head, tampering = case
    rows = tampering.rows
    position = first_difference(written, rows)
    assert position is not None
    verdict = verify(rows, head)
    assert not verdict.ok and verdict.broken is not None
    if position == len(rows):  # the trail ends early: the last rows were deleted
        assert (verdict.broken.kind, verdict.broken.row_id) == ("deleted", rows[-1]["id"])
    else:
        assert verdict.broken.row_id == rows[position]["id"], (tampering.name, verdict.broken)
        expected_kind = {"delete": "deleted", "insert": "inserted", "append": "inserted"}.get(tampering.name)
        if expected_kind is not None:
            assert verdict.broken.kind == expected_kind
    assert verdict.rows == position  # every row before it verified, and no more


@settings(max_examples=200, deadline=None)
@given(st.lists(contents, max_size=8), st.data())
def test_an_untouched_trail_verifies_and_each_row_hash_anchors_it(items: list[dict[str, Any]],
                                                                  data: st.DataObject) -> None:
    rows, head = chained(items, step=data.draw(st.integers(1, 3)))
    verdict = verify(rows, head)
    assert verdict.ok and verdict.broken is None
    assert (verdict.rows, verdict.last_id, verdict.last_hash) == (len(rows), head.id, head.hash)
    anchored = data.draw(st.sampled_from([GENESIS, *(r["row_hash"] for r in rows)]))
    proven = verify(rows, head, anchored)
    assert proven.ok
    assert proven.anchor_id == next((r["id"] for r in rows if r["row_hash"] == anchored), 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(contents, min_size=2, max_size=8), st.data())
def test_an_anchor_is_proven_only_while_the_rows_up_to_it_are_unchanged(items: list[dict[str, Any]],
                                                                        data: st.DataObject) -> None:
    rows, head = chained(items)
    anchored = data.draw(st.integers(0, len(rows) - 1))
    changed = data.draw(st.integers(0, len(rows) - 1))
    rows[changed] = {**rows[changed], "reason": rows[changed]["reason"] + "!"}
    verdict = verify(rows, head, rows[anchored]["row_hash"])
    assert not verdict.ok
    assert verdict.anchor_id == (rows[anchored]["id"] if anchored < changed else None)


def test_a_trail_without_its_head_or_with_another_head_is_broken() -> None:
    rows, head = chained([{"time_ms": 1, "action": "a", "target": "t", "old_head": None, "new_head": None,
                           "bytes_freed": 0, "reason": "r", "actor": "me", "details": None}])
    assert verify(rows, None).broken is not None and verify(rows, None).broken.kind == "head"
    assert verify([], None).ok  # a trail never written to
    other = verify(rows, ChainHead(head.id, "a" * 64))
    assert other.broken is not None and other.broken.kind == "head"


@pytest.mark.parametrize("text", ["", "abc", "g" * 64, "0" * 63, "0" * 65])
def test_a_malformed_anchor_is_refused_in_one_line(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"^invalid anchor .*: expected a row hash of 64 hex digits"):
        check_anchor(text)


def test_an_anchor_is_read_in_any_case_and_with_spaces_around() -> None:
    assert check_anchor(f"  {'AB' * 32}\n") == "ab" * 32
