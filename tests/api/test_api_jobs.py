"""Jobs through real HTTP: a job started by a route (a catalog dry run) is listed and polled to
completion; progress is visible while a job runs; a failed job carries its problem; scoped tokens
see only their scope's jobs."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
from tests.helpers.api_server import LiveApi

import tidekeep as tk
from helpers.catalog_job import NOW
from tidekeep.api.jobs import ProgressCallback
from tidekeep.errors import NotFound

DAY = 86_400_000


def poll(http: httpx.Client, job_id: str, until: Any) -> dict[str, Any]:
    """GET the job until `until(job)` holds (a bounded number of polls)."""
    for _ in range(1200):
        job = http.get(f"/api/v1/jobs/{job_id}").json()
        if until(job):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} never reached the awaited state: {job}")


def test_a_route_started_job_is_listed_and_polled_until_it_succeeds(api: LiveApi, client: tk.Client) -> None:
    client.catalog.add([{"feed": "A", "type": "Events", "create_time": NOW - d * DAY} for d in range(1, 4)])
    client.catalog.set_rules({"rules": [{"number": 1, "name": "a", "expression": "all", "age": "1 days"}]})
    ops = api.as_role("operator")
    job_id = ops.post("/api/v1/catalog/runs", json={"dry_run": True, "now": NOW}).json()["job"]
    viewer = api.as_role("viewer")
    job = poll(viewer, job_id, lambda j: j["state"] in ("succeeded", "failed"))
    assert job["state"] == "succeeded", job
    assert job["result"] == client.catalog.run_entry(job["result"]["run_id"])["report"]
    candidates = sum(p["candidates"] for p in job["result"]["periods"])  # what the run's progress counts
    assert job["progress"]["done"] == job["progress"]["total"] == candidates > 0
    assert job["started_ms"] is not None and job["finished_ms"] >= job["started_ms"] >= job["created_ms"]
    assert viewer.get("/api/v1/jobs").json() == {"items": [job], "next_cursor": None}


def test_progress_moves_while_the_job_runs(api: LiveApi) -> None:
    steps = [threading.Event() for _ in range(2)]

    def work(progress: ProgressCallback) -> dict[str, int]:
        progress(1, 3, "first")
        steps[0].wait(30)
        progress(2, 3, "second")
        steps[1].wait(30)
        progress(3, 3, "done")
        return {"answer": 42}

    job = api.server.state.jobs.submit("test", "someone", work)
    viewer = api.as_role("viewer")
    seen = poll(viewer, job.id, lambda j: j["progress"]["done"] == 1)
    assert seen["state"] == "running" and seen["progress"] == {"done": 1, "total": 3, "message": "first"}
    steps[0].set()
    assert poll(viewer, job.id, lambda j: j["progress"]["done"] == 2)["state"] == "running"
    steps[1].set()
    final = poll(viewer, job.id, lambda j: j["state"] == "succeeded")
    assert final["result"] == {"answer": 42} and final["progress"]["message"] == "done" and final["error"] is None


def test_a_failed_job_carries_its_problem(api: LiveApi) -> None:
    def work(progress: ProgressCallback) -> None:
        raise NotFound("the thing is gone")

    job = api.server.state.jobs.submit("test", "someone", work)
    failed = poll(api.as_role("viewer"), job.id, lambda j: j["state"] == "failed")
    assert failed["error"]["error"] == "NotFound" and failed["error"]["status"] == 404
    assert failed["error"]["detail"] == "the thing is gone" and failed["result"] is None


def test_unknown_jobs_are_404_and_scoped_tokens_see_their_scopes_jobs_only(api: LiveApi) -> None:
    jobs = api.server.state.jobs
    mine = jobs.submit("test", "op-mine", lambda progress: "mine", scope="mine")
    theirs = jobs.submit("test", "op-other", lambda progress: "other", scope="other")
    unscoped = jobs.submit("test", "op", lambda progress: "all")
    viewer = api.as_role("viewer")
    for job in (mine, theirs, unscoped):
        poll(viewer, job.id, lambda j: j["state"] == "succeeded")
    newest_first = [j.id for j in sorted(jobs.list(), key=lambda j: (-j.created_ms, j.id))]  # ties: by id
    assert [j["id"] for j in viewer.get("/api/v1/jobs").json()["items"]] == newest_first
    scoped = api.as_role("viewer", scope="mine")
    assert [j["id"] for j in scoped.get("/api/v1/jobs").json()["items"]] == [mine.id]
    assert scoped.get(f"/api/v1/jobs/{mine.id}").json()["result"] == "mine"
    for job in (theirs, unscoped):
        hidden = scoped.get(f"/api/v1/jobs/{job.id}")
        assert hidden.status_code == 404 and hidden.json()["error"] == "NotFound"
    missing = viewer.get("/api/v1/jobs/no-such-job")
    assert missing.status_code == 404 and missing.headers["content-type"] == "application/problem+json"
    first = viewer.get("/api/v1/jobs", params={"limit": 2}).json()
    rest = viewer.get("/api/v1/jobs", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [j["id"] for j in first["items"] + rest["items"]] == newest_first
    assert viewer.get("/api/v1/jobs", params={"cursor": "bad!"}).status_code == 422
    assert api.http().get("/api/v1/jobs").status_code == 401
