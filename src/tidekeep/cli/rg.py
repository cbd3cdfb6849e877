"""`tidekeep rg create|list|describe|delete|checkpoint|read|retention-cut`: reader groups from the command line.

`read` joins the group as a reader for the length of the command: it returns at most --limit
events (stopping early when nothing arrives within --timeout), then leaves the group, releasing
its segments at its position, so the next `rg read` goes on where this one stopped.

`retention-cut` publishes a MANUAL_RELEASE_AT_USER_STREAMCUT group's acknowledgements: each cut names
its stream, and all of them are stored or none.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput
from ..streams.documents import acknowledged_document, checkpoint_document, reset_document
from .context import open_client, output
from .options import JsonFlag, int_option
from .output import Output, emit, emit_table, iso_utc, size_cell

if TYPE_CHECKING:
    from ..streams.readergroup import EventRead, Reader
    from ..streams.rg_reset import ResetPlan, ResetTarget

GroupName = Annotated[str, typer.Argument(metavar="NAME", help="Reader group name")]

app = typer.Typer(help="Reader groups: shared reading, positions and checkpoints.", no_args_is_help=True)


def event_json(event: EventRead) -> dict[str, Any]:
    from ..streams.model import segment_name

    if event.checkpoint_name is not None:
        return {"checkpoint": event.checkpoint_name}
    assert event.position is not None and event.payload is not None
    try:
        payload: dict[str, str] = {"payload": event.payload.decode("utf-8")}
    except UnicodeDecodeError:
        payload = {"payload_base64": base64.b64encode(event.payload).decode("ascii")}
    return {"stream": event.position.stream, "segment": segment_name(event.position.segment),
            "offset": event.position.offset, "routing_key": event.routing_key, **payload}


def group_config(streams: list[str], retention_type: str, checkpoint_interval: str | None,
                 skip_truncated: bool) -> Any:
    """The ReaderGroupConfig the options of `rg create` give; an unknown retention type is refused."""
    from ..streams.readergroup import ReaderGroupConfig, RetentionType

    return ReaderGroupConfig(streams=list(streams), retention_type=RetentionType.named(retention_type),
                             automatic_checkpoint_interval=checkpoint_interval, skip_truncated=skip_truncated)


@app.command("create")
def create(
    ctx: typer.Context,
    name: GroupName,
    streams: Annotated[list[str], typer.Option("--stream", metavar="SCOPE/STREAM",
                                               help="A stream to read from its head (repeatable)")],
    retention_type: Annotated[str, typer.Option(
        "--retention-type", metavar="TYPE",
        help="NONE | MANUAL_RELEASE_AT_USER_STREAMCUT | AUTOMATIC_RELEASE_AT_LAST_CHECKPOINT")] = "NONE",
    checkpoint_interval: Annotated[str | None, typer.Option(
        "--checkpoint-interval", metavar="DURATION", help="Automatic checkpoints, e.g. 30s")] = None,
    skip_truncated: Annotated[bool, typer.Option("--skip-truncated",
                                                 help="Skip truncated data (logged and audited)")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Create a reader group positioned at the streams' heads."""
    config = group_config(streams, retention_type, checkpoint_interval, skip_truncated)
    with open_client(ctx) as client:
        group = client.create_reader_group(name, config)
        described = group.describe()
    output(ctx, json_output).show(described, f"created reader group {name} on {', '.join(streams)}")


def emit_names(names: list[str]) -> None:
    if not names:
        emit("no reader groups")
    for n in names:
        emit(n)


@app.command("list")
def list_groups(ctx: typer.Context, json_output: JsonFlag = False) -> None:
    """List reader groups."""
    with open_client(ctx) as client:
        names = client.list_reader_groups()
    output(ctx, json_output).show(names, lambda: emit_names(names))


