"""`tidekeep retention preview|run|history|subscribers` (this module's `app`) and `tidekeep stream
policy` (`policy`, a command of the stream app): size/time retention."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput
from ..store.deletion import FileLeft
from ..streams.config import RetentionKind, StreamConfig
from ..streams.documents import decision_document, history_record
from ..units import format_duration, format_size
from . import retention_simulate, subscribers
from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag, StreamArgument, limit_option
from .output import (
    emit,
    emit_table,
    fields,
    format_bytes,
    iso_utc,
    size_cell,
    warn_files_left,
)
from .retention_input import parse_at, policy_from_options

if TYPE_CHECKING:
    pass

app = typer.Typer(help="Size and time retention: preview, run and history of cycles; what-if simulations.",
                  no_args_is_help=True)


def age_text(ms: int) -> str:
    """A readable age: 2h05m, 7m30s, 12s, 250ms."""
    ms = max(ms, 0)
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{rest // 1000:02d}s"
    return f"{rest // 1000}s" if rest >= 1000 else f"{rest}ms"


# The text of a decision is rendered from its document (`decision_document`, what --json prints), so
# a decision made by a server (`--server`) prints exactly as one made here.
def _amount(decision: dict[str, Any], amount: int | None) -> str:
    if amount is None:
        return "-"
    policy = decision["policy"]
    if policy is not None and policy["kind"] == RetentionKind.TIME.value:
        return format_duration(max(amount, 0))
    return format_size(amount)


def _cut_text(stream: str, positions: dict[str, int] | None) -> str:
    """A cut's positions as a document holds them ({"epoch.number": offset}, in segment order)."""
    if positions is None:
        return "none"
    return f"{stream}:" + ",".join(f"{s}={o}" for s, o in positions.items())


def _same_record(a: dict[str, Any], b: dict[str, Any] | None) -> bool:
    return b is not None and all(a[key] == b[key] for key in ("recording_time_ms", "recording_size", "positions"))


def _label(record: dict[str, Any], decision: dict[str, Any]) -> str:
    return ",".join(name for name, key in (("Cmin", "cmin"), ("Cmax", "cmax"), ("chosen", "chosen"),
                                           ("new", "recorded")) if _same_record(record, decision[key]))


def subscriber_cut_text(stream: str, view: dict[str, Any]) -> str:
    if not view["acknowledged"]:
        return f"start cut (nothing acknowledged): {_cut_text(stream, view['positions'])}"
    return _cut_text(stream, view["positions"])


def emit_subscribers(decision: dict[str, Any]) -> None:
    """Consumption-based retention: every subscriber, their lower bound and the case that applied."""
    emit("subscribers:")
    emit_table(["READER GROUP", "GEN", "ACKNOWLEDGED CUT", "AGE", "UNCONSUMED"],
               [[v["reader_group"], str(v["generation"]), subscriber_cut_text(decision["stream"], v),
                 "-" if v["updated_ms"] is None else age_text(decision["now_ms"] - v["updated_ms"]),
                 size_cell(v["unconsumed_bytes"])] for v in decision["subscribers"]], indent="  ")
    fields([("lower bound", _cut_text(decision["stream"], decision["lower_bound"])),
            ("case", "-" if decision["case"] is None else f"({decision['case']})")])


def emit_decision(decision: dict[str, Any]) -> None:
    """`decision`: a `decision_document`."""
    stream = decision["stream"]
    fields([("stream", stream), ("policy", decision["policy_text"] or "none"), ("at", iso_utc(decision["now_ms"])),
            ("stream holds", _amount(decision, decision["stream_amount"]))])
    if decision["records"]:
        emit("retention set:")
        emit_table(["RECORDED", "AGE", "SIZE", "RETAINED", "CUT", ""],
                   [[iso_utc(r["recording_time_ms"]), age_text(decision["now_ms"] - r["recording_time_ms"]),
                     format_size(r["recording_size"]), _amount(decision, r["retained"]),
                     _cut_text(stream, r["positions"]), _label(r, decision)]
                    for r in decision["records"]], indent="  ")
    if decision["subscribers"]:
        emit_subscribers(decision)
    verb = "would truncate" if decision["dry_run"] else "truncated"
    fields([("Cmin", _cut_text(stream, None if decision["cmin"] is None else decision["cmin"]["positions"])),
            ("Cmax", _cut_text(stream, None if decision["cmax"] is None else decision["cmax"]["positions"])),
            ("rule", decision["rule"]), ("reason", decision["reason"]),
            ("cut", _cut_text(stream, decision["cut"])),
            ("retained", _amount(decision, decision["retained"])),
            (verb if decision["cut"] is not None else "freed", format_bytes(decision["freed_bytes"]))])


