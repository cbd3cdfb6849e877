"""The dashboard at scale: server time of its main pages over a large workspace, against the same
pages over a small one served the same way in the same run (issue 21, "Fast with many objects").

    .venv/bin/python benchmarks/bench_dashboard.py [--streams N] [--records M] [--audit A]
                                                   [--small-streams n] [--small-records m]
                                                   [--repeat R] [--json FILE]

Two workspaces (SQLite metadata, local storage), built with tidekeep's own functions:

  large   N streams (default 10,000) in 10 scopes, each with one small chunk of data and a
          retention policy (size, time or none, in turn); one "featured" stream with 4 segments,
          20 chunks, a split (two epochs), a retention cycle that truncated it, and a hold;
          20 reader groups; M catalog records (default 10,000,000) from the catalog generator
          (`client.catalog.generate`, seed 1: a dozen feeds, four types, 1 % LOCKED, create times
          rising with the id over ten years) and 8 retention rules; holds on streams and records;
          A audit rows (default 1,000,000): copies of the featured stream's real truncate row
          spread over the streams and the last year, with a few real hold rows among them
  small   the same with n streams (default 250) and m records (default 1,000), A / 1000 audit rows

Each is served by the dashboard in this process (`ApiServer(workspace, ApiOptions(...),
dashboard_app)`, uvicorn in a thread, authentication on), the benchmark logged in with an admin
token. Each page is fetched R times (default 30; a page stops early once --page-seconds have
passed) after 2 warm-up fetches, one request at a time. Server time is measured inside the
application (an ASGI wrapper outermost: routing, middleware, the page's queries and the template,
until the last body byte is handed to uvicorn); the client's round trip is shown beside it.

Reported per page: HTTP status, p50/p95/p99 server ms, p50 round trip, response bytes, the server
time of the very first fetch (it compiles the page's template, and pays what a page caches for
an interval: the overview's sum over every catalog record), at both sizes, and large/small p50 (goal:
close to 1 — a page's cost does not grow with the object count).
A page answering 404 is "missing" (not built yet), not a failure. Cursor pages follow the page's
own `rel="next"` link; the deep catalog page uses a cursor of the middle record id when the
page's cursors are id cursors (as the API's, api/paging.py). The API's lists behind the pages
(`/api/v1/streams`, `/api/v1/catalog/records` with a status or feed filter, `/api/v1/audit`) are
measured the same way, with the token as a bearer.

Beside the pages, the store queries the pages need are timed directly (no HTTP) at both sizes,
with SQLite's EXPLAIN QUERY PLAN of every statement they run (--json): listing streams, every
stream's size (the /metrics grouped query), record pages with and without filters, explain, the
audit page with its filters, counting records. Timing never fails anything. The table goes to
stdout, progress to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from fastapi import FastAPI

import tidekeep as tk
from tidekeep.api.paging import decode_cursor, encode_cursor
from tidekeep.api.server import ApiOptions, ApiServer
from tidekeep.api.state import ApiState
from tidekeep.store.audit import AuditFilter, audit_rows, chain_rows
from tidekeep.store.metrics_queries import audit_totals, read_store_figures, stream_figures
from tidekeep.store.tokens import TokenStore
from tidekeep.web import dashboard_app

DAY_MS = 86_400_000
SCOPES = 10
FEATURED = "team00/s00000"
RULES = """
rules:
  - {number: 1, name: "Security audit: 7 years", expression: 'feed = "SECURITY_AUDIT"', age: 7 years}
  - {number: 2, name: "Special data: forever", expression: 'feed = "SPECIAL_DATA"', age: forever}
  - {number: 3, name: "Internal errors: 1 week", expression: 'feed = "INTERNAL_LOGS" and type = "Error"', age: 1 week}
  - {number: 4, name: "Internal logs: 3 months", expression: 'feed = "INTERNAL_LOGS"', age: 3 months}
  - {number: 5, name: "Reference data: 5 years", expression: 'type = "Reference"', age: 5 years}
  - {number: 6, name: "Big raw files: 6 months", expression: 'type = "Raw Events" and file_size > 200KB', age: 6 months}
  - {number: 7, name: "App events: 1 year", expression: 'feed = "APP_*_EVENTS" and type in ("Events", "Error")',
     age: 1 year}
  - {number: 8, name: "Everything else: 2 years", expression: all, age: 2 years}
