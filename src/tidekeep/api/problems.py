"""Errors as RFC 9457 problem documents: each typed error has one HTTP status (docs/api.md).

The document carries the error's class name (`error`), so a client, the CLI's `--server` mode
among them, raises the same typed error the operation raised in the server."""

from __future__ import annotations

from typing import Any

from .. import errors

PROBLEM_TYPE = "application/problem+json"

# the first class in this order that the error is an instance of decides (subclasses before bases)
_STATUS_OF: tuple[tuple[type[errors.TidekeepError], int], ...] = (
    (errors.NotAuthenticated, 401),
    (errors.PermissionDenied, 403),
    (errors.NotFound, 404),
    (errors.StaleVersion, 412),
    (errors.HoldActive, 423),
    (errors.TruncatedData, 410),
    (errors.AlreadyExists, 409),
    (errors.ConflictError, 409),
    (errors.StreamSealed, 409),
    (errors.WriterFenced, 409),
    (errors.InvalidInput, 422),
    (errors.StoreUnavailable, 503),
    (errors.ReadOnlyWorkspace, 503),
    (errors.EnvironmentFailure, 503),
    (errors.SchemaError, 503),
    (errors.WorkspaceMismatch, 503),
    (errors.AuditTrailBroken, 500),
)


def status_of(error: errors.TidekeepError) -> int:
    for cls, status in _STATUS_OF:
        if isinstance(error, cls):
            return status
    return 500


def problem(status: int, error: str, detail: str, **extra: Any) -> dict[str, Any]:
    """A problem document: `type` names the error class, `title` too, `detail` the one-line message."""
    return {"type": f"urn:tidekeep:error:{error}", "title": error, "status": status, "detail": detail,
            "error": error, **extra}


def problem_of(error: errors.TidekeepError) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if isinstance(error, errors.HoldActive):
        extra = {"hold_id": error.hold_id}
    elif isinstance(error, errors.StaleVersion):
        extra = {"current_version": error.current}
    return problem(status_of(error), type(error).__name__, str(error), **extra)


def error_from_problem(document: Any, status: int) -> errors.TidekeepError:
    """The typed error a problem document names (for the CLI's `--server` mode); a TidekeepError
    carrying the detail when the name is not one of tidekeep's."""
    if not isinstance(document, dict):
        return errors.TidekeepError(f"HTTP {status} from the server")
    name = str(document.get("error", ""))
    detail = str(document.get("detail") or document.get("title") or f"HTTP {status}")
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.TidekeepError):
        if cls is errors.HoldActive:
            return errors.HoldActive(detail, int(document.get("hold_id") or 0), detail)
        if cls is errors.StaleVersion:
            return errors.StaleVersion(detail, str(document.get("current_version", "")))
        try:
            return cls(detail)
        except TypeError:  # a class whose constructor needs more than the message
            pass
    fallback = errors.InvalidInput if 400 <= status < 500 else errors.TidekeepError
    return fallback(detail)
