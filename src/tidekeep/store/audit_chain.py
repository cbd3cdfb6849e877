"""The audit trail's hash chain, as pure functions of values (docs/audit.md, "The hash chain").

Every audit row carries `row_hash` = SHA-256 over the previous row's hash and this row's content,
`id` included, and `prev_hash`, the hash it was chained to. The first row follows GENESIS. The
chain runs in id order; rows are given ids in that order under one lock (store/audit.py), so id
order is insertion order. The head (the last row's id and hash) is kept apart, so rows cut off the
end of the trail are seen too.

`ChainVerifier` re-computes the chain from the stored content alone and names the first row that
breaks it: a row whose content changed (or that moved: its id is hashed), a row missing before a
row, a row inserted out of order, a row without a hash (written around tidekeep), or an end that
differs from the head. A hash kept elsewhere (an anchor) proves the trail up to its row unchanged
when the re-computed chain passes through it.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidInput

GENESIS = "0" * 64
HASH_CHARS = 64
RECENT_ROWS = 4_096  # how far back a verification can step to name the first of rows added after the head

# the columns a row's hash covers, in this order; a new audit column must be added here, at the end,
# with a migration that says how older rows are read (docs/audit.md)
CONTENT_COLUMNS = ("id", "time_ms", "action", "target", "old_head", "new_head", "bytes_freed", "reason", "actor",
                   "details")


def row_content(row: dict[str, Any]) -> bytes:
    """The bytes a row's hash covers: its content columns as one JSON array (ASCII, no spaces)."""
    return json.dumps([row[name] for name in CONTENT_COLUMNS], ensure_ascii=True, separators=(",", ":")).encode()


def link_hash(prev_hash: str, row: dict[str, Any]) -> str:
    """The hash of `row` chained to `prev_hash`."""
    return hashlib.sha256(prev_hash.encode("ascii") + b"\n" + row_content(row)).hexdigest()


def check_anchor(text: str) -> str:
    """An anchor as given (a row's hash, 64 hex digits, any case), in the stored form (lower case)."""
    anchor = text.strip().lower()
    if len(anchor) != HASH_CHARS or any(c not in "0123456789abcdef" for c in anchor):
        raise InvalidInput(f"invalid anchor {text.strip()[:80]!r}: expected a row hash of 64 hex digits, as "
                         "'tidekeep audit anchor' prints")
    return anchor


@dataclass(frozen=True)
class ChainHead:
    """The last chained row: its id (0 before the first) and hash (GENESIS before the first)."""

    id: int
    hash: str


@dataclass(frozen=True)
class ChainBreak:
    """The first row that breaks the chain. `kind`: changed, deleted, inserted, unchained, or head
    (the trail's end and the head disagree); `row_id` the row named (for head, the last row read)."""

    kind: str
    row_id: int
    message: str


@dataclass(frozen=True)
class ChainVerdict:
    rows: int  # rows that verified (before the first break)
    last_id: int  # the last row that verified (0: none)
    last_hash: str  # its re-computed hash (GENESIS: none)
    head: ChainHead | None
    broken: ChainBreak | None
    anchor: str | None = None
    anchor_id: int | None = None  # the row whose re-computed hash is the anchor; None: not in the trail

    @property
    def ok(self) -> bool:
        return self.broken is None and (self.anchor is None or self.anchor_id is not None)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "rows": self.rows, "last_id": self.last_id, "last_hash": self.last_hash,
                "head": None if self.head is None else {"id": self.head.id, "hash": self.head.hash},
                "broken": None if self.broken is None else {"kind": self.broken.kind, "row_id": self.broken.row_id,
                                                            "message": self.broken.message},
                "anchor": self.anchor, "anchor_id": self.anchor_id}


