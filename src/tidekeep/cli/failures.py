"""What the CLI reports for an exception that is not a TidekeepError (docs/cli.md, "Errors and exit
codes"): one line and an exit code from the documented table, never a traceback.

The operating system's refusals are the user's environment, not a defect, and get the exit code of
their class with the path they name: a path that is not writable says "read-only". So are a remote
store's (an object store's errors reach us as OSErrors without errno). Anything else is
an internal error (exit 70) whose line says how to see the traceback.
"""

from __future__ import annotations

import errno

from ..errors import (
    INTERNAL_ERROR_EXIT,
    EnvironmentFailure,
    InvalidInput,
    NotFound,
    ReadOnlyWorkspace,
    TidekeepError,
)

_READ_ONLY = {errno.EROFS, errno.EACCES, errno.EPERM}


def environment_error(exc: BaseException) -> TidekeepError | None:
    """The typed error for an operating-system failure, or None when `exc` is not one."""
    if isinstance(exc, MemoryError):
        return EnvironmentFailure("out of memory")
    if not isinstance(exc, OSError):
        return None
    if exc.errno is None:
        # pyarrow reports a remote store's refusal (S3, GCS, HDFS: a missing bucket, access denied,
        # the endpoint unreachable) as an OSError without errno, its text naming the store's error
        return EnvironmentFailure(f"storage failure: {_first_line(exc)}")
    path = _path_of(exc)
    reason = exc.strerror or errno.errorcode.get(exc.errno, str(exc.errno))
    # pyarrow's errors carry no filename: their text names the path, so it is the whole message
    detail = f"{path} ({reason})" if path else reason
    if exc.errno in _READ_ONLY:
        return ReadOnlyWorkspace(f"read-only or not permitted: {detail}", path or "")
    if exc.errno == errno.ENOENT:
        return NotFound(f"no such file or directory: {detail}")
    if exc.errno == errno.ENOTDIR:
        return NotFound(f"not a directory: {detail} (a part of the path is a file)")
    if exc.errno == errno.EISDIR:
        return InvalidInput(f"is a directory, expected a file: {detail}")
    return EnvironmentFailure(f"{reason}: {path}" if path else reason)


def internal_error_message(exc: BaseException) -> str:
    """The one line for a defect: what was raised, and how to see where."""
    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:200] + "…"
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return f"internal error ({what}); run again with --debug to see the traceback"


def describe(exc: BaseException) -> tuple[str, int]:
    """The message and exit code for any exception that escaped a command."""
    typed = environment_error(exc)
    if typed is not None:
        return str(typed), typed.exit_code
    return internal_error_message(exc), INTERNAL_ERROR_EXIT


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "…" if len(text) > 300 else text) or type(exc).__name__


def _path_of(exc: OSError) -> str | None:
    names = [str(name) for name in (exc.filename, exc.filename2) if name is not None]
    return " -> ".join(names) if names else None
