"""The dashboard's catalog pages over real HTTP (docs/dashboard.md, "Catalog"): the rules editor's
validate, impact preview and save (roles, CSRF and the version as the API has them), records paged
by id, a record's explain page and the runs — each compared with what the API answers."""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import httpx
import pytest
from tests.helpers.api_server import LiveApi, live_api
from tests.web.test_web_session import browser_of, logged_in

import tidekeep as tk
from tidekeep.web import dashboard_app

DAY = 86_400_000
RULES = {"rules": [{"number": 1, "name": "short", "expression": 'feed = "A"', "age": "2 days"},
                   {"number": 2, "name": "rest", "expression": "all", "age": "forever"}]}
# the edit: feed B goes after 3 days instead of being kept forever by rule 2
EDITED = {"rules": [*RULES["rules"][:1], {"number": 2, "name": "b", "expression": 'feed = "B"', "age": "3 days"},
                    {"number": 3, "name": "rest", "expression": "all", "age": "forever"}]}


@pytest.fixture
def web(sqlite_client: tk.Client) -> Iterator[LiveApi]:
    with live_api(sqlite_client.workspace, app_factory=dashboard_app) as served:
        yield served


def add_records(client: tk.Client) -> list[int]:
    """Feeds A and B, half a day to five and a half days old: no record near a cutoff of whole days,
    so the dashboard's now and the API's now (a few milliseconds apart) decide alike."""
    now = client.workspace.clock.now_ms()
    return client.catalog.add([{"feed": feed, "type": "Events", "create_time": now - days * DAY - DAY // 2,
                                "file_size": 10 * (days + 1)} for feed in ("A", "B") for days in range(6)])


def htmx(csrf: str | None = None) -> dict[str, str]:
    return {"HX-Request": "true"} | ({"X-CSRF-Token": csrf} if csrf else {})


def text_of(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2)


def charts(page: str) -> dict[str, dict[str, Any]]:
    """The chart specs of a page's canvases, by canvas id."""
    return {m.group(1): json.loads(html.unescape(m.group(2)))
            for m in re.finditer(r'<canvas id="([^"]+)"[^>]*data-chart="([^"]+)"', page)}


