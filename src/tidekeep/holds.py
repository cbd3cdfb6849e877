"""Legal holds: while a target is held, nothing deletes its data.

A hold names its target by kind and target. Kind "stream" (target "scope/stream"): a held stream
is never truncated, manually or by retention, nor deleted, nor its scope, because
StreamController.truncate, delete and delete_scope look the holds up inside their own write
transactions (`refuse_if_held`) and refuse with HoldActive. docs/holds.md lists every deleting
operation and what it checks. Kind "records" (target:
a catalog expression, stored in its canonical text form): every catalog record the expression
matches is neither logically deleted nor purged (catalog/holds.py). Kind "dataset" (target: an
archive dataset) and kind "archive" (target: an archive id): the archive collector never expires a
held archive (archives/gc.py). Adding either locks the dataset's row, as the collector does, so a
hold and a collection of one dataset serialise.

Adding and removing a hold is audited (actions "hold_add" and "hold_remove"); the audit row's target
is the held target, so `tidekeep audit list --stream S` shows a stream's holds next to its truncations.
"""

from __future__ import annotations

import builtins
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .errors import HoldActive, InvalidInput, NotFound
from .integers import check_int64
from .names import split_stream_name
from .store.schema_holds import holds as holds_table

if TYPE_CHECKING:
    from .streams.controller import StreamController

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
    return " ".join(reason.split())  # one line: it is shown in errors and audit listings


def check_hold_id(hold_id: object) -> int:
    if isinstance(hold_id, bool) or not isinstance(hold_id, int) or hold_id < 1:
        raise InvalidInput(f"invalid hold id {hold_id!r}: expected a positive integer")
    return check_int64(hold_id, "hold id")


def _hold(row: Any) -> Hold:
    return Hold(row.id, row.kind, row.target, row.reason, row.created_ms, row.created_by)


hold_from_row = _hold  # for the catalog, which reads holds of kind "records" itself


def check_record_expression(target: object) -> str:
    """A "records" hold target: a catalog expression in the text syntax, returned in canonical text
    form so equal expressions are stored alike (and `hold list --target` finds them)."""
    from .catalog.expressions import parse, to_text, validate

    if not isinstance(target, str) or not target.strip():
        raise InvalidInput("a records hold needs an expression: got an empty one")
    expression = parse(target)
    validate(expression)
    text = to_text(expression)
    if len(text) > MAX_TARGET_CHARS:
        raise InvalidInput(f"records hold expression too long: {len(text)} characters in canonical form, "
                           f"at most {MAX_TARGET_CHARS}")
    return text


def holds_on(conn: Connection, kind: str, target: str) -> list[Hold]:
    """The active holds on one target, oldest first, read on the caller's connection so a caller
    inside a write transaction sees exactly what its transaction sees."""
    rows = conn.execute(sa.select(holds_table).where(
        holds_table.c.kind == kind, holds_table.c.target == target).order_by(holds_table.c.id))
    return [_hold(r) for r in rows]


def hold_active(hold: Hold, subject: str, action: str) -> HoldActive:
    """The refusal of a deletion: `subject` (e.g. "stream a/b") cannot be `action` ("deleted")."""
    return HoldActive(f"{subject} is under legal hold {hold.id} ({hold.reason}); it cannot be {action} until "
                      "the hold is removed", hold.id, hold.reason)


def refuse_if_held(conn: Connection, kind: str, target: str, action: str) -> None:
    """Raise HoldActive naming the oldest hold on the target, if it has any. Call it inside the
    deleting transaction, after locking what `HoldStore.add` locks, so a hold cannot slip in between."""
    held = holds_on(conn, kind, target)
    if held:
        raise hold_active(held[0], f"{kind} {target}", action)


def stream_holds_in_scope(conn: Connection, scope: str) -> list[Hold]:
    """The holds on streams of one scope (by name: a hold outlives the stream it names), oldest first."""
    rows = conn.execute(sa.select(holds_table).where(
        holds_table.c.kind == "stream", holds_table.c.target.startswith(f"{scope}/", autoescape=True))
        .order_by(holds_table.c.id))
    return [_hold(r) for r in rows]


