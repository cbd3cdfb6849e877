"""`stream read --follow`: keep reading a stream as events are written, like `tail -f` or
`kafka-console-consumer`.

Each round reads from where the last one stopped up to the tail as it is at the start of the round
(a cut), then the next round starts at that cut, so no event is read twice or skipped, across
scaling too (cuts carry the segment successors). When a round finds nothing, the loop waits the poll
interval and asks for the tail again. It stops after `limit` events, after `idle_timeout_ms`
without a new event, or once the stream is sealed and read to its end; Ctrl-C is handled by the
command (docs/cli.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..client import Client
    from ..streams.cuts import StreamCut
    from ..streams.reader import Event


@dataclass(frozen=True)
class FollowOptions:
    poll_interval_s: float
    idle_timeout_ms: int | None = None  # stop when nothing new arrives for this long; None: never
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


def follow(client: Client, stream: str, start: StreamCut | str | None, options: FollowOptions,
           end_of_round: Callable[[], None] = lambda: None) -> Iterator[Event]:
    """Events from `start` (default: the head) on, for as long as the caller keeps iterating;
    `end_of_round` runs after each round that yielded events (the command flushes its output)."""
    from ..streams.repository import StreamStatus

    position: StreamCut | str | None = start
    last_event_at = options.monotonic()
    while True:
        sealed = client.stream(stream).state().info.state is StreamStatus.SEALED  # before the tail: no event after it
        tail = client.stream(stream).tail_cut()
        found = False
        for event in client.stream(stream).read(position, tail):
            found = True
            yield event
        position = tail
        if found:
            end_of_round()
            last_event_at = options.monotonic()
            continue  # more may have arrived while this round was read
        if sealed:
            return
        if options.idle_timeout_ms is not None and \
                (options.monotonic() - last_event_at) * 1000 >= options.idle_timeout_ms:
            return
        options.sleep(options.poll_interval_s)
