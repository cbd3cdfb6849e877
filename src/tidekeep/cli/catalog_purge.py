"""`tidekeep catalog purge [--dry-run] [--json]`: remove the data of records DELETED for longer than
catalog.purge_age, then their rows (catalog/purge.py). A plain function; catalog.py makes it a
command of the catalog app."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_table, emit_warning, format_bytes, iso_utc
from .progress import progress_bar

if TYPE_CHECKING:
    from ..catalog.purge import PurgeReport
ABORTED_EXIT_CODE = 1


def print_report(report: PurgeReport) -> None:
    verb = "would purge" if report.dry_run else "purged"
    emit(f"purge run {report.run_id} at now={iso_utc(report.now_ms)}{' (dry run)' if report.dry_run else ''}: "
         f"{verb} {report.purged:,} record(s), {format_bytes(report.bytes)} in {report.batches} batch(es); "
         f"deleted before {iso_utc(report.threshold_ms)}; {report.failures} failure(s); {report.held} held")
    if report.failed:
        emit("")
        emit_table(["ID", "LOCATION", "ERROR"], [[f["id"], f["location"], f["error"]] for f in report.failed])
        if report.failures > len(report.failed):
            emit(f"... and {report.failures - len(report.failed)} more")


def purge(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be purged; change nothing")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Delete the data (at each record's location), then the rows, of records DELETED for longer
    than catalog.purge_age, in batches of catalog.purge_batch_size. Held records are left alone.
    Exits 1 if it stopped because failures exceeded catalog.purge_failure_threshold."""
    out = output(ctx, json_output)
    with open_client(ctx) as client, progress_bar("purging", not out.json, unit="records") as update:
        report = client.catalog.purge(progress=update, dry_run=dry_run)
        threshold = client.settings["catalog.purge_failure_threshold"]
    out.show(report.to_dict(), lambda: print_report(report))
    if report.failures and not report.aborted:
        # under the threshold the run goes on and exits 0; the failed records keep their rows
        emit_warning(f"{report.failures} record(s) could not have their data deleted and keep their rows "
                     f"for the next purge (first: {report.failed[0]['location']}: {report.failed[0]['error']})")
    if report.aborted:
        sys.stdout.flush()
        sys.stderr.write(f"error: purge stopped: {report.failures} failures exceed "
                         f"catalog.purge_failure_threshold ({threshold}); failed records keep their rows\n")
        raise typer.Exit(ABORTED_EXIT_CODE)
