"""Log archives: datasets and their archives, ingest, search jobs and their results, the garbage
collectors (the CLI's `tidekeep archives`). Archives belong to no scope: every route refuses a
scoped token. Ingest, a search and a GC run are long work: each starts a job (docs/api.md,
"Archives")."""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ...archives.model import Archive, JobState, SearchJob
from ...errors import InvalidInput, NotFound
from ...integers import INT64_MAX
from ..jobs import KEPT, ProgressCallback
from ..models import Accepted, Page, accepted
from ..paging import DEFAULT_LIMIT, decode_cursor, encode_cursor, page_of
from ..state import UNSCOPED, ApiState, Caller, Operator, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["archives"], dependencies=UNSCOPED)

ARCHIVES = "archives"  # what require_unscoped names
RESULTS_LIMIT_MAX = 10_000  # archives.results.MAX_PAGE_SIZE
SearchId = Annotated[int, Path(ge=1, le=INT64_MAX, description="the search job's id")]


def _unscoped(call: Caller) -> None:
    call.principal.require_unscoped(ARCHIVES)


# ---- datasets and archives -------------------------------------------------------------------------
class DatasetSummary(BaseModel):
    dataset: str
    archives: int
    messages: int
    raw_bytes: int
    stored_bytes: int
    begin_ts: int | None = Field(description="the oldest log timestamp (ms UTC) of its archives")
    end_ts: int | None = Field(description="the newest log timestamp (ms UTC) of its archives")


class ArchiveRecord(BaseModel):
    """One archive, as `tidekeep archives list --json` prints it."""

    id: str
    dataset: str
    begin_ts: int | None
    end_ts: int | None = Field(description="newest log timestamp (ms UTC); null: no timestamps, never expires")
    message_count: int
    raw_bytes: int
    stored_bytes: int
    path: str
    created_ms: int
    ingest_id: str
    catalog_record_id: int | None = None


def archive_order(archive: Archive) -> list[Any]:
    """The order of `archives list`: newest end timestamp first, archives without timestamps last,
    then by id — as an ascending key for page_of."""
    return [0, -archive.end_ts, archive.id] if archive.end_ts is not None else [1, 0, archive.id]


@router.get("/archives/datasets", summary="Datasets with their archive counts, messages and sizes")
def list_datasets(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
                  cursor: Cursor = None) -> Page[DatasetSummary]:
    _unscoped(call)
    summaries = call.client.archives.dataset_summaries()
    items, after = page_of(summaries, lambda s: s["dataset"], cursor, limit)
    return Page[DatasetSummary](items=[DatasetSummary(**s) for s in items], next_cursor=after)


@router.get("/archives/datasets/{dataset}/archives",
            summary="A dataset's archives, newest end timestamp first (as `archives list --json`)")
def list_archives(dataset: str, call: Caller = Reader, limit: Limit = DEFAULT_LIMIT,
                  cursor: Cursor = None) -> Page[ArchiveRecord]:
    _unscoped(call)
    found = call.client.archives.list(dataset)  # InvalidInput for a bad name
    if not found and dataset not in call.client.archives.datasets():
        raise NotFound(f"dataset {dataset!r} does not exist")
    items, after = page_of(found, archive_order, cursor, limit)
    return Page[ArchiveRecord](items=[ArchiveRecord(**a.to_dict()) for a in items], next_cursor=after)


# ---- ingest ----------------------------------------------------------------------------------------
class IngestBody(BaseModel):
    """What `tidekeep archives ingest` takes. The paths are read by the server (and its Spark
    executors): files or directories on the server's filesystem, or URIs of object stores."""

    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(min_length=1, max_length=10_000,
                             description="log files (plain or gzip) or directories, as the server sees them, or URIs")
    timezone: str = Field("UTC", description="IANA zone of timestamps without an offset")
    timestamp_format: str | None = Field(None, description="strptime format of the timestamp at a line's start")


@router.post("/archives/datasets/{dataset}/ingest", status_code=202,
             summary="Compress server-side log files into archives of the dataset (a job; result: the report)")