def finished_job(http: httpx.Client, location: str) -> dict[str, Any]:
    for _ in range(1200):
        job: dict[str, Any] = http.get(location).json()
        if job["state"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {location} did not finish")


def impact_fragment(browser: httpx.Client, first: httpx.Response) -> str:
    """Follow the impact fragment's polling (its hx-get) until the result is there."""
    assert first.status_code == 200, first.text
    fragment = first.text
    for _ in range(1200):
        follow = re.search(r'hx-get="(/catalog/rules/impact/[0-9a-f]+)"', fragment)
        if follow is None:
            return fragment
        time.sleep(0.05)
        answer = browser.get(follow.group(1), headers=htmx())
        assert answer.status_code == 200, answer.text
        fragment = answer.text
    raise AssertionError("the impact preview did not finish")


def test_the_rules_page_lists_the_rules_in_precedence_order_with_the_editor(web: LiveApi,
                                                                            sqlite_client: tk.Client) -> None:
    sqlite_client.catalog.set_rules({"rules": [RULES["rules"][1], RULES["rules"][0]]})
    version = sqlite_client.catalog.rules().version
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/catalog").text
    rows = re.findall(r'<tr id="rule-(\d+)"', page)
    assert rows == ["1", "2"]  # rule 1 decides first, whatever order the file had
    assert f'<code id="rules-version">{version}</code>' in page and "2 Days" in page and "Forever" in page
    textarea = re.search(r'<textarea id="rules-text" name="rules"[^>]*>(.*?)</textarea>', page, re.S)
    assert textarea is not None
    # the editor holds the body PUT /api/v1/catalog/rules takes: saving it unchanged gives the same rules
    assert json.loads(html.unescape(textarea.group(1))) == {"rules": [r | {"enabled": True} for r in RULES["rules"]]}
    assert f'name="version" value="{version}"' in page
    # a viewer may validate only: no impact preview (operator), no save (admin)
    assert "Validate" in page and "Preview impact" not in page and 'id="save-rules"' not in page


def test_validate_shows_the_error_line_and_saves_nothing(web: LiveApi, sqlite_client: tk.Client) -> None:
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        good = browser.post("/catalog/rules/validate", data={"rules": text_of(EDITED)}, headers=htmx())
        assert good.status_code == 200 and "Valid" in good.text and "3 rules" in good.text
        for document, line in (
                ({"rules": [{"number": 1, "name": "x", "expression": "all", "age": "ten days"}]}, "rules: rule 1"),
                ({"rules": [{"number": 1, "name": "x", "expression": "feed in dictionary nope", "age": "1 days"}]},
                 "nope"),
                ({"rulez": []}, "rulez")):
            bad = browser.post("/catalog/rules/validate", data={"rules": text_of(document)}, headers=htmx())
            assert bad.status_code == 422 and "<strong>InvalidInput</strong>" in bad.text, bad.text
            assert line in bad.text and bad.text.count('role="alert"') == 1
        syntax = browser.post("/catalog/rules/validate", data={"rules": '{"rules": [\n  {"number": 1,,'},
                              headers=htmx())
        assert syntax.status_code == 422 and "invalid JSON at line 2" in syntax.text
        # text only: a path is not read
        path = browser.post("/catalog/rules/validate", data={"rules": "/etc/passwd"}, headers=htmx())
        assert path.status_code == 422 and "root:" not in path.text
    assert sqlite_client.catalog.rules().version == ""


def test_the_impact_chart_is_the_apis_impact_of_the_edited_rules(web: LiveApi, sqlite_client: tk.Client) -> None:
    add_records(sqlite_client)
    sqlite_client.catalog.set_rules(RULES)
    saved = sqlite_client.catalog.rules().version
    api = web.as_role("operator")
    response = api.post("/api/v1/catalog/impact", json={"rules": EDITED})
    assert response.status_code == 202, response.text
    expected = finished_job(api, response.json()["location"])["result"]
    per_rule: dict[int, list[int]] = {}
    for row in expected["rows"]:
        per_rule.setdefault(row["rule"], [0, 0])
        per_rule[row["rule"]][0] += row["rows"]
        per_rule[row["rule"]][1] += row["bytes"]
    assert sorted(per_rule) == [1, 2]  # both edited rules delete something: the chart has two bars

    browser, csrf = logged_in(web, "operator")
    with closing(browser):
        fragment = impact_fragment(browser, browser.post("/catalog/rules/impact", data={"rules": text_of(EDITED)},
                                                         headers=htmx(csrf)))
    drawn = charts(fragment)
    records, sizes = drawn["impact-records-chart"], drawn["impact-bytes-chart"]
    assert records["labels"] == sizes["labels"] == ["1 short", "2 b"]
    assert records["datasets"][0]["data"] == [per_rule[1][0], per_rule[2][0]]
    assert sizes["datasets"][0]["data"] == [per_rule[1][1], per_rule[2][1]] and sizes["bytes"] is True
    table = re.findall(r"<tr>\s*<td class=\"num\">(\d+)</td><td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td>", fragment)
    assert table == [(str(r["rule"]), r["rule_name"], r["age"], r["feed"]) for r in expected["rows"]]
    # the preview assessed the edit; the saved rules are as they were
    assert sqlite_client.catalog.rules().version == saved


def test_impact_needs_an_operator_and_bad_rules_start_nothing(web: LiveApi) -> None:
    jobs = web.server.state.jobs
    viewer, csrf = logged_in(web, "viewer")
    with closing(viewer):
        refused = viewer.post("/catalog/rules/impact", data={"rules": text_of(EDITED)}, headers=htmx(csrf))
        assert refused.status_code == 403 and "PermissionDenied" in refused.text
        assert refused.headers["HX-Retarget"] == "#messages"
    operator, csrf = logged_in(web, "operator")
    with closing(operator):
        bad = operator.post("/catalog/rules/impact", data={"rules": '{"rules": [{"number": 0}]}'}, headers=htmx(csrf))
        assert bad.status_code == 422 and "InvalidInput" in bad.text
        forged = operator.post("/catalog/rules/impact", data={"rules": text_of(EDITED)}, headers=htmx("forged"))
        assert forged.status_code == 403
        unknown = operator.get("/catalog/rules/impact/" + "0" * 32, headers=htmx())
        assert unknown.status_code == 404
    assert jobs.list() == []


def page_version(browser: httpx.Client) -> str:
    found = re.search(r'name="version" value="([^"]*)"', browser.get("/catalog").text)
    assert found is not None
    return found.group(1)


def test_save_with_the_version_and_a_stale_version_is_refused(web: LiveApi, sqlite_client: tk.Client) -> None:
    browser, csrf = logged_in(web, "admin")
    with closing(browser):
        loaded = page_version(browser)
        assert loaded == ""
        saved = browser.post("/catalog/rules", data={"rules": text_of(RULES), "version": loaded}, headers=htmx(csrf))
        version = sqlite_client.catalog.rules().version
        assert saved.status_code == 200 and saved.headers["HX-Redirect"] == f"/catalog?saved={version}"
        after = browser.get(saved.headers["HX-Redirect"]).text
        assert "Rules saved as version" in after and f'<code id="rules-version">{version}</code>' in after
        assert sqlite_client.catalog.saved_rules().updated_by == "admin"

        # someone else saves meanwhile: the editor's version is stale
        web.as_role("admin").put("/api/v1/catalog/rules", json=EDITED)
        current = sqlite_client.catalog.rules()
        stale = browser.post("/catalog/rules", data={"rules": text_of({"rules": []}), "version": version},
                             headers=htmx(csrf))
        assert stale.status_code == 412 and "<strong>StaleVersion</strong>" in stale.text
        assert stale.headers["HX-Retarget"] == "#messages"
        assert sqlite_client.catalog.rules() == current and len(current.rules) == 3
        # a plain form post (no htmx) is the same save: a page for the error, a redirect on success
        plain = browser.post("/catalog/rules", data={"rules": text_of(RULES), "version": version, "csrf_token": csrf})
        assert plain.status_code == 412 and "<h1>StaleVersion</h1>" in plain.text
        bad = browser.post("/catalog/rules", data={"rules": "rules: 3", "version": current.version}, headers=htmx(csrf))
        assert bad.status_code == 422 and sqlite_client.catalog.rules() == current
        fresh = browser.post("/catalog/rules", data={"rules": text_of(RULES), "version": current.version,
                                                     "csrf_token": csrf})
        assert fresh.status_code == 303 and sqlite_client.catalog.rules().version != current.version


def test_a_viewer_and_an_operator_cannot_save_and_csrf_is_checked(web: LiveApi, sqlite_client: tk.Client) -> None:
    sqlite_client.catalog.set_rules(RULES)
    before = sqlite_client.catalog.rules()
    for role in ("viewer", "operator", "legal"):
        browser, csrf = logged_in(web, role)
        with closing(browser):
            version = page_version(browser)
            refused = browser.post("/catalog/rules", data={"rules": text_of(EDITED), "version": version},
                                   headers=htmx(csrf))
            assert refused.status_code == 403 and "PermissionDenied" in refused.text, role
    admin, csrf = logged_in(web, "admin")
    with closing(admin):
        version = page_version(admin)
        assert 'id="save-rules"' in admin.get("/catalog").text
        for headers, data in (({}, {}), ({"X-CSRF-Token": "forged"}, {}), ({}, {"csrf_token": "forged"}),
                              ({"X-CSRF-Token": csrf, "Origin": "https://evil.example"}, {})):
            refused = admin.post("/catalog/rules", data={"rules": text_of(EDITED), "version": version} | data,
                                 headers=headers)
            assert refused.status_code == 403 and "CSRF" in refused.text, headers
    assert sqlite_client.catalog.rules() == before


def record_ids(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<a href="/catalog/records/(\d+)">', page)]


def all_pages(browser: httpx.Client, url: str) -> tuple[list[int], int]:
    """Every record id of a list, following its next links; and how many pages it took."""
    ids: list[int] = []
    pages = 0
    while url:
        page = browser.get(url)
        assert page.status_code == 200, page.text
        pages += 1
        ids += record_ids(page.text)
        found = re.search(r'<a href="([^"]+)" rel="next">', page.text)
        url = html.unescape(found.group(1)) if found else ""
    return ids, pages


def test_records_are_keyset_paged_each_exactly_once_with_filters(web: LiveApi, sqlite_client: tk.Client) -> None:
    ids = sqlite_client.catalog.add([{"feed": "A" if i % 3 else "B", "type": "Events" if i % 2 else "Logs",
                                      "create_time": 1_700_000_000_000 + i, "file_size": i} for i in range(250)])
    sqlite_client.catalog.add([{"feed": "C", "type": "Events", "create_time": 1_700_000_000_000,
                                "status": "LOCKED"}])
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        seen, pages = all_pages(browser, "/catalog/records")
        assert seen == [*ids, ids[-1] + 1] and pages == 6  # 251 records, 50 a page
        expected = [r.id for r in sqlite_client.catalog.records(feed="A", type="Events", limit=1000)]
        seen, pages = all_pages(browser, "/catalog/records?feed=A&type=Events&status=")
        assert seen == expected and len(expected) > 50 and pages == (len(expected) + 49) // 50
        locked, _ = all_pages(browser, "/catalog/records?status=LOCKED")
        assert locked == [ids[-1] + 1]
        second = browser.get("/catalog/records?feed=A").text
        assert 'href="/catalog/records?feed=A&amp;cursor=' in second and "First page" not in second
        none = browser.get("/catalog/records?feed=nothing")
        assert none.status_code == 200 and 'id="no-records"' in none.text
        for query in ("status=GONE", "cursor=bm90IGFuIGlk", "feed=A%00"):
            bad = browser.get(f"/catalog/records?{query}")
            assert bad.status_code == 422 and "InvalidInput" in bad.text, query


def test_the_explain_page_is_the_apis_explain(web: LiveApi, sqlite_client: tk.Client) -> None:
    ids = add_records(sqlite_client)
    sqlite_client.catalog.set_rules(RULES)
    hold_id = sqlite_client.holds.add("records", f'feed = "A" and id = {ids[4]}', "case 42")
    now = sqlite_client.workspace.clock.now_ms()
    api = web.as_role("viewer")
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        for record_id in (ids[0], ids[3], ids[4], ids[-1]):  # A young (kept), A old, A old and held, B (forever)
            expected = api.get(f"/api/v1/catalog/records/{record_id}/explain", params={"now": now}).json()
            page = browser.get(f"/catalog/records/{record_id}", params={"now": now})
            assert page.status_code == 200, page.text
            text = html.unescape(page.text)
            assert f'class="decision decision-{expected["decision"].lower()}">{expected["decision"]}<' in text
            assert f'<p id="reason">{expected["reason"]}</p>' in text
            assert f'<dd id="age">{expected["age"]}</dd>' in text
            assert [h["id"] for h in expected["holds"]] == ([hold_id] if record_id == ids[4] else [])
            for hold in expected["holds"]:
                assert f"<td class=\"num\">{hold['id']}</td><td>{hold['reason']}</td>" in text
            if expected["rule"] is None:
                assert "none (no rule matches)" in text
            else:
                rule = expected["rule"]
                assert f'href="/catalog#rule-{rule}">rule {rule} “{expected["rule_name"]}”' in text
            until = expected["retain_until_ms"]
            assert ("forever" if until is None else tk_time(until)) in text
        missing = browser.get("/catalog/records/999999")
        assert missing.status_code == 404 and "NotFound" in missing.text
        assert browser.get("/catalog/records/0").status_code == 422


def tk_time(ms: int) -> str:
    from tidekeep.units import iso_utc

    return iso_utc(ms).replace("T", " ").replace(".000Z", "Z")


def test_runs_list_and_a_runs_periods_and_rules(web: LiveApi, sqlite_client: tk.Client) -> None:
    add_records(sqlite_client)
    sqlite_client.catalog.set_rules(RULES)
    dry = sqlite_client.catalog.run(dry_run=True)
    real = sqlite_client.catalog.run()
    assert real.rows == 4 and dry.rows == 4  # feed A, 2.5 to 5.5 days old
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        runs = browser.get("/catalog/runs").text
        assert re.findall(r'<a href="/catalog/runs/(\d+)">', runs) == [str(real.run_id), str(dry.run_id)]
        for report in (real, dry):
            page = browser.get(f"/catalog/runs/{report.run_id}")
            assert page.status_code == 200, page.text
            text = page.text
            assert ("yes: nothing was changed" in text) == report.dry_run
            spec = charts(text)["run-rules-chart"]
            assert spec["labels"] == ["1 short"] and spec["datasets"][0]["data"] == [4]
            periods = re.findall(r"<tr>\s*<td>([^<]+)</td><td>([^<]+)</td><td>([^<]+)</td>", text)
            assert [(tk_time(p.from_ms), tk_time(p.to_ms), p.tracker_age) for p in report.periods] == periods
        assert browser.get("/catalog/runs/999999").status_code == 404


def test_a_scoped_token_is_refused_every_catalog_page(web: LiveApi, sqlite_client: tk.Client) -> None:
    sqlite_client.catalog.set_rules(RULES)
    before = sqlite_client.catalog.rules()
    token = web.token("scoped", "admin", scope="s")
    with browser_of(web) as browser:
        assert browser.post("/login", data={"token": token, "next": "/"}).status_code == 303
        csrf = re.search(r'name="csrf_token" value="([^"]+)"', browser.get("/").text)
        assert csrf is not None
        for path in ("/catalog", "/catalog/records", "/catalog/records/1", "/catalog/runs", "/catalog/runs/1"):
            refused = browser.get(path)
            assert refused.status_code == 403 and "PermissionDenied" in refused.text, path
        for path in ("/catalog/rules/validate", "/catalog/rules/impact", "/catalog/rules"):
            refused = browser.post(path, data={"rules": text_of(EDITED), "version": before.version},
                                   headers=htmx(csrf.group(1)))
            assert refused.status_code == 403, path
    assert sqlite_client.catalog.rules() == before and web.server.state.jobs.list() == []
