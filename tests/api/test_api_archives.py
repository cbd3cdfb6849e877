"""The archives resource through real HTTP: ingest, datasets and archives, search jobs and their
paged results, cancel, the garbage collectors (preview and run), bad input, roles and scoped tokens.
Time is placed with a ManualClock, so archives expire without waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.helpers.archives import make_archive

import tidekeep as tk
from tidekeep.api.jobs import Job
from tidekeep.api.paging import encode_cursor
from tidekeep.archives.model import JobState
from tidekeep.archives.store import SearchJobStore

PROBLEM = "application/problem+json"
MIN = 60_000
T0 = 1_700_000_000_000  # the ManualClock's start
LOG = ("2023-11-14T22:00:01Z INFO start\n"
       "2023-11-14T22:00:02Z ERROR boom\n"
       "\tat frame one\n"
       "2023-11-14T22:00:03Z INFO done\n")


@pytest.fixture
def timed_client(tmp_path: Path) -> Iterator[tk.Client]:
    """SQLite, a ManualClock at T0, archives kept an hour after their newest timestamp, search
    results an hour after their search ended."""
    c = tk.connect(home=tmp_path / "ws", clock=tk.ManualClock(T0), create=True,
                   settings={"archive_output.retention_period": 60, "results_cache.retention_period": 60})
    yield c
    c.close()


@pytest.fixture
def timed_api(timed_client: tk.Client) -> Iterator[LiveApi]:
    with live_api(timed_client.workspace) as served:
        yield served


def finished(api: LiveApi, accepted: httpx.Response) -> Job:
    """The API job a 202 started, once it has ended. Polled in the server's own registry (the
    server runs in this process); the route reading it is another family's."""
    assert accepted.status_code == 202, accepted.text
    body = accepted.json()
    assert accepted.headers["location"] == body["location"] == f"/api/v1/jobs/{body['job']}"
    job = api.server.state.jobs.get(body["job"])
    deadline = time.monotonic() + 60
    while job.finished_ms is None:
        assert time.monotonic() < deadline, f"job {job.id} did not end: {job.to_dict()}"
        time.sleep(0.05)
    return job


def search_done(http: httpx.Client, search_id: int) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        found = http.get(f"/api/v1/archives/searches/{search_id}")
        assert found.status_code == 200, found.text
        if found.json()["state"] != "RUNNING":
            return found.json()
        assert time.monotonic() < deadline, found.text
        time.sleep(0.05)


def assert_problem(response: httpx.Response, status: int, error: str | None = None) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    if error is not None:
        assert response.json()["error"] == error, response.text


def results_of(client: tk.Client, search_id: int) -> list[dict[str, Any]]:
    return client.archives.results(search_id, page_size=10_000).rows