"""
AUDIT_BATCH = 50_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def stream_name(i: int) -> str:
    return f"team{i % SCOPES:02d}/s{i:05d}"


@dataclass
class Built:
    """A workspace ready to serve, and what the page paths need from it."""

    client: tk.Client
    streams: int
    records: int
    audit: int
    token: str
    middle_record: int
    seconds: float
    steps: dict[str, float] = field(default_factory=dict)


def policy_of(i: int) -> tk.RetentionPolicy | None:
    kind = i % 3
    if kind == 0:
        return tk.RetentionPolicy.by_size(10**6 * (1 + i % 7), 10**9)
    if kind == 1:
        return tk.RetentionPolicy.by_time(DAY_MS * (1 + i % 30))
    return None


def make_streams(client: tk.Client, streams: int) -> None:
    """`streams` streams, each with one small chunk: the client's own create and write, one stream at
    a time (about 0.7 ms a create and 4 ms a write with storage.fsync off on this machine, so 10,000
    take under a minute; no shortcut past the controller is needed)."""
    for i in range(1, streams):
        client.create_stream(stream_name(i), tk.StreamConfig(retention=policy_of(i)))
        with client.stream(stream_name(i)).writer("w") as writer:
            writer.write_many([b"e" * 200] * (1 + i % 5), [f"k{j}" for j in range(1 + i % 5)])
            writer.flush()
        if i % 2000 == 0:
            log(f"    {i} streams")


def make_featured(client: tk.Client) -> None:
    """The stream whose page is measured: 4 segments, 20 chunks, a split, a real truncation."""
    client.create_stream(FEATURED, tk.StreamConfig(segments=4, retention=tk.RetentionPolicy.by_size(0, 20_000)))
    stream = client.stream(FEATURED)
    for round_ in range(20):
        with stream.writer("w") as writer:
            writer.write_many([b"x" * 500] * 40, [f"k{round_}-{j}" for j in range(40)])
            writer.flush()
        if round_ == 10:
            stream.split(stream.state().active_segments()[0].id)
    stream.retention.run()


def make_audit(client: tk.Client, rows: int, now_ms: int, streams: int) -> None:
    """`rows` audit rows in the shape of the featured stream's real truncate row (store/audit.py's
    columns), for targets across the streams, times rising with the id over the last year. They go in
    as the audit log chains rows (store/audit.py, `chain_rows`: ids and hashes), AUDIT_BATCH rows a
    statement, in one transaction."""
    real = audit_rows(client.workspace.db, FEATURED, 100)
    truncate = next(r for r in real if r["action"] == "truncate")
    template = {k: v for k, v in truncate.items() if k not in ("id", "prev_hash", "row_hash")}
    span = 365 * DAY_MS
    with client.workspace.db.write() as conn:
        for start in range(0, rows, AUDIT_BATCH):
            batch = []
            for i in range(start, min(rows, start + AUDIT_BATCH)):
                batch.append({**template, "target": stream_name(1 + i % max(1, streams - 1)),
                              "time_ms": now_ms - span + span * i // max(1, rows), "bytes_freed": 1000 + i % 50_000})
            chain_rows(conn, batch)


def build(home: Path, streams: int, records: int, audit: int) -> Built:
    began = time.perf_counter()
    steps: dict[str, float] = {}

    def step(name: str, started: float) -> None:
        steps[name] = round(time.perf_counter() - started, 2)
        log(f"  {name}: {steps[name]:.1f} s")

    # fsync off while building: it only decides whether a commit waits for the disk, not what is stored
    client = tk.connect(home=home, create=True, settings={"storage.fsync": False})
    now_ms = client.clock.now_ms()
    started = time.perf_counter()
    make_featured(client)
    make_streams(client, streams)
    step(f"{streams} streams", started)
    started = time.perf_counter()
    for i in range(20):
        members = [stream_name(j) for j in range(1 + i * 5, 1 + i * 5 + 1 + i % 5) if j < streams] or [FEATURED]
        client.create_reader_group(f"group{i:02d}", tk.ReaderGroupConfig(streams=members))
    client.holds.add("stream", FEATURED, "litigation 42")
    for i in range(1, min(streams, 6)):
        client.holds.add("stream", stream_name(i * 7 % streams or 1), f"inquiry {i}")
    client.holds.add("records", 'feed = "SECURITY_AUDIT"', "regulator request")
    client.holds.add("records", 'feed = "INTERNAL_LOGS" and type = "Error"', "incident 7")
    step("reader groups, holds", started)
    started = time.perf_counter()
    client.catalog.set_rules(RULES)
    client.catalog.generate(records, seed=1)
    step(f"{records} catalog records", started)
    started = time.perf_counter()
    make_audit(client, audit, now_ms, streams)
    step(f"{audit} audit rows", started)
    _, token = TokenStore(client.workspace.db, client.workspace.audit).create("bench-admin", "admin")
    with client.workspace.db.read() as conn:
        low, high = conn.execute(sa.text("SELECT MIN(id), MAX(id) FROM catalog_records")).one()
    return Built(client, streams, records, audit, token, (int(low) + int(high)) // 2,
                 round(time.perf_counter() - began, 2), steps)


# ---- serving and timing ----------------------------------------------------------------------------
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class ServerClock:
    """Outermost ASGI wrapper: how long each HTTP request spent in the application, from its call to
    the last body message (requests are sent one at a time, so the newest figure is the last one's)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], sink: list[float]) -> None:
        self.app = app
        self.seconds = sink

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.seconds.append(time.perf_counter() - started)
            await send(message)

        await self.app(scope, receive, timed)


@contextlib.contextmanager
def serve(built: Built) -> Iterator[tuple[httpx.Client, list[float]]]:
    """The dashboard over the workspace, a browser-like client logged in with the admin token, and
    the list the server's times are appended to."""
    times: list[float] = []

    def factory(state: ApiState) -> FastAPI:
        app = dashboard_app(state)
        app.add_middleware(ServerClock, sink=times)  # added last: outside the dashboard's own middleware
        return app

    with contextlib.closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = ApiServer(built.client.workspace, ApiOptions("127.0.0.1", port, auth=True), factory)
    server.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=300, follow_redirects=False) as http:
            answer = http.post("/login", data={"token": built.token, "next": "/"})
            while not times:  # its figure may come after the answer (see `fetch`)
                time.sleep(0.001)
            if answer.status_code != 303:
                raise SystemExit(f"login refused: {answer.status_code} {answer.text[:300]}")
            yield http, times
    finally:
        server.stop()


