"""The dashboard's archives pages over real HTTP (a live server, a cookie-keeping client): the
datasets' figures, a dataset's timeline (its expiry line and the next archive to go, computed here
from the archives' times and the retention period), a search started from the form and its
results paged, the GC preview against the API's, and the roles the API asks for. Time is a
ManualClock, so archives are placed around the retention boundary without waiting."""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.helpers.archives import make_archive
from tests.helpers.web_client import logged_in

import tidekeep as tk
from tidekeep.archives.model import JobState
from tidekeep.archives.store import SearchJobStore
from tidekeep.web import dashboard_app
from tidekeep.web.archive_timeline import LEFT, PLOT_WIDTH
from tidekeep.web.render import environment

MIN = 60_000
T0 = 1_700_000_000_000  # the ManualClock's start: 2023-11-14T22:13:20Z
RETENTION = 60  # minutes, archive_output.retention_period


@pytest.fixture
def timed_client(tmp_path: Path) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", clock=tk.ManualClock(T0), create=True,
                   settings={"archive_output.retention_period": RETENTION, "results_cache.retention_period": 60})
    yield c
    c.close()


@pytest.fixture
def web(timed_client: tk.Client) -> Iterator[LiveApi]:
    with live_api(timed_client.workspace, app_factory=dashboard_app) as served:
        yield served


def attributes(page: str, element_id: str) -> dict[str, str]:
    """The attributes of the element with `element_id` (autoescaped values unescaped)."""
    found = re.search(rf'<[a-z]+ [^>]*id="{element_id}"[^>]*>', page)
    assert found is not None, f"no #{element_id}"
    return {k: html.unescape(v) for k, v in re.findall(r'([a-z0-9-]+)="([^"]*)"', found.group(0))}


def rows_with(page: str, attribute: str) -> list[dict[str, str]]:
    """The attributes of every <tr> carrying `attribute`, in order."""
    return [{k: html.unescape(v) for k, v in re.findall(r'([a-z0-9-]+)="([^"]*)"', tr)}
            for tr in re.findall(rf"<tr [^>]*{attribute}=[^>]*>", page)]


def table_ids(page: str, table_id: str) -> list[str]:
    found = re.search(rf'<table id="{table_id}".*?</table>', page, re.S)
    return [] if found is None else re.findall(r'<tr data-archive="([0-9a-f]{32})"', found.group(0))


def number(text: str) -> int | None:
    return int(text) if text else None


# ---- datasets and timeline ---------------------------------------------------------------------------
def test_datasets_page_figures_equal_the_store(web: LiveApi, timed_client: tk.Client) -> None:
    make_archive(timed_client, "web", [(T0 - 90 * MIN, "a"), (T0 - 80 * MIN, "b")])
    make_archive(timed_client, "web", [(T0 - 5 * MIN, "c")])
    make_archive(timed_client, "db", [(None, "no time")])
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/archives")
    assert page.status_code == 200, page.text
    shown = [{"dataset": r["data-dataset"], "archives": int(r["data-archives"]),
              "raw_bytes": int(r["data-raw-bytes"]), "stored_bytes": int(r["data-stored-bytes"]),
              "begin_ts": number(r["data-begin-ts"]), "end_ts": number(r["data-end-ts"])}
             for r in rows_with(page.text, "data-dataset")]
    expected = [{k: s[k] for k in ("dataset", "archives", "raw_bytes", "stored_bytes", "begin_ts", "end_ts")}
                for s in timed_client.archives.dataset_summaries()]
    assert shown == expected and [s["dataset"] for s in shown] == ["db", "web"]
    assert '<strong id="retention">1h</strong>' in page.text
    assert "2023-11-14 20:43:20Z" in page.text  # web's oldest timestamp, T0 − 90 min