# ---- happy paths -------------------------------------------------------------------------------------
def test_ingest_a_log_file_then_list_datasets_and_archives(timed_api: LiveApi, timed_client: tk.Client,
                                                          spark, tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text(LOG)
    ops = timed_api.as_role("operator")
    job = finished(timed_api, ops.post("/api/v1/archives/datasets/web/ingest",
                                       json={"paths": [str(log)], "timezone": "UTC"}))
    assert job.state == "succeeded", job.error
    assert job.kind == "archive-ingest" and job.actor == "operator"
    archives = timed_client.archives.list("web")
    assert job.result["messages"] == 3 and job.result["files"] == 1
    assert [a["id"] for a in job.result["archives"]] == [a.id for a in archives]
    assert job.progress.total is not None and job.progress.done == job.progress.total > 0

    viewer = timed_api.as_role("viewer")
    datasets = viewer.get("/api/v1/archives/datasets")
    assert datasets.status_code == 200
    assert datasets.json() == {"items": timed_client.archives.dataset_summaries(), "next_cursor": None}
    listed = viewer.get("/api/v1/archives/datasets/web/archives")
    assert listed.json() == {"items": [a.to_dict() for a in archives], "next_cursor": None}
    row = timed_client.audit("archives/web", limit=1)[0]
    assert row["action"] == "archive_ingest" and row["actor"] == "operator"


def test_search_then_page_its_results(timed_api: LiveApi, timed_client: tk.Client, spark) -> None:
    for i in range(3):
        make_archive(timed_client, "app", [(T0 - 10 * MIN + i * 1000 + k, f"hit {i}.{k}") for k in range(3)]
                     + [(T0 - 9 * MIN, "miss")])
    ops = timed_api.as_role("operator")
    started = ops.post("/api/v1/archives/searches", json={"dataset": "app", "query": "HIT *", "ignore_case": True})
    job = finished(timed_api, started)
    body = started.json()
    assert body["search_location"] == f"/api/v1/archives/searches/{body['search']}"
    assert job.state == "succeeded", job.error
    assert job.result == timed_client.archives.job(body["search"]).to_dict()

    viewer = timed_api.as_role("viewer")
    search = search_done(viewer, body["search"])
    assert search["state"] == "SUCCEEDED" and search["results_count"] == 9 and search["actor"] == "operator"
    assert search["api_job"] == body["job"] and search["progress"]["done"] == search["progress"]["total"] == 3

    first = viewer.get(f"/api/v1/archives/searches/{body['search']}/results", params={"limit": 5}).json()
    assert len(first["items"]) == 5 and first["total"] == 9 and first["next_cursor"]
    second = viewer.get(f"/api/v1/archives/searches/{body['search']}/results",
                        params={"limit": 5, "cursor": first["next_cursor"]}).json()
    assert len(second["items"]) == 4 and second["next_cursor"] is None
    walked = first["items"] + second["items"]
    assert walked == results_of(timed_client, body["search"])
    assert len({(r["timestamp"], r["message"]) for r in walked}) == 9

    listed = viewer.get("/api/v1/archives/searches").json()
    assert [s["id"] for s in listed["items"]] == [body["search"]]
    assert viewer.get("/api/v1/archives/searches", params={"state": "FAILED"}).json()["items"] == []


def test_cancel_a_search_the_api_runs(timed_api: LiveApi, timed_client: tk.Client, spark) -> None:
    make_archive(timed_client, "app", [(T0 - MIN, "hit")])
    # both job workers busy: the search is created RUNNING and waits for a worker, so it is still
    # RUNNING when the cancel arrives, however fast the machine
    release = threading.Event()
    blockers = [timed_api.server.state.jobs.submit("block", "test", lambda _p: release.wait(60)) for _ in range(2)]
    try:
        ops = timed_api.as_role("operator")
        started = ops.post("/api/v1/archives/searches", json={"dataset": "app", "query": "hit"})
        assert started.status_code == 202, started.text
        search_id = started.json()["search"]
        assert ops.get(f"/api/v1/archives/searches/{search_id}").json()["state"] == "RUNNING"
        cancelled = ops.post(f"/api/v1/archives/searches/{search_id}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["state"] == "CANCELLED" and cancelled.json()["completed_ms"] == T0
    finally:
        release.set()
    assert all(finished_job(timed_api, b.id) for b in blockers)
    job = finished(timed_api, started)
    assert job.result["state"] == "CANCELLED"  # the runner kept the cancel's verdict
    assert timed_client.archives.job(search_id).state == "CANCELLED"
    again = ops.post(f"/api/v1/archives/searches/{search_id}/cancel")
    assert_problem(again, 422, "InvalidInput")
    assert "already ended" in again.json()["detail"]


def finished_job(api: LiveApi, job_id: str) -> bool:
    deadline = time.monotonic() + 60
    while api.server.state.jobs.get(job_id).finished_ms is None:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return True


def test_gc_preview_then_run_each_collector(timed_api: LiveApi, timed_client: tk.Client, spark) -> None:
    clock = timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    old = make_archive(timed_client, "app", [(T0 - 2 * 60 * MIN, "hit old")])  # an hour past its retention
    fresh = make_archive(timed_client, "app", [(T0 - MIN, "hit fresh")])
    search = timed_client.archives.search("app", "hit")
    assert search.results_count == 1  # the expired archive is never searched

    viewer = timed_api.as_role("viewer")
    preview = viewer.get("/api/v1/archives/gc/preview")
    assert preview.status_code == 200
    assert preview.json() == timed_client.archives.gc(dry_run=True).to_dict()
    assert [c["archive_id"] for c in preview.json()["archives"]["candidates"]] == [old.id]
    assert preview.json()["results"]["expired"] == []  # the search ended just now
    assert {a.id for a in timed_client.archives.list()} == {old.id, fresh.id}  # a preview changes nothing

    ops = timed_api.as_role("operator")
    swept = finished(timed_api, ops.post("/api/v1/archives/gc", json={"which": "archive"}))
    assert swept.state == "succeeded", swept.error
    assert swept.result["results"] is None
    assert swept.result["archives"]["deleted"] == 1
    assert swept.result["bytes_freed"] == swept.result["archives"]["bytes_freed"] == old.stored_bytes
    assert [a.id for a in timed_client.archives.list()] == [fresh.id]
    assert timed_client.archives.results(search.id).total == 1  # results were not the target

    clock.advance(61 * MIN)
    expired = finished(timed_api, ops.post("/api/v1/archives/gc", json={"which": "search_result"}))
    assert expired.state == "succeeded", expired.error
    assert expired.result["archives"] is None
    assert [e["job_id"] for e in expired.result["results"]["expired"]] == [search.id]
    assert expired.result["bytes_freed"] == expired.result["results"]["bytes_freed"] > 0
    assert [a.id for a in timed_client.archives.list()] == [fresh.id]  # still within its hour
    gone = viewer.get(f"/api/v1/archives/searches/{search.id}/results")
    assert_problem(gone, 404, "NotFound")

    both = finished(timed_api, ops.post("/api/v1/archives/gc"))  # no body: both collectors
    assert both.state == "succeeded" and both.result["which"] == "both"
    assert both.result["archives"]["deleted"] == 1 and timed_client.archives.list() == []


def test_lists_page_on_both_backends(api: LiveApi, client: tk.Client) -> None:
    """No Spark: the datasets and archives lists, page by page, equal the client's, on SQLite and
    PostgreSQL; the GC preview of a workspace without archive retention."""
    for dataset in ("b", "a", "c"):
        make_archive(client, dataset, [(1000, "x")])
    for end in (5000, 3000, 3000, None, 9000):
        make_archive(client, "a", [(end, "y")])
    viewer = api.as_role("viewer")
    walked: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = viewer.get("/api/v1/archives/datasets/a/archives",
                          params={"limit": 2, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        walked += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break
    assert walked == [a.to_dict() for a in client.archives.list("a")]
    first = viewer.get("/api/v1/archives/datasets", params={"limit": 2}).json()
    rest = viewer.get("/api/v1/archives/datasets", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert first["items"] + rest["items"] == client.archives.dataset_summaries() and rest["next_cursor"] is None
    assert [d["dataset"] for d in first["items"] + rest["items"]] == ["a", "b", "c"]
    # search jobs page by id, newest first (rows made by the store, no Spark: listing is the subject)
    jobs = SearchJobStore(client.workspace)
    for query in ("q1", "q2", "q3", "q4", "q5"):
        made = jobs.create("a", query, regex=False, ignore_case=False, begin_ts=None, end_ts=None,
                           retention_minutes=None)
        if query != "q3":
            jobs.finish(made.id, JobState.SUCCEEDED, archives_searched=0, results_count=0)
    pages = [viewer.get("/api/v1/archives/searches", params={"limit": 2}).json()]
    while pages[-1]["next_cursor"]:
        pages.append(viewer.get("/api/v1/archives/searches",
                                params={"limit": 2, "cursor": pages[-1]["next_cursor"]}).json())
    assert [len(p["items"]) for p in pages] == [2, 2, 1]
    assert [{k: v for k, v in s.items() if k not in ("api_job", "progress")} for p in pages for s in p["items"]] \
        == [j.to_dict() for j in client.archives.jobs()]
    running = viewer.get("/api/v1/archives/searches", params={"state": "RUNNING"}).json()["items"]
    assert [s["query"] for s in running] == ["q3"]
    preview = viewer.get("/api/v1/archives/gc/preview").json()
    assert preview["archives"]["enabled"] is False and preview["archives"]["candidates"] == []
    assert_problem(viewer.get("/api/v1/archives/datasets/nope/archives"), 404, "NotFound")
    assert_problem(viewer.get("/api/v1/archives/datasets/a/archives", params={"cursor": "!!"}), 422, "InvalidInput")


# ---- bad input: a problem document, nothing changed --------------------------------------------------
def test_bad_input_is_refused_and_changes_nothing(timed_api: LiveApi, timed_client: tk.Client, spark,
                                                  tmp_path: Path) -> None:
    make_archive(timed_client, "app", [(T0 - MIN, "hit")])
    ops = timed_api.as_role("operator")
    before_archives = timed_client.archives.list()
    missing = str(tmp_path / "missing.log")
    for body, status in [({"paths": [missing]}, 404), ({"paths": []}, 422), ({"paths": [""]}, 422),
                         ({"paths": ["x\u0000y"]}, 422), ({"paths": [str(tmp_path)], "timezone": "Mars/Base"}, 422),
                         ({"paths": [str(tmp_path)], "surprise": 1}, 422)]:
        assert_problem(ops.post("/api/v1/archives/datasets/app/ingest", json=body), status)
    assert_problem(ops.post("/api/v1/archives/datasets/bad name!/ingest", json={"paths": [str(tmp_path)]}), 422)
    assert timed_api.server.state.jobs.list() == []  # no job started
    assert timed_client.archives.list() == before_archives

    for body, status in [({"dataset": "nope", "query": "x"}, 404), ({"dataset": "app", "query": ""}, 422),
                         ({"dataset": "bad name!", "query": "x"}, 422),
                         ({"dataset": "app", "query": "x", "regex": True, "begin": 5, "end": 1}, 422),
                         ({"dataset": "app", "query": "x", "begin": "yesterday"}, 422),
                         ({"dataset": "app"}, 422), ({"dataset": "app", "query": "x", "limit": 3}, 422)]:
        assert_problem(ops.post("/api/v1/archives/searches", json=body), status)
    assert_problem(ops.post("/api/v1/archives/searches", json={"dataset": "app", "query": "(", "regex": True}),
                   422, "InvalidRegex")
    assert timed_client.archives.jobs() == [] and timed_api.server.state.jobs.list() == []

    viewer = timed_api.as_role("viewer")
    assert_problem(viewer.get("/api/v1/archives/searches/99"), 404, "NotFound")
    assert_problem(viewer.get("/api/v1/archives/searches/0"), 422, "InvalidInput")
    assert_problem(viewer.get("/api/v1/archives/searches/abc"), 422, "InvalidInput")
    assert_problem(viewer.get(f"/api/v1/archives/searches/{2**64}"), 422, "InvalidInput")
    assert_problem(viewer.get("/api/v1/archives/searches/99/results"), 404, "NotFound")
    assert_problem(viewer.get("/api/v1/archives/searches", params={"state": "DONE"}), 422, "InvalidInput")
    assert_problem(viewer.get("/api/v1/archives/searches", params={"cursor": "!!"}), 422, "InvalidInput")
    assert_problem(ops.post("/api/v1/archives/searches/99/cancel"), 404, "NotFound")
    assert_problem(ops.post("/api/v1/archives/gc", json={"which": "everything"}), 422, "InvalidInput")
    assert timed_api.server.state.jobs.list() == []

    done = timed_client.archives.search("app", "hit")
    results = f"/api/v1/archives/searches/{done.id}/results"
    for cursor in ("!!", encode_cursor("an offset"), encode_cursor(-1), encode_cursor(True), encode_cursor(2**64)):
        assert_problem(viewer.get(results, params={"cursor": cursor}), 422, "InvalidInput")
    assert_problem(viewer.get(results, params={"limit": 0}), 422, "InvalidInput")
    assert_problem(viewer.get(results, params={"limit": 10_001}), 422, "InvalidInput")
    far = viewer.get(results, params={"cursor": encode_cursor(10**18)})  # far past the end
    assert far.status_code == 200 and far.json()["items"] == [] and far.json()["next_cursor"] is None


# ---- roles and scopes --------------------------------------------------------------------------------
WRITES = [("post", "/api/v1/archives/datasets/app/ingest", {"paths": ["/nonexistent"]}),
          ("post", "/api/v1/archives/searches", {"dataset": "app", "query": "x"}),
          ("post", "/api/v1/archives/searches/1/cancel", None),
          ("post", "/api/v1/archives/gc", {"which": "both"})]
READS = ["/api/v1/archives/datasets", "/api/v1/archives/datasets/app/archives", "/api/v1/archives/searches",
         "/api/v1/archives/searches/1", "/api/v1/archives/searches/1/results", "/api/v1/archives/gc/preview"]


def test_a_viewer_may_read_but_not_ingest_search_cancel_or_collect(timed_api: LiveApi,
                                                                  timed_client: tk.Client) -> None:
    make_archive(timed_client, "app", [(T0 - 2 * 60 * MIN, "old")])
    viewer = timed_api.as_role("viewer")
    for method, path, body in WRITES:
        response = viewer.request(method, path, json=body)
        assert_problem(response, 403, "PermissionDenied")
        assert "needs operator" in response.json()["detail"]
    assert timed_client.archives.jobs() == [] and timed_api.server.state.jobs.list() == []
    assert len(timed_client.archives.list()) == 1
    for path in READS:
        assert viewer.get(path).status_code in (200, 404), path  # 404: search 1 does not exist
    assert_problem(timed_api.http(None).get("/api/v1/archives/datasets"), 401, "NotAuthenticated")


def test_a_scoped_token_is_refused_everywhere(timed_api: LiveApi, timed_client: tk.Client) -> None:
    make_archive(timed_client, "app", [(T0 - 2 * 60 * MIN, "old")])
    scoped = timed_api.as_role("admin", scope="s")
    for method, path, body in WRITES:
        assert_problem(scoped.request(method, path, json=body), 403, "PermissionDenied")
    for path in READS:
        response = scoped.get(path)
        assert_problem(response, 403, "PermissionDenied")
        assert "needs a token without a scope" in response.json()["detail"]
    assert timed_client.archives.jobs() == [] and timed_api.server.state.jobs.list() == []
    assert len(timed_client.archives.list()) == 1
