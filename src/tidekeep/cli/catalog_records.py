"""`tidekeep catalog add|import|generate|list|show` and `tidekeep catalog dict set|list|show|delete`:
meta records and dictionaries."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from ..catalog.records import MetaRecord
from ..errors import InvalidInput
from ..integers import INT64_MAX, INT64_MIN
from .context import open_client
from .output import emit, emit_json, emit_table, fields, iso_utc, size_cell
from .progress import progress_bar

JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of text")]


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


def read_words(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInput(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidInput(f"cannot read {str(path)!r}: not UTF-8 text") from None


def register(app: typer.Typer) -> None:
    """Add the record and dictionary commands to the `catalog` group."""

    @app.command("add")
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
        with open_client(ctx) as client:
            ids = client.catalog.add(records)
        if json_output:
            emit_json({"ids": ids})
        else:
            emit(f"added {len(ids)} record(s): {', '.join(map(str, ids))}")

    @app.command("import")
    def import_(
        ctx: typer.Context,
        path: Annotated[Path, typer.Argument(metavar="PATH", help="A file or a directory of files of one format")],
        format: Annotated[str | None, typer.Option(
            "--format", metavar="FORMAT", help="csv, json (JSON lines) or parquet [default: from the extension]")
        ] = None,
        json_output: JsonFlag = False,
    ) -> None:
        """Bulk import records through Spark. Every row is checked first: one bad row and nothing is written.
        Columns: the record fields, `attributes` (JSON) and attr.<name> per custom attribute."""
        with open_client(ctx) as client, progress_bar("importing", not json_output) as progress:
            report = client.catalog.import_path(path, format=format, progress=progress)
        if json_output:
            emit_json(report.to_dict())
        else:
            emit(f"imported {report.rows:,} row(s) from {report.files} file(s): {report.inserted:,} inserted, "
                 f"{report.skipped:,} skipped (id already present) in {report.elapsed_s:.1f}s")

    @app.command("generate")
    def generate(
        ctx: typer.Context,
        rows: Annotated[int, typer.Option("--rows", metavar="N", min=INT64_MIN, max=INT64_MAX,
                                          help="How many records")],
        seed: Annotated[int, typer.Option("--seed", metavar="S", min=INT64_MIN, max=INT64_MAX,
                                          help="Random seed (same seed, same data)")] = 0,
        span_days: Annotated[int, typer.Option(
            "--span-days", metavar="D", min=INT64_MIN, max=INT64_MAX,
            help="Create times spread over the D days before now")] = 3650,
        batch_size: Annotated[int, typer.Option(
            "--batch-size", metavar="N", min=INT64_MIN, max=INT64_MAX, help="Records per write transaction")] = 200_000,
        with_files: Annotated[bool, typer.Option(
            "--with-files", help="Also write a small placeholder file at each record's location")] = False,
        json_output: JsonFlag = False,
    ) -> None:
        """Generate synthetic records for demos and benchmarks (a dozen feeds, four types, ~1% LOCKED)."""
        with open_client(ctx) as client, progress_bar("generating", not json_output) as progress:
            report = client.catalog.generate(rows, seed=seed, progress=progress, span_days=span_days,
                                             batch_size=batch_size, with_files=with_files)
        if json_output:
            emit_json(report.to_dict())
        elif report.rows == 0:
            emit("generated 0 records")
        else:
            rate = report.rows / report.elapsed_s if report.elapsed_s > 0 else 0
            emit(f"generated {report.rows:,} record(s), ids {report.first_id}-{report.last_id}, "
                 f"in {report.elapsed_s:.1f}s ({rate:,.0f}/s)")

    @app.command("list")
    def list_records(
        ctx: typer.Context,
        feed: Annotated[str | None, typer.Option("--feed", metavar="FEED", help="Only this feed")] = None,
        type: Annotated[str | None, typer.Option("--type", metavar="TYPE", help="Only this type")] = None,
        status: Annotated[str | None, typer.Option(
            "--status", metavar="STATUS", help="Only UNLOCKED, LOCKED or DELETED")] = None,
        limit: Annotated[int, typer.Option("--limit", metavar="N", min=INT64_MIN, max=INT64_MAX,
                                           help="At most N records")] = 100,
        after: Annotated[int | None, typer.Option("--after", metavar="ID", min=INT64_MIN, max=INT64_MAX,
                                                  help="Only ids above ID (paging)")] = None,
        json_output: JsonFlag = False,
    ) -> None:
        """Records in id order."""
        with open_client(ctx) as client:
            records = client.catalog.records(feed=feed, type=type, status=status, limit=limit, after_id=after)
        if json_output:
            emit_json([record_document(r) for r in records])
        elif not records:
            emit("no records")
        else:
            emit_table(["ID", "FEED", "TYPE", "CREATED", "STATUS", "FILE SIZE", "LOCATION"],
                       [[r.id, r.feed, r.type, iso_utc(r.create_time), r.status, size_cell(r.file_size), r.location]
                        for r in records])

    @app.command("show")
    def show(
        ctx: typer.Context,
        record_id: Annotated[int, typer.Argument(metavar="ID", min=INT64_MIN, max=INT64_MAX, help="The record's id")],
        json_output: JsonFlag = False,
    ) -> None:
        """One record, every field."""
        with open_client(ctx) as client:
            record = client.catalog.get(record_id)
        if json_output:
            emit_json(record_document(record))
            return
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

    dict_app = typer.Typer(help="Dictionaries: named word lists for IN_DICTIONARY terms.", no_args_is_help=True)
    app.add_typer(dict_app, name="dict")

    @dict_app.command("set")
    def dict_set(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(metavar="NAME", help="Dictionary name ([A-Za-z0-9_-]{1,255})")],
        words: Annotated[list[str] | None, typer.Argument(metavar="WORD...", help="The words")] = None,
        file: Annotated[Path | None, typer.Option(
            "--file", "-f", metavar="FILE", help="Read the words from FILE, one per line")] = None,
        json_output: JsonFlag = False,
    ) -> None:
        """Create or replace a dictionary (words trimmed; blank and repeated words dropped)."""
        if file is not None and words:
            raise InvalidInput("give the words either as arguments or with --file, not both")
        given = read_words(file) if file is not None else list(words or [])
        with open_client(ctx) as client:
            client.catalog.set_dictionary(name, given)
            stored = client.catalog.dictionary(name)
        if json_output:
            emit_json({"name": name, "words": stored})
        else:
            emit(f"dictionary {name}: {len(stored)} word(s)")

    @dict_app.command("list")
    def dict_list(ctx: typer.Context, json_output: JsonFlag = False) -> None:
        """Every dictionary with its word count."""
        with open_client(ctx) as client:
            everything = client.catalog.dictionaries()
        if json_output:
            emit_json(everything)
        elif not everything:
            emit("no dictionaries")
        else:
            emit_table(["NAME", "WORDS"], [[name, len(words)] for name, words in everything.items()])

    @dict_app.command("show")
    def dict_show(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(metavar="NAME", help="Dictionary name")],
        json_output: JsonFlag = False,
    ) -> None:
        """A dictionary's words, one per line."""
        with open_client(ctx) as client:
            words = client.catalog.dictionary(name)
        if json_output:
            emit_json({"name": name, "words": words})
        else:
            for word in words:
                emit(word)

    @dict_app.command("delete")
    def dict_delete(
        ctx: typer.Context,
        name: Annotated[str, typer.Argument(metavar="NAME", help="Dictionary name")],
        json_output: JsonFlag = False,
    ) -> None:
        """Delete a dictionary (refused while the saved retention rules use it)."""
        with open_client(ctx) as client:
            client.catalog.delete_dictionary(name)
        if json_output:
            emit_json({"name": name, "deleted": True})
        else:
            emit(f"dictionary {name} deleted")
