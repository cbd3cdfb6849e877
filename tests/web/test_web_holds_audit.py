"""The holds and audit pages: server-side filters and paging equal to a brute-force filter of the
store, CSV downloads equal to the filtered lists and safe in a spreadsheet, adding and removing
holds with the API's role only (and the CSRF token), audit for unscoped tokens only
(docs/dashboard.md, "Holds and audit"). Real HTTP against a live server."""

from __future__ import annotations

import csv
import io
import re
from contextlib import closing
from typing import Any

import httpx
from tests.helpers.api_server import LiveApi
from tests.helpers.web_client import logged_in

import tidekeep as tk
from tidekeep.streams.documents import audit_document

FORMULAS = ("=HYPERLINK(\"http://evil.example\")", "+1+1", "-2", "@SUM(A1)")


def csv_rows(answer: httpx.Response) -> list[list[str]]:
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/csv")
    assert answer.headers["content-disposition"].startswith("attachment; filename=")
    return list(csv.reader(io.StringIO(answer.text)))


def hold_ids(page: str) -> list[int]:
    """The hold ids of a holds page's rows, in order."""
    return [int(i) for i in re.findall(r'<tr>\s*<td class="num">(\d+)</td><td>', page)]


def seed_holds(client: tk.Client) -> None:
    for name in ("s/a", "s/b", "t/c"):
        client.create_stream(name)
    client.holds.add("stream", "s/a", "case 1: the s/a incident")
    client.holds.add("stream", "t/c", "case 2")
    client.holds.add("records", 'feed = "X"', "case 3 records")
    for reason in FORMULAS:
        client.holds.add("stream", "s/b", reason)
    released = client.holds.add("stream", "s/b", "case 4, released later")
    client.holds.remove(released)


def test_hold_filters_and_csv_equal_a_brute_force_filter(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    seed_holds(client)
    holds = client.holds.list()
    cases: list[tuple[dict[str, str], Any]] = [
        ({}, lambda h: True),
        ({"kind": "stream"}, lambda h: h.kind == "stream"),
        ({"kind": "records"}, lambda h: h.kind == "records"),
        ({"target": "s/b"}, lambda h: h.target == "s/b"),
        ({"q": "CASE"}, lambda h: "case" in h.reason.lower() or "case" in h.target.lower()),
        ({"q": "s/a", "kind": "stream"}, lambda h: h.kind == "stream" and ("s/a" in h.target or "s/a" in h.reason)),
        ({"kind": "dataset"}, lambda h: False),
    ]
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        for params, keep in cases:
            expected = [h for h in holds if keep(h)]
            page = browser.get("/holds", params=params)
            assert page.status_code == 200, page.text
            assert hold_ids(page.text) == [h.id for h in expected], params
            rows = csv_rows(browser.get("/holds.csv", params=params))
            assert rows[0] == ["state", "hold", "kind", "target", "reason", "time", "by"]
            assert [(int(r[1]), r[2], r[3]) for r in rows[1:]] == [(h.id, h.kind, h.target) for h in expected], params
        released = browser.get("/holds", params={"state": "released"}).text
        assert "case 4, released later" in released and "Remove hold" not in released
        rows = csv_rows(browser.get("/holds.csv", params={"state": "released", "kind": "stream"}))
        assert [r[0] for r in rows[1:]] == ["released"] and "case 4, released later" in rows[1][4]
        assert csv_rows(browser.get("/holds.csv", params={"state": "released", "kind": "records"}))[1:] == []


def test_csv_cells_that_a_spreadsheet_would_run_get_an_apostrophe(web: LiveApi, sqlite_client: tk.Client) -> None:
    seed_holds(sqlite_client)
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        rows = csv_rows(browser.get("/holds.csv", params={"target": "s/b"}))
        audit = csv_rows(browser.get("/audit.csv", params={"action": "hold_add", "target": "s/b"}))
    assert sorted(r[4] for r in rows[1:]) == sorted("'" + f for f in FORMULAS)
    assert sorted(r[5] for r in audit[1:]) == sorted(["'" + f for f in FORMULAS] + ["case 4, released later"])
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows + audit for cell in row)


