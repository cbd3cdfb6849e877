"""`tidekeep archives ingest | list | show | datasets`: compress logs into archives (archives/ingest.py)
and look at the archives the metadata store holds (plain functions; archives.py makes them commands
of the archives app)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_table, fields, format_bytes, iso_utc, size_cell
from .progress import progress_bar

if TYPE_CHECKING:
    from ..archives.ingest import IngestReport
    from ..archives.model import Archive
    from ..config import Settings


def _time(ms: int | None) -> str:
    return "-" if ms is None else iso_utc(ms) or "-"


def print_report(report: IngestReport) -> None:
    ratio = f", ratio {report.raw_bytes / report.stored_bytes:.1f}x" if report.stored_bytes else ""
    emit(f"ingest {report.ingest_id} into {report.dataset}: {report.files} file(s), {report.messages:,} message(s) "
         f"({report.messages_without_timestamp:,} without timestamp), {len(report.archives)} archive(s), "
         f"{format_bytes(report.raw_bytes)} -> {format_bytes(report.stored_bytes)}{ratio}, "
         f"{report.elapsed_s:.1f} s")
    if report.archives:
        emit("")
        print_archives(report.archives)


def print_archives(archives: list[Archive]) -> None:
    emit_table(["ID", "DATASET", "BEGIN", "END", "MESSAGES", "RAW", "STORED"],
               [[a.id, a.dataset, _time(a.begin_ts), _time(a.end_ts), f"{a.message_count:,}", size_cell(a.raw_bytes),
                 size_cell(a.stored_bytes)] for a in archives])


def ingest(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="Dataset the archives belong to ([A-Za-z0-9_-]{1,255})")],
    paths: Annotated[list[str], typer.Argument(
        metavar="INPUT...",
        help="Log files (plain or gzip) or directories (every file under them, sorted): paths or URIs "
             "(file://, s3://bucket/prefix?endpoint_override=..., any pyarrow filesystem URI)")],
    timezone: Annotated[str, typer.Option(
        "--timezone", metavar="ZONE",
        help="IANA zone of timestamps without an offset, e.g. America/New_York")] = "UTC",
    timestamp_format: Annotated[str | None, typer.Option(
        "--timestamp-format", metavar="FMT",
        help="strptime format of the timestamp at the start of a line, e.g. '%d/%b/%Y:%H:%M:%S %z'; "
             "replaces the built-in ISO-8601, syslog and epoch forms")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Compress text logs into archives (Parquet, zstd, sorted by time, at most archives.target_size
    each) with a Spark job. Lines without a timestamp join the message before them."""
    from ..spark.session import check_job_reach
    from ..store.inputs import check_input_uri, locations_of

    def spark_job(settings: Settings) -> None:  # executors read the files, write archives (ingest_logs)
        for uri in paths:
            check_input_uri(uri)
        check_job_reach(settings, storage=True, inputs=locations_of(paths))

    out = output(ctx, json_output)
    with (open_client(ctx, spark_job) as client,
          progress_bar("ingesting", not out.json, unit="bytes") as update):
        report = client.archives.ingest(dataset, paths, timezone=timezone, timestamp_format=timestamp_format,
                                        progress=update)
    out.show(report.to_dict(), lambda: print_report(report))


def print_archive_list(archives: list[Archive], dataset: str | None) -> None:
    if not archives:
        emit("no archives" + (f" in dataset {dataset}" if dataset else ""))
    else:
        print_archives(archives)


def list_archives(
    ctx: typer.Context,
    dataset: Annotated[str | None, typer.Option("--dataset", metavar="D", help="Only this dataset")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Archives per dataset, newest end timestamp first (archives without timestamps last)."""
    with open_client(ctx) as client:
        archives = client.archives.list(dataset)
    output(ctx, json_output).show([a.to_dict() for a in archives], lambda: print_archive_list(archives, dataset))


def print_archive(archive: Archive) -> None:
    fields([("id", archive.id), ("dataset", archive.dataset),
            ("begin", _time(archive.begin_ts)),
            ("end", _time(archive.end_ts) + ("" if archive.end_ts is not None
                                             else " (no timestamps: never expires)")),
            ("messages", f"{archive.message_count:,}"), ("raw", format_bytes(archive.raw_bytes)),
            ("stored", format_bytes(archive.stored_bytes)), ("path", archive.path),
            ("created", iso_utc(archive.created_ms)), ("ingest", archive.ingest_id),
            ("catalog record", "-" if archive.catalog_record_id is None else archive.catalog_record_id)])


def show(
    ctx: typer.Context,
    archive_id: Annotated[str, typer.Argument(help="Archive id (32 hex digits)")],
    json_output: JsonFlag = False,
) -> None:
    """One archive's metadata."""
    with open_client(ctx) as client:
        archive = client.archives.get(archive_id)
    output(ctx, json_output).show(archive.to_dict(), lambda: print_archive(archive))


def print_datasets(summary: list[dict[str, Any]]) -> None:
    if not summary:
        emit("no datasets")
        return
    emit_table(["DATASET", "ARCHIVES", "MESSAGES", "STORED", "BEGIN", "END"],
               [[s["dataset"], s["archives"], f"{s['messages']:,}", size_cell(s["stored_bytes"]),
                 _time(s["begin_ts"]), _time(s["end_ts"])] for s in summary])


def datasets(ctx: typer.Context, json_output: JsonFlag = False) -> None:
    """Datasets with their archive counts, messages and sizes."""
    with open_client(ctx) as client:
        summary = client.archives.dataset_summaries()
    output(ctx, json_output).show(summary, lambda: print_datasets(summary))
