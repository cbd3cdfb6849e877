"""`tidekeep catalog add|import|generate|list|show`: meta records (plain functions; catalog.py makes
them commands of the catalog app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput
from .context import open_client, output
from .options import JsonFlag, int_argument, int_option, limit_option
from .output import emit, emit_table, fields, iso_utc, size_cell
from .progress import progress_bar

if TYPE_CHECKING:
    from ..catalog.records import MetaRecord
    from ..config import Settings


def record_document(record: MetaRecord) -> dict[str, Any]:
    """A record for --json: the stored values plus ISO forms of its times."""
    doc = record.to_dict()
    for name in ("create_time", "effective_time", "status_time"):
        doc[name.replace("_time", "_iso")] = iso_utc(doc[name])
    return doc


def parse_record_documents(texts: list[str], source: str) -> list[Any]:
    """JSON objects (or arrays of objects) given on the command line or one per line of a file."""
    records: list[Any] = []
    for number, text in enumerate(texts, start=1):
        if not text.strip():
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise InvalidInput(f"{source} {number}: not JSON ({exc.args[0] if exc.args else exc})") from None
        records.extend(value if isinstance(value, list) else [value])
    return records


def read_documents(documents: list[str] | None, file: Path | None) -> list[Any]:
    """The records of `catalog add`: JSON arguments, or the lines of --file; at least one."""
    if file is not None and documents:
        raise InvalidInput("give records either as JSON arguments or with --file, not both")
    if file is not None:
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput(f"cannot read {str(file)!r}: {exc.strerror or exc}") from None
        records = parse_record_documents(text.splitlines(), f"{file} line")
    else:
        records = parse_record_documents(documents or [], "argument")
    if not records:
        raise InvalidInput("no records given: pass JSON objects or --file FILE")
    return records


def add(
    ctx: typer.Context,
    documents: Annotated[list[str] | None, typer.Argument(
        metavar="JSON...", help='Records as JSON objects (or arrays), e.g. \'{"feed":"A","type":"Events",'
                                '"create_time":"2024-01-01T00:00:00Z"}\'')] = None,
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", metavar="FILE", help="A JSON lines file of records, one object per line")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Add meta records (all or none: one bad record and nothing is added)."""
    records = read_documents(documents, file)
    with open_client(ctx) as client:
        ids = client.catalog.add(records)
    output(ctx, json_output).show({"ids": ids}, f"added {len(ids)} record(s): {', '.join(map(str, ids))}")


def import_(
    ctx: typer.Context,
    path: Annotated[str, typer.Argument(
        metavar="INPUT", help="A file or a directory of files of one format: a path or a URI (file://, "
                              "s3://bucket/prefix?endpoint_override=..., any pyarrow filesystem URI)")],
    format: Annotated[str | None, typer.Option(
        "--format", metavar="FORMAT", help="csv, json (JSON lines) or parquet [default: from the extension]")
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """Bulk import records through Spark. Every row is checked first: one bad row and nothing is written.
    Columns: the record fields, `attributes` (JSON) and attr.<name> per custom attribute."""
    from ..spark.session import check_job_reach
    from ..store.inputs import check_input_uri, locations_of

    def spark_job(settings: Settings) -> None:
        # executors read the input files and write the records into the metadata store (import_records)
        check_input_uri(path)
        check_job_reach(settings, metadata=True, inputs=locations_of([path]))

    out = output(ctx, json_output)
    with (open_client(ctx, spark_job) as client,
          progress_bar("importing", not out.json) as progress):
        report = client.catalog.import_path(path, format=format, progress=progress)
    out.show(report.to_dict(), f"imported {report.rows:,} row(s) from {report.files} file(s): "
                               f"{report.inserted:,} inserted, {report.skipped:,} skipped (id already present) "
                               f"in {report.elapsed_s:.1f}s")


def generated_text(report: Any) -> str:
    if report.rows == 0:
        return "generated 0 records"
    rate = report.rows / report.elapsed_s if report.elapsed_s > 0 else 0
    return (f"generated {report.rows:,} record(s), ids {report.first_id}-{report.last_id}, "
            f"in {report.elapsed_s:.1f}s ({rate:,.0f}/s)")


def generate(
    ctx: typer.Context,
    rows: Annotated[int, int_option("--rows", help="How many records")],
    seed: Annotated[int, int_option("--seed", metavar="S", help="Random seed (same seed, same data)")] = 0,
    span_days: Annotated[int, int_option(
        "--span-days", metavar="D", help="Create times spread over the D days before now")] = 3650,
    batch_size: Annotated[int, int_option("--batch-size", help="Records per write transaction")] = 200_000,
    with_files: Annotated[bool, typer.Option(
        "--with-files", help="Also write a small placeholder file at each record's location")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Generate synthetic records for demos and benchmarks (a dozen feeds, four types, ~1% LOCKED)."""
    out = output(ctx, json_output)
    with open_client(ctx) as client, progress_bar("generating", not out.json) as progress:
        report = client.catalog.generate(rows, seed=seed, progress=progress, span_days=span_days,
                                         batch_size=batch_size, with_files=with_files)
    out.show(report.to_dict(), generated_text(report))


def emit_records(records: list[MetaRecord]) -> None:
    if not records:
        emit("no records")
        return
    emit_table(["ID", "FEED", "TYPE", "CREATED", "STATUS", "FILE SIZE", "LOCATION"],
               [[r.id, r.feed, r.type, iso_utc(r.create_time), r.status, size_cell(r.file_size), r.location]
                for r in records])


def list_records(
    ctx: typer.Context,
    feed: Annotated[str | None, typer.Option("--feed", metavar="FEED", help="Only this feed")] = None,
    type: Annotated[str | None, typer.Option("--type", metavar="TYPE", help="Only this type")] = None,
    status: Annotated[str | None, typer.Option(
        "--status", metavar="STATUS", help="Only UNLOCKED, LOCKED or DELETED")] = None,
    limit: Annotated[int, limit_option("At most N records")] = 100,
    after: Annotated[int | None, int_option("--after", metavar="ID", help="Only ids above ID (paging)")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Records in id order."""
    with open_client(ctx) as client:
        records = client.catalog.records(feed=feed, type=type, status=status, limit=limit, after_id=after)
    output(ctx, json_output).show([record_document(r) for r in records], lambda: emit_records(records))


def emit_record(record: MetaRecord) -> None:
    attributes = ", ".join(f"{k}={v}" for k, v in record.attributes.items()) or "-"
    fields([
        ("id", record.id), ("feed", record.feed), ("type", record.type),
        ("create time", iso_utc(record.create_time)), ("effective time", iso_utc(record.effective_time)),
        ("status", record.status), ("status time", iso_utc(record.status_time)),
        ("parent id", record.parent_id if record.parent_id is not None else "-"),
        ("pipeline", record.pipeline or "-"),
        ("file size", record.file_size if record.file_size is not None else "-"),
        ("raw size", record.raw_size if record.raw_size is not None else "-"),
        ("location", record.location or "-"), ("attributes", attributes),
    ])


def show(
    ctx: typer.Context,
    record_id: Annotated[int, int_argument("ID", "The record's id")],
    json_output: JsonFlag = False,
) -> None:
    """One record, every field."""
    with open_client(ctx) as client:
        record = client.catalog.get(record_id)
    output(ctx, json_output).show(record_document(record), lambda: emit_record(record))