def test_holds_page_in_pages(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("s/a")
    made = [client.holds.add("stream", "s/a", f"hold number {i}") for i in range(57)]
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        first = browser.get("/holds").text
        assert hold_ids(first) == made[:50]
        found = re.search(r'href="(/holds\?[^"]*cursor=\d+)" rel="next"', first)
        assert found is not None
        second = browser.get(found.group(1).replace("&amp;", "&")).text
        assert hold_ids(second) == made[50:] and 'rel="next"' not in second
        assert len(csv_rows(browser.get("/holds.csv"))) == 1 + 57  # the download is every page


def test_legal_adds_and_removes_holds_and_viewers_cannot(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("s/a")
    viewer, viewer_csrf = logged_in(web, "viewer")
    legal, csrf = logged_in(web, "legal")
    with closing(viewer), closing(legal):
        page = viewer.get("/holds").text
        assert "Add a hold" not in page and "Remove hold" not in page
        form = {"kind": "stream", "target": "s/a", "reason": "litigation 12", "csrf_token": viewer_csrf}
        refused = viewer.post("/holds", data=form)
        assert refused.status_code == 403 and client.holds.list() == []
        # the legal token without the session's CSRF token: refused, nothing added
        assert legal.post("/holds", data={**form, "csrf_token": "forged"}).status_code == 403
        assert legal.post("/holds", data={k: v for k, v in form.items() if k != "csrf_token"}).status_code == 403
        assert client.holds.list() == []

        added = legal.post("/holds", data={**form, "csrf_token": csrf})
        assert added.status_code == 303, added.text
        [hold] = client.holds.list()
        assert added.headers["location"] == f"/holds?added={hold.id}"
        assert (hold.kind, hold.target, hold.reason, hold.created_by) == ("stream", "s/a", "litigation 12", "legal")
        page = legal.get(added.headers["location"]).text
        assert f"Hold {hold.id} added." in page and f"Remove hold {hold.id}" in page and "hx-confirm" in page

        bad = legal.post("/holds", data={**form, "target": "s/missing", "csrf_token": csrf})
        assert bad.status_code == 404 and "does not exist" in bad.text and len(client.holds.list()) == 1
        bad = legal.post("/holds", data={**form, "kind": "everything", "csrf_token": csrf})
        assert bad.status_code == 422 and "unknown hold kind" in bad.text and len(client.holds.list()) == 1
        bad = legal.post("/holds", data={**form, "reason": " ", "csrf_token": csrf})
        assert bad.status_code == 422 and "needs a reason" in bad.text and len(client.holds.list()) == 1
        assert legal.get("/holds", params={"kind": "everything"}).status_code == 422

        assert viewer.post(f"/holds/{hold.id}/remove", data={"csrf_token": viewer_csrf}).status_code == 403
        assert legal.post(f"/holds/{hold.id}/remove", headers={"X-CSRF-Token": "forged"}).status_code == 403
        assert client.holds.list() == [hold]
        removed = legal.post(f"/holds/{hold.id}/remove", headers={"X-CSRF-Token": csrf, "HX-Request": "true"})
        assert removed.status_code == 204 and removed.headers["HX-Redirect"] == f"/holds?removed={hold.id}"
        assert client.holds.list() == []
        assert [r["actor"] for r in client.audit("s/a") if r["action"].startswith("hold_")] == ["legal", "legal"]


def test_a_scoped_legal_token_holds_its_own_streams_only(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    for name in ("s/a", "t/c"):
        client.create_stream(name)
    client.holds.add("stream", "t/c", "another scope's")
    for target in ("s/a", "t/c"):
        client.holds.remove(client.holds.add("stream", target, f"released on {target}"))
    legal, csrf = logged_in(web, "scoped", token=web.token("s-legal", "legal", "s"))
    with closing(legal):
        assert "another scope" not in legal.get("/holds").text
        released = legal.get("/holds", params={"state": "released"}).text
        assert "released on s/a" in released and "released on t/c" not in released
        assert legal.get("/holds", params={"kind": "records"}).status_code == 200
        other = legal.post("/holds", data={"kind": "stream", "target": "t/c", "reason": "x", "csrf_token": csrf})
        assert other.status_code == 403
        records = legal.post("/holds", data={"kind": "records", "target": 'feed = "X"', "reason": "x",
                                             "csrf_token": csrf})
        assert records.status_code == 403 and len(client.holds.list()) == 1
        [theirs] = client.holds.list()
        assert legal.post(f"/holds/{theirs.id}/remove", data={"csrf_token": csrf}).status_code == 403
        assert legal.post("/holds", data={"kind": "stream", "target": "s/a", "reason": "x",
                                          "csrf_token": csrf}).status_code == 303


# ---- audit -------------------------------------------------------------------------------------
def audit_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<tr>\s*<td class="num">(\d+)</td><td>\d{4}-', page)]


def every_page(browser: httpx.Client, params: dict[str, Any]) -> list[int]:
    """The row ids of every page of the audit list, following its next links."""
    ids: list[int] = []
    answer = browser.get("/audit", params=params)
    while True:
        assert answer.status_code == 200, answer.text
        ids += audit_ids(answer.text)
        found = re.search(r'href="(/audit\?[^"]*)" rel="next"', answer.text)
        if found is None:
            return ids
        answer = browser.get(found.group(1).replace("&amp;", "&"))


def test_audit_filters_paging_and_csv(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    browser, _ = logged_in(web, "viewer")  # first: its token's creation is audited too
    seed_holds(client)
    for i in range(60):
        client.holds.add("stream", "s/a", f"bulk {i}")
    legal = web.as_role("legal")
    added = legal.post("/api/v1/holds", json={"kind": "stream", "target": "t/c", "reason": "by legal"})
    assert added.status_code == 201
    rows = [audit_document(r) for r in client.audit(limit=100_000)]
    middle = sorted(r["time_ms"] for r in rows)[len(rows) // 2]
    cases: list[tuple[dict[str, Any], Any]] = [
        ({}, lambda r: True),
        ({"action": "hold_remove"}, lambda r: r["action"] == "hold_remove"),
        ({"actor": "legal"}, lambda r: r["actor"] == "legal"),
        ({"target": "s/a", "action": "hold_add"}, lambda r: (r["target"], r["action"]) == ("s/a", "hold_add")),
        ({"since": str(middle)}, lambda r: r["time_ms"] >= middle),
        ({"until": str(middle)}, lambda r: r["time_ms"] <= middle),
        ({"actor": "nobody"}, lambda r: False),
    ]
    with closing(browser):
        for params, keep in cases:
            expected = [r for r in rows if keep(r)]
            assert every_page(browser, params) == [r["id"] for r in expected], params
            table = csv_rows(browser.get("/audit.csv", params=params))
            assert table[0][:4] == ["id", "time", "action", "target"]
            assert [(int(r[0]), r[2], r[3], r[6]) for r in table[1:]] == [
                (r["id"], r["action"], r["target"], r["actor"]) for r in expected], params
        assert len(audit_ids(browser.get("/audit").text)) == 50 < len(rows)
        bad = browser.get("/audit", params={"since": "yesterday-ish"})
        assert bad.status_code == 422 and "invalid since" in bad.text  # InvalidInput, as in the API
        assert browser.get("/audit.csv", params={"until": "not a time"}).status_code == 422


def test_audit_is_for_unscoped_tokens_only(web: LiveApi, sqlite_client: tk.Client) -> None:
    scoped, _ = logged_in(web, "scoped", token=web.token("s-admin", "admin", "s"))
    with closing(scoped):
        for path in ("/audit", "/audit.csv"):
            answer = scoped.get(path)
            assert answer.status_code == 403 and "scope" in answer.text, path