def next_link(html: str) -> str | None:
    """The page's `rel="next"` link (templates/macros.html `pager`)."""
    found = re.search(r'<a href="([^"]+)" rel="next"', html)
    return None if found is None else unescape(found.group(1))


def absolute(path: str, link: str) -> str:
    return link if link.startswith("/") else path.split("?")[0] + link


def percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def fetch(http: httpx.Client, times: list[float], path: str,
          headers: dict[str, str] | None) -> tuple[httpx.Response, float, float]:
    """GET `path`: the answer, the server's time and the round trip. The client may hold a whole
    answer (its Content-Length reached) before the server hands over the last, empty body message,
    so the server's figure is waited for."""
    count = len(times)
    sent = time.perf_counter()
    answer = http.get(path, headers=headers)
    trip = time.perf_counter() - sent
    deadline = time.monotonic() + 10
    while len(times) <= count:
        if time.monotonic() > deadline:
            raise SystemExit(f"the server noted no time for {path}")
        time.sleep(0.0002)
    return answer, times[count], trip


def time_page(http: httpx.Client, times: list[float], path: str, repeat: int, budget_s: float,
              headers: dict[str, str] | None = None) -> dict[str, Any]:
    server: list[float] = []
    trip: list[float] = []
    # the first fetch compiles the page's template and pays what a page reads at most once per
    # interval (the overview's catalog bytes); a second warms up
    answer, first, _ = fetch(http, times, path, headers)
    if answer.status_code == 404:
        return {"path": path, "status": 404, "missing": True}
    fetch(http, times, path, headers)
    first_ms = round(first * 1000, 2)
    deadline = time.perf_counter() + budget_s
    for n in range(repeat):
        answer, took, round_trip = fetch(http, times, path, headers)
        server.append(took)
        trip.append(round_trip)
        if n >= 4 and time.perf_counter() > deadline:
            break
    server.sort()
    trip.sort()
    return {"path": path, "status": answer.status_code, "missing": False, "samples": len(server),
            "bytes": len(answer.content), "first_ms": first_ms, "p50_ms": round(statistics.median(server) * 1000, 2),
            "p95_ms": round(percentile(server, 0.95) * 1000, 2), "p99_ms": round(percentile(server, 0.99) * 1000, 2),
            "round_trip_p50_ms": round(statistics.median(trip) * 1000, 2)}