def emit_group(d: dict[str, Any]) -> None:
    emit(f"reader group {d['name']}  generation {d['generation']}  retention {d['config']['retention_type']}")
    emit_table(["STREAM", "POSITION", "UNREAD BYTES"],
               [[s, v["position"], size_cell(v["unread_bytes"])] for s, v in sorted(d["streams"].items())])
    subscribed = {s: v["subscriber"] for s, v in sorted(d["streams"].items()) if v.get("subscriber")}
    if subscribed:
        emit_table(["STREAM", "ACKNOWLEDGED CUT", "ACKNOWLEDGED AT", "UNCONSUMED BYTES"],
                   [[s, v["acknowledged"] or f"- (holds at {v['effective']})",
                     iso_utc(v["acknowledged_ms"]) or "-", size_cell(v["unconsumed_bytes"])]
                    for s, v in subscribed.items()])
    emit_table(["READER", "LAST SEEN", "SEGMENTS"],
               [[r["reader"], iso_utc(r["last_seen_ms"]), " ".join(r["segments"]) or "-"] for r in d["readers"]])
    emit_table(["STREAM", "SEGMENT", "OFFSET", "OWNER", "STATUS"],
               [[s["stream"], s["segment"], s["offset"], s["owner"] or "-", s["status"]] for s in d["segments"]])
    emit(f"pending checkpoints: {', '.join(d['pending_checkpoints']) or '-'}; "
         f"last completed: {d['last_checkpoint'] or '-'}")


@app.command("describe")
def describe(ctx: typer.Context, name: GroupName, json_output: JsonFlag = False) -> None:
    """Readers, segment assignment, positions and unread bytes per stream."""
    with open_client(ctx) as client:
        d = client.reader_group(name).describe()
    output(ctx, json_output).show(d, lambda: emit_group(d))


@app.command("delete")
def delete(ctx: typer.Context, name: GroupName, json_output: JsonFlag = False) -> None:
    """Delete a reader group (its readers' state goes with it; stream data is untouched)."""
    with open_client(ctx) as client:
        client.delete_reader_group(name)
    output(ctx, json_output).show({"deleted": name}, f"deleted reader group {name}")


def emit_lines(lines: list[str]) -> None:
    for line in lines:
        emit(line)


@app.command("checkpoint")
def checkpoint(
    ctx: typer.Context,
    name: GroupName,
    checkpoint_name: Annotated[str, typer.Argument(metavar="CHECKPOINT", help="Checkpoint name")],
    wait: Annotated[float, typer.Option("--wait", metavar="SECONDS",
                                        help="How long to wait for the readers to pass it")] = 30.0,
    json_output: JsonFlag = False,
) -> None:
    """Initiate a checkpoint, wait until every online reader passed it, print its stream cuts."""
    with open_client(ctx) as client:
        done = client.reader_group(name).initiate_checkpoint(checkpoint_name).wait(wait)
    document = checkpoint_document(done)
    output(ctx, json_output).show(
        document, lambda: emit_lines([f"checkpoint {done.name} completed", *document["cuts"].values()]))


@app.command("retention-cut")
def retention_cut(
    ctx: typer.Context,
    name: GroupName,
    cuts: Annotated[list[str], typer.Argument(
        metavar="STREAM_CUT...", help="Acknowledged cuts, compact ('scope/stream:0.0=120,0.1=40') or JSON")],
    json_output: JsonFlag = False,
) -> None:
    """Acknowledge consumption (MANUAL_RELEASE_AT_USER_STREAMCUT groups): data before each cut may go."""
    from ..streams.cuts import StreamCut

    by_stream: dict[str, StreamCut] = {}
    for text in cuts:
        cut = StreamCut.parse(text)
        if cut.stream in by_stream:
            raise InvalidInput(f"two cuts given for stream {cut.stream}: give one per stream")
        by_stream[cut.stream] = cut
    with open_client(ctx) as client:
        stored = client.reader_group(name).update_retention_stream_cut(by_stream)
    output(ctx, json_output).show(
        acknowledged_document(name, stored),
        lambda: emit_lines([f"reader group {name} acknowledged {cut}" for cut in stored.values()]))


def read_events(reader: Reader, limit: int | None, timeout: int, time_window: bool, shown: Output) -> None:
    """Print what the reader reads until `limit` events or `timeout` ms without one; then, with
    `time_window` and text, the reader's time window per stream."""
    count = 0
    while limit is None or count < limit:
        event = reader.read_next_event(timeout)
        if event.is_empty:
            break
        if shown.json:
            line = event_json(event)
            if time_window and event.position is not None:
                line["time_window"] = reader.time_window(event.position.stream).to_dict()
            shown.line(line, "")
        elif event.checkpoint_name is not None:
            emit(f"# checkpoint {event.checkpoint_name}")
        else:
            emit(event_json(event).get("payload", "<binary>"))
        count += event.is_event
    if time_window and not shown.json:
        for stream in sorted(reader.group.config["streams"]):
            window = reader.time_window(stream)
            emit(f"# time window of {stream}: lower {_or_dash(window.lower_ms)}, upper {_or_dash(window.upper_ms)}")


