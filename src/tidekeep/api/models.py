"""Request and response bodies shared by several routers (pydantic models: the OpenAPI schema)."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list; pass `next_cursor` as `cursor` for the next (None: this is the last)."""

    items: list[T]
    next_cursor: str | None = None


class PolicyBody(BaseModel):
    """A size or time retention policy: keep at least `min` and at most `max` (None: no maximum).
    Sizes like "20GB" or bytes; durations like "7d" or milliseconds."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["size", "time"]
    min: str | int
    max: str | int | None = None


class Accepted(BaseModel):
    """A job was started: poll `GET /api/v1/jobs/{id}` (its URL is `location`)."""

    job: str
    location: str


def accepted(response: Any, job_id: str) -> Accepted:
    """A 202 answer for a started job, with its Location header (`response`: the route's Response)."""
    location = f"/api/v1/jobs/{job_id}"
    response.headers["Location"] = location
    return Accepted(job=job_id, location=location)


class Deleted(BaseModel):
    deleted: bool = True
    details: dict[str, Any] = Field(default_factory=dict)


class Problem(BaseModel):
    """An error (RFC 9457): `error` is the typed error's class name, `detail` its one-line message."""

    type: str
    title: str
    status: int
    detail: str
    error: str
    hold_id: int | None = None  # HoldActive: the hold that refused the deletion
    current_version: str | None = None  # StaleVersion: the version the thing has now
    errors: list[dict[str, Any]] | None = None  # request validation: every field that was wrong


_PROBLEM_STATUSES = {
    401: "no token, or an invalid or revoked one",
    403: "the token's role or scope does not allow this",
    404: "no such thing",
    409: "a conflict: it exists already, it is sealed, another run is in progress, or a concurrent change won",
    410: "the position lies before the stream's head: the data was truncated",
    412: "If-Match names a version that is no longer current: nothing was changed",
    422: "bad input: nothing was changed",
    423: "a legal hold protects the target",
    503: "the metadata store or the storage is unavailable",
}
# every route may answer these, as application/problem+json (app.py mounts each router with them)
PROBLEM_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"description": text, "model": Problem, "content": {"application/problem+json": {}}}
    for status, text in _PROBLEM_STATUSES.items()
}
