"""A search job: `tidekeep archives search DATASET QUERY` and `client.archives.search(...)`.

1. Everything is checked before anything is written (the dataset exists, the query compiles, the
   time range is valid), so bad input leaves no job row.
2. The job row is created RUNNING; its lower bound (creation − archive_output.retention_period) is
   fixed then (docs/design/archives.md#safe-expiry). Archives overlapping the time range whose end
   timestamp is at or after that bound (or that have no timestamps, with no time range) are the
   ones searched — an expired archive is never read, even while the collector has yet to delete it,
   and the collector never deletes what this job may read while it is RUNNING. From then until the
   job ends a heartbeat thread (heartbeat.py) records every `search.heartbeat_interval` that this
   process is alive; if it dies, the collector marks the job FAILED and it stops holding expiry.
3. A Spark job runs one task per archive. A task reads the archive through FileIO: row groups
   whose timestamp statistics lie outside the range are skipped, and of the others only what can
   match is read and decoded (row_group_search.py). It matches the messages with pyarrow.compute
   and writes the matches to search-results/<job id>/<archive id>.parquet (no file when an
   archive has no match); with `storage.fsync` (local storage) the file and its name are on disk
   before the task returns.
4. The job ends SUCCEEDED, FAILED (the first archive that could not be read, named, or the Spark
   error) or — decided elsewhere — CANCELLED by `tidekeep archives cancel`, KILLED by the
   collector past search.max_runtime, or FAILED by the collector when its heartbeat stopped (the
   process looked dead; it may only have been frozen). A watcher thread polls the job's state;
   once it is no longer RUNNING the Spark job is cancelled, the counts so far are stored, and the
   job is returned as it stands. Results written before a cancel stay and expire with the rest.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFound
from ..faults import pause_point
from ..spark.connect import is_connect_session, tagged_jobs
from ..spark.progress import track_tasks, units_done
from .heartbeat import Heartbeat
from .model import JobState, SearchJob, check_dataset, results_dir
from .query import Matcher, compile_query
from .results import result_files
from .store import ArchiveStore, SearchJobStore
from .timerange import TimeRange, parse_range

if TYPE_CHECKING:
    from ..store.house import Workspace

Progress = Callable[[int, int], None]
log = logging.getLogger("tidekeep.archives.search")

OUTCOME_DDL = "archive_id STRING, matches BIGINT, error STRING"
POLL_INTERVAL_S = 0.25  # how often the watcher looks at the job's state and the progress
ERROR_SHOWN = 300  # characters of an underlying error kept in the job's error text


@dataclass(frozen=True)
class ArchiveTask:
    """What one Spark task needs: the archive and where it and the results live."""

    archive_id: str
    archive_path: str  # the archive file, relative to the storage root
    storage_uri: str  # the storage root (a URI)
    results_dir: str  # the job's results directory, relative to the storage root
    fsync: bool  # the driver's storage.fsync setting

    @property
    def archive_uri(self) -> str:
        from ..store.fileio import FileIO

        return FileIO(self.storage_uri, fsync=self.fsync).uri_of(self.archive_path)


@dataclass(frozen=True)
class ArchiveOutcome:
    archive_id: str
    matches: int
    error: str | None = None


# ---- the executor side: one archive ---------------------------------------------------------------


def _row_group_may_match(meta: Any, group: int, time_range: TimeRange) -> bool:
    """False when the timestamp statistics prove no row of the group is in range."""
    if not time_range.bounded:
        return True
    column = meta.row_group(group).column(0)  # timestamp comes first in every archive format
    stats = column.statistics
    if stats is None:
        return True
    if stats.null_count is not None and stats.null_count == meta.row_group(group).num_rows:
        return False  # no timestamps at all: never in a bounded range
    if not stats.has_min_max:
        return True
    if time_range.begin_ms is not None and stats.max < time_range.begin_ms:
        return False
    return not (time_range.end_ms is not None and stats.min > time_range.end_ms)


def search_archive(task: ArchiveTask, job_id: int, matcher: Matcher, time_range: TimeRange) -> int:
    """Search one archive file and write its matches; returns how many. Raises on an unreadable file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..store.fileio import FileIO
    from .archive_format import DICTIONARY_COLUMNS, TEMPLATE_FORMATS, format_of, read_columns, schema_of
    from .model import RESULT_SCHEMA
    from .row_group_search import COLUMNS, RowGroupSearch

    storage = FileIO(task.storage_uri, fsync=task.fsync)
    final = posixpath.join(task.results_dir, f"{task.archive_id}.parquet")
    partial = posixpath.join(task.results_dir, f".{task.archive_id}.parquet.partial")
    matches = 0
    writer: Any = None
    sink: Any = None
    with storage.open_input(task.archive_path) as handle:
        parquet = pq.ParquetFile(handle)
        meta = parquet.metadata
        archive_format = format_of(parquet.schema_arrow)
        if archive_format in TEMPLATE_FORMATS:  # the footer read once: opened again with it
            parquet = pq.ParquetFile(handle, metadata=meta, read_dictionary=list(DICTIONARY_COLUMNS))
        names = parquet.schema_arrow.names
        stored = read_columns(archive_format, COLUMNS)
        if names[:1] != ["timestamp"] or not set(stored) <= set(names):
            raise ValueError(f"not an archive of format {archive_format}: columns {names}, expected "
                             f"{', '.join(schema_of(archive_format).names)}")
        row_groups = RowGroupSearch.of(archive_format, matcher, time_range)
        try:
            for group in range(meta.num_row_groups):
                if not _row_group_may_match(meta, group, time_range):
                    continue
                table = row_groups.candidates(parquet, group)  # only what can match, decoded
                if table is None:
                    continue
                table = table.filter(matcher.mask(table.column("message")))
                if table.num_rows == 0:
                    continue
                found = pa.table({
                    "job_id": pa.repeat(pa.scalar(job_id, pa.int64()), table.num_rows),
                    "timestamp": table.column("timestamp").cast(pa.int64()),
                    "message": table.column("message").cast(pa.string()),
                    "archive_id": pa.repeat(pa.scalar(task.archive_id, pa.string()), table.num_rows),
                }, schema=RESULT_SCHEMA)
                if writer is None:
                    sink = storage.create(partial)
                    writer = pq.ParquetWriter(sink, RESULT_SCHEMA, compression="zstd")
                writer.write_table(found)
                matches += found.num_rows
        finally:
            if writer is not None:
                writer.close()
                storage.finish_data(sink)
    if writer is not None:
        # written under a hidden name, then moved: a task killed mid-write never leaves a half file
        # where read_results looks
        storage.move(partial, final)  # the new name durable too (storage.fsync)
    return matches


