"""`tidekeep retention subscribers STREAM`: the reader groups that hold a stream back
(consumption-based retention), with their acknowledged cuts, the age of each and the bytes each has
not consumed yet. A subscriber that has acknowledged nothing holds the stream at its start cut.
A command of the retention app (retention.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..streams.documents import subscriber_age_ms, subscriber_json
from .context import open_client, output
from .options import JsonFlag
from .output import emit, emit_table, size_cell

if TYPE_CHECKING:
    from ..streams.subscriber_store import Subscriber


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


def emit_subscribers(stream: str, found: list[Subscriber], now: int) -> None:
    if not found:
        emit(f"{stream} has no subscribers: size/time retention applies unchanged")
        return
    emit_table(["READER GROUP", "TYPE", "GEN", "ACKNOWLEDGED CUT", "AGE", "UNCONSUMED"],
               [[s.reader_group, s.retention_type, s.generation,
                 s.to_dict()["acknowledged"] or f"- (holds at its start {s.to_dict()['start']})",
                 age_text(subscriber_age_ms(s, now)), size_cell(s.unconsumed_bytes)] for s in found])


def subscribers(
    ctx: typer.Context,
    stream: Annotated[str, typer.Argument(metavar="SCOPE/STREAM", help="The stream")],
    json_output: JsonFlag = False,
) -> None:
    """Subscriber reader groups of a stream: acknowledged cut, its age, unconsumed bytes."""
    with open_client(ctx) as client:
        found = client.stream(stream).subscribers()
        now = client.clock.now_ms()
    output(ctx, json_output).show([subscriber_json(s, now) for s in found],
                                  lambda: emit_subscribers(stream, found, now))
