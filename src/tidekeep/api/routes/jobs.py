"""Jobs started through the API (catalog runs, impact previews, ...): their state, progress and
result (api/jobs.py). A scoped token sees only the jobs started by a token of its scope."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ...errors import NotFound
from ..jobs import Job
from ..models import Page
from ..paging import DEFAULT_LIMIT, page_of
from ..state import Caller, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["jobs"])


def visible_to(call: Caller, job: Job) -> bool:
    return call.principal.scope is None or job.scope == call.principal.scope


@router.get("/jobs", summary="The caller's visible jobs, newest first (jobs of one millisecond by id)")
def list_jobs(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Page[dict[str, Any]]:
    jobs = sorted((j for j in call.state.jobs.list() if visible_to(call, j)), key=lambda j: (-j.created_ms, j.id))
    items, after = page_of(jobs, lambda j: [-j.created_ms, j.id], cursor, limit)
    return Page[dict[str, Any]](items=[j.to_dict() for j in items], next_cursor=after)


@router.get("/jobs/{job_id}", summary="A job's state, progress and (once finished) result or error")
def get_job(job_id: str, call: Caller = Reader) -> dict[str, Any]:
    job = call.state.jobs.get(job_id)
    if not visible_to(call, job):  # as if absent: a job id says nothing about other scopes
        raise NotFound(f"job {job_id!r} does not exist (jobs live in the server process that started them)")
    return job.to_dict()
