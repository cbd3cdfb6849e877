"""The `catalog_runs` rows of the retention job and the purge: started RUNNING with the run's fixed
`now`, ended SUCCEEDED or FAILED with the report. A run killed before it could end stays RUNNING
until a later successful run of the same kind, which has done its work, marks it INTERRUPTED."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..store.database import inserted_id
from ..store.fencing import LeaseFence, check_fence
from ..store.schema_catalog import catalog_runs

if TYPE_CHECKING:
    from ..store.house import Workspace


def start_run(workspace: Workspace, kind: str, now_ms: int, dry_run: bool, rules_version: str | None = None,
              fence: LeaseFence | None = None) -> int:
    """The run's RUNNING row; with a `fence`, only while that lease is held (else LeaseLost, no row)."""
    with workspace.db.write() as conn:
        check_fence(conn, fence)
        return inserted_id(conn.execute(sa.insert(catalog_runs).values(
            kind=kind, state="RUNNING", dry_run=dry_run, now_ms=now_ms, started_ms=workspace.clock.now_ms(),
            rules_version=rules_version or None, actor=workspace.audit.actor)))


def end_run(workspace: Workspace, kind: str, run_id: int, state: str, dry_run: bool, report: dict[str, Any]) -> None:
    with workspace.db.write() as conn:
        conn.execute(sa.update(catalog_runs).where(catalog_runs.c.id == run_id).values(
            state=state, finished_ms=workspace.clock.now_ms(), report=json.dumps(report)))
        if state == "SUCCEEDED" and not dry_run:
            conn.execute(sa.update(catalog_runs).where(
                catalog_runs.c.kind == kind, catalog_runs.c.state == "RUNNING", catalog_runs.c.dry_run.is_(False),
                catalog_runs.c.id < run_id).values(state="INTERRUPTED"))


def list_runs(workspace: Workspace, limit: int = 20) -> list[Mapping[str, Any]]:
    """Recent runs of both kinds, newest first, with their reports."""
    with workspace.db.read() as conn:
        rows = conn.execute(sa.select(catalog_runs).order_by(catalog_runs.c.id.desc()).limit(limit))
        return [{**dict(r._mapping), "report": json.loads(r.report) if r.report else None} for r in rows]
