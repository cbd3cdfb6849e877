"""`tidekeep archives search|results|jobs|job|cancel`: search jobs and their results cache
(archives/search.py, archives/results.py).

`search` runs the job in this process (a Spark job, with a progress bar on a terminal) and prints
the job and the first page of results. It exits 0 when the job SUCCEEDED and 1 otherwise (FAILED,
or CANCELLED/KILLED from elsewhere while it ran), with one line on stderr saying why; --json
output is printed either way. Plain functions; archives.py makes them commands of the archives app.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..printable import printable
from ..units import format_duration
from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag, int_option, limit_option
from .output import emit, emit_table, fields, iso_utc
from .progress import progress_bar

if TYPE_CHECKING:
    from ..archives.model import SearchJob
    from ..archives.results import ResultsPage

# archives.results.MAX_PAGE_SIZE and the names of archives.model.JobState, written out: those modules
# load pyarrow, which `--help` must not import (docs/cli.md, "Start-up time");
# tests/cli/test_cli_startup.py checks they agree
MAX_PAGE_SIZE_SHOWN = 10_000
JOB_STATE_NAMES = ("RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "KILLED")

JobArg = Annotated[str, typer.Argument(metavar="JOB", help="Search job id")]
PageOption = Annotated[int, int_option("--page", help="Page number, from 1")]
PageSizeOption = Annotated[int, int_option("--page-size", help=f"Results per page, 1 to {MAX_PAGE_SIZE_SHOWN}")]
UNFINISHED_EXIT_CODE = 1  # FAILED, CANCELLED or KILLED: the results are missing or incomplete


def _shown(message: str) -> str:
    # one result per line: a multi-line message shows its line breaks as \n
    return message.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def print_job_line(job: SearchJob) -> None:
    when = f"completed {iso_utc(job.completed_ms)}" if job.completed_ms is not None else "running"
    emit(f"search job {job.id} {job.state}: {job.archives_searched} archive(s) searched, "
         f"{job.results_count} result(s); created {iso_utc(job.created_ms)}, {when}")
    if job.error:
        emit(f"error: {job.error}")


def print_page(page: ResultsPage) -> None:
    if not page.rows:
        emit("no results" if page.total == 0 else f"page {page.page} is past the last page ({page.pages})")
        return
    emit_table(["TIMESTAMP", "ARCHIVE", "MESSAGE"],
               [[iso_utc(r["timestamp"]) or "-", r["archive_id"], _shown(r["message"])] for r in page.rows])
    first = (page.page - 1) * page.page_size + 1
    emit(f"results {first}-{first + len(page.rows) - 1} of {page.total} (page {page.page} of {page.pages})")
    if page.page < page.pages:
        emit(f"next: tidekeep archives results {page.job.id} --page {page.page + 1} --page-size {page.page_size}")


def heartbeat_text(job: SearchJob) -> str:
    """The last heartbeat and the promised interval, or "-" for a job without heartbeats."""
    if job.heartbeat_ms is None:
        return "-"
    every = f" (every {format_duration(job.heartbeat_interval_ms)})" if job.heartbeat_interval_ms else ""
    return f"{iso_utc(job.heartbeat_ms)}{every}"


def job_fields(job: SearchJob) -> list[tuple[str, object]]:
    time_range = "-" if job.begin_ts is None and job.end_ts is None else \
        f"[{iso_utc(job.begin_ts) or '-'}, {iso_utc(job.end_ts) or '-'}] (inclusive)"
    flags = ", ".join(f for f, on in (("regex", job.regex), ("ignore case", job.ignore_case)) if on) or "-"
    return [("id", job.id), ("dataset", job.dataset), ("query", job.query), ("options", flags),
            ("time range", time_range), ("state", job.state), ("created", iso_utc(job.created_ms)),
            ("completed", iso_utc(job.completed_ms) or "-"), ("heartbeat", heartbeat_text(job)),
            ("lower bound", iso_utc(job.lower_bound_ms) or "- (archive_output.retention_period not set)"),
            ("archives searched", job.archives_searched), ("results", job.results_count),
            ("results path", job.results_path or "-"),
            ("results expired", iso_utc(job.results_expired_ms) or "-"), ("error", job.error or "-"),
            ("actor", job.actor)]


def _fail_unless_succeeded(job: SearchJob) -> None:
    from ..archives.model import JobState

    if job.state is JobState.SUCCEEDED:
        return
    sys.stdout.flush()
    why = {JobState.FAILED: f"failed: {job.error}", JobState.CANCELLED: "was cancelled",
           JobState.KILLED: "was killed (it ran longer than search.max_runtime)"}.get(job.state, str(job.state))
    sys.stderr.write(f"error: search job {job.id} {printable(' '.join(why.split()))}\n")
    raise typer.Exit(UNFINISHED_EXIT_CODE)


def print_results(page: ResultsPage) -> None:
    print_job_line(page.job)
    emit("")
    print_page(page)


def search(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="Dataset to search")],
    query: Annotated[str, typer.Argument(
        help="Wildcard query (* any run, ? one character, \\ escapes), matched anywhere in a message; "
             "a regex with --regex")],
    begin: Annotated[str | None, typer.Option(
        "--begin", metavar="T", help="Earliest timestamp, inclusive: ISO-8601 (no zone = UTC) or epoch ms")] = None,
    end: Annotated[str | None, typer.Option(
        "--end", metavar="T", help="Latest timestamp, inclusive: ISO-8601 (no zone = UTC) or epoch ms")] = None,
    regex: Annotated[bool, typer.Option("--regex", help="QUERY is an RE2 regex (search semantics)")] = False,
    ignore_case: Annotated[bool, typer.Option("--ignore-case", "-i", help="Match case-insensitively")] = False,
    page_size: PageSizeOption = 50,
    json_output: JsonFlag = False,
) -> None:
    """Run a search job over DATASET's archives (those overlapping the time range and not expired)
    and print the job and the first page of results. Exits 1 unless the job SUCCEEDED."""
    from ..spark.session import check_job_reach

    out = output(ctx, json_output)
    if is_remote(ctx):
        page = remote_search(ctx, {"dataset": dataset, "query": query, "begin": begin, "end": end, "regex": regex,
                                   "ignore_case": ignore_case}, page_size, not out.json)
        out.show(page.to_dict(), lambda: print_results(page))
        _fail_unless_succeeded(page.job)
        return
    # executors read the archives and write the results (run_search)
    with (open_client(ctx, lambda settings: check_job_reach(settings, storage=True)) as client,
          progress_bar("searching archives", not out.json, unit="archives") as update):
        from ..archives.results import check_paging

        check_paging(1, page_size)  # before the job: bad input creates nothing
        job = client.archives.search(dataset, query, begin=begin, end=end, regex=regex, ignore_case=ignore_case,
                                     progress=update)
        page = client.archives.results(job.id, page=1, page_size=page_size)
    out.show(page.to_dict(), lambda: print_results(page))
    _fail_unless_succeeded(page.job)


def remote_search(ctx: typer.Context, body: dict[str, Any], page_size: int, show_progress: bool) -> ResultsPage:
    """The search through the server: start it, follow its job, then the job and its first page."""
    import dataclasses

    from ..archives.model import JobState, SearchJob
    from ..archives.results import ResultsPage, check_paging

    check_paging(1, page_size)  # before the job: bad input creates nothing
    with open_remote(ctx) as remote:
        started = remote.call("POST", "/archives/searches", json=body)
        remote.job(started, "searching archives", show_progress, unit="archives")
        path = f"/archives/searches/{started['search']}"
        found = remote.call("GET", path)
        rows = remote.items(f"{path}/results", limit=page_size)
    known = {f.name for f in dataclasses.fields(SearchJob)}
    job = SearchJob(**{k: v for k, v in found.items() if k in known} | {"state": JobState(found["state"])})
    shown = [{"timestamp": r["timestamp"], "message": r["message"], "archive_id": r["archive_id"]} for r in rows]
    return ResultsPage(job, 1, page_size, job.results_count, shown)


def results(ctx: typer.Context, job_id: JobArg, page: PageOption = 1, page_size: PageSizeOption = 50,
            json_output: JsonFlag = False) -> None:
    """One page of a search job's results, newest timestamp first (messages without a timestamp
    last), then by archive id and position. Results that have expired are not found (exit 3)."""
    with open_client(ctx) as client:
        shown = client.archives.results(job_id, page=page, page_size=page_size)  # type: ignore[arg-type]
    output(ctx, json_output).show(shown.to_dict(), lambda: print_results(shown))


def print_jobs(found: list[SearchJob]) -> None:
    if not found:
        emit("no search jobs")
        return
    emit_table(["ID", "STATE", "DATASET", "QUERY", "CREATED", "COMPLETED", "HEARTBEAT", "ARCHIVES", "RESULTS"],
               [[j.id, j.state, j.dataset, _shown(j.query) + (" (regex)" if j.regex else ""),
                 iso_utc(j.created_ms), iso_utc(j.completed_ms) or "-", iso_utc(j.heartbeat_ms) or "-",
                 j.archives_searched, j.results_count] for j in found])


def jobs(
    ctx: typer.Context,
    state: Annotated[str | None, typer.Option(
        "--state", metavar="S", help=f"Only jobs in this state ({', '.join(JOB_STATE_NAMES)})")] = None,
    limit: Annotated[int, limit_option("At most N jobs, newest first")] = 100,
    json_output: JsonFlag = False,
) -> None:
    """Search jobs, newest first, with their last heartbeat (a RUNNING job whose process died
    stops beating and is marked FAILED by the archive collector)."""
    with open_client(ctx) as client:
        found = client.archives.jobs(limit=limit, state=state)
    output(ctx, json_output).show([j.to_dict() for j in found], lambda: print_jobs(found))


def job(ctx: typer.Context, job_id: JobArg, json_output: JsonFlag = False) -> None:
    """One search job: its query, range, state, last heartbeat, lower bound, counts and results location."""
    with open_client(ctx) as client:
        found = client.archives.job(job_id)  # type: ignore[arg-type]
    output(ctx, json_output).show(found.to_dict(), lambda: fields(job_fields(found)))


def cancel(ctx: typer.Context, job_id: JobArg, json_output: JsonFlag = False) -> None:
    """Cancel a RUNNING search job. The process running it stops its Spark job within a moment
    and stores how far it got; results written so far stay until they expire."""
    with open_client(ctx) as client:
        cancelled = client.archives.cancel(job_id)  # type: ignore[arg-type]
    output(ctx, json_output).show(cancelled.to_dict(),
                                  f"search job {cancelled.id} {cancelled.state} at {iso_utc(cancelled.completed_ms)}")
