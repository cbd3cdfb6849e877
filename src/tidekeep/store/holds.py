"""Legal holds in the foundation: the value, the one reader of the holds table, the kinds the
families register, and the one way to ask "what holds cover this?".

A hold names its target by kind and target. The kinds are a closed vocabulary (`HOLD_KINDS`,
stored in the table); what a kind's target means belongs to its family, which registers a
`HoldKind` here: how a target is checked and stored (canonical text, inside the adding
transaction, after locking what the family's deleting operations lock, so a hold and a deletion
serialise) and what to undo when a hold is released. A family may also register a `Coverage`:
which holds, of any kind, cover one of its things ("stream", "archive", "record"), so
`holds_covering` answers for every family at once (a dataset hold covers each of its archives;
a records hold covers the records its expression matches and the archives filed as those
records). docs/holds.md lists every deleting operation and what it checks.

Invariants: only this module reads or writes the holds table; every add and remove is audited in
the same transaction (actions "hold_add" and "hold_remove", target = the held target).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..clock import Clock
from ..errors import HoldActive, InvalidInput, NotFound
from ..integers import check_int64
from .audit import AuditEntry, AuditLog
from .database import Database, check_storable_text
from .schema import audit as audit_table
from .schema_holds import holds as holds_table

HOLD_KINDS: tuple[str, ...] = ("stream", "records", "dataset", "archive")
MAX_TARGET_CHARS = 600  # the holds.target column


@dataclass(frozen=True)
class Hold:
    id: int
    kind: str
    target: str
    reason: str
    created_ms: int
    created_by: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_kind(kind: object) -> str:
    if kind not in HOLD_KINDS:
        raise InvalidInput(f"unknown hold kind {kind!r}: expected one of {', '.join(HOLD_KINDS)}")
    return str(kind)


def check_reason(reason: object) -> str:
    if not isinstance(reason, str) or not reason.strip():
        raise InvalidInput("a hold needs a reason: got an empty one")
    check_storable_text(reason, "reason")
    return " ".join(reason.split())  # one line: it is shown in errors and audit listings


def check_hold_id(hold_id: object) -> int:
    if isinstance(hold_id, bool) or not isinstance(hold_id, int) or hold_id < 1:
        raise InvalidInput(f"invalid hold id {hold_id!r}: expected a positive integer")
    return check_int64(hold_id, "hold id")


def hold_from_row(row: Any) -> Hold:
    return Hold(row.id, row.kind, row.target, row.reason, row.created_ms, row.created_by)


# ---- lookups (on the caller's connection: inside a write transaction they see what it sees) ----
def holds_on(conn: Connection, kind: str, target: str) -> list[Hold]:
    """The holds of `kind` naming exactly `target`, oldest first."""
    rows = conn.execute(sa.select(holds_table).where(
        holds_table.c.kind == kind, holds_table.c.target == target).order_by(holds_table.c.id))
    return [hold_from_row(r) for r in rows]


def holds_of(conn: Connection, kinds: Iterable[str]) -> list[Hold]:
    """Every hold of the given kinds, oldest first."""
    rows = conn.execute(sa.select(holds_table).where(holds_table.c.kind.in_(list(kinds))).order_by(holds_table.c.id))
    return [hold_from_row(r) for r in rows]


def holds_under(conn: Connection, kind: str, prefix: str) -> list[Hold]:
    """The holds of `kind` whose target starts with `prefix` (e.g. the streams of one scope), oldest first."""
    rows = conn.execute(sa.select(holds_table).where(
        holds_table.c.kind == kind, holds_table.c.target.startswith(prefix, autoescape=True))
        .order_by(holds_table.c.id))
    return [hold_from_row(r) for r in rows]


def hold_active(hold: Hold, subject: str, action: str) -> HoldActive:
    """The refusal of a deletion: `subject` (e.g. "stream a/b") cannot be `action` ("deleted")."""
    return HoldActive(f"{subject} is under legal hold {hold.id} ({hold.reason}); it cannot be {action} until "
                      "the hold is removed", hold.id, hold.reason)


# PostgreSQL advisory lock (a namespace of tidekeep's own, then the holds): adding a hold takes it
# exclusively, every slice of the catalog job shared (catalog/slice_runner.py)
HOLDS_LOCK = (0x746B0001, 1)


def lock_holds(conn: Connection, shared: bool) -> None:
    """Order hold additions against the work that reads the holds and deletes in one transaction:
    shared for that work, exclusive for an addition, each until its transaction ends. A hold added
    then waits for such a transaction in flight, and one that starts later sees the hold. SQLite
    needs nothing: its one writer already orders write transactions."""
    if conn.dialect.name != "postgresql":
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(sa.text(f"SELECT {function}(:space, :key)"), {"space": HOLDS_LOCK[0], "key": HOLDS_LOCK[1]})


def refuse_if_held(conn: Connection, kind: str, target: str, action: str) -> None:
    """Raise HoldActive naming the oldest hold on the target, if it has any. Call it inside the
    deleting transaction, after locking what the kind's validation locks, so a hold cannot slip in."""
    held = holds_on(conn, kind, target)
    if held:
        raise hold_active(held[0], f"{kind} {target}", action)


