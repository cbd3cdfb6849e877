"""The archives pages in a real browser against a live `tidekeep serve`: a log file ingested through
the API's ingest route, the datasets page, the dataset's timeline, a search run from the form and
its results paged, the GC preview and a GC run behind its confirmation (tests/helpers/dashboard.py)."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.helpers.dashboard import ARCHIVE_RETENTION_MINUTES, Served, axe_violations, describe

from tidekeep.units import iso_utc

HITS = 12


def ingested(served: Served, dataset: str, log: Path) -> dict[str, Any]:
    """Ingest `log` into `dataset` through POST /api/v1/archives/datasets/{dataset}/ingest; the job's report."""
    accepted = served.call("POST", f"/api/v1/archives/datasets/{dataset}/ingest", "operator",
                           json={"paths": [str(log)], "timezone": "UTC"})
    deadline = time.monotonic() + 300
    while True:
        job = served.call("GET", accepted["location"], "operator")
        if job["finished_ms"] is not None:
            assert job["state"] == "succeeded", job
            report: dict[str, Any] = job["result"]
            return report
        assert time.monotonic() < deadline, job
        time.sleep(0.5)


def accessible(page: Any) -> None:
    found = axe_violations(page)
    assert found == [], describe(found)


def result_rows(page: Any) -> list[str]:
    return [text.strip() for text in page.locator("#results tbody pre.message").all_inner_texts()]


def test_archives_datasets_timeline_search_and_gc(served: Served, login: Callable[[str], Any],
                                                  shot: Callable[[Any, str], Path], tmp_path: Path) -> None:
    dataset = f"e2e-{uuid.uuid4().hex[:8]}"
    now = int(time.time() * 1000)
    log = tmp_path / "app.log"
    lines = [f"{iso_utc(now - (HITS - i) * 60_000)} INFO request {i} hit" for i in range(HITS)]
    log.write_text("\n".join([*lines, f"{iso_utc(now - 30_000)} WARN slow disk"]) + "\n")
    report = ingested(served, dataset, log)
    assert report["messages"] == HITS + 1

    viewer = login("viewer")
    viewer.goto("/archives")
    row = viewer.locator(f'tr[data-dataset="{dataset}"]')
    assert row.locator("td").nth(1).inner_text() == str(len(report["archives"]))
    assert row.locator("td").nth(2).inner_text() == str(HITS + 1)
    shot(viewer, "datasets")
    accessible(viewer)

    row.get_by_role("link", name=dataset).click()
    viewer.wait_for_url(re.compile(rf".*/archives/datasets/{dataset}$"))
    assert viewer.locator("svg#timeline rect.bar").count() == len(report["archives"])
    # the expiry line (now - retention) and the archive that goes next, when its newest message passes retention
    expiry_ms = int(viewer.locator("#expiry-line").get_attribute("data-expiry-ms") or "")
    retention_ms = ARCHIVE_RETENTION_MINUTES * 60_000
    assert now - retention_ms <= expiry_ms <= int(time.time() * 1000) - retention_ms
    newest = max(archive["end_ts"] for archive in report["archives"])
    next_to_go = viewer.locator("#next-to-go")
    assert int(next_to_go.get_attribute("data-expires-ms") or "") == min(
        archive["end_ts"] for archive in report["archives"]) + ARCHIVE_RETENTION_MINUTES * 60_000
    assert newest < now and viewer.locator("rect.bar-expired").count() == 0
    assert viewer.locator("#archives tbody tr").count() == len(report["archives"])
    shot(viewer, "timeline")
    accessible(viewer)
    # a viewer may read but not start a search, as in the API
    viewer.goto(f"/archives/search?dataset={dataset}")
    assert viewer.locator("#search-form").count() == 0
    assert "needs the operator role" in viewer.locator("main").inner_text()

    operator = login("operator")
    operator.goto(f"/archives/search?dataset={dataset}")
    shot(operator, "search-form")
    accessible(operator)
    operator.fill("#query", "request * hit")
    operator.fill("#page_size", "5")
    operator.get_by_role("button", name="Search").click()
    operator.wait_for_url(re.compile(r".*/archives/searches/\d+\?limit=5$"))
    # htmx polls the progress every second until the search has ended
    operator.locator('#search-live[data-state="SUCCEEDED"]').wait_for(timeout=240_000)
    assert operator.locator("#results-total").inner_text() == str(HITS)
    first = result_rows(operator)
    assert len(first) == 5 and all("hit" in r for r in first)
    shot(operator, "search-results")
    accessible(operator)

    seen = list(first)
    while operator.get_by_role("link", name="Next page").count():
        operator.get_by_role("link", name="Next page").click()
        operator.wait_for_url(re.compile(r".*cursor=.*"))
        rows = result_rows(operator)
        assert rows and not set(rows) & set(seen), "the next page shows other rows"
        seen += rows
    assert len(seen) == len(set(seen)) == HITS
    assert seen == list(reversed(lines))  # newest first
    shot(operator, "search-results-last-page")

    operator.goto("/archives/gc")
    preview = operator.locator("#gc-archives").inner_text()
    assert f"Retention {ARCHIVE_RETENTION_MINUTES} min" in preview and "Would delete: 0 (0 B)" in preview
    shot(operator, "gc-preview")
    accessible(operator)
    operator.once("dialog", lambda dialog: dialog.accept())
    operator.get_by_role("button", name="Run garbage collection").click()
    operator.locator('#gc-job[data-state="succeeded"]').wait_for(timeout=60_000)
    shot(operator, "gc-run")
    accessible(operator)
    assert len(served.call("GET", f"/api/v1/archives/datasets/{dataset}/archives", "viewer")["items"]) == len(
        report["archives"])  # every archive is younger than its retention
