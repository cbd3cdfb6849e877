"""`tidekeep stream write` and `tidekeep stream read`: events in from lines, events out as lines.

`write` reads its whole input and checks every line (key field present, size limit) before it
writes anything, so bad input leaves the stream unchanged. Standard input is spooled to memory
(and to a temporary file beyond 64 MiB) for that; a file is simply read twice.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING, Annotated, Any

import typer

from ..errors import InvalidInput, NotFound, StreamSealed
from ..units import parse_duration_ms
from .context import open_client, output
from .events import KeyExtractor, event_record, event_text, field_key, json_key, parse_lines
from .follow import FollowOptions, follow
from .options import StreamName, int_option
from .output import Output

if TYPE_CHECKING:
    from ..client import Client
    from ..streams.cuts import StreamCut

SPOOL_IN_MEMORY_BYTES = 64 * 1024 * 1024


def key_extractor(key_field: int | None, key_json: str | None, delimiter: str | None) -> KeyExtractor | None:
    if key_field is not None and key_json is not None:
        raise InvalidInput("give either --key-field or --key-json, not both")
    if delimiter is not None and key_field is None:
        raise InvalidInput("--delimiter only applies with --key-field")
    if key_field is not None:
        return field_key(key_field, "," if delimiter is None else delimiter)
    if key_json is not None:
        return json_key(key_json)
    return None


@contextlib.contextmanager
def open_input(source: str | None) -> Iterator[IO[bytes]]:
    """A seekable binary input: the named file, or standard input spooled."""
    if source is None or source == "-":
        if sys.stdin.isatty():
            raise InvalidInput("no input: give a FILE, or pipe lines into standard input")
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES) as spool:
            shutil.copyfileobj(sys.stdin.buffer, spool)
            spool.seek(0)
            yield spool  # type: ignore[misc]
        return
    try:
        handle = open(source, "rb")  # noqa: SIM115 - closed by the with below
    except FileNotFoundError:
        raise NotFound(f"input file {source!r} does not exist") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read input file {source!r}: {exc.strerror}") from None
    with handle:
        yield handle


def _progress(total: int, enabled: bool):  # type: ignore[no-untyped-def]
    if not enabled:
        return contextlib.nullcontext(None)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(TextColumn("writing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                    console=Console(stderr=True), transient=True)


def cut_argument(client: Client, stream: str, text: str) -> StreamCut | str:
    """A cut given on the command line: "head", "tail", or a cut in compact or JSON form (the
    client validates it against the stream)."""
    keyword = text.strip().lower()
    if keyword == "head":
        return client.stream(stream).head_cut()
    if keyword == "tail":
        return client.stream(stream).tail_cut()
    return text


def write(
    ctx: typer.Context,
    name: StreamName,
    source: Annotated[str | None, typer.Argument(
        metavar="[FILE|-]", help="Lines to write, one event per line [default: standard input]")] = None,
    key_field: Annotated[int | None, int_option(
        "--key-field", help="Routing key = field N (from 1) of each line, split by --delimiter")] = None,
    key_json: Annotated[str | None, typer.Option(
        "--key-json", metavar="FIELD", help="Routing key = this top-level field of each JSON-object line")] = None,
    delimiter: Annotated[str | None, typer.Option(
        "--delimiter", metavar="TEXT", help="Field delimiter for --key-field [default: ',']")] = None,
    writer_id: Annotated[str | None, typer.Option(
        "--writer-id", metavar="ID", help="Writer id [default: a fresh cli-<random> id]")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print a JSON summary")] = False,
) -> None:
    """Append one event per input line; events without a key field go to a random segment."""
    from ..streams.repository import StreamStatus

    key_of = key_extractor(key_field, key_json, delimiter)
    writer_name = writer_id if writer_id is not None else f"cli-{uuid.uuid4().hex[:12]}"
    out = output(ctx, json_output)
    with open_client(ctx) as client:
        if client.stream(name).state().info.state is StreamStatus.SEALED:
            raise StreamSealed(f"stream {name!r} is sealed and takes no more writes")
        with open_input(source) as stream_in:
            count = payload_bytes = 0
            for event in parse_lines(stream_in, key_of):  # check everything before writing anything
                count += 1
                payload_bytes += len(event.payload)
            stream_in.seek(0)
            show_bar = source not in (None, "-") and not out.json and sys.stderr.isatty()
            write_lines(client, name, writer_name, stream_in, key_of, count, show_bar)
    out.show({"stream": name, "events": count, "payload_bytes": payload_bytes,
              "logical_bytes": payload_bytes + 8 * count, "writer_id": writer_name},
             f"wrote {count} events to {name}")


def write_lines(client: Client, name: str, writer_name: str, stream_in: IO[bytes], key_of: KeyExtractor | None,
                count: int, show_bar: bool) -> None:
    """Write the `count` (checked) lines of `stream_in` as events; a bar, if shown, moves every 1000."""
    # opened only now: opening takes the writer id's next epoch, a change bad input must not make;
    # the CLI knows where its input ends, so it flushes by size and at the end: no linger timer
    writer = client.stream(name).writer(writer_name, linger=0)
    with writer, _progress(count, show_bar) as progress:
        task = None if progress is None else progress.add_task("write", total=count)
        for done, event in enumerate(parse_lines(stream_in, key_of), start=1):
            writer.write(event.payload, event.routing_key)
            if progress is not None and done % 1000 == 0:
                progress.update(task, completed=done)


def read(
    ctx: typer.Context,
    name: StreamName,
    from_cut: Annotated[str | None, typer.Option(
        "--from", metavar="CUT", help="Start cut: 'head', 'tail', compact or JSON form [default: head]")] = None,
    to_cut: Annotated[str | None, typer.Option(
        "--to", metavar="CUT", help="End cut (exclusive) [default: the tail now]")] = None,
    limit: Annotated[int | None, int_option("--limit", help="Stop after N events")] = None,
    json_output: Annotated[bool, typer.Option(
        "--json", help="One JSON object per event: payload, routing key, segment, offset, ...")] = False,
    follow_: Annotated[bool, typer.Option(
        "--follow", "-f", help="Keep reading new events as they are written, until Ctrl-C, --limit, "
        "--idle-timeout or the stream is sealed")] = False,
    poll_interval: Annotated[str, typer.Option(
        "--poll-interval", metavar="DURATION", help="With --follow: how often to look for new events")] = "500ms",
    idle_timeout: Annotated[str | None, typer.Option(
        "--idle-timeout", metavar="DURATION",
        help="With --follow: stop (exit 0) when no new event arrives for this long [default: never]")] = None,
) -> None:
    """Print events between two cuts, per routing key in write order; payloads as UTF-8 text."""
    if limit is not None and limit < 0:
        raise InvalidInput(f"invalid --limit {limit}: must be 0 or more")
    options = follow_options(follow_, to_cut, poll_interval, idle_timeout)
    out = sys.stdout.buffer
    with open_client(ctx) as client:
        start = None if from_cut is None else cut_argument(client, name, from_cut)
        end = None if to_cut is None else cut_argument(client, name, to_cut)
        events = (client.stream(name).read(start, end) if options is None
                  else follow(client, name, start, options, end_of_round=out.flush))
        try:
            print_events(events, limit, output(ctx, json_output))
        except BrokenPipeError:
            # the reader went away (`| head`): stop quietly, like other Unix filters
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except KeyboardInterrupt:
            # Ctrl-C is how a follow ends: what was read is printed first, then the CLI's one
            # "interrupted" line and exit code 130, as for any command (docs/cli.md)
            if options is None:
                raise
            with contextlib.suppress(BrokenPipeError):
                out.flush()
            raise typer.Exit(130) from None


def print_events(events: Any, limit: int | None, shown: Output) -> None:
    """Each event as a line (its payload, or a JSON object with --json), up to `limit`, then flush."""
    out = sys.stdout.buffer
    # the limit is checked after each event, not before the next: a follow must not wait for an
    # event it will not print
    for printed, event in enumerate(events if limit != 0 else (), start=1):
        if shown.json:
            shown.line(event_record(event), "")
        else:
            out.write(event_text(event))
        if limit is not None and printed >= limit:
            break
    out.flush()


def follow_options(enabled: bool, to_cut: str | None, poll_interval: str,
                   idle_timeout: str | None) -> FollowOptions | None:
    """The --follow settings (None without --follow); the follow-only flags are checked either way."""
    poll_ms = _duration("--poll-interval", poll_interval)
    if poll_ms <= 0:
        raise InvalidInput(f"invalid --poll-interval {poll_interval!r}: must be greater than zero")
    idle_ms = None if idle_timeout is None else _duration("--idle-timeout", idle_timeout)
    if not enabled:
        if idle_timeout is not None:
            raise InvalidInput("--idle-timeout only applies with --follow")
        return None
    if to_cut is not None:
        raise InvalidInput("give --to or --follow, not both: --follow reads on past the tail")
    return FollowOptions(poll_interval_s=poll_ms / 1000, idle_timeout_ms=idle_ms)


def _duration(flag: str, text: str) -> int:
    try:
        return parse_duration_ms(text)
    except InvalidInput as exc:
        raise InvalidInput(f"bad {flag}: {exc}") from None
