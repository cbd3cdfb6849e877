"""Meta records in the metadata store: add, get, list, count, change status.

The shell around records.py: every record is validated, its location included (locations.py),
before the transaction starts, so a bad record leaves the store unchanged; all records of one
`add` land in one transaction.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import AlreadyExists, InvalidInput, NotFound
from ..integers import check_int64
from ..store.database import check_storable_text
from ..store.holds import hold_active
from ..store.schema_catalog import catalog_records
from .holds import first_hold_on_records
from .location_rules import location_rules
from .locations import check_location
from .records import MetaRecord, Status, record_from_mapping, record_from_row

if TYPE_CHECKING:
    from ..store.house import Workspace

MAX_LIST = 100_000
_ID_CHUNK = 1000  # ids per IN (...) list: far below SQLite's and PostgreSQL's parameter limits


def check_record_id(record_id: object, what: str = "record id") -> int:
    if isinstance(record_id, bool) or not isinstance(record_id, int) or record_id < 1:
        raise InvalidInput(f"invalid {what} {record_id!r}: expected a positive integer")
    return check_int64(record_id, what)


def check_status(status: object) -> str:
    if isinstance(status, str) and status.strip().upper() in Status.__members__:
        return status.strip().upper()
    raise InvalidInput(f"invalid status {status!r}: expected one of UNLOCKED, LOCKED, DELETED")


def bump_id_sequence(conn: Connection, max_id: int) -> None:
    """On PostgreSQL, move the id sequence to at least `max_id`, so rows added later without an id
    do not collide with explicit ones. Never lowers it: a concurrent add may have taken ids above."""
    if conn.dialect.name != "postgresql":
        return  # SQLite assigns max(rowid) + 1 by itself
    conn.execute(sa.text(
        "SELECT setval(s.seq, GREATEST(CAST(:m AS bigint), COALESCE(pg_sequence_last_value(s.seq::regclass), 0))) "
        "FROM (SELECT pg_get_serial_sequence('catalog_records', 'id') AS seq) AS s"), {"m": max_id})


class RecordStore:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self.db = workspace.db

    def add(self, records: Iterable[Any]) -> builtins.list[int]:
        """Add records (MetaRecord or mappings) in one transaction; returns their ids in order.
        Explicit ids are kept; a duplicate id (in the batch or in the store) is AlreadyExists and
        nothing is written."""
        if isinstance(records, (MetaRecord, dict, str, bytes)):
            raise InvalidInput("add: expected a list of records, got a single value")
        checked = [record_from_mapping(r, f"record {i}") for i, r in enumerate(records, start=1)]
        if any(r.location is not None for r in checked):
            rules = location_rules(self.workspace.settings)
            for i, record in enumerate(checked, start=1):
                check_location(record.location, rules, f"record {i}")
        explicit = [r.id for r in checked if r.id is not None]
        seen: set[int] = set()
        for record_id in explicit:
            if record_id in seen:
                raise AlreadyExists(f"record id {record_id} appears twice in the batch")
            seen.add(record_id)
        if not checked:
            return []
        with self.db.write() as conn:
            taken = self._existing(conn, explicit)
            if taken:
                raise AlreadyExists(f"record id {min(taken)} already exists")
            ids = self._insert(conn, checked)
            if explicit:
                bump_id_sequence(conn, max(explicit))
        return ids

    def _insert(self, conn: Connection, records: Sequence[MetaRecord]) -> builtins.list[int]:
        with_id = [r.to_row() for r in records if r.id is not None]
        if with_id:
            conn.execute(sa.insert(catalog_records), with_id)
        without = [r.to_row() for r in records if r.id is None]
        assigned: builtins.list[int] = []
        if without:
            # insertmanyvalues: one round trip per few hundred rows, ids back in parameter order
            result = conn.execute(
                sa.insert(catalog_records).returning(catalog_records.c.id, sort_by_parameter_order=True), without)
            assigned = [int(row.id) for row in result]
        fresh = iter(assigned)
        return [r.id if r.id is not None else next(fresh) for r in records]

    @staticmethod
    def _existing(conn: Connection, ids: Sequence[int]) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(ids), _ID_CHUNK):
            chunk = ids[start:start + _ID_CHUNK]
            found.update(conn.execute(sa.select(catalog_records.c.id).where(catalog_records.c.id.in_(chunk))).scalars())
        return found

    def get(self, record_id: int) -> MetaRecord:
        record_id = check_record_id(record_id)
        with self.db.read() as conn:
            row = conn.execute(sa.select(catalog_records).where(catalog_records.c.id == record_id)).one_or_none()
        if row is None:
            raise NotFound(f"record {record_id} does not exist")
        return record_from_row(row)

    def list(self, feed: str | None = None, type: str | None = None, status: str | None = None,
             limit: int = 100, after_id: int | None = None) -> builtins.list[MetaRecord]:
        """Records in id order, optionally of one feed, type and/or status; page with after_id."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIST:
            raise InvalidInput(f"invalid limit {limit!r}: expected 1 to {MAX_LIST}")
        check_storable_text(feed, "feed")
        check_storable_text(type, "type")
        query = sa.select(catalog_records).order_by(catalog_records.c.id).limit(limit)
        if feed is not None:
            query = query.where(catalog_records.c.feed == feed)
        if type is not None:
            query = query.where(catalog_records.c.type == type)
        if status is not None:
            query = query.where(catalog_records.c.status == check_status(status))
        if after_id is not None:
            if isinstance(after_id, bool) or not isinstance(after_id, int) or after_id < 0:
                raise InvalidInput(f"invalid after_id {after_id!r}: expected an integer >= 0")
            check_int64(after_id, "after_id")
            query = query.where(catalog_records.c.id > after_id)
        with self.db.read() as conn:
            return [record_from_row(r) for r in conn.execute(query)]

    def count(self, status: str | None = None) -> int:
        query = sa.select(sa.func.count()).select_from(catalog_records)
        if status is not None:
            query = query.where(catalog_records.c.status == check_status(status))
        with self.db.read() as conn:
            return int(conn.execute(query).scalar_one())

    def set_status(self, ids: Iterable[int], status: str) -> int:
        """Set the status of existing records (status_time = now); every id must exist, else
        NotFound and nothing changes. Setting DELETED (a logical delete, which the purge follows)
        is refused with HoldActive, and nothing changes, while a hold protects any of the records
        (docs/holds.md). Returns how many rows changed."""
        status = check_status(status)
        if isinstance(ids, int):
            ids = [ids]
        wanted = sorted({check_record_id(i) for i in ids})
        if not wanted:
            return 0
        now = self.workspace.clock.now_ms()
        with self.db.write() as conn:
            missing = set(wanted) - self._existing(conn, wanted)
            if missing:
                raise NotFound(f"record {min(missing)} does not exist")
            if status == Status.DELETED.name:
                held = first_hold_on_records(conn, wanted, now)
                if held is not None:
                    hold, record_id = held
                    raise hold_active(hold, f"record {record_id}", "deleted")
            changed = 0
            for start in range(0, len(wanted), _ID_CHUNK):
                chunk = wanted[start:start + _ID_CHUNK]
                changed += conn.execute(sa.update(catalog_records).where(catalog_records.c.id.in_(chunk))
                                        .values(status=status, status_time=now)).rowcount
        return changed


__all__ = ["RecordStore", "bump_id_sequence", "check_record_id", "check_status"]
