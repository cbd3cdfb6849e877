"""What a file deletion could not do, and how it is told.

Deleting data files always comes after the metadata commit that made them unreferenced (see
docs/streams.md, "Manual truncation"). When a file cannot be deleted then — a read-only
filesystem, a permission problem, any other OSError — the operation has still happened: it
reports its committed result plus the files it left, and a later pass (the orphan sweep for chunk
files, the next collector run for archives) deletes them once deletion works again. A missing file
is not a failure: gone is gone.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

FILES_NAMED = 3  # paths a one-line message names; the count is always exact
FILES_LOGGED = 20  # paths a log record's structured fields carry
LEFT_FOR_SWEEP = "the sweep"
IN_RESULT = "files_left_in_result"  # the log record attribute warn_files_left sets


class FileLeft(NamedTuple):
    """A file that could not be deleted, and why (one line)."""

    path: str  # relative to the storage root
    reason: str


@dataclass(frozen=True)
class DeleteOutcome:
    """What one deletion call did: files removed (a missing file counts as neither) and files left."""

    deleted: int = 0
    failed: tuple[FileLeft, ...] = ()

    def __add__(self, other: DeleteOutcome) -> DeleteOutcome:
        """Both calls' work; a file both failed to delete (a file, then its directory) is named once."""
        named = {f.path for f in self.failed}
        return DeleteOutcome(self.deleted + other.deleted,
                             self.failed + tuple(f for f in other.failed if f.path not in named))


def failure_reason(exc: BaseException) -> str:
    """One line for why a deletion failed: the OS's words for the errno where there is one
    ("PermissionError: Read-only file system"), else the first line of the message."""
    code = getattr(exc, "errno", None)
    if isinstance(code, int) and code in errno.errorcode:
        return f"{type(exc).__name__}: {os.strerror(code)}"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def describe_files_left(files: Sequence[FileLeft], left_for: str = LEFT_FOR_SWEEP) -> str:
    """"N file(s) could not be deleted and are left for the sweep: a, b, c and 4 more (reason)":
    the first few paths and the first failure's reason (with how many other reasons there were)."""
    named = ", ".join(f.path for f in files[:FILES_NAMED])
    if len(files) > FILES_NAMED:
        named += f" and {len(files) - FILES_NAMED} more"
    reasons = list(dict.fromkeys(f.reason for f in files))
    why = reasons[0] if reasons else "unknown reason"
    if len(reasons) > 1:
        why += f"; {len(reasons) - 1} other reason(s)"
    return f"{len(files)} file(s) could not be deleted and are left for {left_for}: {named} ({why})"


def files_left_json(files: Sequence[FileLeft]) -> list[dict[str, str]]:
    """The machine form (`--json`, reports): [{"path": ..., "reason": ...}, ...]."""
    return [{"path": f.path, "reason": f.reason} for f in files]


def warn_files_left(logger: logging.Logger, operation: str, files: Sequence[FileLeft],
                    left_for: str = LEFT_FOR_SWEEP, in_result: bool = True) -> None:
    """One WARNING per operation that committed but left files, naming a bounded list of them
    (the paths are structured fields too, for the service's JSON logs). `in_result`: the
    operation's result names these files as well, so a CLI command, which prints that result's own
    `warning:` line, drops this record (cli/context.py) and the user reads it once. Clean-ups whose
    result does not carry the files (a writer's own uncommitted files) pass False."""
    if not files:
        return
    fields: dict[str, Any] = {"files_left": [f.path for f in files[:FILES_LOGGED]], "files_left_count": len(files)}
    logger.warning("%s: %s", operation, describe_files_left(files, left_for),
                   extra={"fields": fields, IN_RESULT: in_result})


def in_result(record: logging.LogRecord) -> bool:
    """Whether a log record is a files-left warning whose operation's result names the files."""
    return bool(getattr(record, IN_RESULT, False))


__all__ = ["DeleteOutcome", "FileLeft", "describe_files_left", "failure_reason", "files_left_json", "in_result",
           "warn_files_left"]
