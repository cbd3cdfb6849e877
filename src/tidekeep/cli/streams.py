"""`tidekeep stream ...`: lifecycle, scaling, cuts and truncation. Data in and out is in stream_data.py,
the retention policy in retention.py; all are commands of this module's `app`."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput
from ..units import format_duration
from . import retention, stream_data
from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag, StreamName, int_option
from .output import emit, emit_table, fields, format_bytes, iso_utc, key_range, warn_files_left
from .stream_data import cut_argument

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..stream_handle import Stream
    from ..streams.controller import StreamInfo
    from ..streams.model import Segment

app = typer.Typer(help="Create, scale, write, read and truncate streams.", no_args_is_help=True)

NO_RETENTION = "none: data is kept until truncated by hand"


def parse_range(text: str) -> tuple[float, float]:
    """"LO:HI" as a key range; exact floats, so copy bounds from `stream describe`."""
    low, sep, high = text.partition(":")
    try:
        if not sep:
            raise ValueError
        bounds = float(low), float(high)
    except ValueError:
        raise InvalidInput(f"invalid key range {text!r}: expected LO:HI, like 0.5:0.75") from None
    if not all(math.isfinite(b) for b in bounds):
        raise InvalidInput(f"invalid key range {text!r}: bounds must be finite numbers")
    return bounds


def info_record(info: StreamInfo) -> dict[str, Any]:
    policy = info.config.retention
    return {
        "name": info.name,
        "state": info.state,
        "current_epoch": info.current_epoch,
        "created": iso_utc(info.created_ms),
        "created_ms": info.created_ms,
        "retention": None if policy is None else policy.describe(),
        "timestamp_aggregation_timeout_ms": info.config.timestamp_aggregation_timeout_ms,
    }


def segment_record(segment: Segment) -> dict[str, Any]:
    from ..streams.model import segment_name

    return {"segment": segment_name(segment.id), "epoch": segment.epoch,
            "key_range": [segment.key_low, segment.key_high]}


def emit_scaled(ctx: typer.Context, stream: str, sealed: list[str | int], new_segments: list[dict[str, Any]],
                json_output: bool) -> None:
    """`new_segments`: segment records (`segment_record`)."""
    from ..stream_handle import parse_segment
    from ..streams.model import segment_name

    sealed_names = [segment_name(parse_segment(s)) for s in sealed]
    added = ", ".join(f"{s['segment']} {key_range(*s['key_range'])}" for s in new_segments)
    epoch = new_segments[0]["epoch"]
    output(ctx, json_output).show(
        {"stream": stream, "sealed": sealed_names, "epoch": epoch, "new_segments": new_segments},
        f"scaled {stream} to epoch {epoch}: sealed {', '.join(sealed_names)}; new segments {added}")


def scaled(ctx: typer.Context, name: str, verb: str, body: dict[str, Any],
           local: Callable[[Stream], list[Segment]]) -> list[dict[str, Any]]:
    """The new segments of a scale, split or merge, through the server or the workspace."""
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            return streams_remote.scaled(remote, name, verb, body)
    with open_client(ctx) as client:
        return [segment_record(s) for s in local(client.stream(name))]


def emit_description(d: dict[str, Any]) -> None:
    fields([
        ("stream", d["name"]),
        ("state", d["state"]),
        ("created", iso_utc(d["created_ms"])),
        ("retention", d["retention"] or NO_RETENTION),
        ("watermark", f"a writer stops holding it back {format_duration(d['timestamp_aggregation_timeout_ms'])} "
                      "after its last note (timestamp aggregation timeout)"),
        ("size", f"{format_bytes(d['size_bytes'])} between head and tail"),
        ("written", f"{format_bytes(d['written_bytes'])} in total, {format_bytes(d['truncated_bytes'])} truncated"),
        ("head", d["head"]),
        ("tail", d["tail"]),
    ])
    emit(f"epochs (current: {d['current_epoch']})")
    emit_table(["EPOCH", "CREATED", "ACTIVE SEGMENTS"],
               [[e["epoch"], iso_utc(e["created_ms"]), " ".join(e["segments"])] for e in d["epochs"]], indent="  ")
    emit("segments (offsets in logical bytes; an event takes 8 bytes plus its payload)")
    emit_table(["SEGMENT", "EPOCH", "KEY RANGE", "HEAD", "TAIL=LENGTH", "READABLE", "STATE"],
               [[s["segment"], s["epoch"], key_range(*s["key_range"]), s["head"], s["tail"], s["readable_bytes"],
                 "sealed" if s["sealed"] else "active"] for s in d["segments"]], indent="  ")
    chunks = d.get("chunks")
    if chunks is not None:
        emit(f"chunks: {chunks['count']} ({chunks['compacted']} compacted, {chunks['below_target']} below the "
             f"{format_bytes(chunks['target_size'])} target size)")
        emit_table(["SEGMENT", "CHUNKS", "COMPACTED", "BELOW TARGET", "SMALLEST", "LARGEST", "BYTES"],
                   [[seg, c["count"], c["compacted"], c["below_target"], format_bytes(c["smallest"]),
                     format_bytes(c["largest"]), format_bytes(c["bytes"])] for seg, c in chunks["segments"].items()],
                   indent="  ")


def emit_stream_list(records: list[dict[str, Any]], scope: str | None) -> None:
    """`records`: `info_record`s."""
    if not records:
        emit("no streams" + (f" in scope {scope}" if scope else ""))
        return
    emit_table(["NAME", "STATE", "EPOCH", "CREATED", "RETENTION"],
               [[r["name"], r["state"], r["current_epoch"], iso_utc(r["created_ms"]), r["retention"] or "none"]
                for r in records])


def emit_truncated(name: str, result: dict[str, Any]) -> None:
    """`result`: the truncation's record (what `stream truncate --json` prints)."""
    if result["bytes_freed"] == 0 and result["old_head"] == result["new_head"]:
        emit(f"{name}: the head is already at {result['new_head']}; nothing truncated")
        return
    deleted = result["chunks_deleted"] - len(result["files_left"])
    fields([("truncated", name), ("old head", result["old_head"]), ("new head", result["new_head"]),
            ("freed", f"{format_bytes(result['bytes_freed'])} ({deleted} chunk files deleted)")])


