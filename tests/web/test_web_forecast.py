"""The dashboard's what-if retention (docs/dashboard.md) over real HTTP: the stream page's forecast of
its policy and of a proposed one, and a dataset page's of its retention period and a proposed one —
bars per day whose data are the forecasts the library computes from the same now, a table of the
same days; a held stream's bars of what the hold keeps; a bad proposal is a one-line error."""

from __future__ import annotations

import json
import re
from contextlib import closing
from html import unescape
from typing import Any

from tests.helpers.api_server import LiveApi
from tests.helpers.archives import make_archive
from tests.helpers.web_client import logged_in

import tidekeep as tk
from tidekeep.web.forecast_chart import forecast_chart

HOUR = 3_600_000
HTMX = {"HX-Request": "true"}


def chart_of(fragment: str) -> dict[str, Any]:
    found = re.search(r'<canvas id="forecast-chart"[^>]*data-chart="([^"]*)"', fragment)
    assert found is not None, fragment
    return json.loads(unescape(found.group(1)))


def now_of(fragment: str) -> int:
    found = re.search(r'data-now-ms="(\d+)"', fragment)
    assert found is not None
    return int(found.group(1))


def stream_with_history(client: tk.Client) -> tk.Stream:
    """A stream whose retention set was recorded over the last day (cycles at explicit times), under a
    time policy of 12 hours."""
    client.create_stream("web/orders", tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(10**9)))
    handle = client.stream("web/orders")
    start = client.clock.now_ms() - 30 * HOUR
    for hour in range(0, 30, 6):
        with handle.writer("w") as writer:
            writer.write_many([b"x" * 50] * 4, [f"k{i}" for i in range(4)])
        handle.retention.run(start + hour * HOUR)
    handle.update(tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_time("12h")))
    return handle


def test_the_stream_forecast_charts_the_policy_and_a_proposed_one(web: LiveApi, sqlite_client: tk.Client) -> None:
    handle = stream_with_history(sqlite_client)
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/streams/web/orders")
        assert page.status_code == 200 and 'id="forecast-form"' in page.text
        current = browser.get("/streams/web/orders/forecast", params={"days": 3}, headers=HTMX)
        assert current.status_code == 200, current.text
        now = now_of(current.text)
        expected = handle.retention.simulate(now=now, days=3).forecast().to_dict()
        spec = chart_of(current.text)
        assert spec == forecast_chart([("current policy", expected)])
        assert spec["labels"] == ["now", "day 1", "day 2", "day 3"] and spec["type"] == "bar" and spec["bytes"]
        assert spec["datasets"][0]["data"] == [d["bytes"] for d in expected["by_day"]] and expected["totals"]["bytes"]
        proposed = browser.get("/streams/web/orders/forecast", headers=HTMX,
                               params={"kind": "size", "low": "100", "high": "300", "days": 3})
        assert proposed.status_code == 200, proposed.text
        now = now_of(proposed.text)
        mine = handle.retention.simulate(tk.RetentionPolicy.by_size(100, 300), now, 3).forecast().to_dict()
        spec = chart_of(proposed.text)
        assert [d["label"] for d in spec["datasets"]] == [
            "current policy", "proposed (by size: keep at least 100 B and at most 300 B)"]
        assert spec["datasets"][1]["data"] == [d["bytes"] for d in mine["by_day"]]
        assert spec["datasets"][0]["data"] == [d["bytes"] for d in handle.retention.simulate(
            now=now, days=3).forecast().to_dict()["by_day"]]
        table = re.search(r'<table id="forecast-table">.*?</table>', proposed.text, re.S)
        assert table is not None and table.group(0).count("<tr>") == 1 + 4  # the header and days 0..3
        # held: nothing goes, and the bars say what the hold keeps
        sqlite_client.holds.add("stream", "web/orders", "litigation")
        held = browser.get("/streams/web/orders/forecast", params={"days": 3}, headers=HTMX)
        spec = chart_of(held.text)
        assert [d["label"] for d in spec["datasets"]] == ["current policy", "current policy, held"]
        assert not any(spec["datasets"][0]["data"]) and sum(spec["datasets"][1]["data"]) == expected["totals"]["bytes"]
        assert "held by hold" in held.text
        for params, message in (({"kind": "size"}, "the proposed policy needs its minimum"),
                                ({"kind": "time", "low": "2h", "high": "1h"}, "max 1h is less than min 2h"),
                                ({"days": 400}, "invalid days 400")):
            refused = browser.get("/streams/web/orders/forecast", params=params, headers=HTMX)
            assert refused.status_code == 422 and message in unescape(refused.text), (params, refused.text)


def test_the_dataset_forecast_charts_the_period_and_a_proposed_one(web: LiveApi, sqlite_client: tk.Client) -> None:
    now = sqlite_client.clock.now_ms()
    for hours in (100, 50, 30, 5):
        make_archive(sqlite_client, "web", [(now - hours * HOUR, f"line {hours}")])
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/archives/datasets/web")
        assert page.status_code == 200 and 'id="forecast-form"' in page.text
        answer = browser.get("/archives/datasets/web/forecast", params={"retention": "2d", "days": 2}, headers=HTMX)
        assert answer.status_code == 200, answer.text
        at = now_of(answer.text)
        current = sqlite_client.archives.forecast("web", None, at, 2).to_dict()
        proposed = sqlite_client.archives.forecast("web", "2d", at, 2).to_dict()
        assert chart_of(answer.text) == forecast_chart([("current retention", current),
                                                        ("proposed (2880 min)", proposed)])
        # the fixture's workspace has no retention period: nothing expires; under the proposed 2 days the
        # archives 100h and 50h old go now, the 30h old one 18h later, the 5h old one on day 2
        assert current["lines"] == [] and [d["items"] for d in proposed["by_day"]] == [2, 1, 1]
        refused = browser.get("/archives/datasets/web/forecast", params={"retention": "90s"}, headers=HTMX)
        assert refused.status_code == 422 and "not a whole number of minutes" in unescape(refused.text)
        assert browser.get("/archives/datasets/nope/forecast", headers=HTMX).status_code == 404
