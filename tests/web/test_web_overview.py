"""The overview against the store it summarises: bytes per family, the deletions chart from the
audit rows of the last 24 hours, holds, failed jobs, schedule and leases; a scoped token sees its
scope's figures only (docs/dashboard.md, "Overview"). Real HTTP against a live server."""

from __future__ import annotations

import html
import json
import re
import threading
import time
from contextlib import closing
from typing import Any

from tests.helpers.api_server import LiveApi
from tests.helpers.web_client import logged_in

import tidekeep as tk
from tidekeep.catalog.schedule import next_fire
from tidekeep.errors import InvalidInput
from tidekeep.store.audit import AuditEntry
from tidekeep.store.leases import LeaseStore
from tidekeep.store.overview_queries import FAMILY_ACTIONS, HOUR_MS
from tidekeep.units import iso_utc
from tidekeep.web.recent import Recent
from tidekeep.web.schedule import DEFAULT_SWEEP_EVERY_MS


def write(client: tk.Client, name: str, events: int) -> None:
    client.create_stream(name)
    with client.stream(name).writer("w") as writer:
        for i in range(events):
            writer.write(f"event-{i:04d}".encode(), routing_key=str(i))


def truncate_to_tail(web: LiveApi, name: str) -> None:
    scope, stream = name.split("/")
    ops = web.as_role("operator")
    tail = ops.get(f"/api/v1/scopes/{scope}/streams/{stream}/tail").json()["cut"]
    done = ops.post(f"/api/v1/scopes/{scope}/streams/{stream}/truncate", json={"cut": tail, "reason": "test"})
    assert done.status_code == 200, done.text


def chart_of(page: str) -> dict[str, Any]:
    found = re.search(r'<canvas id="deletions-chart"[^>]*data-chart="([^"]*)"', page)
    assert found is not None
    spec: dict[str, Any] = json.loads(html.unescape(found.group(1)))
    return spec


def bytes_shown(page: str, family: str) -> int:
    found = re.search(rf'id="bytes-{family}">.*?data-bytes="(\d+)"', page, re.S)
    assert found is not None, family
    return int(found.group(1))


