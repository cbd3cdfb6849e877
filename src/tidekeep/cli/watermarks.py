"""`tidekeep watermark list|writers|compute|note`: a stream's watermarks and the writer marks behind them.

Times are the writers' own (application-defined milliseconds, shown as given); `noted` and `created`
are wall-clock times of the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..streams.documents import computed_document, writer_json, writer_state
from ..times import parse_time_ms
from .context import open_client, output
from .options import JsonFlag, ScopedStream, limit_option
from .output import emit, emit_table, iso_utc

if TYPE_CHECKING:
    from ..streams.watermark_store import WriterStatus
    from ..streams.watermarks import Watermark

StreamArg = ScopedStream

app = typer.Typer(help="Watermarks: writers' time marks and the watermarks readers' time windows come from.",
                  no_args_is_help=True)


def cut_text(cut: dict[int, int]) -> str:
    from ..streams.model import segment_name

    return ",".join(f"{segment_name(s)}={o}" for s, o in sorted(cut.items())) or "-"


def watermark_rows(marks: list[Watermark]) -> list[list[Any]]:
    return [[m.revision, m.lower_time_ms, m.upper_time_ms, cut_text(m.cut)] for m in marks]


def emit_watermarks(stream: str, marks: list[Watermark]) -> None:
    if not marks:
        emit(f"{stream} has no watermarks yet (no writer has noted time, or `tidekeep serve` has not run)")
    else:
        emit_table(["REVISION", "LOWER", "UPPER", "CUT"], watermark_rows(marks))


def emit_writers(stream: str, statuses: list[WriterStatus]) -> None:
    if not statuses:
        emit(f"{stream} has no writer marks (closed writers are removed)")
        return
    emit_table(["WRITER", "TIME", "POSITION", "SOURCE", "NOTED", "ACTIVE", "STATE"],
               [[s.mark.writer_id, s.mark.time_ms, cut_text(s.mark.positions), s.source,
                 iso_utc(s.mark.noted_ms), "yes" if s.active else "no", writer_state(s)] for s in statuses])


def computed_text(stream: str, mark: Watermark | None, statuses: list[WriterStatus]) -> str:
    if mark is not None:
        return (f"appended watermark {mark.revision} of {stream}: lower {mark.lower_time_ms}, "
                f"upper {mark.upper_time_ms}, cut {cut_text(mark.cut)}")
    return f"no new watermark for {stream}: {why_none(statuses)}"


@app.command("list")
def list_watermarks(
    ctx: typer.Context,
    stream: StreamArg,
    limit: Annotated[int, limit_option("Show the newest N", low=1)] = 20,
    all_: Annotated[bool, typer.Option("--all", help="Show every watermark, oldest first")] = False,
    json_output: JsonFlag = False,
) -> None:
    """A stream's watermarks, oldest first: revision, lower and upper time, cut.

    Up to each watermark's cut, every active writer had reached at least its lower time."""
    with open_client(ctx) as client:
        marks = client.stream(stream).watermarks.list() if all_ else client.stream(stream).watermarks.tail(limit)
    output(ctx, json_output).show([m.to_dict() for m in marks], lambda: emit_watermarks(stream, marks))


@app.command("writers")
def writers(ctx: typer.Context, stream: StreamArg, json_output: JsonFlag = False) -> None:
    """Each writer's last mark and whether it holds watermarks back.

    States: participating (noted past the last watermark), lagging (holds watermarks back until the
    stream's timestamp aggregation timeout) or inactive (timed out; rejoins on its next note)."""
    with open_client(ctx) as client:
        statuses = client.stream(stream).watermarks.writers()
    output(ctx, json_output).show([writer_json(s) for s in statuses], lambda: emit_writers(stream, statuses))


@app.command("compute")
def compute(ctx: typer.Context, stream: StreamArg, json_output: JsonFlag = False) -> None:
    """Compute and append the stream's next watermark now.

    `tidekeep serve` does this every watermark.frequency. The append is conditional: nothing is
    appended if another process appended first."""
    with open_client(ctx) as client:
        mark = client.stream(stream).watermarks.compute(owner="cli")
        statuses = [] if mark is not None else client.stream(stream).watermarks.writers()
    output(ctx, json_output).show(computed_document(mark, statuses), computed_text(stream, mark, statuses))


@app.command("note")
def note(
    ctx: typer.Context,
    stream: StreamArg,
    time: Annotated[str, typer.Argument(
        metavar="TIME", help="The writer's time: epoch milliseconds or ISO-8601 (no zone: UTC)")],
    writer: Annotated[str, typer.Option("--writer", metavar="ID", help="The writer id")],
    position: Annotated[str | None, typer.Option(
        "--position", metavar="CUT", help="The writer's position, e.g. 's/x:0.0=120,0.1=0' "
        "[default: after the writer's last committed event]")] = None,
    json_output: JsonFlag = False,
) -> None:
    """Record a writer mark (for writers outside this client).

    E.g. a batch job that has finished a time range. Time and offsets never go backwards for one
    writer."""
    with open_client(ctx) as client:
        mark = client.stream(stream).watermarks.note(writer, parse_time_ms(time, "time"), position)
    output(ctx, json_output).show(mark.to_dict(),
                                  f"noted {writer} at time {mark.time_ms}, position {cut_text(mark.positions)}")


def why_none(statuses: list[WriterStatus]) -> str:
    if not statuses:
        return "no writer has a mark"
    lagging = [s.mark.writer_id for s in statuses if s.active and not s.participating]
    if lagging:
        return f"waiting for {', '.join(lagging)} to note past the last watermark or time out"
    if not any(s.active for s in statuses):
        return "no writer counts for time (every one timed out or closed)"
    # every active writer noted past the last watermark, so the lower time did advance: the conditional
    # append found a newer watermark than the one this computation started from
    return "another process appended a watermark first"