def _history_case(record: dict[str, Any]) -> str:
    consumption = record["consumption"]
    if consumption is None:
        return "-"
    groups = ",".join(s["reader_group"] for s in consumption["subscribers"] if s["allowed"]) or "none"
    return f"({consumption['case']}) allowed by {groups}"


def emit_history(stream: str, entries: list[dict[str, Any]]) -> None:
    if not entries:
        emit(f"no truncations of {stream}")
        return
    emit_table(["TIME", "FREED", "NEW HEAD", "CONSUMPTION", "REASON"],
               [[e["time"], size_cell(e["bytes_freed"]), e["new_head"], _history_case(e), e["reason"]]
                for e in entries])


@app.command("preview")
def preview(
    ctx: typer.Context,
    stream: StreamArgument,
    at: Annotated[str | None, typer.Option(
        "--at", metavar="TIME", help="Decide as of TIME: +DURATION from now, ISO-8601 or epoch ms")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Dry run: the retention set with sizes and ages, Cmin, Cmax, the chosen cut, the bytes that
    would be freed and the rule that chose it. Changes nothing."""
    if is_remote(ctx):
        from .streams_remote import stream_path

        if at is not None:
            parse_at(at, 0)  # refused here, naming --at as the local command does; the server resolves it
        with open_remote(ctx) as remote:
            # the server resolves --at on its own clock, as the local command does on the workspace's
            document = remote.call("GET", f"{stream_path(stream)}/retention/preview", params={"at": at})
    else:
        with open_client(ctx) as client:
            now = None if at is None else parse_at(at, client.clock.now_ms())
            document = decision_document(client.stream(stream).retention.preview(now), dry_run=True)
    output(ctx, json_output).show(document, lambda: emit_decision(document))


@app.command("run")
def run(ctx: typer.Context, stream: StreamArgument, json_output: JsonFlag = False) -> None:
    """Run one retention cycle now: record the tail if due, decide, truncate (audited), prune."""
    if is_remote(ctx):
        from .streams_remote import stream_path

        with open_remote(ctx) as remote:
            document = remote.result(remote.call("POST", f"{stream_path(stream)}/retention/run"),
                                     "retention", show_progress=False)
    else:
        with open_client(ctx) as client:
            document = decision_document(client.stream(stream).retention.run(), dry_run=False)
    output(ctx, json_output).show(document, lambda: emit_decision(document))
    warn_files_left([FileLeft(f["path"], f["reason"]) for f in document["files_left"]])


@app.command("history")
def history(
    ctx: typer.Context,
    stream: StreamArgument,
    limit: Annotated[int, limit_option("At most N entries")] = 50,
    json_output: JsonFlag = False,
) -> None:
    """Past truncations of STREAM (by retention and by hand), newest first, from the audit table."""
    if limit < 1:  # the same line with and without --server (audit list says it the same way)
        raise InvalidInput(f"invalid --limit {limit}: must be 1 or more")
    if is_remote(ctx):
        from .streams_remote import stream_path

        with open_remote(ctx) as remote:
            entries = remote.items(f"{stream_path(stream)}/retention/history", limit=limit)
    else:
        with open_client(ctx) as client:
            entries = [history_record(e) for e in client.stream(stream).retention.history(limit)]
    output(ctx, json_output).show(entries, lambda: emit_history(stream, entries))


app.command("subscribers")(subscribers.subscribers)
app.command("simulate")(retention_simulate.simulate)


def policy(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="scope/stream")],
    size: Annotated[str | None, typer.Option("--size", metavar="MIN[:MAX]",
                                             help="Keep MIN to MAX bytes, e.g. 20GB:100GB")] = None,
    time: Annotated[str | None, typer.Option("--time", metavar="MIN[:MAX]",
                                             help="Keep data MIN to MAX long, e.g. 7d:30d")] = None,
    none: Annotated[bool, typer.Option("--none", help="Remove the policy: retention stops")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Set or remove a stream's size or time retention policy."""
    if size is None and time is None and not none:
        raise InvalidInput("give one of --size MIN[:MAX], --time MIN[:MAX] or --none")
    new_policy = policy_from_options(size, time, none)
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            described = streams_remote.update_retention(remote, name,
                                                        None if new_policy is None else new_policy.to_dict())
        text = described or "none"
    else:
        with open_client(ctx) as client:
            config = client.stream(name).state().info.config
            info = client.stream(name).update(StreamConfig(
                segments=config.segments, retention=new_policy,
                timestamp_aggregation_timeout=config.timestamp_aggregation_timeout_ms))
        text = "none" if info.config.retention is None else info.config.retention.describe()
    output(ctx, json_output).show(
        {"stream": name, "retention": None if new_policy is None else new_policy.to_dict(), "retention_text": text},
        f"{name}: retention {text}")