# ---- what the families register -------------------------------------------------------------------
def _nothing_to_undo(conn: Connection, hold: Hold) -> None:
    return None


@dataclass(frozen=True)
class HoldKind:
    """How the targets of one kind are held (registered by the family that owns them)."""

    name: str
    # inside the adding transaction: refuse a bad or missing target (InvalidInput, NotFound), lock
    # what the family's deletions lock, return the target as it is stored (canonical text)
    validate: Callable[[Connection, object], str]
    # inside the removing transaction: what releasing such a hold must undo
    released: Callable[[Connection, Hold], None] = _nothing_to_undo


# which holds (beyond the exact ones) cover one thing: (connection, its identifier, now) → holds
Coverage = Callable[[Connection, str, int], list[Hold]]

_kinds: dict[str, HoldKind] = {}
_coverage: dict[str, list[Coverage]] = {}
_loaders: builtins.list[Callable[[], None]] = []
_loading = threading.RLock()


def register_kind(kind: HoldKind) -> None:
    check_kind(kind.name)
    _kinds[kind.name] = kind


def register_coverage(subject: str, coverage: Coverage) -> None:
    """Add a rule for which holds cover a thing of type `subject` ("stream", "archive", "record")."""
    _coverage.setdefault(subject, []).append(coverage)


def register_loader(load: Callable[[], None]) -> None:
    """Add `load`, which imports the modules that register kinds and coverage. Loaders run once,
    before the first lookup (`kind_named`, `holds_covering`): a process that never looks a hold up
    (`tidekeep stream describe`) never imports the families' hold rules."""
    _loaders.append(load)


def _run_loaders() -> None:
    # under a lock, popped only once run: a second thread's lookup waits for the rules being loaded
    with _loading:
        while _loaders:
            _loaders[0]()
            _loaders.pop(0)


def kind_named(name: object) -> HoldKind:
    kind = check_kind(name)
    _run_loaders()
    found = _kinds.get(kind)
    if found is None:  # the family module that registers it was not imported: a wiring error, not input
        raise LookupError(f"no family has registered the hold kind {kind!r}")
    return found


def holds_covering(conn: Connection, subject: str, identifier: str, now_ms: int) -> list[Hold]:
    """The one question: which holds cover this thing — a stream (by "scope/name"), an archive (by
    id), a catalog record (by id), or a dataset or records expression (exactly) — oldest first.
    Empty when nothing holds it."""
    _run_loaders()
    found = {h.id: h for h in holds_on(conn, subject, identifier)} if subject in HOLD_KINDS else {}
    for coverage in _coverage.get(subject, []):
        found.update((h.id, h) for h in coverage(conn, identifier, now_ms))
    return [found[i] for i in sorted(found)]


# ---- filtered pages (the dashboard's hold list) ------------------------------------------------------
@dataclass(frozen=True)
class HoldFilter:
    """Which holds a page shows: each given field must match. `target` exactly; `text` anywhere in
    the target or the reason (any case); `target_prefix` keeps the targets starting with it (a
    scope's streams: "scope/")."""

    kind: str | None = None
    target: str | None = None
    text: str | None = None
    target_prefix: str | None = None

    def checked(self) -> HoldFilter:
        if self.kind is not None:
            check_kind(self.kind)
        for what, value in (("target", self.target), ("text", self.text), ("target prefix", self.target_prefix)):
            check_storable_text(value, what)
        return self


def _matching(target: sa.ColumnElement[str], reason: sa.ColumnElement[str], where: HoldFilter) -> list[Any]:
    conditions: list[Any] = []
    if where.target is not None:
        conditions.append(target == where.target)
    if where.target_prefix is not None:
        conditions.append(target.startswith(where.target_prefix, autoescape=True))
    if where.text:
        needle = where.text.lower()
        conditions.append(sa.or_(sa.func.lower(target).contains(needle, autoescape=True),
                                 sa.func.lower(reason).contains(needle, autoescape=True)))
    return conditions


def _active_matching(where: HoldFilter) -> list[Any]:
    where = where.checked()
    conditions = _matching(holds_table.c.target, holds_table.c.reason, where)
    if where.kind is not None:
        conditions.append(holds_table.c.kind == where.kind)
    return conditions


def active_holds_page(db: Database, where: HoldFilter, limit: int, after_id: int | None = None) -> builtins.list[Hold]:
    """At most `limit` active holds matching `where`, oldest first, after hold `after_id` when given:
    one keyset query a page."""
    conditions = _active_matching(where)
    if after_id is not None:
        conditions.append(holds_table.c.id > after_id)
    query = sa.select(holds_table).where(*conditions).order_by(holds_table.c.id).limit(limit)
    with db.read() as conn:
        return [hold_from_row(r) for r in conn.execute(query)]


