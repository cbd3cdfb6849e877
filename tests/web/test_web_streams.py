"""The dashboard's streams area over real HTTP (a live server with the dashboard, SQLite): the list's
filter, sort and keyset paging over many streams, a scoped token's view, the stream page, and its
actions — truncate (operator) and hold (legal) refused to a viewer and without the CSRF token,
truncate refused under a hold — each refusal changing nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing
from html import unescape

import httpx
import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.helpers.web_client import logged_in

import tidekeep as tk
from tidekeep.web import dashboard_app

ORDERS = 70  # streams alpha/orders-000 .. -069
CLICKS = 50  # streams beta/clicks-000 .. -049
BIG = "alpha/orders-007"  # the one stream with data
SIZED = "beta/clicks-003"  # a size policy


@pytest.fixture
def web(sqlite_client: tk.Client) -> Iterator[LiveApi]:
    for i in range(ORDERS):
        sqlite_client.create_stream(f"alpha/orders-{i:03d}")
    for i in range(CLICKS):
        sqlite_client.create_stream(f"beta/clicks-{i:03d}", tk.StreamConfig(
            segments=2, retention=tk.RetentionPolicy.by_size("1KiB") if f"beta/clicks-{i:03d}" == SIZED else None))
    with sqlite_client.stream(BIG).writer("w") as writer:
        for i in range(40):
            writer.write(b"x" * 50, routing_key=str(i))
    with live_api(sqlite_client.workspace, app_factory=dashboard_app) as served:
        yield served


def names_on(page: httpx.Response) -> list[str]:
    """The streams a list page shows, as scope/name in the table's order."""
    assert page.status_code == 200, page.text
    return [f"{scope}/{name}" for scope, name in re.findall(r'<a href="/streams/([^/"]+)/([^/"]+)">', page.text)]


def next_link(page: httpx.Response) -> str | None:
    found = re.search(r'<a href="([^"]+)" rel="next">', page.text)
    return None if found is None else unescape(found.group(1))


def every_page(browser: httpx.Client, first: str) -> list[list[str]]:
    pages, url = [], first
    while True:
        answer = browser.get(url if url.startswith("/") else "/streams" + url)
        pages.append(names_on(answer))
        following = next_link(answer)
        if following is None:
            return pages
        url = following


def test_the_list_pages_sorts_and_filters_on_the_server(web: LiveApi) -> None:
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        pages = every_page(browser, "/streams")
        assert [len(p) for p in pages] == [50, 50, 20]
        shown = [n for p in pages for n in p]
        everyone = [f"beta/clicks-{i:03d}" for i in range(CLICKS)] + [f"alpha/orders-{i:03d}" for i in range(ORDERS)]
        assert shown == everyone  # by name (then scope), each stream once
        assert "120 streams match" in browser.get("/streams").text
        # descending, by scope
        by_scope = [n for p in every_page(browser, "/streams?sort=scope&order=desc") for n in p]
        assert by_scope == sorted(everyone, reverse=True)
        # the one stream with data leads by retained bytes, and shows its size and events
        page = browser.get("/streams?sort=retained&order=desc")
        assert names_on(page)[0] == BIG
        assert re.search(r"orders-007</a></td>\s*<td>alpha</td>\s*<td class=\"num\">1</td>\s*"
                         r"<td class=\"num\">2\.[0-9] KiB</td>\s*<td class=\"num\">40</td>", page.text)
        # by policy: none < size < time, so the sized stream is last ascending and first descending
        assert [n for p in every_page(browser, "/streams?sort=policy") for n in p][-1] == SIZED
        assert names_on(browser.get("/streams?sort=policy&order=desc"))[0] == SIZED
        # the name filter (any case) and the scope filter, kept across pages and sorts
        assert names_on(browser.get("/streams?q=CLICKS-00")) == [f"beta/clicks-{i:03d}" for i in range(10)]
        alpha = every_page(browser, "/streams?scope=alpha&sort=name&order=desc")
        assert [len(p) for p in alpha] == [50, 20]
        assert [n for p in alpha for n in p] == [f"alpha/orders-{i:03d}" for i in reversed(range(ORDERS))]
        assert 'value="alpha" selected' in browser.get("/streams?scope=alpha").text
        none = browser.get("/streams?q=nothing-like-this")
        assert names_on(none) == [] and "No stream matches" in none.text
        # bad input: one line, 422 (InvalidInput, as in the API)
        for bad in ("sort=size", "order=up", "cursor=notacursor", "cursor=WzFd"):
            answer = browser.get(f"/streams?{bad}")
            assert answer.status_code == 422, bad
            assert "InvalidInput" in answer.text