def expected_timeline(archives: list[Any], now: int, retention_minutes: int, held: set[str]) -> dict[str, Any]:
    """The expiry line and the next archive to go, from the archives' times: the axis spans the
    archives' timestamps and the expiry now − retention; an archive is past retention iff its
    newest timestamp is before the expiry; the next to go is the oldest end not yet past it of the
    archives no hold keeps."""
    expiry = now - retention_minutes * MIN
    points = [a.begin_ts for a in archives] + [a.end_ts for a in archives] + [expiry]
    start, end = min(points), max(points)
    waiting = sorted((a for a in archives if a.end_ts >= expiry and a.id not in held), key=lambda a: (a.end_ts, a.id))
    return {"expiry_ms": expiry, "x": LEFT + (expiry - start) * PLOT_WIDTH / (end - start),
            "expired": {a.id for a in archives if a.end_ts < expiry and a.id not in held},
            "held": {a.id for a in archives if a.end_ts < expiry and a.id in held},
            "next": waiting[0].id if waiting else "",
            "next_expires_ms": waiting[0].end_ts + retention_minutes * MIN if waiting else None}


def test_timeline_expiry_line_and_next_to_go(web: LiveApi, timed_client: tk.Client) -> None:
    clock = timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    made = [make_archive(timed_client, "app", [(T0 - 3 * 60 * MIN, "oldest"), (T0 - 2 * 60 * MIN, "x")]),
            make_archive(timed_client, "app", [(T0 - 61 * MIN, "just past")]),
            make_archive(timed_client, "app", [(T0 - 59 * MIN, "next"), (T0 - 40 * MIN, "later")]),
            make_archive(timed_client, "app", [(T0 - 50 * MIN, "b"), (T0 - 10 * MIN, "c")]),
            make_archive(timed_client, "app", [(T0 - 30 * MIN, "d")])]
    timeless = make_archive(timed_client, "app", [(None, "no time")])
    held = {made[1].id, made[2].id}  # past retention, and the one that would otherwise go next
    for archive_id in sorted(held):
        timed_client.holds.add("archive", archive_id, "incident 7")
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        # the line moves with now: made[4] ends at T0 − 30 min, so 30 minutes on it is exactly at its
        # retention (kept) and one millisecond later past it. made[2] would go before it but is held
        for advance, goes_next in ((0, made[4]), (30 * MIN, made[4]), (1, made[3])):
            clock.advance(advance)
            page = browser.get("/archives/datasets/app")
            assert page.status_code == 200, page.text
            want = expected_timeline(made, clock.now_ms(), RETENTION, held)
            line = attributes(page.text, "expiry-line")
            assert int(line["data-expiry-ms"]) == want["expiry_ms"]
            assert float(line["x1"]) == pytest.approx(want["x"], abs=0.01)
            nxt = attributes(page.text, "next-to-go")
            assert nxt["data-archive"] == want["next"]
            assert number(nxt["data-expires-ms"]) == want["next_expires_ms"]
            bars = {archive: kind for kind, archive in re.findall(
                r'<rect class="bar (bar-\w+)"[^>]*data-archive="([0-9a-f]+)"', page.text)}
            assert {a for a, kind in bars.items() if kind == "bar-expired"} == want["expired"]
            assert {a for a, kind in bars.items() if kind == "bar-held"} == want["held"]
            assert set(bars) == {a.id for a in made}  # the timeless archive has no bar
            assert want["next"] == goes_next.id

        # the table pages through every archive once, in the API's order
        walked: list[str] = []
        url: str | None = "/archives/datasets/app?limit=2"
        while url is not None:
            page = browser.get(url)
            assert page.status_code == 200
            walked += table_ids(page.text, "archives")
            found = re.search(r'<a href="(\?limit=2&amp;cursor=[^"]+)" rel="next">', page.text)
            url = None if found is None else "/archives/datasets/app" + html.unescape(found.group(1))
        assert walked == [a.id for a in timed_client.archives.list("app")] and timeless.id in walked
        missing = browser.get("/archives/datasets/nope")
        assert missing.status_code == 404 and "dataset &#39;nope&#39; does not exist" in missing.text


