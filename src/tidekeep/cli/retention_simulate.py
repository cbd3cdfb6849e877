"""`tidekeep retention simulate`: what-if retention — what a proposed policy (a stream), retention
period (a dataset's archives) or rule set (the catalog) would delete now and on each of the next N
days, changing nothing (docs/retention.md#what-if-retention). The text is rendered from the forecast
document (what --json prints), so a forecast a server made (`--server`) prints as one made here."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput
from ..forecast import DEFAULT_DAYS, MAX_DAYS, check_days
from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag, int_option
from .output import emit, emit_table, fields, format_bytes, iso_utc, size_cell
from .progress import progress_bar
from .retention_input import parse_at, policy_from_options

if TYPE_CHECKING:
    from ..config import Settings

OPTION_OF = {"stream": "--stream", "dataset": "--dataset", "catalog": "--catalog"}


def target_of(stream: str | None, dataset: str | None, catalog: bool, proposals: Mapping[str, tuple[str, Any]]) -> str:
    """The one target asked about; a proposal for another target is refused, naming both options.
    `proposals`: option -> (the target it belongs to, its value)."""
    given = [name for name, value in (("stream", stream), ("dataset", dataset), ("catalog", catalog or None))
             if value is not None]
    if len(given) != 1:
        raise InvalidInput("give one of --stream NAME, --dataset NAME or --catalog" if not given else
                           f"give only one of --stream, --dataset and --catalog, not "
                           f"{' and '.join(OPTION_OF[g] for g in given)}")
    for option, (belongs, value) in proposals.items():
        if value is not None and belongs != given[0]:
            raise InvalidInput(f"{option} goes with {OPTION_OF[belongs]}, not with {OPTION_OF[given[0]]}")
    return given[0]


def _reads_the_metadata_store(settings: Settings) -> None:
    """The catalog's forecast is a Spark job whose executors open the metadata store."""
    from ..spark.session import check_job_reach

    check_job_reach(settings, metadata=True)


def _items(value: int | None, unit: str) -> str:
    return "unknown" if value is None else f"{value:,} {unit}"


def emit_forecast(document: Mapping[str, Any]) -> None:
    """`document`: a Forecast's document (tidekeep/forecast.py)."""
    proposal, details, unit = document["proposal"], document["details"], document["unit"]
    what = {"streams": f"stream {document['target']}", "archives": f"dataset {document['target']}",
            "catalog": "the catalog"}[document["family"]]
    if document["family"] == "streams":
        chosen = proposal["policy_text"]
    elif document["family"] == "archives":
        minutes = proposal["retention_minutes"]
        chosen = "no retention period" if minutes is None else f"retention {minutes} min"
    else:
        chosen = f"rules version {proposal['rules_version']}" if proposal["rules_version"] else "rules not saved"
    pairs = [("forecast of", what), ("under", f"{chosen} ({'current' if proposal['current'] else 'proposed'})"),
             ("from", iso_utc(document["now_ms"])), ("days", str(document["days"]))]
    if "now" in details:
        now = details["now"]
        pairs.append(("now", f"{now['rule']}: {now['reason']}"))
    fields(pairs)
    totals = document["totals"]
    if document["lines"]:
        units = unit.upper()
        emit_table(["DAY", "UNTIL", "RULE", "NAME", "CASE", "BYTES", units, "HELD BYTES", f"HELD {units}"],
                   [[str(line["day"]), iso_utc(line["end_ms"]), line["rule"], line["name"] or "-", line["case"] or "-",
                     size_cell(line["bytes"]), "?" if line["items"] is None else f"{line['items']:,}",
                     "?" if line["held_bytes"] is None else size_cell(line["held_bytes"]),
                     "?" if line["held_items"] is None else f"{line['held_items']:,}"] for line in document["lines"]])
    else:
        emit(f"nothing would be deleted now or in the next {document['days']} day(s)")
    emit(f"total: {format_bytes(totals['bytes'])}, {_items(totals['items'], unit)} would be deleted"
         + ("" if not totals["held_items"] else f"; held: {_items(totals['held_items'], unit)}"
            + ("" if totals["held_bytes"] is None else f", {format_bytes(totals['held_bytes'])}")))
    for note in document["notes"]:
        emit(f"note: {note}")