def page_paths(http: httpx.Client, built: Built, sort_key: str, query: str) -> dict[str, str | None]:
    """The pages measured, by name; None where the path depends on a page that is missing or has
    no next page."""
    scope, stream = FEATURED.split("/")
    paths: dict[str, str | None] = {
        "overview": "/", "streams": "/streams", "streams filtered": f"/streams?q={query}",
        "streams sorted": f"/streams?sort={sort_key}&order=desc",
        "streams page 2": None, "stream": f"/streams/{scope}/{stream}", "reader groups": "/readergroups",
        "catalog": "/catalog", "records": "/catalog/records", "records rare feed": "/catalog/records?feed=NO_SUCH_FEED",
        "records page 2": None,
        "records deep": None, "record": f"/catalog/records/{built.middle_record}", "archives": "/archives",
        "holds": "/holds", "audit": "/audit", "audit rare action": "/audit?action=hold_add",
    }
    first = http.get("/streams")
    link = next_link(first.text) if first.status_code == 200 else None
    paths["streams page 2"] = None if link is None else absolute("/streams", link)
    first = http.get("/catalog/records")
    link = next_link(first.text) if first.status_code == 200 else None
    if link is not None:
        paths["records page 2"] = absolute("/catalog/records", link)
        cursor = re.search(r"[?&]cursor=([^&]+)", link)
        with contextlib.suppress(Exception):
            if cursor is not None and isinstance(decode_cursor(cursor.group(1)), int):
                paths["records deep"] = f"/catalog/records?cursor={encode_cursor(built.middle_record)}"
    return paths


def api_paths(http: httpx.Client, built: Built, headers: dict[str, str]) -> dict[str, str | None]:
    """The API's lists that the pages' lists correspond to (on main already): what a page costs
    when it pages the way the API does."""
    first = http.get("/api/v1/streams", headers=headers).json()
    after = first.get("next_cursor")
    deep = encode_cursor(built.middle_record)
    return {"api streams": "/api/v1/streams",
            "api streams page 2": None if after is None else f"/api/v1/streams?cursor={after}",
            "api records deep": f"/api/v1/catalog/records?cursor={deep}",
            "api records UNLOCKED deep": f"/api/v1/catalog/records?status=UNLOCKED&cursor={deep}",
            "api records rare feed": "/api/v1/catalog/records?feed=NO_SUCH_FEED",
            "api audit": "/api/v1/audit", "api audit rare action": "/api/v1/audit?action=hold_add"}


def measure_pages(built: Built, options: argparse.Namespace) -> dict[str, dict[str, Any]]:
    results: dict[str, dict[str, Any]] = {}
    bearer = {"Authorization": f"Bearer {built.token}"}
    with serve(built) as (http, times):
        paths = [(name, path, None) for name, path in page_paths(http, built, options.sort_key, options.query).items()]
        paths += [(name, path, bearer) for name, path in api_paths(http, built, bearer).items()]
        for name, path, headers in paths:
            if path is None:
                results[name] = {"path": None, "status": None, "missing": True}
                log(f"    {name}: no path (the page it follows is missing or has no next page)")
                continue
            results[name] = row = time_page(http, times, path, options.repeat, options.page_seconds, headers)
            if row["missing"]:
                log(f"    {name}: {path} missing (404)")
            else:
                log(f"    {name}: {path} {row['status']} p50 {row['p50_ms']} ms ({row['samples']} samples)")
    return results