def ingest(dataset: str, body: IngestBody, response: Response, call: Caller = Operator) -> Accepted:
    _unscoped(call)
    archives = call.client.archives
    # refused here, before a job exists: bad names and options, missing or unreachable inputs
    archives.check_ingest(dataset, body.paths, timezone=body.timezone, timestamp_format=body.timestamp_format)

    def work(progress: ProgressCallback) -> dict[str, Any]:
        report = archives.ingest(dataset, body.paths, timezone=body.timezone,
                                 timestamp_format=body.timestamp_format,
                                 progress=lambda done, total: progress(done, total, "bytes read"))
        return report.to_dict()

    job = call.state.jobs.submit("archive-ingest", call.principal.name, work, call.principal.scope)
    return accepted(response, job.id)


# ---- searches --------------------------------------------------------------------------------------
class SearchBody(BaseModel):
    """What `tidekeep archives search` takes."""

    model_config = ConfigDict(extra="forbid")
    dataset: str
    query: str = Field(description="wildcard query (* any run, ? one character, \\ escapes), or an RE2 regex")
    regex: bool = False
    ignore_case: bool = False
    begin: str | int | None = Field(None, description="earliest timestamp, inclusive: ISO-8601 or epoch ms")
    end: str | int | None = Field(None, description="latest timestamp, inclusive: ISO-8601 or epoch ms")


class SearchAccepted(Accepted):
    """A search job was created and runs in a job: `search` is its id (GET
    /api/v1/archives/searches/{search}), `job` the API job running it."""

    search: int
    search_location: str


class JobProgress(BaseModel):
    done: int
    total: int | None
    message: str


class SearchRecord(BaseModel):
    """A search job, as `tidekeep archives job --json` prints it, plus the API job running it (when
    this server process started it) and that job's progress, in archives searched."""

    id: int
    dataset: str
    query: str
    regex: bool
    ignore_case: bool
    begin_ts: int | None
    end_ts: int | None
    state: str = Field(description=", ".join(JobState))
    created_ms: int
    completed_ms: int | None
    lower_bound_ms: int | None
    archives_searched: int
    results_count: int
    results_path: str | None
    results_expired_ms: int | None
    error: str | None
    actor: str
    heartbeat_ms: int | None = None
    heartbeat_interval_ms: int | None = None
    api_job: str | None = None
    progress: JobProgress | None = None


class _SearchJobs:
    """Which API job runs which search, per server (ApiState): kept for as many searches as the
    job registry remembers jobs."""

    def __init__(self) -> None:
        self._of: weakref.WeakKeyDictionary[ApiState, OrderedDict[int, str]] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def remember(self, state: ApiState, search_id: int, job_id: str) -> None:
        with self._lock:
            known = self._of.setdefault(state, OrderedDict())
            known[search_id] = job_id
            while len(known) > KEPT:
                known.popitem(last=False)

    def job_of(self, state: ApiState, search_id: int) -> str | None:
        with self._lock:
            return self._of.get(state, OrderedDict()).get(search_id)


_search_jobs = _SearchJobs()


def search_record(call: Caller, job: SearchJob) -> SearchRecord:
    record = SearchRecord(**job.to_dict())
    api_job = _search_jobs.job_of(call.state, job.id)
    if api_job is not None:
        try:
            running = call.state.jobs.get(api_job)
        except NotFound:  # forgotten by the registry: the search's own record is the whole story
            return record
        record.api_job = api_job
        record.progress = JobProgress(done=running.progress.done, total=running.progress.total,
                                      message=running.progress.message)
    return record


@router.post("/archives/searches", status_code=202,
             summary="Start a search job over a dataset's archives (a Spark job; result: the finished search)")
def start_search(body: SearchBody, response: Response, call: Caller = Operator) -> SearchAccepted:
    _unscoped(call)
    # bad input raises here, before the search job exists
    started = call.client.archives.start_search(body.dataset, body.query, begin=body.begin, end=body.end,
                                                regex=body.regex, ignore_case=body.ignore_case)

    def work(progress: ProgressCallback) -> dict[str, Any]:
        done = started.run(lambda searched, total: progress(searched, total, "archives searched"))
        return done.to_dict()

    try:
        job = call.state.jobs.submit("archive-search", call.principal.name, work, call.principal.scope)
    except BaseException as exc:  # the server is stopping: the search must not stay RUNNING
        started.abandon(f"the API server could not start it ({type(exc).__name__})")
        raise
    _search_jobs.remember(call.state, started.job.id, job.id)
    answer = accepted(response, job.id)
    return SearchAccepted(job=answer.job, location=answer.location, search=started.job.id,
                          search_location=f"/api/v1/archives/searches/{started.job.id}")


