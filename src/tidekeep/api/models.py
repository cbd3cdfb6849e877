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


class Deleted(BaseModel):
    deleted: bool = True
    details: dict[str, Any] = Field(default_factory=dict)
