"""`client.archives`: one object for every archives operation (ingest, search, results, the
garbage collectors). Each method delegates to the module that owns the work, imported on first
use so `import tidekeep` stays light."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..forecast import Forecast
    from ..store.house import Workspace
    from .gc import ArchiveGcReport, GcReport
    from .gc_results import ResultGcReport
    from .ingest import IngestReport
    from .model import Archive, SearchJob
    from .results import ResultsPage, ResultsSlice
    from .search import StartedSearch

Progress = Callable[[int, int], None]  # (done, total) in the unit of the operation


class Archives:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    # ---- archives (store.py, ingest.py) -------------------------------------------------------
    def ingest(self, dataset: str, paths: Sequence[str | Path], *, timezone: str = "UTC",
               timestamp_format: str | None = None, progress: Progress | None = None) -> IngestReport:
        """Compress text logs (plain or gzip) into archives of `dataset` with a Spark job."""
        from .ingest import ingest_logs

        return ingest_logs(self.workspace, dataset, paths, timezone=timezone, timestamp_format=timestamp_format,
                           progress=progress)

    def check_ingest(self, dataset: str, paths: Sequence[str | Path], *, timezone: str = "UTC",
                     timestamp_format: str | None = None) -> None:
        """Raise what `ingest` would refuse before writing anything (bad names, options, missing or
        unreachable inputs), without ingesting."""
        from .ingest import check_ingest

        check_ingest(self.workspace, dataset, paths, timezone=timezone, timestamp_format=timestamp_format)

    def list(self, dataset: str | None = None) -> builtins.list[Archive]:
        from .store import ArchiveStore

        return ArchiveStore(self.workspace).list(dataset)

    def get(self, archive_id: str) -> Archive:
        from .store import ArchiveStore

        return ArchiveStore(self.workspace).get(archive_id)

    def datasets(self) -> builtins.list[str]:
        from .store import ArchiveStore

        return ArchiveStore(self.workspace).datasets()

    def dataset_summaries(self) -> builtins.list[dict[str, Any]]:
        """Each dataset with its archive count, messages, sizes and time span (`archives datasets`)."""
        from .model import dataset_summaries
        from .store import ArchiveStore

        store = ArchiveStore(self.workspace)
        return dataset_summaries(store.datasets(), store.list())

    # ---- search (search.py, results.py) -------------------------------------------------------
    def search(self, dataset: str, query: str, *, begin: int | str | None = None, end: int | str | None = None,
               regex: bool = False, ignore_case: bool = False, progress: Progress | None = None) -> SearchJob:
        """Run a search job to its end; returns the finished job (its results are in the cache)."""
        from .search import run_search

        return run_search(self.workspace, dataset, query, begin=begin, end=end, regex=regex, ignore_case=ignore_case,
                          progress=progress)

    def start_search(self, dataset: str, query: str, *, begin: int | str | None = None,
                     end: int | str | None = None, regex: bool = False, ignore_case: bool = False) -> StartedSearch:
        """Create a search job RUNNING and return it unrun: `.job` is the job, `.run(progress)` runs
        it to its end (in any thread). Bad input raises before the job exists."""
        from .search import start_search

        return start_search(self.workspace, dataset, query, begin=begin, end=end, regex=regex,
                            ignore_case=ignore_case)

    def results(self, job_id: int, page: int = 1, page_size: int = 50) -> ResultsPage:
        """One page of a job's results, newest timestamp first."""
        from .results import read_results

        return read_results(self.workspace, job_id, page=page, page_size=page_size)

    def results_from(self, job_id: int, offset: int = 0, limit: int = 50) -> ResultsSlice:
        """`limit` of a job's results from position `offset`, in the order `results` pages them."""
        from .results import read_results_from

        return read_results_from(self.workspace, job_id, offset=offset, limit=limit)

    def jobs(self, limit: int = 100, state: str | None = None, before: int | None = None) -> builtins.list[SearchJob]:
        """Search jobs, newest first; `before`: only those with a lower id (the page after it)."""
        from .store import SearchJobStore

        return SearchJobStore(self.workspace).list(limit, state, before)

    def job(self, job_id: int) -> SearchJob:
        from .store import SearchJobStore

        return SearchJobStore(self.workspace).get(job_id)

    def cancel(self, job_id: int) -> SearchJob:
        from .store import SearchJobStore

        return SearchJobStore(self.workspace).cancel(job_id)

    # ---- what-if retention (expiry_forecast.py) ------------------------------------------------
    def forecast(self, dataset: str, retention: int | str | None = None, now_ms: int | None = None,
                 days: int = 7) -> Forecast:
        """Which archives of `dataset` expire now and on each of the next `days` days under
        `retention` (minutes or a duration; default: archive_output.retention_period), changing
        nothing (docs/archives-retention.md#what-if-retention)."""
        from .expiry_forecast import archive_forecast

        return archive_forecast(self.workspace, dataset, retention, now_ms, days)

    # ---- garbage collectors (gc.py) -----------------------------------------------------------
    def gc(self, dry_run: bool = False, progress: Progress | None = None) -> GcReport:
        """Run the archive collector and the search-result collector once (those whose retention
        period is set); a dry run lists what would be deleted and why. `progress` counts archive files."""
        from .gc import collect_all

        return collect_all(self.workspace, dry_run=dry_run, progress=progress)

    def gc_archives(self, dry_run: bool = False, progress: Progress | None = None) -> ArchiveGcReport:
        """The archive collector alone, once (its half of `gc`)."""
        from .gc import collect_archives

        return collect_archives(self.workspace, dry_run=dry_run, progress=progress)

    def gc_results(self, dry_run: bool = False) -> ResultGcReport:
        """The search-result collector alone, once (its half of `gc`)."""
        from .gc_results import collect_search_results

        return collect_search_results(self.workspace, dry_run=dry_run)