def warn_left(files_left: list[dict[str, str]]) -> None:
    """The files an operation could not delete, from its record's `files_left`."""
    from ..store.deletion import FileLeft

    warn_files_left([FileLeft(f["path"], f["reason"]) for f in files_left])


@app.command("create")
def create(
    ctx: typer.Context,
    name: StreamName,
    segments: Annotated[int, int_option("--segments", help="Initial segment count")] = 1,
    retention_size: Annotated[str | None, typer.Option(
        "--retention-size", metavar="MIN[:MAX]", help="Size retention policy, e.g. 20GB:100GB")] = None,
    retention_time: Annotated[str | None, typer.Option(
        "--retention-time", metavar="MIN[:MAX]", help="Time retention policy, e.g. 7d:30d")] = None,
    aggregation_timeout: Annotated[str, typer.Option(
        "--timestamp-aggregation-timeout", metavar="D",
        help="A writer that has not noted past the last watermark for this long stops holding "
             "watermarks back")] = "60s",
    json_output: JsonFlag = False,
) -> None:
    """Create a stream (and its scope, if new) with N segments splitting the key space evenly."""
    from ..streams.config import StreamConfig

    policy = retention.policy_from_options(retention_size, retention_time)
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            record, described = streams_remote.create(remote, name, segments,
                                                       None if policy is None else policy.to_dict(),
                                                       aggregation_timeout)
    else:
        config = StreamConfig(segments=segments, retention=policy, timestamp_aggregation_timeout=aggregation_timeout)
        with open_client(ctx) as client:
            record = info_record(client.create_stream(name, config))
            described = client.stream(name).describe()
    listed = ", ".join(f"{s['segment']} {key_range(*s['key_range'])}" for s in described["segments"])
    output(ctx, json_output).show(
        {**record, "segments": [
            {"segment": s["segment"], "key_range": s["key_range"]} for s in described["segments"]]},
        f"created stream {name} with {segments} segment(s): {listed}")


@app.command("list")
def list_streams(
    ctx: typer.Context,
    scope: Annotated[str | None, typer.Option("--scope", metavar="SCOPE", help="Only this scope")] = None,
    json_output: JsonFlag = False,
) -> None:
    """List streams, by scope and name."""
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            records = streams_remote.list_streams(remote, scope)
    else:
        with open_client(ctx) as client:
            records = [info_record(i) for i in client.list_streams(scope)]
    output(ctx, json_output).show(records, lambda: emit_stream_list(records, scope))