# ---- store queries -------------------------------------------------------------------------------
@contextlib.contextmanager
def captured(engine: sa.Engine) -> Iterator[list[tuple[str, Any]]]:
    """The SELECT statements run on `engine` inside the block, with their parameters."""
    seen: list[tuple[str, Any]] = []

    def note(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith(("SELECT", "WITH")):
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        sa.event.remove(engine, "before_cursor_execute", note)


def plans(engine: sa.Engine, statements: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    """SQLite's EXPLAIN QUERY PLAN of each distinct statement."""
    result = []
    seen: set[str] = set()
    with engine.connect() as conn:
        for statement, parameters in statements:
            if statement in seen:
                continue
            seen.add(statement)
            rows = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters).all()
            result.append({"sql": " ".join(statement.split()), "plan": [str(r[-1]) for r in rows]})
    return result


def store_queries(built: Built) -> dict[str, Callable[[], object]]:
    client = built.client
    db = client.workspace.db
    middle = built.middle_record
    now = client.clock.now_ms()
    newest = client.audit_page(AuditFilter(), 1)[0]["id"]

    def figures() -> object:
        with db.read() as conn:
            return stream_figures(conn)

    def totals() -> object:
        with db.read() as conn:
            return audit_totals(conn, db.is_sqlite)

    def sql(text: str, **values: Any) -> Callable[[], object]:
        """A query a page would need and no store function runs yet (the note in docs/benchmarks.md)."""
        def call() -> object:
            with db.read() as conn:
                return conn.execute(sa.text(text), values).all()
        return call

    return {
        "list_streams (all)": client.list_streams,
        "stream sizes (grouped, all)": figures,
        "/metrics refresh (read_store_figures)": lambda: read_store_figures(db, now),
        "/metrics audit totals (its part)": totals,
        "stream describe (featured)": lambda: client.stream(FEATURED).describe(),
        "streams keyset page + its sizes (SQL)": sql(
            "WITH page AS (SELECT id, scope, name, state, config FROM streams WHERE (scope, name) > (:scope, :name) "
            "ORDER BY scope, name LIMIT 101) SELECT page.*, (SELECT SUM(tail - head) FROM segments "
            "WHERE segments.stream_id = page.id) AS size FROM page", scope="team05", name="s05000"),
        "catalog bytes by status (SQL)": sql(
            "SELECT status, COUNT(*), SUM(file_size) FROM catalog_records GROUP BY status"),
        "audit last 24 h by hour (SQL)": sql(
            "SELECT time_ms / 3600000 AS hour, action, COUNT(*), SUM(bytes_freed) FROM audit "
            "WHERE time_ms >= :since GROUP BY hour, action", since=now - DAY_MS),
        "records first page": lambda: client.catalog.records(limit=101),
        "records deep page": lambda: client.catalog.records(limit=101, after_id=middle),
        "records feed=SECURITY_AUDIT deep": lambda: client.catalog.records(feed="SECURITY_AUDIT", limit=101,
                                                                           after_id=middle),
        "records type=Reference deep": lambda: client.catalog.records(type="Reference", limit=101, after_id=middle),
        "records status=LOCKED": lambda: client.catalog.records(status="LOCKED", limit=101),
        "records status=UNLOCKED deep": lambda: client.catalog.records(status="UNLOCKED", limit=101, after_id=middle),
        "records status=DELETED (none)": lambda: client.catalog.records(status="DELETED", limit=101),
        "records feed=NO_SUCH (none)": lambda: client.catalog.records(feed="NO_SUCH", limit=101),
        "record count": client.catalog.count,
        "record explain": lambda: client.catalog.explain(middle),
        "audit first page": lambda: client.audit_page(AuditFilter(), 101),
        "audit deep page": lambda: client.audit_page(AuditFilter(), 101, newest // 2),
        "audit target=featured": lambda: client.audit_page(AuditFilter(target=FEATURED), 101),
        "audit action=hold_add (rare)": lambda: client.audit_page(AuditFilter(action="hold_add"), 101),
        "audit last 24 h": lambda: client.audit_page(AuditFilter(since_ms=now - DAY_MS), 101),
        "audit actor=nobody (none)": lambda: client.audit_page(AuditFilter(actor="nobody"), 101),
        "holds list": lambda: client.holds.list(None, None),
        "reader groups list": client.list_reader_groups,
    }


def measure_queries(built: Built, repeat: int, budget_s: float) -> dict[str, dict[str, Any]]:
    engine = built.client.workspace.db.engine
    results: dict[str, dict[str, Any]] = {}
    for name, call in store_queries(built).items():
        with captured(engine) as statements:
            call()
        seconds: list[float] = []
        deadline = time.perf_counter() + budget_s
        for n in range(repeat):
            started = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - started)
            if n >= 2 and time.perf_counter() > deadline:
                break
        seconds.sort()
        results[name] = {"p50_ms": round(statistics.median(seconds) * 1000, 2),
                         "max_ms": round(seconds[-1] * 1000, 2), "samples": len(seconds),
                         "statements": plans(engine, statements) if built.client.workspace.db.is_sqlite else []}
        log(f"    {name}: p50 {results[name]['p50_ms']} ms")
    return results


# ---- the report ----------------------------------------------------------------------------------
def ratio(large: dict[str, Any], small: dict[str, Any]) -> float | None:
    if large.get("missing", True) or small.get("missing", True) or not small.get("p50_ms"):
        return None
    return round(large["p50_ms"] / small["p50_ms"], 2)


def cell(row: dict[str, Any]) -> str:
    if row.get("missing", True):
        return "missing" if row.get("status") == 404 else "-"
    status = "" if row["status"] == 200 else f" [{row['status']}]"
    return f"{row['p50_ms']:.1f}/{row['p95_ms']:.1f}/{row['p99_ms']:.1f}{status}"


def report(figures: dict[str, Any]) -> None:
    large, small = figures["large"], figures["small"]
    print(f"dashboard pages: large {large['streams']} streams, {large['records']} records, {large['audit']} audit "
          f"rows; small {small['streams']} streams, {small['records']} records, {small['audit']} audit rows; "
          f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("server ms p50/p95/p99 (one request at a time); first: the first fetch, before the warm-up's second")
    print(f"{'page':<26} {'large':>26} {'first':>9} {'small':>26} {'large/small':>11}  path (large)")
    for name, row in large["pages"].items():
        other = small["pages"][name]
        r = figures["page_ratios"][name]
        first = f"{row['first_ms']:.1f}" if "first_ms" in row else "-"
        print(f"{name:<26} {cell(row):>26} {first:>9} {cell(other):>26} {'-' if r is None else f'{r:.2f}x':>11}  "
              f"{row.get('path') or '-'}")
    print("store queries, ms p50")
    print(f"{'query':<40} {'large':>10} {'small':>10} {'large/small':>11}")
    for name, row in large["queries"].items():
        other = small["queries"][name]
        r = figures["query_ratios"][name]
        print(f"{name:<40} {row['p50_ms']:>10.2f} {other['p50_ms']:>10.2f} {'-' if r is None else f'{r:.1f}x':>11}")
    missing = [n for n, row in large["pages"].items() if row.get("missing")]
    if missing:
        print(f"missing (no page yet, or no next page): {', '.join(missing)}")


def run(options: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    sizes = {"small": (options.small_streams, options.small_records, max(10, options.audit // 1000)),
             "large": (options.streams, options.records, options.audit)}
    for label, (streams, records, audit) in sizes.items():
        log(f"{label}: building {streams} streams, {records} records, {audit} audit rows")
        built = build(tmp / label, streams, records, audit)
        try:
            log(f"{label}: pages")
            pages = measure_pages(built, options)
            log(f"{label}: store queries")
            queries = measure_queries(built, options.query_repeat, options.page_seconds)
        finally:
            built.client.close()
        figures[label] = {"streams": streams, "records": records, "audit": audit, "build_s": built.seconds,
                          "build_steps": built.steps, "pages": pages, "queries": queries}
    figures["page_ratios"] = {n: ratio(figures["large"]["pages"][n], figures["small"]["pages"][n])
                              for n in figures["large"]["pages"]}
    figures["query_ratios"] = {n: ratio({**q, "missing": False}, {**figures["small"]["queries"][n], "missing": False})
                               for n, q in figures["large"]["queries"].items()}
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", type=int, default=10_000, help="streams of the large workspace (default 10000)")
    parser.add_argument("--records", type=int, default=10_000_000,
                        help="catalog records of the large workspace (default 10000000)")
    parser.add_argument("--audit", type=int, default=1_000_000,
                        help="audit rows of the large workspace (default 1000000; the small one gets 1/1000)")
    parser.add_argument("--small-streams", type=int, default=250, help="streams of the small workspace (default 250)")
    parser.add_argument("--small-records", type=int, default=1_000,
                        help="catalog records of the small workspace (default 1000)")
    parser.add_argument("--repeat", type=int, default=30, help="timed fetches per page (default 30)")
    parser.add_argument("--query-repeat", type=int, default=10, help="timed calls per store query (default 10)")
    parser.add_argument("--page-seconds", type=float, default=20.0,
                        help="stop repeating a page or query after this many seconds (at least 5 fetches)")
    parser.add_argument("--sort-key", default="retained",
                        help="the streams list's sort key measured (default retained: the size)")
    parser.add_argument("--query", default="s0004", help="the streams list's filter text measured (default s0004)")
    parser.add_argument("--json", type=Path, help="also write the figures as JSON to this file")
    options = parser.parse_args(argv)
    if options.streams < 2 or options.small_streams < 2 or options.records < 1 or options.small_records < 1:
        parser.error("at least 2 streams and 1 record in each workspace")
    with tempfile.TemporaryDirectory(prefix="tidekeep-bench-dashboard-") as tmp:
        figures = run(options, Path(tmp))
    report(figures)
    if options.json is not None:
        options.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