def expected_chart(client: tk.Client, since_ms: int, until_ms: int, families: tuple[str, ...],
                   prefix: str = "") -> list[list[int]]:
    """Brute force over every audit row: per family, the deleting rows of each hour of the window."""
    family_of = {a: f for f, actions in FAMILY_ACTIONS.items() for a in actions}
    counts = [[0] * 24 for _ in families]
    for row in client.audit(limit=100_000):
        family = family_of.get(row["action"])
        if family in families and since_ms <= row["time_ms"] <= until_ms and row["target"].startswith(prefix):
            counts[families.index(family)][(row["time_ms"] - since_ms) // HOUR_MS] += 1
    return counts


def test_figures_equal_the_store_after_a_truncation_and_a_hold(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    write(client, "o/a", 20)
    write(client, "o/b", 5)
    write(client, "p/c", 7)
    truncate_to_tail(web, "o/a")
    legal = web.as_role("legal")
    assert legal.post("/api/v1/holds", json={"kind": "stream", "target": "o/b", "reason": "case 7"}).status_code == 201
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/").text
    streams = {n: client.stream(n).describe()["size_bytes"] for n in ("o/a", "o/b", "p/c")}
    assert streams["o/a"] == 0 and streams["o/b"] > 0
    assert bytes_shown(page, "streams") == sum(streams.values())
    assert bytes_shown(page, "archives") == 0 and bytes_shown(page, "catalog") == 0
    holds = client.holds.list()
    assert re.search(rf'id="hold-count">{len(holds)}<', page) and len(holds) == 1
    assert "case 7" in page and 'href="/holds"' in page

    spec = chart_of(page)
    now = client.workspace.clock.now_ms()
    assert spec["until_ms"] <= now and spec["since_ms"] == spec["until_ms"] // HOUR_MS * HOUR_MS - 23 * HOUR_MS
    assert [d["label"] for d in spec["datasets"]] == ["streams", "archives", "catalog"]
    assert [d["data"] for d in spec["datasets"]] == expected_chart(client, spec["since_ms"], spec["until_ms"],
                                                                     ("streams", "archives", "catalog"))
    assert spec["datasets"][0]["data"][-1] >= 1  # the truncation, this hour


def test_the_chart_counts_only_the_window(web: LiveApi, sqlite_client: tk.Client) -> None:
    """Rows older than 24 hours, and rows that delete nothing, are not on the chart."""
    client = sqlite_client
    now = client.workspace.clock.now_ms()
    with client.workspace.db.write() as conn:
        for action, target, at in (("truncate", "o/x", now - 25 * HOUR_MS), ("truncate", "o/x", now - 3 * HOUR_MS),
                                   ("catalog_purge", "records", now - 5 * HOUR_MS),
                                   ("archive_expire", "ds", now - HOUR_MS), ("hold_add", "o/x", now)):
            client.workspace.audit.append(conn, AuditEntry(action, target, "test", time_ms=at))
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        spec = chart_of(browser.get("/").text)
    families = ("streams", "archives", "catalog")
    assert [d["data"] for d in spec["datasets"]] == expected_chart(client, spec["since_ms"], spec["until_ms"], families)
    assert spec["total"] == 3


def test_failed_jobs_schedule_and_leases(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client

    def fails(progress: Any) -> None:
        raise InvalidInput("no such rule: r9")

    job = web.server.state.jobs.submit("catalog-impact", "admin", fails)
    leases = LeaseStore(client.workspace.db, client.workspace.clock)
    assert leases.acquire("member:host-1", "host-1", 30_000).granted
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        for _ in range(200):
            if web.server.state.jobs.get(job.id).state == "failed":
                break
            time.sleep(0.05)
        page = browser.get("/").text
    assert job.id[:12] in page and "no such rule: r9" in page
    assert "member:host-1" in page and "host-1" in page
    now = client.workspace.clock.now_ms()
    cron = client.workspace.settings["catalog.schedule"]
    # the catalog never ran: its next fire time after now (within the minute the page was drawn)
    assert any(tk_time(t) in page for t in {next_fire(cron, now - 60_000), next_fire(cron, now)})
    assert "every 1h" in page and DEFAULT_SWEEP_EVERY_MS == 3_600_000
    assert "stream compaction" in page and "every 10m" in page  # chunks.compaction_interval


def tk_time(ms: int) -> str:
    """A time as the pages show it (web/render.py `|time`)."""
    return iso_utc(ms).replace("T", " ").replace(".000Z", "Z")


def test_a_scoped_token_sees_its_scope_only(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    write(client, "o/a", 10)
    write(client, "p/c", 7)
    truncate_to_tail(web, "p/c")
    legal = web.as_role("legal")
    for target in ("o/a", "p/c"):
        assert legal.post("/api/v1/holds", json={"kind": "stream", "target": target, "reason": f"on {target}"}
                          ).status_code == 201
    browser, _ = logged_in(web, "scoped", token=web.token("o-viewer", "viewer", "o"))
    with closing(browser):
        page = browser.get("/").text
    assert bytes_shown(page, "streams") == client.stream("o/a").describe()["size_bytes"]
    assert 'id="bytes-archives"' not in page and "Next scheduled runs" not in page and "member:" not in page
    assert re.search(r'id="hold-count">1<', page) and "on o/a" in page and "on p/c" not in page
    spec = chart_of(page)
    assert [d["label"] for d in spec["datasets"]] == ["streams"]
    assert spec["datasets"][0]["data"] == expected_chart(client, spec["since_ms"], spec["until_ms"], ("streams",),
                                                         "o/")[0]
    assert sum(spec["datasets"][0]["data"]) == 0  # the truncation of p/c is another scope's


def test_the_costly_figures_are_read_once_per_interval() -> None:
    clock = tk.ManualClock()
    reads: list[int] = []

    def read() -> int:
        reads.append(clock.now_ms())
        return len(reads)

    recent = Recent(read, clock, max_age_ms=15_000)
    first = recent.get()
    clock.advance(14_999)
    assert recent.get() == first == (1, reads[0])
    clock.advance(1)
    # stale: the old value at once, and one read in the background
    assert recent.get() == first
    recent.wait_for_refresh()
    assert recent.get() == (2, reads[0] + 15_000) and len(reads) == 2


def test_a_stale_figure_never_makes_a_request_wait() -> None:
    clock = tk.ManualClock()
    release = threading.Event()
    reads: list[int] = []

    def read() -> int:
        reads.append(clock.now_ms())
        if len(reads) > 1:
            release.wait(30)  # a slow scan of the store
        return len(reads)

    recent = Recent(read, clock, max_age_ms=1_000)
    assert recent.get()[0] == 1
    clock.advance(5_000)
    for _ in range(5):  # every request meanwhile gets the old value; one refresh runs
        assert recent.get()[0] == 1
    assert len(reads) == 2
    release.set()
    recent.wait_for_refresh()
    assert recent.get()[0] == 2


def test_a_failed_refresh_keeps_the_old_value_and_tries_again() -> None:
    clock = tk.ManualClock()
    outcomes: list[int | None] = [1, None, 3]

    def read() -> int:
        outcome = outcomes.pop(0)
        if outcome is None:
            raise tk.StoreUnavailable("the database is down")
        return outcome

    recent = Recent(read, clock, max_age_ms=1_000)
    assert recent.get()[0] == 1
    clock.advance(1_000)
    assert recent.get()[0] == 1
    recent.wait_for_refresh()
    assert recent.get()[0] == 1  # the failure kept the value and started another refresh
    recent.wait_for_refresh()
    assert recent.get()[0] == 3