@app.command("describe")
def describe(ctx: typer.Context, name: StreamName, json_output: JsonFlag = False) -> None:
    """Epochs, segments with key ranges and offsets, head and tail cuts, size, retention."""
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            described = streams_remote.describe(remote, name)
    else:
        with open_client(ctx) as client:
            described = client.stream(name).describe()
    output(ctx, json_output).show(described, lambda: emit_description(described))


@app.command("scale")
def scale(
    ctx: typer.Context,
    name: StreamName,
    seal: Annotated[list[str] | None, typer.Option(
        "--seal", metavar="SEGMENT", help="An active segment to seal, e.g. 0.1 (repeatable)")] = None,
    ranges: Annotated[list[str] | None, typer.Option(
        "--range", metavar="LO:HI",
        help="A new segment's key range; together they must exactly cover the sealed ones (repeatable)")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Seal adjacent segments and replace them with new ones over the same key range (a new epoch)."""
    new_ranges = [parse_range(r) for r in ranges or []]
    created = scaled(ctx, name, "scale", {"seal": list(seal or []), "new_ranges": new_ranges},
                     lambda stream: stream.scale(list(seal or []), new_ranges))
    emit_scaled(ctx, name, list(seal or []), created, json_output)


@app.command("split")
def split(
    ctx: typer.Context,
    name: StreamName,
    segment: Annotated[str, typer.Argument(metavar="SEGMENT", help="An active segment, e.g. 0.1")],
    parts: Annotated[int, int_option("--parts", help="Into how many equal key ranges")] = 2,
    json_output: JsonFlag = False,
) -> None:
    """Scale shortcut: split one segment into N equal key ranges."""
    created = scaled(ctx, name, "split", {"segment": segment, "parts": parts},
                     lambda stream: stream.split(segment, parts))
    emit_scaled(ctx, name, [segment], created, json_output)


@app.command("merge")
def merge(
    ctx: typer.Context,
    name: StreamName,
    segments: Annotated[list[str], typer.Argument(metavar="SEGMENT...", help="Two or more adjacent segments")],
    json_output: JsonFlag = False,
) -> None:
    """Scale shortcut: merge adjacent segments into one."""
    created = scaled(ctx, name, "merge", {"segments": list(segments)}, lambda stream: stream.merge(segments))
    emit_scaled(ctx, name, list(segments), created, json_output)


@app.command("seal")
def seal_stream(ctx: typer.Context, name: StreamName, json_output: JsonFlag = False) -> None:
    """Seal the stream: it keeps its data and takes no more writes."""
    from ..streams.repository import StreamStatus

    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            changed = streams_remote.seal(remote, name)
    else:
        with open_client(ctx) as client:
            changed = client.stream(name).seal()
    output(ctx, json_output).show({"stream": name, "state": StreamStatus.SEALED.value, "changed": changed},
                                  f"sealed {name}" if changed else f"{name} was already sealed; nothing changed")


@app.command("delete")
def delete(
    ctx: typer.Context,
    name: StreamName,
    force: Annotated[bool, typer.Option("--force", help="Seal the stream first if it is still active")] = False,
    json_output: JsonFlag = False,
) -> None:
    """Delete a sealed stream and all its data (audited). Never asks; --force seals first. A stream
    under a legal hold is refused before anything changes."""
    from ..store.deletion import files_left_json

    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            answer = streams_remote.delete(remote, name, force)
        sealed_first, bytes_freed, files_left = answer["sealed_first"], answer["bytes_freed"], answer["files_left"]
    else:
        with open_client(ctx) as client:
            # one transaction seals (with --force) and deletes: a refusal leaves the stream as it was
            result = client.stream(name).delete(force=force)
        sealed_first, bytes_freed = result.sealed_first, result.bytes_freed
        files_left = files_left_json(result.files_left)
    output(ctx, json_output).show(
        {"stream": name, "deleted": True, "sealed_first": sealed_first,
         "bytes_freed": bytes_freed, "files_left": files_left},
        f"deleted stream {name}{' (sealed it first)' if sealed_first else ''}: "
        f"{format_bytes(bytes_freed)} of data removed")
    warn_left(files_left)


@app.command("compact")
def compact(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(
        metavar="[STREAM]", help="scope/stream to compact; default: every stream")] = None,
    target_size: Annotated[str | None, typer.Option(
        "--target-size", metavar="SIZE", help="Merge adjacent chunks below SIZE [default: chunks.target_size]")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Merge each segment's adjacent small chunks into larger files. Offsets and events stay as they
    are; the replaced files are removed by the sweep once sweep.grace has passed (docs/streams.md)."""
    from ..config import chunk_target_size

    out = output(ctx, json_output)
    if target_size is not None:
        chunk_target_size(target_size)  # a bad size is refused before any work, whatever streams there are
    records: list[dict[str, Any]] = []
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            names = [name] if name is not None else [r["name"] for r in streams_remote.list_streams(remote, None)]
            for each in names:
                records.append(streams_remote.compact(remote, each, target_size, not out.json))
    else:
        from .progress import progress_bar

        with open_client(ctx) as client:
            names = [name] if name is not None else [i.name for i in client.list_streams()]
            for each in names:
                with progress_bar(f"compacting {each}", not out.json, unit="groups") as update:
                    records.append(client.stream(each).compact(target_size, progress=update).to_dict())
    out.show({"streams": records}, lambda: emit_compacted(records))


def emit_compacted(records: list[dict[str, Any]]) -> None:
    if not records:
        emit("no streams")
        return
    emit_table(["STREAM", "CHUNKS BEFORE", "CHUNKS AFTER", "MERGED FILES", "MERGED", "SKIPPED"],
               [[r["stream"], r["chunks_before"], r["chunks_after"], r["groups_merged"],
                 format_bytes(r["bytes_merged"]), r["groups_skipped"]] for r in records])


@app.command("truncate")
def truncate(
    ctx: typer.Context,
    name: StreamName,
    cut: Annotated[str, typer.Argument(metavar="CUT", help="'tail', or a stream cut in compact or JSON form")],
    reason: Annotated[str, typer.Option("--reason", help="Recorded in the audit trail")] = "manual truncation",
    json_output: JsonFlag = False,
) -> None:
    """Move the stream's head forward to CUT and delete the data before it (audited)."""
    from ..store.deletion import files_left_json

    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            answer = streams_remote.truncate(remote, name, cut, reason)
        record = {"stream": name, **{k: answer[k] for k in ("old_head", "new_head", "bytes_freed", "chunks_deleted",
                                                              "files_left")}}
    else:
        with open_client(ctx) as client:
            result = client.stream(name).truncate(cut_argument(client, name, cut), reason)
        record = {"stream": name, "old_head": str(result.old_head), "new_head": str(result.new_head),
                  "bytes_freed": result.bytes_freed, "chunks_deleted": result.chunks_deleted,
                  "files_left": files_left_json(result.files_left)}
    output(ctx, json_output).show(record, lambda: emit_truncated(name, record))
    warn_left(record["files_left"])


@app.command("head")
def head(ctx: typer.Context, name: StreamName, json_output: JsonFlag = False) -> None:
    """Print the head cut (the first readable position) in compact form, or JSON with --json."""
    emit_cut(ctx, name, "head", json_output)


@app.command("tail")
def tail(ctx: typer.Context, name: StreamName, json_output: JsonFlag = False) -> None:
    """Print the tail cut (where the next events go) in compact form, or JSON with --json."""
    emit_cut(ctx, name, "tail", json_output)


def emit_cut(ctx: typer.Context, name: str, end: str, json_output: bool) -> None:
    """The stream's `head` or `tail` cut: compact, or its JSON form with key ranges."""
    if is_remote(ctx):
        from . import streams_remote

        with open_remote(ctx) as remote:
            compact, as_json = streams_remote.cut(remote, name, end)
    else:
        with open_client(ctx) as client:
            handle = client.stream(name)
            found = handle.head_cut() if end == "head" else handle.tail_cut()
        compact, as_json = str(found), found.to_json()
    emit(as_json if output(ctx, json_output).json else compact)


# data in and out, and the retention policy, live in their own modules; registered here, after the
# commands above, because `stream --help` lists commands in the order they were added
app.command("write")(stream_data.write)
app.command("read")(stream_data.read)
app.command("policy")(retention.policy)
