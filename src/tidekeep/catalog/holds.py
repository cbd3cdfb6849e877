"""Holds on catalog records: a hold of kind "records" is an expression, and every record it matches
is neither logically deleted by the retention job nor purged while the hold exists.

The hold's target is the expression's canonical text (`to_text`), checked when the hold is added
(the kind "records", registered here with store/holds.py); here it is read back and compiled: to
one SQLAlchemy condition "held by any hold" (the purge and the job exclude `~condition`) and to
Python for explain. Expressions are compiled
with the run's fixed `now` and the catalog's dictionaries, as the rules are.

An archive's catalog record (type `Archive`, location = the archive's file) is also held while a
hold of kind "dataset" or "archive" holds its archive: purging the record would delete the file.
Both rules are registered as coverage: `holds_covering(conn, "record", id, now)` answers for a
record, and `holds_covering(conn, "archive", id, now)` includes the records holds matching the
archive's catalog record.

Releasing a records hold forgets the retention job's trackers: they say the spans behind them were
processed, but the records the hold protected were skipped there, so the next run covers the whole
timeline again and deletes what has expired meanwhile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import InvalidInput
from ..store.holds import (
    MAX_TARGET_CHARS,
    Hold,
    HoldKind,
    holds_of,
    register_coverage,
    register_kind,
)
from ..store.schema_archives import archives as archives_table
from ..store.schema_catalog import catalog_dictionaries, catalog_trackers
from ..store.schema_catalog import catalog_records as records_table
from .expressions.ast import Expr

RECORDS_KIND = "records"
ARCHIVE_HOLD_KINDS = ("dataset", "archive")


def check_record_expression(target: object) -> str:
    """A "records" hold target: a catalog expression in the text syntax, returned in canonical text
    form so equal expressions are stored alike (and `hold list --target` finds them)."""
    from .expressions import parse, to_text, validate

    if not isinstance(target, str) or not target.strip():
        raise InvalidInput("a records hold needs an expression: got an empty one")
    expression = parse(target)
    validate(expression)
    text = to_text(expression)
    if len(text) > MAX_TARGET_CHARS:
        raise InvalidInput(f"records hold expression too long: {len(text)} characters in canonical form, "
                           f"at most {MAX_TARGET_CHARS}")
    return text


def record_holds(conn: Connection) -> list[tuple[Hold, Expr]]:
    """The active holds on catalog records with their parsed expressions, oldest first."""
    found = holds_of(conn, (RECORDS_KIND,))
    if not found:
        return []
    from .expressions import parse

    return [(hold, parse(hold.target)) for hold in found]


def check_room_for(conn: Connection, expression: Expr) -> None:
    """InvalidInput when a new hold with `expression` would take the holds on records past
    MAX_HELD_TERMS together: the purge and the job test all of them in one statement / column."""
    from .expressions.shape import MAX_HELD_TERMS, check_total, count_terms

    held = [count_terms(expr) for _, expr in record_holds(conn)]
    check_total([*held, count_terms(expression)], MAX_HELD_TERMS, "the holds on records (with the new one)")


def load_dictionaries(conn: Connection) -> dict[str, list[str]]:
    return {r.name: list(json.loads(r.words)) for r in conn.execute(sa.select(catalog_dictionaries))}


def compile_context(conn: Connection, now_ms: int) -> Any:
    from .expressions import CompileContext

    return CompileContext(now_ms, load_dictionaries(conn))


def held_predicate(holds: Sequence[tuple[Hold | None, Expr]], ctx: Any, table: sa.Table = records_table) -> Any:
    """A SQLAlchemy condition on `table`: true for a record any of `holds` matches (false when there
    are none, so `~held_predicate(...)` is always safe to add to a WHERE)."""
    if not holds:
        return sa.false()
    from .expressions import to_sqlalchemy
    from .expressions.sql import any_of

    return any_of([to_sqlalchemy(expr, ctx, table) for _, expr in holds])


def holds_matching(record: Mapping[str, Any], holds: Sequence[tuple[Hold, Expr]], ctx: Any) -> list[Hold]:
    """The holds that protect one record (a mapping of catalog_records columns), for explain."""
    if not holds:
        return []
    from .expressions import to_python

    return [hold for hold, expr in holds if to_python(expr, ctx)(record)]


@dataclass(frozen=True)
class HeldRecords:
    """The record holds as read at one moment: their ids (to notice a change) and the condition."""

    hold_ids: tuple[int, ...]
    condition: Any


def archive_holds(conn: Connection) -> list[Hold]:
    """The active holds of kinds "dataset" and "archive", oldest first."""
    return holds_of(conn, ARCHIVE_HOLD_KINDS)


def _held_archive_records(holds: Sequence[Hold], table: sa.Table) -> Any:
    """True for the catalog records of the archives `holds` (dataset and archive holds) protect."""
    datasets = [h.target for h in holds if h.kind == "dataset"]
    ids = [h.target for h in holds if h.kind == "archive"]
    held = sa.select(archives_table.c.catalog_record_id).where(
        archives_table.c.catalog_record_id.is_not(None),
        sa.or_(archives_table.c.dataset.in_(datasets), archives_table.c.id.in_(ids)))
    return table.c.id.in_(held)


def load_held_records(conn: Connection, now_ms: int, table: sa.Table = records_table) -> HeldRecords:
    holds = record_holds(conn)
    on_archives = archive_holds(conn)
    conditions = []
    if holds:
        conditions.append(held_predicate(holds, compile_context(conn, now_ms), table))
    if on_archives:
        conditions.append(_held_archive_records(on_archives, table))
    if not conditions:
        return HeldRecords((), sa.false())
    return HeldRecords(tuple(sorted([h.id for h, _ in holds] + [h.id for h in on_archives])), sa.or_(*conditions))


def _hold_conditions(conn: Connection, now_ms: int) -> list[tuple[Hold, Any]]:
    """Every hold that can protect a catalog record (records, dataset, archive) with its condition
    on the records table, oldest first."""
    from .expressions import to_sqlalchemy

    candidates: list[tuple[Hold, Any]] = []
    holds = record_holds(conn)
    if holds:
        ctx = compile_context(conn, now_ms)
        candidates += [(hold, to_sqlalchemy(expr, ctx, records_table)) for hold, expr in holds]
    candidates += [(hold, _held_archive_records([hold], records_table)) for hold in archive_holds(conn)]
    return sorted(candidates, key=lambda c: c[0].id)


def first_hold_on_records(conn: Connection, record_ids: Sequence[int], now_ms: int,
                          chunk: int = 1000) -> tuple[Hold, int] | None:
    """The oldest hold (records, dataset or archive) that protects any of `record_ids`, with the
    lowest such record id; None when none of them is held."""
    for hold, condition in _hold_conditions(conn, now_ms):
        for start in range(0, len(record_ids), chunk):
            lowest = conn.execute(sa.select(sa.func.min(records_table.c.id)).where(
                records_table.c.id.in_(list(record_ids[start:start + chunk])), condition)).scalar()
            if lowest is not None:
                return hold, int(lowest)
    return None


def holds_on_record(conn: Connection, record_id: str, now_ms: int) -> list[Hold]:
    """The holds that protect one catalog record (by id), oldest first."""
    if not record_id.isdigit():
        return []
    return [hold for hold, condition in _hold_conditions(conn, now_ms)
            if conn.execute(sa.select(records_table.c.id).where(records_table.c.id == int(record_id), condition))
            .first() is not None]


def record_holds_on_archive(conn: Connection, archive_id: str, now_ms: int) -> list[Hold]:
    """The records holds matching an archive's catalog record (deleting the archive deletes it)."""
    record_id = conn.execute(sa.select(archives_table.c.catalog_record_id)
                             .where(archives_table.c.id == archive_id)).scalar_one_or_none()
    if record_id is None:
        return []
    return [hold for hold in holds_on_record(conn, str(record_id), now_ms) if hold.kind == RECORDS_KIND]


def validate_records_target(conn: Connection, target: object) -> str:
    """A new records hold: its expression checked and canonical, within MAX_HELD_TERMS with the
    others. No row to lock: the purge and the job read the holds again right before they delete."""
    from .expressions import parse

    expression = check_record_expression(target)
    check_room_for(conn, parse(expression))
    return expression


def forget_trackers(conn: Connection, hold: Hold) -> None:
    conn.execute(sa.delete(catalog_trackers))


register_kind(HoldKind(RECORDS_KIND, validate_records_target, released=forget_trackers))
register_coverage("record", holds_on_record)
register_coverage("archive", record_holds_on_archive)

__all__ = [
    "RECORDS_KIND",
    "HeldRecords",
    "archive_holds",
    "check_record_expression",
    "check_room_for",
    "compile_context",
    "first_hold_on_records",
    "held_predicate",
    "holds_matching",
    "holds_on_record",
    "load_held_records",
    "record_holds",
    "record_holds_on_archive",
]
