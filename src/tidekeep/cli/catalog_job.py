"""`tidekeep catalog run|impact|explain|runs`: the data retention job and its explanations (plain
functions; catalog.py makes them commands of the catalog app)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput
from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag, int_argument, limit_option
from .output import emit, emit_table, fields, format_bytes, iso_utc, size_cell
from .progress import progress_bar

if TYPE_CHECKING:
    from ..config import Settings


# Each report prints from its document (what --json prints), so a report a server sent (--server)
# prints as one made here.
def _rule_label(report: Mapping[str, Any], number: int) -> str:
    for period in report["periods"]:
        for action in period["actions"]:
            if action["rule"] == number:
                return f"{number} {action['name']}"
    return str(number)


def print_run(report: Mapping[str, Any]) -> None:
    """`report`: a RunReport's document."""
    verb = "would delete" if report["dry_run"] else "deleted"
    run = f"run {report['run_id']}" if report["run_id"] is not None else "run"
    emit(f"{run} at now={iso_utc(report['now_ms'])}{' (dry run)' if report['dry_run'] else ''}: {verb} "
         f"{report['rows']:,} record(s), {format_bytes(report['bytes'])} in {report['elapsed_s']:.1f}s")
    if not report["periods"]:
        emit("no active rules: nothing to do")
        return
    rows = []
    for p in report["periods"]:  # `deleted` and `by_rule` are in rule number order
        per_rule = ", ".join(f"rule {k}: {v['rows']:,}" for k, v in p["deleted"].items()) or "-"
        deleting = ",".join(str(a["rule"]) for a in p["actions"] if a["action"] == "DELETE") or "-"
        rows.append([iso_utc(p["from_ms"]), iso_utc(p["to_ms"]), p["tracker_age"], deleting, f"{p['candidates']:,}",
                     f"{p['rows']:,}", size_cell(p["bytes"]), per_rule])
    emit_table(["FROM", "TO", "TRACKER", "DELETING RULES", "CANDIDATES", "DELETED", "BYTES", "BY RULE"], rows)
    if report["by_rule"]:
        emit("")
        emit_table(["RULE", "RECORDS", "BYTES"],
                   [[_rule_label(report, int(k)), f"{v['rows']:,}", size_cell(v["bytes"])]
                    for k, v in report["by_rule"].items()])


def _reads_the_metadata_store(settings: Settings) -> None:
    """The refusal of the job's and the impact's Spark work, whose executors open the metadata store."""
    from ..spark.session import check_job_reach

    check_job_reach(settings, metadata=True)


def run(
    ctx: typer.Context,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Count what would be deleted; change nothing")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Run the data retention job now (Spark): logically delete what the rules say has expired.

    Period by period, youngest first, in create-time slices; trackers make the next run incremental.
    """
    out = output(ctx, json_output)
    if is_remote(ctx):
        with open_remote(ctx) as remote:
            report = remote.result(remote.call("POST", "/catalog/runs", json={"dry_run": dry_run}),
                                   "retention job", not out.json)
    else:
        with (open_client(ctx, _reads_the_metadata_store) as client,
              progress_bar("retention job", not out.json, unit="records") as update):
            report = client.catalog.run(dry_run=dry_run, progress=update).to_dict()
    out.show(report, lambda: print_run(report))


def print_impact(summary: Mapping[str, Any]) -> None:
    """`summary`: an ImpactSummary's document."""
    emit(f"impact at now={iso_utc(summary['now_ms'])}: {summary['total_rows']:,} record(s), "
         f"{format_bytes(summary['total_bytes'])} would be deleted")
    if summary["rows"]:
        emit_table(["RULE", "AGE", "FEED", "TYPE", "RECORDS", "BYTES", "HELD"],
                   [[f"{r['rule']} {r['rule_name']}", r["age"], r["feed"], r["type"], f"{r['rows']:,}",
                     size_cell(r["bytes"]), r["held_rows"]] for r in summary["rows"]])


def impact(
    ctx: typer.Context,
    rules: Annotated[str | None, typer.Option(
        "--rules", metavar="FILE",
        help="Rules file (YAML or Stroom JSON) to assess instead of the saved rules")] = None,
    json_output: JsonFlag = False,
) -> None:
    """What the job would delete if it ran now with no trackers, per rule, feed and type."""
    out = output(ctx, json_output)
    if is_remote(ctx):
        if rules is not None:  # a file on this machine: the server assesses its saved rules only
            raise InvalidInput("--rules is not available with --server; the server assesses its saved rules")
        with open_remote(ctx) as remote:
            summary = remote.result(remote.call("POST", "/catalog/impact", json={}), "impact", not out.json)
    else:
        with (open_client(ctx, _reads_the_metadata_store) as client,
              progress_bar("impact", not out.json, unit="records") as update):
            summary = client.catalog.impact(rules=rules, progress=update).to_dict()
    out.show(summary, lambda: print_impact(summary))


def print_explanation(answer: Mapping[str, Any]) -> None:
    """`answer`: an Explanation's document."""
    fields([
        ("record", answer["record_id"]),
        ("status", f"{answer['status']} since {iso_utc(answer['status_time'])}"),
        ("created", iso_utc(answer["create_time"])),
        ("rule", "none" if answer["rule"] is None else f"{answer['rule']} {answer['rule_name']}"),
        ("age", answer["age"]),
        ("retain until", "forever" if answer["retain_until_ms"] is None else iso_utc(answer["retain_until_ms"])),
        ("holds", ", ".join(f"{h['id']} ({h['reason']})" for h in answer["holds"]) or "none"),
        ("decision", f"{answer['decision']}: {answer['reason']}"),
    ])


def explain(
    ctx: typer.Context,
    record_id: Annotated[int, int_argument("ID", "Record id")],
    json_output: JsonFlag = False,
) -> None:
    """Why a record is kept or deleted: the deciding rule, its age, retain-until, holds."""
    if is_remote(ctx):
        from ..catalog.record_store import check_record_id

        check_record_id(record_id)  # the local command's line, not the API's for its path parameter
        with open_remote(ctx) as remote:
            answer = remote.call("GET", f"/catalog/records/{record_id}/explain")
    else:
        with open_client(ctx) as client:
            answer = client.catalog.explain(record_id).to_dict()
    output(ctx, json_output).show(answer, lambda: print_explanation(answer))


def print_runs(entries: Sequence[Mapping[str, Any]]) -> None:
    rows = []
    for e in entries:
        report = e["report"] or {}
        rows.append([e["id"], e["kind"], e["state"], "yes" if e["dry_run"] else "no", iso_utc(e["now_ms"]),
                     iso_utc(e["started_ms"]), report.get("rows", report.get("purged", "")),
                     size_cell(report.get("bytes"))])
    emit_table(["RUN", "KIND", "STATE", "DRY RUN", "NOW", "STARTED", "RECORDS", "BYTES"], rows)


def runs(
    ctx: typer.Context,
    limit: Annotated[int, limit_option("How many runs, newest first", low=1)] = 20,
    json_output: JsonFlag = False,
) -> None:
    """Recent retention job and purge runs, newest first."""
    with open_client(ctx) as client:
        entries = client.catalog.runs(limit)
    output(ctx, json_output).show(entries, lambda: print_runs(entries))