class HoldStore:
    """Add, list and remove holds. Writes share the stream controller's database, clock, actor and audit."""

    def __init__(self, streams: StreamController) -> None:
        self.streams = streams

    def add(self, kind: str, target: str, reason: str) -> int:
        """Hold `target`; returns the new hold's id. The target must exist."""
        kind = check_kind(kind)
        reason = check_reason(reason)
        if kind == "records":
            return self._add_records_hold(check_record_expression(target), reason)
        if kind in ("dataset", "archive"):
            return self._add_archive_hold(kind, target, reason)
        split_stream_name(target)
        with self.streams.db.write() as conn:
            # lock the stream row as truncate does, so a hold and a truncation of one stream serialise
            row = self.streams._stream_row(conn, target, lock=True)
            name = f"{row.scope}/{row.name}"
            hold_id = conn.execute(sa.insert(holds_table).values(
                kind=kind, target=name, reason=reason, created_ms=self.streams.clock.now_ms(),
                created_by=self.streams.actor)).inserted_primary_key[0]
            self.streams._audit(conn, "hold_add", name, None, None, 0, reason, {"hold": hold_id, "kind": kind})
        return int(hold_id)

    def _add_records_hold(self, expression: str, reason: str) -> int:
        # no row to lock: the purge and the job read the holds again right before they delete
        from .catalog.expressions import parse
        from .catalog.holds import check_room_for

        with self.streams.db.write() as conn:
            check_room_for(conn, parse(expression))
            hold_id = conn.execute(sa.insert(holds_table).values(
                kind="records", target=expression, reason=reason, created_ms=self.streams.clock.now_ms(),
                created_by=self.streams.actor)).inserted_primary_key[0]
            self.streams._audit(conn, "hold_add", expression, None, None, 0, reason,
                                {"hold": hold_id, "kind": "records"})
        return int(hold_id)

    def _add_archive_hold(self, kind: str, target: str, reason: str) -> int:
        from .archives.model import check_archive_id, check_dataset
        from .archives.store import lock_dataset
        from .store.schema_archives import archives as archives_table

        target = check_dataset(target) if kind == "dataset" else check_archive_id(target)
        with self.streams.db.write() as conn:
            if kind == "dataset":
                lock_dataset(conn, target)  # NotFound if there is no such dataset
            else:
                dataset = conn.execute(sa.select(archives_table.c.dataset)
                                       .where(archives_table.c.id == target)).scalar_one_or_none()
                if dataset is None:
                    raise NotFound(f"archive {target} does not exist")
                lock_dataset(conn, dataset)
            hold_id = conn.execute(sa.insert(holds_table).values(
                kind=kind, target=target, reason=reason, created_ms=self.streams.clock.now_ms(),
                created_by=self.streams.actor)).inserted_primary_key[0]
            self.streams._audit(conn, "hold_add", target, None, None, 0, reason, {"hold": hold_id, "kind": kind})
        return int(hold_id)

    def list(self, kind: str | None = None, target: str | None = None) -> builtins.list[Hold]:
        """Active holds, oldest first, optionally of one kind and/or on one target."""
        query = sa.select(holds_table).order_by(holds_table.c.id)
        if kind is not None:
            query = query.where(holds_table.c.kind == check_kind(kind))
        if target is not None:
            query = query.where(holds_table.c.target == target)
        with self.streams.db.read() as conn:
            return [_hold(r) for r in conn.execute(query)]

    def active_for(self, kind: str, target: str) -> builtins.list[Hold]:
        """The holds that currently protect `target` (empty when it may be deleted)."""
        kind = check_kind(kind)
        with self.streams.db.read() as conn:
            return holds_on(conn, kind, target)

    def remove(self, hold_id: int) -> Hold:
        """Release a hold; returns it as it was."""
        hold_id = check_hold_id(hold_id)
        with self.streams.db.write() as conn:
            row = conn.execute(sa.select(holds_table).where(holds_table.c.id == hold_id)).one_or_none()
            if row is None:
                raise NotFound(f"hold {hold_id} does not exist")
            hold = _hold(row)
            conn.execute(sa.delete(holds_table).where(holds_table.c.id == hold_id))
            if hold.kind == "records":
                # the retention job's trackers say the spans behind them were processed, but the
                # records this hold protected were skipped there: forget the trackers so that the
                # next run covers the whole timeline again and deletes what has expired meanwhile
                from .store.schema_catalog import catalog_trackers

                conn.execute(sa.delete(catalog_trackers))
            self.streams._audit(conn, "hold_remove", hold.target, None, None, 0,
                                f"released hold {hold.id} ({hold.reason})", {"hold": hold.id, "kind": hold.kind})
        return hold


__all__ = ["HOLD_KINDS", "Hold", "HoldStore", "check_record_expression", "hold_active", "hold_from_row", "holds_on",
           "refuse_if_held", "stream_holds_in_scope"]
