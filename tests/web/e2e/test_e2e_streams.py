"""The streams area in a real browser against a live `tidekeep serve` (tests/helpers/dashboard.py):
a stream created through the API and written with the CLI is listed; its page runs a retention
preview; a hold added in the page makes the truncation refused; a viewer sees no destructive action.
Screenshots of the list and the stream page; no serious accessibility violation on either."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from playwright.sync_api import expect
from tests.helpers.dashboard import Served, axe_violations, describe


def written_stream(served: Served) -> tuple[str, str]:
    """A new stream with a size policy (keep at least 1 GiB: the server's retention cycles leave it
    be while the test reads its head), created and scaled through the API (a
    split, then a merge of the split's parts: five segments over three epochs) and written through
    the API between the steps."""
    scope, stream = f"web{uuid.uuid4().hex[:8]}", "orders"
    path = f"/api/v1/scopes/{scope}/streams"
    served.call("POST", path, "operator",
                json={"name": stream, "segments": 2, "retention": {"kind": "size", "min": "1GiB"}})
    events = [{"data": f"order {i},customer-{i % 7}", "routing_key": f"customer-{i % 7}"} for i in range(100)]

    def write() -> None:
        written = served.call("POST", f"{path}/{stream}/events", "operator", json={"events": events})
        assert written["events"] == len(events)

    write()
    parts = served.call("POST", f"{path}/{stream}/split", "operator", json={"segment": "0.0", "parts": 2})
    write()
    served.call("POST", f"{path}/{stream}/merge", "operator",
                json={"segments": [s["segment"] for s in parts["new_segments"]]})
    return scope, stream


def test_list_stream_page_preview_hold_and_roles(login: Callable[[str], Any], served: Served,
                                                 shot: Callable[[Any, str], Path]) -> None:
    scope, stream = written_stream(served)
    name = f"{scope}/{stream}"
    operator = login("operator")

    # listed, with its size, under the name filter
    operator.goto(f"/streams?q={stream}&scope={scope}")
    row = operator.locator("table.streams tbody tr", has=operator.get_by_role("link", name=stream))
    assert row.count() == 1
    cells = row.locator("td").all_inner_texts()
    assert cells[1:] == [scope, "2 of 5", cells[3], "200", "by size: keep at least 1 GiB (no maximum)", "active"]
    assert cells[3].endswith("KiB")
    operator.goto("/streams")
    shot(operator, "list")
    assert axe_violations(operator) == [], describe(axe_violations(operator))

    # the stream page and a retention preview: the case, the cut, the reason
    operator.goto(f"/streams?q={stream}&scope={scope}")
    operator.get_by_role("link", name=stream).click()
    operator.wait_for_url(re.compile(rf".*/streams/{scope}/{stream}$"))
    assert operator.locator("h1").inner_text().startswith(f"Stream {name}")
    head = served.call("GET", f"/api/v1/scopes/{scope}/streams/{stream}/head")["cut"]
    assert operator.locator("#head-cut").inner_text() == head
    assert operator.locator("svg.segments rect").count() == 5
    assert operator.locator("svg.segments line.link").count() == 4  # 0.0 to its two parts, the parts to the merge
    operator.get_by_role("button", name="Preview retention").click()
    reason = operator.locator("#preview-reason")
    reason.wait_for()
    expected = served.call("GET", f"/api/v1/scopes/{scope}/streams/{stream}/retention/preview")
    assert reason.inner_text() == expected["reason"]
    assert operator.locator("#preview-case").inner_text() == "no consumption case (no subscriber)"
    assert expected["cut"] is None and operator.locator("#preview-cut").inner_text().startswith("none")
    # Playwright's own waits: wait_for_function would evaluate a string in the page, which its CSP forbids
    expect(operator.locator("canvas[data-chart]").first).to_have_attribute("data-drawn", "1")
    shot(operator, "stream")
    assert axe_violations(operator) == [], describe(axe_violations(operator))

    # a truncation to the tail, confirmed: the message, and the head in the page moves without a reload
    tail = served.call("GET", f"/api/v1/scopes/{scope}/streams/{stream}/tail")["cut"]
    operator.fill("#truncate-cut", "tail")
    operator.fill("#truncate-reason", "emptied in the browser")
    operator.once("dialog", lambda dialog: dialog.accept())
    operator.get_by_role("button", name="Truncate", exact=True).click()
    operator.locator("#messages .ok").wait_for()
    assert operator.locator("#messages").inner_text().startswith(f"Truncated {name}")
    expect(operator.locator("#head-cut")).to_have_text(tail)
    head = served.call("GET", f"/api/v1/scopes/{scope}/streams/{stream}/head")["cut"]
    assert head == tail

    # a legal hold added in the page
    legal = login("legal")
    legal.goto(f"/streams/{scope}/{stream}")
    assert legal.locator("#truncate-form").count() == 0
    legal.fill("#hold-reason", "litigation 7")
    legal.get_by_role("button", name="Add hold").click()
    legal.get_by_text(re.compile(r"Hold \d+ added")).wait_for()
    assert "litigation 7" in legal.locator("#holds").inner_text()

    # ...and the operator's truncation is refused, after the confirmation, with the hold named
    operator.reload()
    assert "litigation 7" in operator.locator("#holds").inner_text()
    operator.fill("#truncate-cut", "tail")
    operator.once("dialog", lambda dialog: dialog.accept())
    operator.get_by_role("button", name="Truncate", exact=True).click()
    alert = operator.locator("#messages .error")
    alert.wait_for()
    assert alert.inner_text().startswith("HoldActive")
    assert served.call("GET", f"/api/v1/scopes/{scope}/streams/{stream}/head")["cut"] == head

    # a viewer sees the page and the preview, and no destructive action
    viewer = login("viewer")
    viewer.goto(f"/streams/{scope}/{stream}")
    assert viewer.locator("#truncate-form").count() == 0 and viewer.locator("#hold-form").count() == 0
    assert viewer.get_by_role("button", name=re.compile("Truncate|Add hold")).count() == 0
    viewer.get_by_role("button", name="Preview retention").click()
    viewer.locator("#preview-reason").wait_for()
    assert viewer.get_by_role("button", name=re.compile("Truncate")).count() == 0