class ChainVerifier:
    """Fed the rows in id order (`feed` returns False once the chain broke: stop reading), then
    `verdict(head)`."""

    def __init__(self, anchor: str | None = None) -> None:
        self.anchor = anchor
        self.anchor_id: int | None = 0 if anchor == GENESIS else None  # the empty trail's head
        self.rows = 0
        self.last_id = 0
        self.last_hash = GENESIS
        # the last rows verified, (id, hash), oldest first: to step back past a row found inserted
        self._recent: deque[tuple[int, str]] = deque([(0, GENESIS)], maxlen=RECENT_ROWS)
        self.broken: ChainBreak | None = None

    def feed(self, row: dict[str, Any]) -> bool:
        if self.broken is not None:
            return False
        expected = link_hash(self.last_hash, row)
        if row.get("row_hash") == expected and row.get("prev_hash") == self.last_hash:
            self.last_hash, self.last_id = expected, int(row["id"])
            self.rows += 1
            self._recent.append((self.last_id, expected))
            if expected == self.anchor:
                self.anchor_id = self.last_id
            return True
        self.broken = self._diagnose(row)
        return False

    def _step_back_to(self, row_id: int) -> int | None:
        """Undo the rows verified after `row_id` (they were inserted); the first of them, or None when
        `row_id` is too far back (or not a verified row)."""
        if all(i != row_id for i, _ in self._recent):
            return None
        first = None
        while self._recent[-1][0] != row_id:
            first, _ = self._recent.pop()
            self.rows -= 1
            if self.anchor_id == first:
                self.anchor_id = None
        self.last_id, self.last_hash = self._recent[-1]
        return first

    def _diagnose(self, row: dict[str, Any]) -> ChainBreak:
        row_id = int(row["id"])
        stored, prev = row.get("row_hash"), row.get("prev_hash")
        after = f"row {self.last_id}" if self.last_id else "the start of the trail"
        if stored is None or prev is None:
            return ChainBreak("unchained", row_id, f"row {row_id} has no hash: it was written around tidekeep")
        if prev == self.last_hash:
            return ChainBreak("changed", row_id, f"row {row_id} was changed or moved: its hash does not match "
                                                 "its content")
        if len(self._recent) > 1 and prev == self._recent[-2][1] and stored in (
                link_hash(prev, row), link_hash(prev, {**row, "id": self.last_id})):
            # this row was chained to the row before the last one verified, as it is or under that last
            # row's id (moved to make room): the last one was put in between
            inserted = self.last_id
            self._step_back_to(self._recent[-2][0])
            return ChainBreak("inserted", inserted, f"row {inserted} was inserted out of order: row {row_id} was "
                                                    "chained to the row before it")
        if stored == link_hash(prev, row):
            return ChainBreak("deleted", row_id, f"rows were deleted between {after} and row {row_id}: row "
                                                 f"{row_id} was chained to a row no longer in the trail")
        return ChainBreak("changed", row_id, f"row {row_id} was changed or moved: it does not follow {after}")

    def verdict(self, head: ChainHead | None) -> ChainVerdict:
        broken = self.broken
        if broken is None or (head is not None and head.id < self.last_id):
            # rows verified past the head came before the break: they are the first thing wrong
            broken = self._check_head(head) or broken
        return ChainVerdict(self.rows, self.last_id, self.last_hash, head, broken, self.anchor, self.anchor_id)

    def _check_head(self, head: ChainHead | None) -> ChainBreak | None:
        if head is None:
            return (None if self.rows == 0 else
                    ChainBreak("head", self.last_id, "the chain's head is missing: it was deleted"))
        if head.id == self.last_id and head.hash == self.last_hash:
            return None
        if head.id > self.last_id:
            return ChainBreak("deleted", self.last_id, f"rows after row {self.last_id} were deleted: the head is row "
                                                       f"{head.id}")
        if head.id < self.last_id:
            last = self.last_id
            first = self._step_back_to(head.id)
            if first is None:
                return ChainBreak("inserted", last, f"rows after the head (row {head.id}) were added without "
                                                    f"moving it, up to row {last}")
            if self.last_hash == head.hash:
                return ChainBreak("inserted", first, f"rows {first} to {last} were added after the head (row "
                                                     f"{head.id}) without moving it")
        return ChainBreak("head", self.last_id, f"the head's hash for row {head.id} differs from the trail's: "
                                                "the head or the last row was changed")


__all__ = ["CONTENT_COLUMNS", "GENESIS", "ChainBreak", "ChainHead", "ChainVerdict", "ChainVerifier", "check_anchor",
           "link_hash", "row_content"]