def test_without_retention_there_is_no_expiry_line(tmp_path: Path) -> None:
    with tk.connect(home=tmp_path / "ws", clock=tk.ManualClock(T0), create=True) as client, \
            live_api(client.workspace, app_factory=dashboard_app) as served:
        make_archive(client, "app", [(T0 - 5000 * MIN, "old")])
        browser, _ = logged_in(served, "viewer")
        with closing(browser):
            page = browser.get("/archives/datasets/app").text
        assert 'id="expiry-line"' not in page and 'id="next-to-go"' not in page
        assert "kept forever" in page and "bar-expired" not in page


# ---- searches ----------------------------------------------------------------------------------------
def live_state(browser: httpx.Client, search_id: int) -> str:
    fragment = browser.get(f"/archives/searches/{search_id}/live", headers={"HX-Request": "true"})
    assert fragment.status_code == 200, fragment.text
    return attributes(fragment.text, "search-live")["data-state"]


def test_search_from_the_form_then_page_every_result_once(web: LiveApi, timed_client: tk.Client, spark,
                                                          tmp_path: Path) -> None:
    log = tmp_path / "app.log"
    log.write_text("".join(f"2023-11-14T22:0{i}:00Z INFO hit {i}\n" for i in range(9))
                   + "2023-11-14T22:09:30Z INFO miss\n")
    timed_client.archives.ingest("app", [log])
    # both job workers busy: the search is RUNNING when its page first shows, however fast the machine
    release = threading.Event()
    blockers = [web.server.state.jobs.submit("block", "test", lambda _p: release.wait(60)) for _ in range(2)]
    browser, csrf = logged_in(web, "operator")
    with closing(browser):
        try:
            started = browser.post("/archives/searches", data={
                "csrf_token": csrf, "dataset": "app", "query": "HIT *", "ignore_case": "true", "begin": "",
                "end": "", "page_size": "4"})
            assert started.status_code == 303, started.text
            target = started.headers["location"]
            search_id = int(re.fullmatch(r"/archives/searches/(\d+)\?limit=4", target).group(1))  # type: ignore[union-attr]
            running = browser.get(target)
            assert running.status_code == 200
            live = attributes(running.text, "search-live")
            assert live["data-state"] == "RUNNING" and live["hx-trigger"] == "every 1s"
            assert live["hx-get"] == f"/archives/searches/{search_id}/live?limit=4"
            assert 'id="search-progress"' in running.text
            assert 'hx-confirm="Cancel search' in running.text
            # a second search, cancelled from its page while it waits
            other = browser.post("/archives/searches", data={"csrf_token": csrf, "dataset": "app", "query": "miss"})
            other_id = int(other.headers["location"].split("/")[3].split("?")[0])
            cancelled = browser.post(f"/archives/searches/{other_id}/cancel", headers={"X-CSRF-Token": csrf,
                                                                                        "HX-Request": "true"})
            assert cancelled.status_code == 200, cancelled.text
            assert attributes(cancelled.text, "search-live")["data-state"] == "CANCELLED"
            assert "hx-trigger" not in attributes(cancelled.text, "search-live")
        finally:
            release.set()
        deadline = time.monotonic() + 120
        while live_state(browser, search_id) == "RUNNING" or any(b.finished_ms is None for b in blockers):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        done = browser.get(target)
        assert "hx-trigger" not in attributes(done.text, "search-live")  # polling stops

        walked: list[tuple[str, str]] = []
        url: str | None = target
        pages = 0
        while url is not None:
            page = browser.get(url)
            assert page.status_code == 200
            pages += 1
            table = re.search(r'<table id="results".*?</table>', page.text, re.S)
            assert table is not None
            walked += [(html.unescape(t), html.unescape(m)) for t, m in re.findall(
                r'<td class="mono">([^<]*)</td><td><pre class="message">([^<]*)</pre>', table.group(0))]
            found = re.search(r'<a href="([^"]+)" rel="next">Next page</a>', page.text)
            url = None if found is None else html.unescape(found.group(1))
    api = web.as_role("viewer").get(f"/api/v1/archives/searches/{search_id}/results", params={"limit": 1000})
    assert api.status_code == 200
    as_shown = environment.filters["time"]
    assert walked == [(as_shown(r["timestamp"]), r["message"]) for r in api.json()["items"]]
    assert pages == 3 and len(walked) == len(set(walked)) == 9
    assert {m for _, m in walked} == {f"2023-11-14T22:0{i}:00Z INFO hit {i}" for i in range(9)}
    assert timed_client.archives.job(search_id).actor == "operator"  # audited as the token, as through the API
    assert timed_client.archives.job(other_id).state == "CANCELLED"