def test_a_scoped_token_sees_only_its_scope(web: LiveApi) -> None:
    browser, _ = logged_in(web, "viewer", scope="beta")
    with closing(browser):
        shown = [n for p in every_page(browser, "/streams") for n in p]
        assert shown == [f"beta/clicks-{i:03d}" for i in range(CLICKS)]
        page = browser.get("/streams")
        assert "50 streams match" in page.text and '<option value="alpha"' not in page.text
        assert browser.get("/streams?scope=alpha").status_code == 403
        assert browser.get("/streams/alpha/orders-007").status_code == 403
        assert browser.get("/streams/beta/clicks-001").status_code == 200


def test_the_stream_page_shows_head_tail_policy_segments_subscribers_and_watermark_lag(
        web: LiveApi, sqlite_client: tk.Client) -> None:
    handle = sqlite_client.stream(SIZED)
    with handle.writer("w") as writer:
        for i in range(30):
            writer.write(b"y" * 60, routing_key=str(i))
    handle.split("0.0")
    handle.retention.run()  # records the tail: a point of the retained-size chart
    handle.truncate(handle.tail_cut(), "cleared for the test")
    sqlite_client.create_reader_group("billing", tk.ReaderGroupConfig(
        streams=[SIZED], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    handle.watermarks.note("w", sqlite_client.clock.now_ms() - 90_000)
    assert handle.watermarks.compute() is not None
    described = handle.describe()
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/streams/beta/clicks-003")
        assert page.status_code == 200
        text = page.text
        assert described["head"] in unescape(text) and described["tail"] in unescape(text)
        assert "by size: keep at least 1 KiB" in text and "config version 1" in text
        # the diagram: one box per segment (two epoch-0 segments, one sealed by the split, two successors)
        assert text.count('<g class="segment sealed">') == 1 and text.count('<g class="segment active">') == 3
        assert text.count('<line class="link"') == 2
        assert "cleared for the test" in text  # the truncation history
        chunks = described["chunks"]
        assert f'<dd id="chunks">{chunks["count"]} <span class="muted">({chunks["compacted"]} compacted' in text
        assert re.search(r"<td>billing</td>\s*<td>MANUAL_RELEASE_AT_USER_STREAMCUT</td>", text)
        lag = re.search(r'<dd id="watermark" data-lag-ms="(\d+)">(\dm \d+s) ', text)  # now − its lower time
        assert lag is not None and 90_000 <= int(lag.group(1)) < 150_000
        assert lag.group(2) == f"{int(lag.group(1)) // 60_000}m {int(lag.group(1)) % 60_000 // 1000}s"
        assert 'data-chart="' in text and "retained" in text
        # a viewer sees no destructive action
        assert "truncate-form" not in text and "hold-form" not in text
        preview = browser.get("/streams/beta/clicks-003/preview", headers={"HX-Request": "true"})
        assert preview.status_code == 200
        assert 'id="preview-reason"' in preview.text and "Truncate at this cut" not in preview.text


def test_an_operator_truncates_and_the_audit_names_the_token(web: LiveApi, sqlite_client: tk.Client) -> None:
    handle = sqlite_client.stream(BIG)
    handle.update(tk.StreamConfig(retention=tk.RetentionPolicy.by_size(0)))
    browser, csrf = logged_in(web, "operator")
    with closing(browser):
        page = browser.get(f"/streams/{BIG}")
        assert 'id="truncate-form"' in page.text and 'id="hold-form"' not in page.text
        # the preview offers its cut (keep at least 0 B: everything recorded may go)
        preview = browser.get(f"/streams/{BIG}/preview", headers={"HX-Request": "true"})
        decision = handle.retention.preview()
        assert decision.cut is not None and "Truncate at this cut" in preview.text
        offered = re.search(r'name="cut" value="([^"]+)"', preview.text)
        assert offered is not None and offered.group(1) == str(handle.state().cut(decision.cut))
        answer = browser.post(f"/streams/{BIG}/truncate", data={"cut": offered.group(1), "csrf_token": csrf})
        assert answer.status_code == 303 and answer.headers["location"] == f"/streams/{BIG}"
        assert handle.head_cut().positions == decision.cut
        with handle.writer("w") as writer:
            writer.write(b"more")
        answer = browser.post(f"/streams/{BIG}/truncate", data={"cut": "tail", "reason": "tidy up", "csrf_token": csrf},
                              headers={"HX-Request": "true"})
        assert answer.status_code == 200 and "Truncated alpha/orders-007" in answer.text
        assert answer.headers["HX-Trigger"] == "stream-changed"
    assert handle.head_cut() == handle.tail_cut()
    entry = sqlite_client.audit(BIG)[0]
    assert (entry["action"], entry["reason"], entry["actor"]) == ("truncate", "tidy up", "operator")


def test_a_viewer_and_a_forged_form_are_refused_and_change_nothing(web: LiveApi, sqlite_client: tk.Client) -> None:
    handle = sqlite_client.stream(BIG)
    head = handle.head_cut()
    viewer, viewer_csrf = logged_in(web, "viewer")
    operator, operator_csrf = logged_in(web, "operator")
    legal, _ = logged_in(web, "legal")
    with closing(viewer), closing(operator), closing(legal):
        assert viewer.post(f"/streams/{BIG}/truncate",
                           data={"cut": "tail", "csrf_token": viewer_csrf}).status_code == 403
        assert viewer.post(f"/streams/{BIG}/holds", data={"reason": "no", "csrf_token": viewer_csrf}).status_code == 403
        # an operator may truncate but not hold; a legal token may hold but not truncate
        assert operator.post(f"/streams/{BIG}/holds", data={"reason": "no"},
                             headers={"X-CSRF-Token": operator_csrf}).status_code == 403
        # the right role without the CSRF token, or with another session's
        assert operator.post(f"/streams/{BIG}/truncate", data={"cut": "tail"}).status_code == 403
        forged = operator.post(f"/streams/{BIG}/truncate", data={"cut": "tail", "csrf_token": viewer_csrf})
        assert forged.status_code == 403 and "CSRF" in forged.text
        assert legal.post(f"/streams/{BIG}/holds", data={"reason": "no"}).status_code == 403
    assert handle.head_cut() == head
    assert sqlite_client.holds.list("stream", BIG) == []
    assert [e for e in sqlite_client.audit(BIG) if e["action"] in ("truncate", "hold_add")] == []


def test_a_hold_added_in_the_dashboard_refuses_the_truncation(web: LiveApi, sqlite_client: tk.Client) -> None:
    handle = sqlite_client.stream(BIG)
    head = handle.head_cut()
    legal, legal_csrf = logged_in(web, "legal")
    operator, csrf = logged_in(web, "operator")
    with closing(legal), closing(operator):
        page = legal.get(f"/streams/{BIG}")
        assert 'id="hold-form"' in page.text and 'id="truncate-form"' not in page.text
        added = legal.post(f"/streams/{BIG}/holds", data={"reason": "case 42", "csrf_token": legal_csrf},
                           headers={"HX-Request": "true"})
        assert added.status_code == 200 and "case 42" in added.text and re.search(r"Hold \d+ added", added.text)
        [hold] = sqlite_client.holds.list("stream", BIG)
        assert (hold.reason, hold.created_by) == ("case 42", "legal")
        # through htmx: the error goes to the page's message area
        refused = operator.post(f"/streams/{BIG}/truncate", data={"cut": "tail", "csrf_token": csrf},
                                headers={"HX-Request": "true"})
        assert refused.status_code == 423
        assert refused.headers["HX-Retarget"] == "#messages" and "HoldActive" in refused.text
        # as a plain form: the error page
        page = operator.post(f"/streams/{BIG}/truncate", data={"cut": "tail", "csrf_token": csrf})
        assert page.status_code == 423 and "<h1>HoldActive</h1>" in page.text
        # an empty reason for a hold is refused too
        assert legal.post(f"/streams/{BIG}/holds", data={"reason": " ", "csrf_token": legal_csrf}).status_code == 422
    assert handle.head_cut() == head
    assert len(sqlite_client.holds.list("stream", BIG)) == 1


def test_an_unknown_stream_is_a_404_page(web: LiveApi) -> None:
    browser, csrf = logged_in(web, "admin")
    with closing(browser):
        for path in ("/streams/alpha/no-such", "/streams/nowhere/orders-001", "/streams/alpha/no-such/preview"):
            answer = browser.get(path)
            assert answer.status_code == 404 and "NotFound" in answer.text, path
        answer = browser.post("/streams/alpha/no-such/truncate", data={"cut": "tail", "csrf_token": csrf})
        assert answer.status_code == 404
