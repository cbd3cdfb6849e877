"""`tidekeep retention subscribers STREAM`: the reader groups that hold a stream back
(consumption-based retention), with their acknowledged cuts, the age of each and the bytes each has
not consumed yet. A subscriber that has acknowledged nothing holds the stream at its start cut.
A command of the retention app (retention.py)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ..streams.documents import subscriber_json
from .context import is_remote, open_client, open_remote, output
from .options import JsonFlag
from .output import emit, emit_table, size_cell


def age_text(ms: int | None) -> str:
    """Display only: the largest two units, e.g. "3m 12s"; "-" for nothing acknowledged."""
    if ms is None:
        return "-"
    parts = []
    rest = ms
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    return " ".join(parts[:2]) if parts else f"{ms}ms"


def emit_subscribers(stream: str, found: list[dict[str, Any]]) -> None:
    """`found`: `subscriber_json` records."""
    if not found:
        emit(f"{stream} has no subscribers: size/time retention applies unchanged")
        return
    emit_table(["READER GROUP", "TYPE", "GEN", "ACKNOWLEDGED CUT", "AGE", "UNCONSUMED"],
               [[s["reader_group"], s["retention_type"], s["generation"],
                 s["acknowledged"] or f"- (holds at its start {s['start']})",
                 age_text(s["age_ms"]), size_cell(s["unconsumed_bytes"])] for s in found])


def subscribers(
    ctx: typer.Context,
    stream: Annotated[str, typer.Argument(metavar="SCOPE/STREAM", help="The stream")],
    json_output: JsonFlag = False,
) -> None:
    """Subscriber reader groups of a stream: acknowledged cut, its age, unconsumed bytes."""
    if is_remote(ctx):
        from .streams_remote import stream_path

        with open_remote(ctx) as remote:
            found = remote.items(f"{stream_path(stream)}/subscribers")
    else:
        with open_client(ctx) as client:
            now = client.clock.now_ms()
            found = [subscriber_json(s, now) for s in client.stream(stream).subscribers()]
    output(ctx, json_output).show(found, lambda: emit_subscribers(stream, found))
