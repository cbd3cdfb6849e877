"""Progress bars for long CLI work (import, generate, the catalog job and impact, purge, archive
ingest, search and gc): done / total in the operation's unit — records, bytes, files, archives.

The library reports (done, total) in that unit: counted work, or for Spark work the fraction of the
job's stages done (spark/progress.py) times a total known up front (candidate records, input bytes).
A bar shows only on a terminal stderr and never with --json, so stdout stays clean for pipes.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator

from ..units import human_size

BYTES = "bytes"


def progress_text(done: int, total: int | None, unit: str) -> str:
    """`1,200 / 5,000 records`, `12.0 MiB / 1.5 GiB` for bytes; `1,200 records` while the total is unknown."""
    def amount(n: int) -> str:
        return human_size(n) if unit == BYTES else f"{n:,}"

    suffix = "" if unit == BYTES else f" {unit}"
    if total is None:
        return f"{amount(done)}{suffix}"
    return f"{amount(done)} / {amount(total)}{suffix}"


@contextlib.contextmanager
def progress_bar(label: str, enabled: bool, unit: str = "records") -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal (and not --json); yields the (done, total)
    callback, or None when no bar is shown."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn(label), BarColumn(), TextColumn("{task.fields[amount]}"), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None, amount="")

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total, amount=progress_text(done, total, unit))

        yield update
