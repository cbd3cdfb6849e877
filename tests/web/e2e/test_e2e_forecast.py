"""What-if retention in a real browser against a live `tidekeep serve` (tests/helpers/dashboard.py): on
a stream's page a viewer proposes a policy, and the forecast's chart is drawn (Chart.js, bars per day:
the policy's and the proposed one's) with the bytes the API forecasts for the same proposal; the
table lists every day; no serious accessibility violation; a screenshot."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from tests.helpers.dashboard import Served, axe_violations, describe


def test_a_proposed_policy_is_forecast_and_charted(login: Callable[[str], Any], served: Served,
                                                   shot: Callable[[Any, str], Path]) -> None:
    # keep at least 1 GiB: the policy deletes nothing; the proposed "keep at least 0 B" deletes all but nothing
    scope, stream = f"fc{uuid.uuid4().hex[:8]}", "orders"
    path = f"/api/v1/scopes/{scope}/streams"
    served.call("POST", path, "operator", json={"name": stream, "segments": 2,
                                                "retention": {"kind": "size", "min": "1GiB"}})
    events = [{"data": f"order {i}", "routing_key": f"customer-{i % 5}"} for i in range(60)]
    assert served.call("POST", f"{path}/{stream}/events", "operator", json={"events": events})["events"] == 60
    head = served.call("GET", f"{path}/{stream}/head")["cut"]
    viewer = login("viewer")
    viewer.goto(f"/streams/{scope}/{stream}")
    viewer.select_option("#forecast-kind", "size")
    viewer.fill("#forecast-low", "0")
    viewer.fill("#forecast-days", "3")
    viewer.get_by_role("button", name="Forecast").click()
    chart = viewer.locator("#forecast-chart")
    chart.wait_for()
    # Playwright's own waits: wait_for_function would evaluate a string in the page, which its CSP forbids
    expect(chart).to_have_attribute("data-drawn", "1")
    box = chart.bounding_box()
    assert box is not None and box["width"] > 100 and box["height"] > 50
    spec = json.loads(chart.get_attribute("data-chart") or "{}")
    assert spec["labels"] == ["now", "day 1", "day 2", "day 3"]
    assert [d["label"] for d in spec["datasets"]] == ["current policy",
                                                      "proposed (by size: keep at least 0 B (no maximum))"]
    expected = served.call("POST", "/api/v1/retention/simulate", "viewer",
                           json={"stream": f"{scope}/{stream}", "policy": {"kind": "size", "min": 0}, "days": 3})
    assert spec["datasets"][1]["data"] == [d["bytes"] for d in expected["by_day"]]
    assert spec["datasets"][1]["data"][0] > 0 and not any(spec["datasets"][0]["data"])
    assert viewer.locator("#forecast-table tbody tr").count() == 4
    shot(viewer, "forecast")
    assert axe_violations(viewer) == [], describe(axe_violations(viewer))
    # the forecasts changed nothing: the head is where it was, nothing was truncated
    assert served.call("GET", f"{path}/{stream}/head")["cut"] == head
    assert served.call("GET", f"{path}/{stream}/retention/history")["items"] == []
