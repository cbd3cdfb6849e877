"""The purge: records DELETED for longer than `catalog.purge_age` lose their data, then their rows
(docs/design/catalog.md#purge). The decisions are in purge_plan.py; this is the shell.

Per batch: fetch up to `catalog.purge_batch_size` DELETED records with `status_time` at or below
the sliding threshold, not excluded, not held, newest first; check each record's `location`
against the location rules (locations.py: never into tidekeep's own areas, absolute ones only
under `catalog.data_roots`) and delete the data there through FileIO (a missing file is a
success: the data is gone either way); then delete the rows of the successes in one audited
transaction, whose audit row names the files removed. Files go first and rows second, so a
crash in between leaves rows whose files are already gone, and the rerun deletes those rows
(missing file = success): the purge is idempotent and never leaves data without a row to find it.
A record whose data cannot be deleted keeps its row, is excluded for the rest of the run and
counts as a failure; once failures exceed `catalog.purge_failure_threshold` the run stops.

Under `tidekeep serve` the purge gets the catalog lease's fence (store/fencing.py): it is confirmed
before each batch's files are deleted and checked again in the transaction that deletes the rows,
so a purge whose lease was taken over stops with LeaseLost (files already deleted in that batch
keep their rows, which the next purge finds gone and deletes).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..faults import fault_point
from ..store.audit import AuditEntry
from ..store.fencing import LeaseFence, check_fence, confirm_fence
from ..store.fileio import FileIO
from ..store.schema_catalog import catalog_records as records_table
from . import locations, purge_plan
from .holds import HeldRecords, load_held_records
from .location_rules import data_root_options, location_rules, real_file, real_rules
from .runs import end_run, exclusive_run, start_run

if TYPE_CHECKING:
    from ..store.house import Workspace

Progress = Callable[[int, int], None]
DELETED = "DELETED"
FAILED_IDS_SHOWN = 100  # the report names this many failed ids; the count is always exact
AUDIT_FILES_SHOWN = 100  # a batch's audit row names this many removed files; the count is always exact


@dataclass
class PurgeReport:
    now_ms: int
    threshold_ms: int
    dry_run: bool
    eligible: int = 0  # DELETED, old enough and not held, when the run started
    held: int = 0  # DELETED and old enough but held, so left alone
    purged: int = 0  # rows deleted (dry run: rows that would be)
    bytes: int = 0  # sum of their file_size
    batches: int = 0
    failures: int = 0
    failed: list[dict[str, Any]] = field(default_factory=list)  # {"id", "location", "error"}, first few
    aborted: bool = False
    run_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        verb = "would purge" if self.dry_run else "purged"
        text = (f"{verb} {self.purged} records ({self.bytes} bytes) in {self.batches} batches; "
                f"{self.failures} failures; {self.held} held")
        return text + ("; ABORTED: failures exceeded catalog.purge_failure_threshold" if self.aborted else "")


@dataclass(frozen=True)
class _Candidate:
    id: int
    status_time: int
    location: str | None
    file_size: int


@dataclass(frozen=True)
class Deletion:
    """What deleting one record's data did."""

    error: str | None = None  # why it could not be deleted: the record is a failure and keeps its row
    removed: str | None = None  # the file removed (its normal form); None when nothing was there
    bytes: int = 0  # that file's size when it was removed


