"""Reading a search job's results from the results cache, a page at a time.

The cache of job N is search-results/N/ with one Parquet file (RESULT_SCHEMA) per archive that had
matches, named <archive id>.parquet; hidden files (a task's partial output) are ignored. Results
are ordered by timestamp, newest first (messages without a timestamp last), then archive id, then
position in the archive. Ordering needs only the timestamp column of every file; messages are read
just for the files the page draws from. A RUNNING job shows what its finished tasks wrote so far.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInput, NotFound
from ..units import iso_utc
from .model import SearchJob
from .store import SearchJobStore

if TYPE_CHECKING:
    from ..store.house import Workspace

MAX_PAGE_SIZE = 10_000
_RESULT_FILE = re.compile(r"([0-9a-f]{32})\.parquet")


@dataclass(frozen=True)
class ResultsPage:
    job: SearchJob
    page: int
    page_size: int
    total: int  # results of the whole job (so far, for a RUNNING job)
    rows: list[dict[str, Any]] = field(default_factory=list)  # {timestamp, message, archive_id}

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.page_size))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["job"] = self.job.to_dict()
        d["pages"] = self.pages
        return d


def check_paging(page: object, page_size: object) -> tuple[int, int]:
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise InvalidInput(f"invalid page {page!r}: expected a whole number from 1")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidInput(f"invalid page size {page_size!r}: expected a whole number from 1 to {MAX_PAGE_SIZE}")
    return page, page_size


def result_files(workspace: Workspace, results_path: str) -> list[tuple[str, str]]:
    """(archive id, key) of the job's result files, by archive id."""
    found = []
    for stored in workspace.storage.list_files(results_path, recursive=False):
        match = _RESULT_FILE.fullmatch(posixpath.basename(stored.path))
        if match:
            found.append((match.group(1), stored.path))
    return sorted(found)


def read_results(workspace: Workspace, job_id: int, page: int = 1, page_size: int = 50) -> ResultsPage:
    """One page of a job's results; NotFound for an unknown job or results already expired."""
    page, page_size = check_paging(page, page_size)
    job, total, rows = _results_slice(workspace, job_id, (page - 1) * page_size, page_size)
    return ResultsPage(job, page, page_size, total, rows)


@dataclass(frozen=True)
class ResultsSlice:
    """`limit` results from position `offset` (0: the newest) of a job's ordered results."""

    job: SearchJob
    offset: int
    limit: int
    total: int  # results of the whole job (so far, for a RUNNING job)
    rows: list[dict[str, Any]] = field(default_factory=list)  # {timestamp, message, archive_id}


def read_results_from(workspace: Workspace, job_id: int, offset: int = 0, limit: int = 50) -> ResultsSlice:
    """The results at positions [offset, offset + limit) in the order read_results pages them (the
    HTTP API's cursor paging); NotFound for an unknown job or results already expired."""
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InvalidInput(f"invalid offset {offset!r}: expected a whole number from 0")
    check_paging(1, limit)
    job, total, rows = _results_slice(workspace, job_id, offset, limit)
    return ResultsSlice(job, offset, limit, total, rows)


def _results_slice(workspace: Workspace, job_id: int, start: int, count: int) -> tuple[SearchJob, int,
                                                                                       list[dict[str, Any]]]:
    """The job, its result count and its results at positions [start, start + count)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    job = SearchJobStore(workspace).get(job_id)
    if job.results_expired_ms is not None:
        raise NotFound(f"the results of search job {job.id} expired at {iso_utc(job.results_expired_ms)} "
                       "(results_cache.retention_period)")
    files = result_files(workspace, job.results_path) if job.results_path else []
    storage = workspace.storage
    stamps, file_index, positions = [], [], []
    for index, (_, path) in enumerate(files):
        column = storage.read_parquet(path, columns=["timestamp"]).column("timestamp")
        stamps.append(column)
        file_index.append(pa.array([index] * len(column), pa.int32()))
        positions.append(pa.array(range(len(column)), pa.int64()))
    if not files:
        return job, 0, []
    keys = pa.table({"timestamp": pa.chunked_array([c for s in stamps for c in s.chunks], pa.int64()),
                     "file": pa.chunked_array(file_index), "position": pa.chunked_array(positions)})
    total = keys.num_rows
    order = pc.sort_indices(keys, sort_keys=[("timestamp", "descending", "at_end"), ("file", "ascending", "at_end"),
                                             ("position", "ascending", "at_end")])
    chosen = keys.take(order[start:start + count])
    wanted: dict[int, list[int]] = {}
    for f, pos in zip(chosen.column("file").to_pylist(), chosen.column("position").to_pylist(), strict=True):
        wanted.setdefault(f, []).append(pos)
    messages: dict[tuple[int, int], str] = {}
    for f, rows in wanted.items():
        column = storage.read_parquet(files[f][1], columns=["message"]).column("message")
        for pos, text in zip(rows, column.take(pa.array(rows, pa.int64())).to_pylist(), strict=True):
            messages[(f, pos)] = text
    rows_out = [{"timestamp": ts, "message": messages[(f, pos)], "archive_id": files[f][0]}
                for ts, f, pos in zip(chosen.column("timestamp").to_pylist(), chosen.column("file").to_pylist(),
                                      chosen.column("position").to_pylist(), strict=True)]
    return job, total, rows_out


__all__ = ["MAX_PAGE_SIZE", "ResultsPage", "ResultsSlice", "check_paging", "read_results",
           "read_results_from", "result_files"]