def test_bad_search_input_is_refused_with_one_line_and_no_job(web: LiveApi, timed_client: tk.Client) -> None:
    make_archive(timed_client, "app", [(T0 - MIN, "hit")])
    browser, csrf = logged_in(web, "operator")
    with closing(browser):
        for data, status, text in [({"dataset": "app", "query": ""}, 422, "it is empty"),
                                   ({"dataset": "nope", "query": "x"}, 404, "does not exist"),
                                   ({"dataset": "app", "query": "(", "regex": "true"}, 422, "invalid regex"),
                                   ({"dataset": "app", "query": "x", "begin": "soon"}, 422, "invalid --begin"),
                                   ({"dataset": "app", "query": "x", "page_size": "0"}, 422, "page_size")]:
            answer = browser.post("/archives/searches", data={"csrf_token": csrf, **data},
                                  headers={"HX-Request": "true"})
            assert answer.status_code == status, answer.text
            assert answer.headers["HX-Retarget"] == "#messages" and text in html.unescape(answer.text)
    assert timed_client.archives.jobs() == [] and web.server.state.jobs.list() == []


def test_unknown_searches_and_expired_results(web: LiveApi, timed_client: tk.Client) -> None:
    clock = timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    make_archive(timed_client, "app", [(T0 - MIN, "hit")])
    # a search row ended with no results (the store's, no Spark: the page is the subject)
    jobs = SearchJobStore(timed_client.workspace)
    ended = jobs.create("app", "hit", regex=False, ignore_case=False, begin_ts=None, end_ts=None,
                        retention_minutes=RETENTION)
    jobs.finish(ended.id, JobState.SUCCEEDED, archives_searched=1, results_count=0)
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        assert browser.get("/archives/searches/99").status_code == 404
        for bad in ("0", "abc", str(2**64)):
            assert browser.get(f"/archives/searches/{bad}").status_code == 422, bad
        assert browser.get(f"/archives/searches/{ended.id}", params={"limit": 0}).status_code == 422
        assert browser.get(f"/archives/searches/{ended.id}", params={"cursor": "!!"}).status_code == 422
        page = browser.get(f"/archives/searches/{ended.id}")
        assert page.status_code == 200 and attributes(page.text, "search-live")["data-state"] == "SUCCEEDED"
        assert '<span id="results-total">0</span>' in page.text
        clock.advance(61 * MIN)
        timed_client.archives.gc_results()
        page = browser.get(f"/archives/searches/{ended.id}")
        assert page.status_code == 200 and "Its results expired at 2023-11-14 23:14:20Z" in page.text