@app.command("read")
def read(
    ctx: typer.Context,
    name: GroupName,
    reader_id: Annotated[str, typer.Option("--reader", metavar="ID", help="Reader id to join as")],
    limit: Annotated[int | None, int_option("--limit", help="At most N events")] = None,
    timeout: Annotated[int, int_option("--timeout", metavar="MS", help="Stop when nothing arrives for this long")
                       ] = 1000,
    time_window: Annotated[bool, typer.Option(
        "--time-window", help="Show the reader's time window (watermarks): with --json on every event, "
        "else per stream at the end")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Read events as a member of the group, then leave it at the position reached."""
    if limit is not None and limit < 0:
        raise InvalidInput(f"invalid --limit {limit}: must be >= 0")
    if timeout < 0:
        raise InvalidInput(f"invalid --timeout {timeout}: must be >= 0")
    with open_client(ctx) as client:
        reader = client.reader_group(name).reader(reader_id)
        try:
            read_events(reader, limit, timeout, time_window, output(ctx, json_output))
        finally:
            reader.close()


def reset_target(kind: str, values: list[str]) -> ResetTarget:
    """`--to head|tail` (no values), `--to cut CUT...` (one per stream), `--to checkpoint NAME`."""
    from ..streams.rg_reset import CHECKPOINT, HEAD, TAIL, ResetTarget

    word = kind.strip().lower()
    if word in (HEAD, TAIL):
        if values:
            raise InvalidInput(f"--to {word} takes no further arguments, got {' '.join(values)!r}")
        return ResetTarget.head() if word == HEAD else ResetTarget.tail()
    if word == "cut":
        if not values:
            raise InvalidInput("--to cut needs the cuts: one per stream of the group, e.g. --to cut 's/x:0.0=120'")
        return ResetTarget.to_cuts(values)
    if word == CHECKPOINT:
        if len(values) != 1:
            raise InvalidInput("--to checkpoint needs exactly one checkpoint name")
        return ResetTarget.to_checkpoint(values[0])
    raise InvalidInput(f"invalid --to {kind!r}: use head, tail, cut CUT... or checkpoint NAME")


def emit_reset(name: str, plan: ResetPlan, dry_run: bool, generation: int | None) -> None:
    emit(f"{'would reset' if dry_run else 'reset'} reader group {name} to {_target_text(plan.target)}"
         + ("" if generation is None else f" (generation {generation})"))
    emit_table(["STREAM", "CURRENT POSITION", "NEW POSITION"],
               [[r.stream, str(r.current), str(r.new)] for r in plan.streams])
    if dry_run and plan.online_readers:
        emit(f"online readers: {', '.join(plan.online_readers)} (the reset needs --force while they are)")


@app.command("reset")
def reset(
    ctx: typer.Context,
    name: GroupName,
    to: Annotated[str, typer.Option(
        "--to", metavar="head|tail|cut|checkpoint",
        help="Where to start again: every stream's head (earliest) or tail (latest, skip what is unread), "
             "the cuts given (one per stream), or a completed checkpoint of the group")],
    values: Annotated[list[str] | None, typer.Argument(
        metavar="CUT|CHECKPOINT", help="With --to cut: the cuts; with --to checkpoint: its name")] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Reset even while readers are online (they continue from the new positions)")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the new positions; change nothing")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Move a reader group to new positions (Kafka's --reset-offsets, Pravega's resetReaderGroup).

    Refused while readers are online unless --force. The group's end cuts and options stay;
    pending and completed checkpoints are dropped (the group starts a new generation)."""
    from ..streams.rg_reset import apply_reset, plan_reset

    target = reset_target(to, list(values or []))
    with open_client(ctx) as client:
        group = client.reader_group(name)
        plan = plan_reset(group, target)
        generation = None
        if not dry_run:
            generation = apply_reset(group, plan, allow_online_readers=force)
    output(ctx, json_output).show(reset_document(plan, dry_run, generation),
                                  lambda: emit_reset(name, plan, dry_run, generation))


def _target_text(target: ResetTarget) -> str:
    from ..streams.rg_reset import CHECKPOINT, CUTS

    if target.kind == CHECKPOINT:
        return f"checkpoint {target.checkpoint}"
    return "the given cuts" if target.kind == CUTS else target.kind


def _or_dash(value: int | None) -> str:
    return "-" if value is None else str(value)
