"""`tidekeep archives gc [--dry-run] [--json]`: run the archive collector, then the search-result
collector, once (archives/gc.py, archives/gc_results.py). A plain function; archives.py makes it a
command of the archives app."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_table, format_bytes, iso_utc, size_cell, warn_files_left
from .progress import progress_bar

if TYPE_CHECKING:
    from ..archives.gc import GcReport


def format_age(ms: int) -> str:
    """An age for people: its two largest units ("3d 4h", "2h 5m", "42s"); exact values are in --json."""
    if ms < 1000:
        return f"{ms}ms"
    parts = []
    rest = ms // 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts[:2])


def print_report(report: GcReport) -> None:
    archives, results = report.archives, report.results
    emit(archives.summary())
    if archives.enabled and (archives.dry_run or archives.candidates):
        rows = [[c["archive_id"], c["dataset"], iso_utc(c["end_ts"]), format_age(c["age_ms"]), size_cell(c["bytes"]),
                 c["why"]] for c in archives.candidates]
        if rows:
            emit("")
            emit("deleted archives:" if not archives.dry_run else "archives that would be deleted:")
            emit_table(["ARCHIVE", "DATASET", "END", "AGE", "BYTES", "WHY"], rows)
    if archives.held:
        emit("")
        emit("expired but held (kept):")
        emit_table(["ARCHIVE", "DATASET", "END", "AGE", "BYTES", "WHY"],
                   [[h["archive_id"], h["dataset"], iso_utc(h["end_ts"]), format_age(h["age_ms"]),
                     size_cell(h["bytes"]), h["why"]] for h in archives.held])
    if archives.failed_jobs:
        emit("")
        emit("searches whose process died, that would be marked FAILED (no heartbeat):" if archives.dry_run
             else "searches whose process died, marked FAILED (no heartbeat):")
        emit_table(["JOB", "DATASET", "CREATED", "LAST HEARTBEAT", "SILENT", "QUERY"],
                   [[f["job_id"], f["dataset"], iso_utc(f["created_ms"]), iso_utc(f["heartbeat_ms"]),
                     format_age(f["silent_ms"]), f["query"]] for f in archives.failed_jobs])
    if archives.killed_jobs:
        emit("")
        emit("searches that would be killed (ran longer than search.max_runtime):" if archives.dry_run
             else "searches killed (ran longer than search.max_runtime):")
        emit_table(["JOB", "DATASET", "CREATED", "RUNTIME", "QUERY"],
                   [[k["job_id"], k["dataset"], iso_utc(k["created_ms"]), format_age(k["runtime_ms"]), k["query"]]
                    for k in archives.killed_jobs])
    emit(results.summary())
    if results.expired:
        emit("")
        emit("search results that would expire:" if results.dry_run else "search results expired:")
        emit_table(["JOB", "DATASET", "STATE", "COMPLETED", "AGE", "BYTES"],
                   [[e["job_id"], e["dataset"], e["state"], iso_utc(e["completed_ms"]), format_age(e["age_ms"]),
                     size_cell(e["bytes"])] for e in results.expired])
    if not archives.dry_run and archives.bytes_freed + results.bytes_freed:
        emit(f"freed {format_bytes(archives.bytes_freed + results.bytes_freed)}")


def gc(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="List what would be deleted and why (archive, end, age, bytes); change nothing")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Run the garbage collectors once: expire archives whose newest log timestamp is older than
    archive_output.retention_period (never one a running search may read, never a held one), then
    search results older than results_cache.retention_period after their job completed. A
    collector whose retention period is null does nothing. Resumes a sweep that crashed."""
    from ..archives.gc import LEFT_FOR

    out = output(ctx, json_output)
    with open_client(ctx) as client, progress_bar("deleting", not out.json, unit="files") as update:
        report = client.archives.gc(dry_run=dry_run, progress=update)
    out.show(report.to_dict(), lambda: print_report(report))
    warn_files_left([*report.archives.files_left, *report.results.files_left], left_for=LEFT_FOR)