class DataDeleter:
    """Deletes record data on the storage filesystem or at a URI of its own, after checking the
    location against the workspace's location rules (locations.py) as they are now: a row may have
    been added before the rules, written by hand, or the settings may have changed since. A refused
    location is a failure, never a deletion. Local files are checked a second time with the
    symlinks of their directories resolved. An absolute place is deleted through a FileIO opened
    `outside` the workspace at the top of its filesystem (the location rules, not a workspace stamp,
    decide what may go there), once per scheme and authority; its key is the place's path."""

    def __init__(self, workspace: Workspace) -> None:
        self.storage = workspace.storage
        self.rules = location_rules(workspace.settings)
        self._real_rules = real_rules(self.rules)
        self._root_options = data_root_options(workspace.settings)
        self._filesystems: dict[tuple[str, str, str], FileIO] = {}

    def delete(self, location: str | None) -> Deletion:
        if location is None:
            return Deletion()  # a record without data: nothing to remove
        decision = locations.decide(location, self.rules)
        if decision.place is None:
            return Deletion(error=decision.problem(location))
        place = decision.place
        try:
            if place.scheme == "file":
                reason = locations.decide_real(real_file(place), self._real_rules)
                if reason is not None:
                    return Deletion(error=f"location {locations.shown(location)} {reason}")
            if decision.relative is not None:
                size = self.storage.remove_file(decision.relative)
            else:
                size = self._top_of(place).remove_file(place.path.lstrip("/"))
            if size is None:
                return Deletion()  # nothing there, or removed meanwhile: gone is gone
        except IsADirectoryError:
            # never delete a directory tree on a record's say-so
            return Deletion(error=f"{location!r} is not a file")
        except FileNotFoundError:
            return Deletion()  # removed meanwhile: gone is gone
        except locations.Refused as exc:  # a resolved path that is not valid UTF-8 text
            return Deletion(error=f"location {locations.shown(location)} resolves to a path that {exc.args[0]}")
        except (OSError, pa.ArrowException) as exc:
            return Deletion(error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
        return Deletion(removed=place.text, bytes=size)

    def _top_of(self, place: locations.Place) -> FileIO:
        """The top of a place's filesystem ("/" for a local place, the bucket or host of a URI),
        opened with the options of the data root holding it (an S3 endpoint, scheme, region): the
        place's normal-form path is its key there, so what was checked is what is deleted."""
        options = locations.options_for(place, self._root_options)
        key = (place.scheme, place.authority, options)
        top = self._filesystems.get(key)
        if top is None:
            uri = "/" if place.scheme == "file" else f"{place.scheme}://{place.authority}"
            top = self._filesystems[key] = FileIO.outside(f"{uri}?{options}" if options else uri)
        return top


def _eligible(threshold_ms: int, held: HeldRecords) -> list[Any]:
    return [records_table.c.status == DELETED, records_table.c.status_time <= threshold_ms, ~held.condition]


def _fetch(conn: Connection, cursor: purge_plan.PurgeCursor, held: HeldRecords, batch_size: int) -> list[_Candidate]:
    query = (sa.select(records_table.c.id, records_table.c.status_time, records_table.c.location,
                       records_table.c.file_size)
             .where(*_eligible(cursor.threshold_ms, held))
             .order_by(records_table.c.status_time.desc(), records_table.c.id.desc())
             .limit(batch_size))
    if cursor.excluded:
        query = query.where(records_table.c.id.not_in(sorted(cursor.excluded)))
    return [_Candidate(r.id, r.status_time, r.location, r.file_size or 0) for r in conn.execute(query)]


def _count(conn: Connection, where: Sequence[Any]) -> tuple[int, int]:
    row = conn.execute(sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(records_table.c.file_size), 0))
                       .select_from(records_table).where(*where)).one()
    return int(row[0]), int(row[1])


def _delete_rows(workspace: Workspace, batch: Sequence[_Candidate], removed: Sequence[tuple[int, Deletion]],
                 threshold_ms: int, run_id: int, fence: LeaseFence | None = None) -> tuple[int, int]:
    """Delete the rows of records whose data is gone, in one audited transaction; returns the rows
    and bytes (their file_size) actually deleted (a concurrent purge may have taken some already).
    The audit row names the files this batch removed: `bytes_freed` is their measured size."""
    ids = [c.id for c in batch]
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        where = [records_table.c.id.in_(ids), records_table.c.status == DELETED,
                 records_table.c.status_time <= threshold_ms]
        present = conn.execute(sa.select(records_table.c.id, records_table.c.file_size).where(*where)).all()
        if not present and not removed:
            return 0, 0
        if present:
            conn.execute(sa.delete(records_table).where(*where))
        count, size = len(present), sum(r.file_size or 0 for r in present)
        freed = sum(d.bytes for _, d in removed)
        workspace.audit.append(conn, AuditEntry(
            "catalog_purge", "catalog", f"purged {count} records deleted before the purge threshold", freed,
            {"count": count, "min_id": min((r.id for r in present), default=None),
             "max_id": max((r.id for r in present), default=None), "run": run_id,
             "threshold_ms": threshold_ms, "record_bytes": size,
             "files": [{"id": record_id, "path": d.removed, "bytes": d.bytes}
                       for record_id, d in removed[:AUDIT_FILES_SHOWN]],
             "files_removed": len(removed),
             "files_omitted": max(len(removed) - AUDIT_FILES_SHOWN, 0)}))
    return count, size