def active_holds_summary(db: Database, where: HoldFilter, newest: int) -> tuple[int, builtins.list[Hold]]:
    """How many active holds match `where`, and the `newest` of them, newest first."""
    conditions = _active_matching(where)
    with db.read() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(holds_table).where(*conditions)).scalar_one()
        rows = conn.execute(sa.select(holds_table).where(*conditions).order_by(holds_table.c.id.desc()).limit(newest))
        return int(count), [hold_from_row(r) for r in rows]


def released_holds_page(db: Database, where: HoldFilter, limit: int,
                        before_id: int | None = None) -> builtins.list[dict[str, Any]]:
    """At most `limit` releases of holds matching `where` (their "hold_remove" audit rows, whose
    details name the hold and its kind), newest first, older than audit row `before_id` when given."""
    where = where.checked()
    conditions = [audit_table.c.action == "hold_remove",
                  *_matching(audit_table.c.target, audit_table.c.reason, where)]
    if where.kind is not None:
        # the details are written by `remove` below as json.dumps({"hold": id, "kind": kind})
        kind = (sa.func.json_extract(audit_table.c.details, "$.kind") if db.is_sqlite
                else sa.cast(audit_table.c.details, sa.JSON)["kind"].as_string())
        conditions.append(kind == where.kind)
    if before_id is not None:
        conditions.append(audit_table.c.id < before_id)
    query = sa.select(audit_table).where(*conditions).order_by(audit_table.c.id.desc()).limit(limit)
    with db.read() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


# ---- adding, listing, removing ---------------------------------------------------------------------
class HoldStore:
    """Add, list and remove holds; each change audited in its own transaction."""

    def __init__(self, db: Database, clock: Clock, actor: str) -> None:
        self.db = db
        self.clock = clock
        self.actor = actor
        self.audit = AuditLog(clock, actor)

    def add(self, kind: str, target: str, reason: str) -> int:
        """Hold `target`; returns the new hold's id. The target must exist (its family checks)."""
        holder = kind_named(kind)
        reason = check_reason(reason)
        with self.db.write() as conn:
            lock_holds(conn, shared=False)
            stored = holder.validate(conn, target)
            inserted = conn.execute(sa.insert(holds_table).values(
                kind=holder.name, target=stored, reason=reason, created_ms=self.clock.now_ms(),
                created_by=self.actor)).inserted_primary_key
            assert inserted is not None  # a single-row insert always has a key
            hold_id = int(inserted[0])
            self.audit.append(conn, AuditEntry("hold_add", stored, reason,
                                               details={"hold": hold_id, "kind": holder.name}))
        return hold_id

    def list(self, kind: str | None = None, target: str | None = None) -> builtins.list[Hold]:
        """Active holds, oldest first, optionally of one kind and/or on one target."""
        query = sa.select(holds_table).order_by(holds_table.c.id)
        if kind is not None:
            query = query.where(holds_table.c.kind == check_kind(kind))
        if target is not None:
            check_storable_text(target, "target")
            query = query.where(holds_table.c.target == target)
        with self.db.read() as conn:
            return [hold_from_row(r) for r in conn.execute(query)]

    def get(self, hold_id: int) -> Hold:
        """One active hold; NotFound when no hold has that id (never added, or removed)."""
        hold_id = check_hold_id(hold_id)
        with self.db.read() as conn:
            row = conn.execute(sa.select(holds_table).where(holds_table.c.id == hold_id)).one_or_none()
        if row is None:
            raise NotFound(f"hold {hold_id} does not exist")
        return hold_from_row(row)

    def active_for(self, kind: str, target: str) -> builtins.list[Hold]:
        """The holds that currently protect `target` of `kind` (empty when it may be deleted): for an
        archive, also the holds on its dataset and on its catalog record (`holds_covering`)."""
        kind = check_kind(kind)
        with self.db.read() as conn:
            return holds_covering(conn, kind, target, self.clock.now_ms())

    def remove(self, hold_id: int) -> Hold:
        """Release a hold; returns it as it was."""
        hold_id = check_hold_id(hold_id)
        with self.db.write() as conn:
            row = conn.execute(sa.select(holds_table).where(holds_table.c.id == hold_id)).one_or_none()
            if row is None:
                raise NotFound(f"hold {hold_id} does not exist")
            hold = hold_from_row(row)
            conn.execute(sa.delete(holds_table).where(holds_table.c.id == hold_id))
            kind_named(hold.kind).released(conn, hold)
            self.audit.append(conn, AuditEntry("hold_remove", hold.target, f"released hold {hold.id} ({hold.reason})",
                                               details={"hold": hold.id, "kind": hold.kind}))
        return hold


__all__ = ["HOLDS_LOCK", "HOLD_KINDS", "MAX_TARGET_CHARS", "Coverage", "Hold", "HoldFilter", "HoldKind", "HoldStore",
           "active_holds_page", "active_holds_summary", "check_hold_id",
           "check_kind", "check_reason", "hold_active", "hold_from_row", "holds_covering", "holds_of", "holds_on",
           "holds_under", "kind_named", "lock_holds", "refuse_if_held", "register_coverage", "register_kind",
           "register_loader", "released_holds_page"]