@router.get("/archives/searches", summary="Search jobs, newest first")
def list_searches(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
                  state: Annotated[JobState | None, Query(description="only jobs in this state")] = None,
                  ) -> Page[SearchRecord]:
    _unscoped(call)
    before = None if cursor is None else decode_cursor(cursor)
    if before is not None and (isinstance(before, bool) or not isinstance(before, int)
                               or not 1 <= before <= INT64_MAX):
        raise InvalidInput("invalid cursor: it belongs to another list")
    found = call.client.archives.jobs(limit=limit + 1, state=None if state is None else str(state), before=before)
    shown = found[:limit]
    after = encode_cursor(shown[-1].id) if len(found) > limit else None
    return Page[SearchRecord](items=[search_record(call, j) for j in shown], next_cursor=after)


@router.get("/archives/searches/{search_id}", summary="One search job: state, counts, progress")
def get_search(search_id: SearchId, call: Caller = Reader) -> SearchRecord:
    _unscoped(call)
    return search_record(call, call.client.archives.job(search_id))


@router.post("/archives/searches/{search_id}/cancel", summary="Cancel a RUNNING search job")
def cancel_search(search_id: SearchId, call: Caller = Operator) -> SearchRecord:
    _unscoped(call)
    return search_record(call, call.client.archives.cancel(search_id))


class ResultRow(BaseModel):
    timestamp: int | None
    message: str
    archive_id: str


class ResultsPage(Page[ResultRow]):
    """A page of a search's results, newest timestamp first (as `archives results`): `total`
    results so far (a RUNNING search is still adding some) and the search job itself."""

    total: int
    search: SearchRecord


ResultsLimit = Annotated[int, Query(ge=1, le=RESULTS_LIMIT_MAX, description="at most this many results")]


@router.get("/archives/searches/{search_id}/results", summary="A page of a search job's results")
def search_results(search_id: SearchId, call: Caller = Reader, limit: ResultsLimit = DEFAULT_LIMIT,
                   cursor: Cursor = None) -> ResultsPage:
    _unscoped(call)
    offset = 0 if cursor is None else decode_cursor(cursor)
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= INT64_MAX:
        raise InvalidInput("invalid cursor: it belongs to another list")
    found = call.client.archives.results_from(search_id, offset=offset, limit=limit)
    end = offset + len(found.rows)
    after = encode_cursor(end) if found.rows and end < found.total else None
    return ResultsPage(items=[ResultRow(**r) for r in found.rows], next_cursor=after, total=found.total,
                       search=search_record(call, found.job))


# ---- garbage collectors ----------------------------------------------------------------------------
class GcBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    which: Literal["archive", "search_result", "both"] = Field(
        "both", description="the archive collector, the search-result collector, or both (archives first)")


@router.get("/archives/gc/preview",
            summary="What the archive and search-result collectors would delete now, and why (a dry run)")
def gc_preview(call: Caller = Reader) -> dict[str, Any]:
    _unscoped(call)
    return call.client.archives.gc(dry_run=True).to_dict()


@router.post("/archives/gc", status_code=202,
             summary="Run the garbage collectors once (a job; result: what each deleted, and the bytes freed)")
def gc_run(response: Response, call: Caller = Operator, body: GcBody | None = None) -> Accepted:
    _unscoped(call)
    which = "both" if body is None else body.which
    archives = call.client.archives

    def work(progress: ProgressCallback) -> dict[str, Any]:
        result: dict[str, Any] = {"which": which, "archives": None, "results": None}
        freed = 0
        if which in ("archive", "both"):
            swept = archives.gc_archives(progress=lambda done, total: progress(done, total, "archive files deleted"))
            result["archives"], freed = swept.to_dict(), freed + swept.bytes_freed
        if which in ("search_result", "both"):
            expired = archives.gc_results()
            result["results"], freed = expired.to_dict(), freed + expired.bytes_freed
        result["bytes_freed"] = freed
        return result

    job = call.state.jobs.submit("archive-gc", call.principal.name, work, call.principal.scope)
    return accepted(response, job.id)