def purge_deleted(workspace: Workspace, progress: Progress | None = None, now_ms: int | None = None,
                  dry_run: bool = False, fence: LeaseFence | None = None) -> PurgeReport:
    """Purge the records DELETED at or before `now − catalog.purge_age`; see the module doc. Refused
    with RunInProgress, before anything changes, while another purge that is not a dry run is
    working (catalog/runs.py)."""
    if not dry_run:
        workspace.storage.require_deletable()  # a workspace proven to be itself deletes its records' data
    with exclusive_run(workspace, "purge", dry_run):
        return _purge(workspace, progress, now_ms, dry_run, fence)


def _purge(workspace: Workspace, progress: Progress | None, now_ms: int | None, dry_run: bool,
           fence: LeaseFence | None) -> PurgeReport:
    settings = workspace.settings
    now = workspace.clock.now_ms() if now_ms is None else now_ms
    batch_size = int(settings["catalog.purge_batch_size"])
    failure_threshold = int(settings["catalog.purge_failure_threshold"])
    cursor = purge_plan.start(now, int(settings["catalog.purge_age"]))
    report = PurgeReport(now_ms=now, threshold_ms=cursor.threshold_ms, dry_run=dry_run)
    with workspace.db.read() as conn:
        held = load_held_records(conn, now)
        report.eligible, eligible_bytes = _count(conn, _eligible(cursor.threshold_ms, held))
        report.held = _count(conn, [records_table.c.status == DELETED,
                                    records_table.c.status_time <= cursor.threshold_ms, held.condition])[0]
    report.run_id = start_run(workspace, "purge", now, dry_run, fence=fence)
    try:
        if dry_run:
            # nothing is deleted, so nothing can fail: the eligible records are exactly what a run would take
            report.purged, report.bytes = report.eligible, eligible_bytes
            report.batches = -(-report.eligible // batch_size)
        else:
            _purge_batches(workspace, cursor, report, batch_size, failure_threshold, progress, fence)
    except BaseException:
        end_run(workspace, report.run_id, "FAILED", report.to_dict())
        raise
    if progress is not None:
        progress(report.purged, report.eligible)
    end_run(workspace, report.run_id, "FAILED" if report.aborted else "SUCCEEDED", report.to_dict())
    return report


def _purge_batches(workspace: Workspace, cursor: purge_plan.PurgeCursor, report: PurgeReport, batch_size: int,
                   failure_threshold: int, progress: Progress | None, fence: LeaseFence | None = None) -> None:
    deleter = DataDeleter(workspace)
    while not cursor.done:
        with workspace.db.read() as conn:
            held = load_held_records(conn, report.now_ms)
            batch = _fetch(conn, cursor, held, batch_size)
        # a hold added since the batch was read must still protect its records: look again just
        # before the data goes, and drop whatever it now covers
        fetched = batch
        batch = _without_newly_held(workspace, batch, held, report.now_ms)
        if batch:
            confirm_fence(workspace.db, fence)  # the data goes next: only while the lease is still ours
        failed: list[int] = []
        done: list[_Candidate] = []
        removed: list[tuple[int, Deletion]] = []
        for candidate in batch:
            outcome = deleter.delete(candidate.location)
            if outcome.error is None:
                done.append(candidate)
                if outcome.removed is not None:
                    removed.append((candidate.id, outcome))
            else:
                failed.append(candidate.id)
                if len(report.failed) < FAILED_IDS_SHOWN:
                    report.failed.append({"id": candidate.id, "location": candidate.location,
                                          "error": outcome.error})
        fault_point("purge.after_files")
        if done:
            count, size = _delete_rows(workspace, done, removed, cursor.threshold_ms, int(report.run_id or 0), fence)
            report.purged += count
            report.bytes += size
        fault_point("purge.after_rows")
        cursor = purge_plan.advance(cursor, [c.status_time for c in fetched], failed, batch_size, failure_threshold)
        report.batches, report.failures, report.aborted = cursor.batches, cursor.failures, cursor.aborted
        if progress is not None:
            progress(report.purged, report.eligible)


def _without_newly_held(workspace: Workspace, batch: list[_Candidate], held: HeldRecords,
                        now_ms: int) -> list[_Candidate]:
    if not batch:
        return batch
    with workspace.db.read() as conn:
        current = load_held_records(conn, now_ms)
        if current.hold_ids == held.hold_ids:
            return batch
        still = {r.id for r in conn.execute(sa.select(records_table.c.id).where(
            records_table.c.id.in_([c.id for c in batch]), ~current.condition))}
    return [c for c in batch if c.id in still]


__all__ = ["AUDIT_FILES_SHOWN", "DataDeleter", "Deletion", "PurgeReport", "purge_deleted"]