def _remote_rules(rules: str | None) -> dict[str, Any] | None:
    """A rules file on this machine, read here and sent as the body of PUT /catalog/rules takes it."""
    if rules is None:
        return None
    from ..catalog.rules import load_rules_file, to_yaml_document

    return to_yaml_document(load_rules_file(rules))


def simulate(
    ctx: typer.Context,
    stream: Annotated[str | None, typer.Option("--stream", metavar="NAME",
                                               help="A stream (scope/stream): simulate its retention cycles")] = None,
    size: Annotated[str | None, typer.Option("--size", metavar="MIN[:MAX]",
                                             help="With --stream: a size policy to try, e.g. 20GB:100GB")] = None,
    time: Annotated[str | None, typer.Option("--time", metavar="MIN[:MAX]",
                                             help="With --stream: a time policy to try, e.g. 7d:30d")] = None,
    dataset: Annotated[str | None, typer.Option("--dataset", metavar="NAME",
                                                help="A dataset: which of its archives expire")] = None,
    retention: Annotated[str | None, typer.Option(
        "--retention", metavar="DURATION",
        help="With --dataset: a retention period to try, minutes or e.g. 30d")] = None,
    catalog: Annotated[bool, typer.Option("--catalog", help="The catalog: which records the retention job "
                                                            "deletes (a Spark job)")] = False,
    rules: Annotated[str | None, typer.Option(
        "--rules", metavar="FILE", help="With --catalog: a rules file (YAML or Stroom JSON) to try")] = None,
    days: Annotated[int, int_option("--days", help=f"Days after now to forecast, 0..{MAX_DAYS}")] = DEFAULT_DAYS,
    at: Annotated[str | None, typer.Option(
        "--at", metavar="TIME", help="Forecast from TIME instead of now: +DURATION from now, ISO-8601 or epoch ms")]
    = None,
    json_output: JsonFlag = False,
) -> None:
    """What-if retention: what a policy (--stream), retention period (--dataset) or rule set
    (--catalog) would delete now and on each of the next N days, by day and rule, with what holds
    keep apart. Each proposal defaults to the current one. Changes nothing."""
    target = target_of(stream, dataset, catalog, {"--size": ("stream", size), "--time": ("stream", time),
                                                  "--retention": ("dataset", retention), "--rules": ("catalog", rules)})
    days = check_days(days, "--days")
    policy = policy_from_options(size, time)
    out = output(ctx, json_output)
    if at is not None:
        parse_at(at, 0)  # refused here, naming --at, also with --server (the server resolves it on its clock)
    if is_remote(ctx):
        body: dict[str, Any] = {"days": days, "at": at}
        if target == "stream":
            body.update(stream=stream, policy=None if policy is None else policy.to_dict())
        elif target == "dataset":
            body.update(dataset=dataset, retention=retention)
        else:
            body.update(catalog=True, rules=_remote_rules(rules))
        with open_remote(ctx) as remote:
            document = remote.result(remote.call("POST", "/retention/simulate", json=body), "forecast", not out.json)
    else:
        proposal = {"stream": policy, "dataset": retention, "catalog": rules}[target]
        document = _local(ctx, target, stream or dataset, proposal, days, at, not out.json)
    out.show(document, lambda: emit_forecast(document))


def _local(ctx: typer.Context, target: str, name: str | None, proposal: Any, days: int, at: str | None,
           show_progress: bool) -> dict[str, Any]:
    """The forecast made here: `name` is the stream or the dataset, `proposal` its policy, retention
    period or rules file (None: the current one)."""
    if target == "catalog":
        from ..catalog.forecast_document import catalog_forecast_of

        with (open_client(ctx, _reads_the_metadata_store) as client,
              progress_bar("forecast", show_progress, unit="records") as update):
            now = None if at is None else parse_at(at, client.clock.now_ms())
            return catalog_forecast_of(client.workspace, proposal, now, days, progress=update).to_dict()
    assert name is not None
    with open_client(ctx) as client:
        now = None if at is None else parse_at(at, client.clock.now_ms())
        if target == "stream":
            return client.stream(name).retention.simulate(proposal, now, days).forecast().to_dict()
        return client.archives.forecast(name, proposal, now, days).to_dict()
