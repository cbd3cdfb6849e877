"""What-if archive retention on the metadata store (docs/archives-retention.md#what-if-retention): one
read of a dataset's archives, the RUNNING searches and the holds, then the collector's own plan for
now (expiry.plan_archive_sweep) and the pure day-by-day forecast (expiry_days.py). Reads only: no
search is failed or killed, nothing is journaled or deleted."""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa

from ..errors import InvalidInput, NotFound
from ..forecast import DEFAULT_DAYS, Forecast, check_days
from ..store.schema_archives import archive_datasets, archive_search_jobs
from ..store.schema_archives import archives as archives_table
from ..units import parse_minutes
from .expiry import plan_archive_sweep
from .expiry_days import expiry_forecast
from .gc import archives_with_held_records, held_reasons
from .holds import load_holds
from .model import JobState, check_dataset
from .store import archive_from_row, job_from_row

if TYPE_CHECKING:
    from ..store.house import Workspace


def proposed_minutes(retention: int | str) -> int:
    """A proposed retention period as the setting takes it: whole minutes above zero, or a duration
    such as "30d" (a whole number of minutes)."""
    try:
        return parse_minutes(retention)
    except InvalidInput as exc:
        raise InvalidInput(f"invalid retention period: {exc}") from None


def archive_forecast(workspace: Workspace, dataset: str, retention: int | str | None = None,
                     now_ms: int | None = None, days: int = DEFAULT_DAYS) -> Forecast:
    """Which archives of `dataset` expire now and on each of the next `days` days under `retention`
    (minutes or a duration; default: `archive_output.retention_period`), changing nothing."""
    dataset = check_dataset(dataset)
    days = check_days(days)
    minutes: int | None = (workspace.settings["archive_output.retention_period"] if retention is None
                           else proposed_minutes(retention))
    if now_ms is not None and (isinstance(now_ms, bool) or not isinstance(now_ms, int) or now_ms < 0):
        raise InvalidInput(f"invalid time {now_ms!r}: expected milliseconds since the epoch")
    now = workspace.clock.now_ms() if now_ms is None else now_ms
    with workspace.db.read() as conn:
        if conn.execute(sa.select(archive_datasets.c.name).where(archive_datasets.c.name == dataset)).first() is None:
            raise NotFound(f"dataset {dataset!r} does not exist")
        archives = [archive_from_row(r) for r in conn.execute(
            sa.select(archives_table).where(archives_table.c.dataset == dataset))]
        running = [job_from_row(r) for r in conn.execute(
            sa.select(archive_search_jobs).where(archive_search_jobs.c.state == str(JobState.RUNNING)))]
        held_datasets, held_archives = load_holds(conn)
        held_records = archives_with_held_records(conn, now, [a.id for a in archives])
    held = held_archives | held_records
    plan = None if minutes is None else plan_archive_sweep(now, minutes, workspace.settings["search.max_runtime"],
                                                           archives, running, held_datasets, held)
    why = held_reasons(archives, held_datasets, held_archives, held_records)
    return expiry_forecast(dataset, archives, minutes, retention is None, plan, held_datasets, held, why, now, days)


__all__ = ["archive_forecast", "proposed_minutes"]
