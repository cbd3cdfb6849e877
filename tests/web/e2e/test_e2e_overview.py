"""The overview, reader groups, holds and audit pages in headless Chromium against a live
`tidekeep serve` (tests/helpers/dashboard.py): each page drawn, screenshotted and checked with
axe-core; a hold added through the UI by the legal role, listed, exported as CSV and removed."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.dashboard import Served, axe_violations, describe

Shot = Callable[[Any, str], Any]


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


def check_page(page: Any, shot: Shot, name: str) -> None:
    shot(page, name)
    violations = axe_violations(page)
    assert violations == [], describe(violations)


def test_overview(login: Callable[[str], Any], served: Served, shot: Shot) -> None:
    scope = unique("ov")
    served.call("POST", f"/api/v1/scopes/{scope}/streams", "operator", json={"name": "a"})
    served.call("POST", "/api/v1/holds", "legal", json={"kind": "stream", "target": f"{scope}/a", "reason": "e2e"})
    page = login("admin")
    assert page.get_by_role("heading", level=1).inner_text() == "Overview"
    page.wait_for_selector("#deletions-chart[data-drawn='1']")  # Chart.js drew it (static/app.js)
    assert page.locator("#hold-count").inner_text().isdigit()
    assert page.get_by_role("heading", name="Next scheduled runs").is_visible()
    assert page.get_by_role("heading", name="Controllers and leases").is_visible()
    assert page.locator("td", has_text="member:").count() >= 1  # the serve process itself
    check_page(page, shot, "overview")


def test_reader_groups(login: Callable[[str], Any], served: Served, shot: Shot) -> None:
    scope, group = unique("rg"), unique("group")
    for stream in ("a", "b"):
        served.call("POST", f"/api/v1/scopes/{scope}/streams", "operator", json={"name": stream})
    served.call("POST", "/api/v1/reader-groups", "operator",
                json={"name": group, "streams": [f"{scope}/a", f"{scope}/b"]})
    served.call("POST", f"/api/v1/reader-groups/{group}/checkpoints", "operator", json={"name": "first", "wait": 5})
    page = login("viewer")
    page.goto(f"/readergroups?scope={scope}")
    page.get_by_role("link", name=group).click()
    page.wait_for_url(f"**/readergroups/{scope}/{group}")
    assert page.get_by_role("heading", level=1).inner_text() == f"Reader group {group}"
    assert page.locator("td", has_text=f"{scope}/a").count() >= 1
    assert page.get_by_role("cell", name="first", exact=True).is_visible()
    check_page(page, shot, "group")
    page.goto("/readergroups")
    check_page(page, shot, "list")


def test_holds_added_exported_and_removed_in_the_ui(login: Callable[[str], Any], served: Served, shot: Shot) -> None:
    scope = unique("hd")
    served.call("POST", f"/api/v1/scopes/{scope}/streams", "operator", json={"name": "a"})
    viewer = login("viewer")
    viewer.goto("/holds")
    assert viewer.get_by_role("button", name="Add hold").count() == 0
    assert viewer.get_by_role("button", name="Remove hold").count() == 0

    page = login("legal")
    page.goto("/holds")
    page.select_option("#h-kind", "stream")
    page.fill("#h-target", f"{scope}/a")
    page.fill("#h-reason", "=e2e matter 42")
    page.get_by_role("button", name="Add hold").click()
    page.wait_for_url("**/holds?added=*")
    assert page.locator("p.ok").inner_text().endswith("added.")
    row = page.locator("tr", has_text=f"{scope}/a")
    assert row.count() == 1 and "=e2e matter 42" in row.inner_text()

    page.fill("#f-q", scope)
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(f"**q={scope}**")
    check_page(page, shot, "holds")
    with page.expect_download() as downloading:
        page.get_by_role("link", name="Export CSV").click()
    download = downloading.value
    rows = list(csv.reader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))
    assert download.suggested_filename == "holds-active.csv"
    assert [(r[2], r[3], r[4]) for r in rows[1:]] == [("stream", f"{scope}/a", "'=e2e matter 42")]

    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove hold").click()
    page.wait_for_url("**/holds?removed=*")
    assert page.locator("tr", has_text=f"{scope}/a").count() == 0
    assert served.call("GET", "/api/v1/holds", "viewer", params={"target": f"{scope}/a"})["items"] == []


def test_audit_filtered(login: Callable[[str], Any], served: Served, shot: Shot) -> None:
    scope = unique("au")
    served.call("POST", f"/api/v1/scopes/{scope}/streams", "operator", json={"name": "a"})
    served.call("POST", "/api/v1/holds", "legal", json={"kind": "stream", "target": f"{scope}/a", "reason": "audited"})
    page = login("admin")
    page.goto("/audit")
    page.fill("#a-target", f"{scope}/a")
    page.fill("#a-action", "hold_add")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/audit?*hold_add*")
    rows = page.locator("tbody tr")
    assert rows.count() == 1 and "legal" in rows.inner_text() and "audited" in rows.inner_text()
    check_page(page, shot, "audit")
