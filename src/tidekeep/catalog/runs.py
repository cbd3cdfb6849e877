"""The `catalog_runs` rows of the retention job and the purge, and the lock that lets only one run
of a kind work at a time.

A run (not a dry run) does its work inside `exclusive_run`, which holds the run lock of its kind in
the metadata store (store/run_lock.py) or refuses the run with RunInProgress before it changes
anything — so two runs never do the same work, and a run started beside `tidekeep serve`'s is
refused like any other. Dry runs change nothing but their own row: they take no lock and are never
refused.

A row starts RUNNING with the run's fixed `now` and ends SUCCEEDED or FAILED with the report. Since
only the lock holder can be running, a run marks every RUNNING row of its kind (not dry runs)
INTERRUPTED as soon as it holds the lock: those belong to processes that died before they could
end them. A crashed run is thus reported as soon as the next run starts, and a live one never is."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import NotFound, RunInProgress
from ..faults import pause_point
from ..store.database import inserted_id
from ..store.fencing import LeaseFence, check_fence
from ..store.run_lock import run_lock
from ..store.schema_catalog import catalog_runs
from ..units import iso_utc

if TYPE_CHECKING:
    from ..store.house import Workspace


@contextlib.contextmanager
def exclusive_run(workspace: Workspace, kind: str, dry_run: bool) -> Iterator[None]:
    """The block a run of `kind` does its work in. A run that is not a dry run holds the kind's run
    lock for the block, or is refused at once with RunInProgress (nothing written, nothing
    changed) while another process or thread holds it; a dry run takes no lock."""
    if dry_run:
        yield
        return
    with run_lock(workspace.db, f"catalog-{kind}") as held:
        if not held:
            raise _in_progress(workspace, kind)
        with workspace.db.write() as conn:  # at once, so a refused run never names a dead run's row
            _mark_interrupted(conn, kind)
        yield


def _in_progress(workspace: Workspace, kind: str) -> RunInProgress:
    """The refusal, naming the running run: the only RUNNING row of the kind, since the lock holder
    marked the others INTERRUPTED as soon as it took the lock."""
    with workspace.db.read() as conn:
        row = conn.execute(sa.select(catalog_runs.c.id, catalog_runs.c.started_ms, catalog_runs.c.actor)
                           .where(*_running(kind)).order_by(catalog_runs.c.id.desc()).limit(1)).first()
    name = "retention job" if kind == "retention" else kind
    if row is None:  # the holder is still loading its inputs, or has no rules to run
        running = f"another {name} run is in progress (it has not written its run row yet)"
    else:
        by = f" by {row.actor}" if row.actor else ""
        running = f"{name} run {row.id} is in progress (started {iso_utc(row.started_ms)}{by})"
    return RunInProgress(f"{running}; this run was refused and changed nothing: wait for that run to end "
                         "('tidekeep catalog runs' shows it)", kind, None if row is None else int(row.id))


def _running(kind: str) -> list[sa.ColumnElement[bool]]:
    return [catalog_runs.c.kind == kind, catalog_runs.c.state == "RUNNING", catalog_runs.c.dry_run.is_(False)]


def start_run(workspace: Workspace, kind: str, now_ms: int, dry_run: bool, rules_version: str | None = None,
              fence: LeaseFence | None = None) -> int:
    """The run's RUNNING row; with a `fence`, only while that lease is held (else LeaseLost, no row).
    A run that is not a dry run calls it inside `exclusive_run`."""
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        run_id = inserted_id(conn.execute(sa.insert(catalog_runs).values(
            kind=kind, state="RUNNING", dry_run=dry_run, now_ms=now_ms, started_ms=workspace.clock.now_ms(),
            rules_version=rules_version or None, actor=workspace.audit.actor)))
    pause_point(f"catalog.{kind}_started")  # tests: a run that holds its lock and has its row
    return run_id


def _mark_interrupted(conn: Connection, kind: str) -> None:
    """Only the lock holder calls this: every other RUNNING row of its kind is a dead process's."""
    conn.execute(sa.update(catalog_runs).where(*_running(kind)).values(state="INTERRUPTED"))


def end_run(workspace: Workspace, run_id: int, state: str, report: dict[str, Any]) -> None:
    with workspace.db.write() as conn:
        conn.execute(sa.update(catalog_runs).where(catalog_runs.c.id == run_id).values(
            state=state, finished_ms=workspace.clock.now_ms(), report=json.dumps(report)))


def list_runs(workspace: Workspace, limit: int = 20, before_id: int | None = None) -> list[Mapping[str, Any]]:
    """Recent runs of both kinds, newest first, with their reports; `before_id`: only older runs
    than that one (paging)."""
    query = sa.select(catalog_runs).order_by(catalog_runs.c.id.desc()).limit(limit)
    if before_id is not None:
        query = query.where(catalog_runs.c.id < before_id)
    with workspace.db.read() as conn:
        return [_run_entry(r) for r in conn.execute(query)]


def get_run(workspace: Workspace, run_id: int) -> Mapping[str, Any]:
    """One run with its report, as `list_runs` gives it; NotFound when there is none."""
    with workspace.db.read() as conn:
        row = conn.execute(sa.select(catalog_runs).where(catalog_runs.c.id == run_id)).one_or_none()
    if row is None:
        raise NotFound(f"catalog run {run_id} does not exist (see 'tidekeep catalog runs')")
    return _run_entry(row)


def _run_entry(row: Any) -> Mapping[str, Any]:
    return {**dict(row._mapping), "report": json.loads(row.report) if row.report else None}