def _describe(exc: BaseException) -> str:
    if isinstance(exc, FileNotFoundError):
        return "the archive file is missing"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:ERROR_SHOWN]}" if text else type(exc).__name__


def search_indexes(job_id: int, matcher: Matcher, time_range: TimeRange, tasks: list[ArchiveTask],
                   indexes: Iterable[int]) -> Iterator[ArchiveOutcome]:
    """Search the archives `indexes` names: one outcome each. An unreadable archive is an outcome
    with its error, not a failed task."""
    for index in indexes:
        task = tasks[index]
        pause_point("search_archive")  # tests: a search slow enough to cancel midway (TIDEKEEP_PAUSE)
        try:
            yield ArchiveOutcome(task.archive_id, search_archive(task, job_id, matcher, time_range))
        except Exception as exc:  # any unreadable archive: reported by the driver, naming it
            yield ArchiveOutcome(task.archive_id, 0, f"archive {task.archive_id} ({task.archive_uri}): "
                                 f"{_describe(exc)}")


def search_tasks(job_id: int, matcher: Matcher, time_range: TimeRange, tasks: list[ArchiveTask],
                 batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow body: search_indexes over the indexes the input rows hold, one outcome row each
    (OUTCOME_DDL)."""
    import pyarrow as pa

    schema = pa.schema([("archive_id", pa.string()), ("matches", pa.int64()), ("error", pa.string())])
    for batch in batches:
        for outcome in search_indexes(job_id, matcher, time_range, tasks, batch.column(0).to_pylist()):
            yield pa.RecordBatch.from_pylist([{"archive_id": outcome.archive_id, "matches": outcome.matches,
                                               "error": outcome.error}], schema=schema)


# ---- the driver side --------------------------------------------------------------------------------


class _Watcher(threading.Thread):
    """Polls the job's state and cancels the Spark job (`cancel`) once the job is no longer RUNNING
    (cancelled from elsewhere, or KILLED by the collector)."""

    def __init__(self, jobs: SearchJobStore, job_id: int, cancel: Callable[[], None]) -> None:
        super().__init__(name=f"tidekeep-search-{job_id}-watcher", daemon=True)
        self.jobs, self.job_id, self.cancel = jobs, job_id, cancel
        self.finished = threading.Event()
        self.ended_elsewhere = threading.Event()

    def run(self) -> None:
        while not self.finished.wait(POLL_INTERVAL_S):
            try:
                if self.jobs.state(self.job_id) is not JobState.RUNNING:
                    self.ended_elsewhere.set()
                if self.ended_elsewhere.is_set():
                    self.cancel()  # repeated each poll: a job submitted after the first call is caught too
            except Exception:  # a failed poll must not end the watching; the next poll retries
                log.warning("search job %s: watcher poll failed", self.job_id, exc_info=True)


def _counts(outcomes: list[ArchiveOutcome]) -> tuple[int, int, str | None]:
    """(archives searched, results, first error) of the finished tasks."""
    good = [o for o in outcomes if o.error is None]
    errors = sorted(o.error for o in outcomes if o.error is not None)
    error = None
    if errors:
        error = errors[0] + (f" (and {len(errors) - 1} more unreadable archives)" if len(errors) > 1 else "")
    return len(good), sum(o.matches for o in good), error


@dataclass
class StartedSearch:
    """A search job already created RUNNING, its heartbeat beating, whose Spark job has yet to run.
    `run` runs it to its end (once). The HTTP API starts a search this way so it can answer with the
    job's id at once and run the Spark job in the background (docs/api.md, "Archives")."""

    workspace: Workspace
    spark: Any
    job: SearchJob
    matcher: Matcher
    time_range: TimeRange
    heartbeat: Heartbeat

    def run(self, progress: Progress | None = None) -> SearchJob:
        """Run the Spark job and return the job in its final state."""
        jobs = SearchJobStore(self.workspace)
        try:
            return _run(self.workspace, self.spark, self.job, self.matcher, self.time_range,
                        ArchiveStore(self.workspace), jobs, progress)
        except BaseException as exc:
            # never leave a job RUNNING behind: it would hold the archive collector back until killed
            state = JobState.CANCELLED if isinstance(exc, KeyboardInterrupt) else JobState.FAILED
            with contextlib.suppress(Exception):
                jobs.finish(self.job.id, state, archives_searched=0, results_count=0, error=_describe(exc))
            raise
        finally:
            self.heartbeat.stop()

    def abandon(self, why: str) -> None:
        """End the job FAILED without running it (its runner could not be started)."""
        self.heartbeat.stop()
        SearchJobStore(self.workspace).finish(self.job.id, JobState.FAILED, archives_searched=0, results_count=0,
                                              error=why)


def start_search(workspace: Workspace, dataset: str, query: str, *, begin: int | str | None = None,
                 end: int | str | None = None, regex: bool = False, ignore_case: bool = False) -> StartedSearch:
    """Check the search, start Spark, create the job RUNNING and start its heartbeat; bad input
    raises before anything is written."""
    dataset = check_dataset(dataset)
    matcher = compile_query(query, regex=regex, ignore_case=ignore_case)
    time_range = parse_range(begin, end)
    archive_store, jobs = ArchiveStore(workspace), SearchJobStore(workspace)
    if not archive_store.dataset_exists(dataset):
        raise NotFound(f"dataset {dataset!r} does not exist")
    # Spark starts before the job exists: a RUNNING job holds the archive collector back, and
    # the job's duration should be the search, not the JVM's start-up
    from ..spark.session import job_spark

    spark = job_spark(workspace.settings, storage=True, writes=True)  # executors read archives, write results
    interval = workspace.settings["search.heartbeat_interval"]
    job = jobs.create(dataset, query, regex=regex, ignore_case=ignore_case, begin_ts=time_range.begin_ms,
                      end_ts=time_range.end_ms, retention_minutes=workspace.settings["archive_output.retention_period"],
                      heartbeat_interval_ms=interval)
    heartbeat = Heartbeat(jobs, job.id, interval)
    heartbeat.start()
    return StartedSearch(workspace, spark, job, matcher, time_range, heartbeat)


def run_search(workspace: Workspace, dataset: str, query: str, *, begin: int | str | None = None,
               end: int | str | None = None, regex: bool = False, ignore_case: bool = False,
               progress: Progress | None = None) -> SearchJob:
    """Run a search job to its end in this process and return it in its final state."""
    return start_search(workspace, dataset, query, begin=begin, end=end, regex=regex,
                        ignore_case=ignore_case).run(progress)


def _partial_counts(workspace: Workspace, results_path: str, finished_tasks: int) -> tuple[int, int, None]:
    """How far a Spark job that did not finish got: the results it wrote (every result file is
    readable, `read_results`) and the archives searched — those whose tasks Spark reported finished,
    or, if more, those with a result file (a task may write its file and be stopped before it
    reports)."""
    import pyarrow.parquet as pq

    files = result_files(workspace, results_path)
    found = 0
    for _, key in files:
        with workspace.storage.open_input(key) as handle:  # the footer only
            found += pq.ParquetFile(handle).metadata.num_rows
    return max(finished_tasks, len(files)), found, None


def _outcomes(spark: Any, job_id: int, matcher: Matcher, time_range: TimeRange,
              tasks: list[ArchiveTask]) -> list[ArchiveOutcome]:
    """One Spark task per archive. A classic session runs them as an RDD job, which starts sooner
    than a DataFrame job with a Python stage (0.04 s in a search, docs/benchmarks.md); Spark
    Connect has DataFrames only."""
    total = len(tasks)
    if is_connect_session(spark):
        rows = spark.range(0, total, 1, total).mapInArrow(
            lambda it: search_tasks(job_id, matcher, time_range, tasks, it), OUTCOME_DDL).collect()
        return [ArchiveOutcome(r["archive_id"], r["matches"], r["error"]) for r in rows]
    indexes = spark.sparkContext.parallelize(range(total), total)
    return list(indexes.mapPartitions(lambda it: search_indexes(job_id, matcher, time_range, tasks, it)).collect())


def _run(workspace: Workspace, spark: Any, job: SearchJob, matcher: Matcher, time_range: TimeRange,
         archive_store: ArchiveStore, jobs: SearchJobStore, progress: Progress | None) -> SearchJob:
    path = results_dir(job.id)
    jobs.set_results_path(job.id, path)
    archives = archive_store.for_search(job.dataset, time_range.begin_ms, time_range.end_ms, job.lower_bound_ms)
    total = len(archives)
    if progress is not None:
        progress(0, total)
    if not archives:  # as CLP: nothing to search is a success with no results
        jobs.finish(job.id, JobState.SUCCEEDED, archives_searched=0, results_count=0)
        return jobs.get(job.id)

    storage_uri = workspace.storage.uri_of("")
    tasks = [ArchiveTask(a.id, a.path, storage_uri, path, workspace.storage.fsync)
             for a in archives]
    tag = f"tidekeep-search-{job.id}-{uuid.uuid4().hex[:12]}"  # its jobs alone are cancelled (docs/spark.md)
    tracked = [0]  # archives whose tasks Spark reports finished

    def on_fraction(fraction: float) -> None:
        tracked[0] = max(tracked[0], units_done(fraction, total))
        if progress is not None:
            progress(tracked[0], total)

    job_id = job.id
    outcomes: list[ArchiveOutcome] | None = None
    spark_error: BaseException | None = None
    with tagged_jobs(spark, tag) as cancel:
        watcher = _Watcher(jobs, job.id, cancel)
        watcher.start()
        try:
            with track_tasks(spark, tag, on_fraction):
                outcomes = _outcomes(spark, job_id, matcher, time_range, tasks)
        except Exception as exc:  # cancelled, or a task died (a Py4J or a Connect error)
            spark_error = exc
        finally:
            watcher.finished.set()
            watcher.join()

    if outcomes is not None:
        searched, found, error = _counts(outcomes)
    else:
        searched, found, error = _partial_counts(workspace, path, tracked[0])
    if progress is not None:
        progress(max(searched, tracked[0]), total)  # never back: tasks of unreadable archives finished too
    final = JobState.FAILED if (error is not None or spark_error is not None) else JobState.SUCCEEDED
    if spark_error is not None and error is None:
        error = f"the Spark job failed: {_describe(spark_error).splitlines()[0]}"
    if not jobs.finish(job.id, final, archives_searched=searched, results_count=found, error=error):
        # cancelled, KILLED or FAILED for a missing heartbeat meanwhile: that verdict stands — the
        # first final state wins (the audit and the results' TTL count from it), the watcher has
        # cancelled the Spark job, and once the job stopped holding expiry the collector may have
        # deleted archives it had yet to read, so its results may be incomplete. Record how far it got
        jobs.update_counts(job.id, archives_searched=searched, results_count=found)
    return jobs.get(job.id)


__all__ = ["ArchiveOutcome", "ArchiveTask", "StartedSearch", "run_search", "search_archive", "start_search"]
