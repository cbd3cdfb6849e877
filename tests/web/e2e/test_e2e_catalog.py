"""The catalog pages in a real browser against a live `tidekeep serve` (tests/helpers/dashboard.py):
edit a rule and see the impact chart drawn before saving, a stale save refused, a save's new
version, a record's explain page, the runs and a run's periods; a viewer sees no save. Screenshots
of each page; no serious accessibility violation on any."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

from tests.helpers.dashboard import Served, axe_violations, cli, describe

DAY = 86_400_000


def feeds(test: str) -> tuple[str, str]:
    """Feeds A and B of one test: the browser tests share one workspace, so each has names of its own."""
    return f"E2E_{test.upper()}_A", f"E2E_{test.upper()}_B"


def rules(a: str) -> dict[str, Any]:
    return {"rules": [{"number": 1, "name": "short", "expression": f'feed = "{a}"', "age": "2 days"},
                      {"number": 2, "name": "rest", "expression": "all", "age": "forever"}]}


def edited(a: str, b: str) -> dict[str, Any]:
    """The edit: feed B is no longer kept forever."""
    return {"rules": [rules(a)["rules"][0],
                      {"number": 2, "name": "b logs", "expression": f'feed = "{b}"', "age": "3 days"},
                      {"number": 3, "name": "rest", "expression": "all", "age": "forever"}]}


def add_records(served: Served, a: str, b: str) -> list[int]:
    """Records of feeds a and b, half a day to five and a half days old, through the CLI."""
    now = int(time.time() * 1000)
    records = [{"feed": feed, "type": "Events", "create_time": now - days * DAY - DAY // 2,
                "file_size": 1024 * (days + 1)} for feed in (a, b) for days in range(6)]
    done = cli(served.home, "catalog", "add", json.dumps(records), "--json")
    assert done.returncode == 0, done.stderr
    ids: list[int] = json.loads(done.stdout)["ids"]
    return ids


def finished_job(served: Served, location: str) -> dict[str, Any]:
    for _ in range(1200):
        job: dict[str, Any] = served.call("GET", location)
        if job["state"] in ("succeeded", "failed"):
            assert job["state"] == "succeeded", job
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {location} did not finish")


def check_page(page: Any, shot: Callable[[Any, str], Any], name: str) -> None:
    shot(page, name)
    violations = axe_violations(page)
    assert violations == [], describe(violations)


def test_edit_rules_preview_the_impact_then_save(login: Callable[[str], Any], served: Served,
                                                 shot: Callable[[Any, str], Any]) -> None:
    a, b = feeds("edit")
    add_records(served, a, b)
    served.call("PUT", "/api/v1/catalog/rules", json=rules(a))
    saved = served.call("GET", "/api/v1/catalog/rules")["version"]

    page = login("admin")
    page.goto("/catalog")
    assert page.locator("#rules-version").inner_text() == saved
    assert page.locator("#rules-table tbody tr").count() == 2
    check_page(page, shot, "rules")

    # edit: feed B is no longer kept forever; preview before saving
    page.fill("#rules-text", json.dumps(edited(a, b), indent=2))
    page.get_by_role("button", name="Validate").click()
    page.wait_for_selector("#validation .ok")
    assert page.locator("#validation").inner_text().startswith("Valid: 3 rules")
    page.get_by_role("button", name="Preview impact").click()
    chart = page.locator("#impact-records-chart")
    chart.wait_for()
    page.wait_for_selector("#impact-records-chart[data-drawn='1']")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 0 and box["height"] > 0
    # Chart.js drew into the canvas: its bitmap has been sized and holds coloured pixels
    assert page.evaluate("() => { const c = document.getElementById('impact-records-chart');"
                         " const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
                         " return c.width > 0 && d.some((v, i) => i % 4 === 3 && v > 0); }")
    assert page.locator("#impact-bytes-chart[data-drawn='1']").count() == 1
    rows = page.locator("#impact-table tbody tr")
    assert rows.count() == 2
    assert [rows.nth(i).locator("td").nth(3).inner_text() for i in range(2)] == [a, b]
    # nothing saved yet
    assert served.call("GET", "/api/v1/catalog/rules")["version"] == saved
    assert page.locator("#rules-version").inner_text() == saved
    check_page(page, shot, "impact-preview")

    # someone saves meanwhile: this editor's version is stale, its save is refused and saves nothing
    served.call("PUT", "/api/v1/catalog/rules", json=rules(a))
    meanwhile = served.call("GET", "/api/v1/catalog/rules")["version"]
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("#messages .error")
    assert page.locator("#messages").inner_text().startswith("StaleVersion:")
    assert served.call("GET", "/api/v1/catalog/rules")["version"] == meanwhile
    shot(page, "stale-save")

    page.goto("/catalog")
    page.fill("#rules-text", json.dumps(edited(a, b), indent=2))
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r".*/catalog\?saved="))
    current = served.call("GET", "/api/v1/catalog/rules")
    assert current["version"] not in (saved, meanwhile) and len(current["rules"]) == 3
    assert current["updated_by"] == "admin"
    assert page.locator("#rules-version").inner_text() == current["version"]
    assert page.locator("#saved").is_visible()
    assert page.locator("#rules-table tbody tr").count() == 3
    check_page(page, shot, "saved")


def test_records_explain_and_runs(login: Callable[[str], Any], served: Served,
                                  shot: Callable[[Any, str], Any]) -> None:
    a, b = feeds("explain")
    ids = add_records(served, a, b)
    served.call("PUT", "/api/v1/catalog/rules", json=rules(a))
    dry = finished_job(served, served.call("POST", "/api/v1/catalog/runs", json={"dry_run": True})["location"])
    run_id = dry["result"]["run_id"]

    page = login("viewer")
    page.goto(f"/catalog/records?feed={a}")
    page.wait_for_selector("#records-table")
    listed = page.locator("#records-table tbody tr td:first-child a").all_inner_texts()
    assert listed == [str(i) for i in ids[:6]]
    check_page(page, shot, "records")

    old = ids[4]  # feed A, 4.5 days old: rule 1 (2 days) deletes it on the next run
    page.get_by_role("link", name=str(old), exact=True).click()
    page.wait_for_url(re.compile(rf".*/catalog/records/{old}$"))
    expected = served.call("GET", f"/api/v1/catalog/records/{old}/explain", role="viewer")
    assert expected["decision"] == "DELETE"
    assert page.locator("#decision").inner_text() == "DELETE"
    assert page.locator("#reason").inner_text() == expected["reason"]
    assert page.locator("#deciding-rule").inner_text() == "rule 1 “short”"
    assert page.locator("#age").inner_text() == "2 Days"
    check_page(page, shot, "explain")

    page.goto("/catalog/runs")
    link = page.locator(f"#runs-table a[href='/catalog/runs/{run_id}']")
    assert link.count() == 1
    check_page(page, shot, "runs")
    link.click()
    page.wait_for_url(re.compile(rf".*/catalog/runs/{run_id}$"))
    assert page.locator("#run-dry").inner_text().startswith("yes")
    assert page.locator("#periods-table tbody tr").count() == len(dry["result"]["periods"]) > 0
    page.wait_for_selector("#run-rules-chart[data-drawn='1']")
    check_page(page, shot, "run")


def test_a_viewer_validates_but_sees_no_preview_or_save(login: Callable[[str], Any], served: Served,
                                                        shot: Callable[[Any, str], Any]) -> None:
    page = login("viewer")
    page.goto("/catalog")
    assert page.get_by_role("button", name="Validate").count() == 1
    assert page.get_by_role("button", name="Save").count() == 0
    assert page.get_by_role("button", name="Preview impact").count() == 0
    page.fill("#rules-text", '{"rules": [{"number": 1, "name": "x", "expression": "all", "age": "ten days"}]}')
    page.get_by_role("button", name="Validate").click()
    page.wait_for_selector("#validation .error")
    assert page.locator("#validation").inner_text().startswith("InvalidInput: rules: rule 1")
    check_page(page, shot, "viewer-validate")