# ---- the garbage collectors --------------------------------------------------------------------------
def test_gc_preview_equals_the_api_and_shows_what_a_running_search_protects(
        web: LiveApi, timed_client: tk.Client) -> None:
    clock = timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    old = make_archive(timed_client, "app", [(T0 - 62 * MIN, "old")])
    kept = make_archive(timed_client, "app", [(T0 - 58 * MIN, "kept for the search")])
    make_archive(timed_client, "app", [(T0 - 10 * MIN, "fresh")])
    held = make_archive(timed_client, "legal", [(T0 - 5 * 60 * MIN, "held")])
    timed_client.holds.add("dataset", "legal", "litigation 42")
    running = SearchJobStore(timed_client.workspace).create(
        "app", "x", regex=False, ignore_case=False, begin_ts=None, end_ts=None, retention_minutes=RETENTION)
    clock.advance(5 * MIN)  # now − retention = T0 − 55 min; the search holds expiry at T0 − 60 min

    api = web.as_role("viewer").get("/api/v1/archives/gc/preview").json()
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/archives/gc")
    assert page.status_code == 200
    assert table_ids(page.text, "gc-candidates") == [c["archive_id"] for c in api["archives"]["candidates"]] == [old.id]
    assert api["archives"]["held_back_by_job"] == running.id
    assert f'<a href="/archives/searches/{running.id}">{running.id}</a>' in page.text
    assert table_ids(page.text, "gc-protected") == [kept.id]
    assert table_ids(page.text, "gc-held") == [h["archive_id"] for h in api["archives"]["held"]] == [held.id]
    assert "expired but held (dataset hold)" in page.text
    assert "2023-11-14 21:13:20Z" in page.text  # the safe expiry, T0 − 60 min, as the API gives it
    assert api["archives"]["expiry_ms"] == T0 - 60 * MIN
    assert "Run garbage collection" not in page.text  # not offered to a viewer
    assert len(timed_client.archives.list()) == 4  # a preview changes nothing


ACTIONS = [("/archives/gc", {"which": "both"}), ("/archives/searches", {"dataset": "app", "query": "x"})]


def test_an_operator_runs_the_collectors_and_a_viewer_may_not(web: LiveApi, timed_client: tk.Client) -> None:
    old = make_archive(timed_client, "app", [(T0 - 2 * 60 * MIN, "old")])
    fresh = make_archive(timed_client, "app", [(T0 - MIN, "fresh")])
    viewer, viewer_csrf = logged_in(web, "viewer")
    with closing(viewer):
        for path, data in [*ACTIONS, ("/archives/searches/1/cancel", {})]:
            refused = viewer.post(path, data={"csrf_token": viewer_csrf, **data})
            assert refused.status_code == 403 and "needs operator" in refused.text, path
    assert len(timed_client.archives.list()) == 2
    assert timed_client.archives.jobs() == [] and web.server.state.jobs.list() == []

    operator, csrf = logged_in(web, "operator")
    with closing(operator):
        page = operator.get("/archives/gc")
        assert 'hx-post="/archives/gc"' in page.text and "hx-confirm=" in page.text
        forged = operator.post("/archives/gc", data={"csrf_token": "forged", "which": "archive"})
        assert forged.status_code == 403 and web.server.state.jobs.list() == []
        started = operator.post("/archives/gc", data={"which": "archive"}, headers={"X-CSRF-Token": csrf})
        assert started.status_code == 200, started.text
        job_id = attributes(started.text, "gc-job")["hx-get"].rsplit("/", 1)[1]
        deadline = time.monotonic() + 60
        while (state := attributes(fragment := operator.get(f"/archives/gc/jobs/{job_id}").text,
                                   "gc-job")["data-state"]) in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert state == "succeeded", fragment
        assert "Archives deleted: 1;" in fragment
        assert operator.get("/archives/gc/jobs/nope").status_code == 404
    assert [a.id for a in timed_client.archives.list()] == [fresh.id] and old.id != fresh.id
    job = web.server.state.jobs.get(job_id)
    assert job.kind == "archive-gc" and job.actor == "operator"


PAGES = ["/archives", "/archives/datasets/app", "/archives/search", "/archives/searches/1",
         "/archives/searches/1/live", "/archives/gc"]


def test_a_scoped_token_is_refused_everywhere(web: LiveApi, timed_client: tk.Client) -> None:
    make_archive(timed_client, "app", [(T0 - 2 * 60 * MIN, "old")])
    web.token("admin-s", "admin", scope="s")
    browser, csrf = logged_in(web, "admin-s")
    with closing(browser):
        for path in PAGES:
            answer = browser.get(path)
            assert answer.status_code == 403 and "needs a token without a scope" in answer.text, path
        for path, data in ACTIONS:
            assert browser.post(path, data={"csrf_token": csrf, **data}).status_code == 403, path
    assert len(timed_client.archives.list()) == 1
    assert timed_client.archives.jobs() == [] and web.server.state.jobs.list() == []
