"""Prometheus metrics at GET /metrics (docs/api.md, "Metrics").

Two sources:
- the store-wide figures (store/metrics_queries.py, streams/metrics.py), read by a background
  refresher every `api.metrics_interval` (default 15 s); a scrape only renders the last snapshot,
  so any number of scrapers cost the store nothing more;
- the request histogram, observed by an ASGI middleware for every request, labelled with the route
  TEMPLATE (never the raw path, so the number of series stays bounded whatever the callers send).

Each app has its own CollectorRegistry (several apps may live in one process: the tests do)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..clock import Clock
from ..store.house import Workspace
from ..store.metrics_queries import StoreFigures, read_store_figures
from ..streams.metrics import SubscriberLag, subscriber_lags
from ..streams.of_workspace import stream_controller

log = logging.getLogger("tidekeep.api")

# the audit actions whose rows free storage, and those whose rows a collector wrote (docs/api.md)
FREEING_ACTIONS = ("truncate", "delete_stream", "sweep", "archive_expire", "search_results_expire", "catalog_purge")
GC_ACTIONS = ("sweep", "archive_expire", "search_results_expire", "catalog_purge")
SEARCH_STATES = ("RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "KILLED")
CATALOG_KINDS = ("retention", "purge")
CATALOG_STATES = ("RUNNING", "SUCCEEDED", "FAILED", "INTERRUPTED")
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# the text format every Prometheus version (and other scrapers) reads; the names are all plain ASCII
EXPOSITION_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED = "unmatched"  # the route label of a request no route matched (a 404 of any path)


@dataclass(frozen=True)
class Figures:
    """What one refresh read."""

    store: StoreFigures = field(default_factory=StoreFigures)
    lags: list[SubscriberLag] = field(default_factory=list)


@dataclass(frozen=True)
class Snapshot:
    taken_ms: int
    figures: Figures
    duration_s: float


def workspace_figures(workspace: Workspace) -> Callable[[int], Figures]:
    """The refresher's reader over an open workspace."""
    controller = stream_controller(workspace)

    def read(now_ms: int) -> Figures:
        return Figures(read_store_figures(workspace.db, now_ms), subscriber_lags(controller))

    return read


class MetricsRefresher:
    """Reads the figures every `interval_ms` on a daemon thread (`start`/`stop`), or at once
    (`refresh_now`). A failed refresh is logged and counted; the previous snapshot stays."""

    def __init__(self, read: Callable[[int], Figures], clock: Clock, interval_ms: int) -> None:
        self.read = read
        self.clock = clock
        self.interval_ms = interval_ms
        self.snapshot: Snapshot | None = None
        self.failures = 0
        self._refresh_lock = threading.Lock()  # one refresh at a time: the newest read is the one kept
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh_now(self) -> Snapshot:
        with self._refresh_lock:
            started = time.perf_counter()
            now_ms = self.clock.now_ms()
            figures = self.read(now_ms)
            self.snapshot = Snapshot(now_ms, figures, time.perf_counter() - started)
            return self.snapshot

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="api-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.refresh_now()
            except Exception as exc:  # the store may be away for a while: keep serving the last snapshot
                self.failures += 1
                log.warning("metrics refresh failed (the previous figures stay): %s", exc)
            self._stop.wait(self.interval_ms / 1000)


def _gauge(name: str, documentation: str, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, labels=list(labels))


def _counter(name: str, documentation: str, labels: Iterable[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, labels=list(labels))


def snapshot_families(snapshot: Snapshot | None, failures: int) -> Iterator[Metric]:
    """The Prometheus families of a snapshot (none of the store's before the first refresh)."""
    errors = _counter("tidekeep_metrics_refresh_errors", "Failed refreshes of the store-wide figures "
                      "in this server process")
    errors.add_metric([], failures)
    yield errors
    if snapshot is None:
        return
    store, now_ms = snapshot.figures.store, snapshot.taken_ms
    taken = _gauge("tidekeep_metrics_refresh_timestamp_seconds", "When the store-wide figures were last read")
    taken.add_metric([], now_ms / 1000)
    yield taken
    took = _gauge("tidekeep_metrics_refresh_duration_seconds", "How long the last read of the figures took")
    took.add_metric([], snapshot.duration_s)
    yield took

    retained = _gauge("tidekeep_stream_retained_bytes", "Logical bytes from the stream's head to its tail",
                      ["stream"])
    events = _gauge("tidekeep_stream_retained_events", "Events in the chunks the stream keeps", ["stream"])
    open_txns = _gauge("tidekeep_stream_transactions_open", "Open transactions of the stream", ["stream"])
    since = _gauge("tidekeep_stream_retention_run_age_seconds", "Seconds since `tidekeep serve` last ended a "
                   "retention cycle of the stream (streams it never cycled have no sample)", ["stream"])
    mark = _gauge("tidekeep_stream_watermark_lag_seconds", "Now minus the lower time of the stream's newest "
                  "watermark (streams without watermarks have no sample)", ["stream"])
    for s in store.streams:
        retained.add_metric([s.stream], s.retained_bytes)
        events.add_metric([s.stream], s.retained_events)
        open_txns.add_metric([s.stream], s.open_transactions)
        if s.retention_done_ms is not None:
            since.add_metric([s.stream], (now_ms - s.retention_done_ms) / 1000)
        if s.watermark_ms is not None:
            mark.add_metric([s.stream], (now_ms - s.watermark_ms) / 1000)
    yield from (retained, events, open_txns, since, mark)

    lag = _gauge("tidekeep_subscriber_lag_bytes", "Bytes from a subscribing reader group's effective cut to "
                 "the tail that still exist", ["stream", "reader_group"])
    for subscriber in snapshot.figures.lags:
        lag.add_metric([subscriber.stream, subscriber.reader_group], subscriber.lag_bytes)
    yield lag

    audit = store.audit
    truncations = _counter("tidekeep_stream_truncations", "Stream truncations (audit action truncate)")
    truncations.add_metric([], audit["truncate"].entries if "truncate" in audit else 0)
    yield truncations
    freed = _counter("tidekeep_freed_bytes", "Bytes freed, by audit action (the sum of the audit rows' "
                     "bytes_freed)", ["action"])
    for action in FREEING_ACTIONS:
        freed.add_metric([action], audit[action].bytes_freed if action in audit else 0)
    yield freed
    deletions = _counter("tidekeep_gc_deletions", "What the collectors deleted, by audit action: orphan chunk "
                         "files (sweep), archives, search result sets, purged catalog records", ["action"])
    for action in GC_ACTIONS:
        deletions.add_metric([action], audit[action].items if action in audit else 0)
    yield deletions
    rows = _counter("tidekeep_catalog_deleted_rows", "Catalog records logically deleted by the retention job "
                    "(audit action catalog_delete)")
    rows.add_metric([], audit["catalog_delete"].items if "catalog_delete" in audit else 0)
    yield rows

    archives = _gauge("tidekeep_archives", "Log archives: stored, or expiring (in the collector's journal)",
                      ["state"])
    archive_bytes = _gauge("tidekeep_archive_stored_bytes", "Stored bytes of the log archives", ["state"])
    for state, (count, stored) in sorted(store.archives.items()):
        archives.add_metric([state], count)
        archive_bytes.add_metric([state], stored)
    yield from (archives, archive_bytes)
    searches = _gauge("tidekeep_search_jobs", "Archive search jobs by state", ["state"])
    for state in sorted({*SEARCH_STATES, *store.search_jobs}):
        searches.add_metric([state], store.search_jobs.get(state, 0))
    yield searches

    runs = _gauge("tidekeep_catalog_runs", "Catalog retention job and purge runs (not dry runs) by state",
                  ["kind", "state"])
    for kind, state in sorted({*((k, s) for k in CATALOG_KINDS for s in CATALOG_STATES), *store.catalog_runs}):
        runs.add_metric([kind, state], store.catalog_runs.get((kind, state), 0))
    yield runs
    duration = _gauge("tidekeep_catalog_last_run_duration_seconds", "Duration of the newest finished run of "
                      "each kind", ["kind"])
    for kind, ms in sorted(store.catalog_last_run_ms.items()):
        duration.add_metric([kind], ms / 1000)
    yield duration

    held = _gauge("tidekeep_leases_held", "Leases held by each controller process (owner), by kind of "
                  "resource", ["owner", "kind"])
    for (owner, kind), count in sorted(store.leases_held.items()):
        held.add_metric([owner, kind], count)
    yield held


class SnapshotCollector(Collector):
    def __init__(self, refresher: MetricsRefresher) -> None:
        self.refresher = refresher

    def collect(self) -> Iterable[Metric]:
        return list(snapshot_families(self.refresher.snapshot, self.refresher.failures))


class ApiMetrics:
    """The registry of one app: the snapshot's families and the request histogram."""

    def __init__(self, refresher: MetricsRefresher) -> None:
        self.refresher = refresher
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(SnapshotCollector(refresher))
        self.requests = Histogram("tidekeep_api_request_duration_seconds",
                                  "API requests by method, route template and status", ["method", "route", "status"],
                                  registry=self.registry)

    @classmethod
    def of(cls, workspace: Workspace) -> ApiMetrics:
        return cls(MetricsRefresher(workspace_figures(workspace), workspace.clock,
                                    workspace.settings["api.metrics_interval"]))


def route_template(scope: Scope, templates: Mapping[int, str]) -> str:
    """The matched route's path template ("/api/v1/scopes/{scope}/streams/{stream}"): the router
    puts the route in the scope; `templates` has, by the route's id, the full template of each route
    of an included router. UNMATCHED when no route matched."""
    route: Any = scope.get("route")
    if route is None:
        return UNMATCHED
    found = templates.get(id(route))
    if found is not None:
        return found
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else UNMATCHED


class RequestMetrics:
    """ASGI middleware: each HTTP request's duration into the histogram (a plain ASGI wrapper, not
    BaseHTTPMiddleware, so the cost per request stays a timer and one observation)."""

    def __init__(self, app: ASGIApp, histogram: Histogram, templates: Mapping[int, str]) -> None:
        self.app = app
        self.histogram = histogram
        self.templates = templates

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # an exception escaping the app becomes a 500 further out

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_noting_status)
        finally:
            method = scope.get("method", "")
            self.histogram.labels(method if method in _METHODS else "other", route_template(scope, self.templates),
                                  str(status)).observe(time.perf_counter() - started)


__all__ = ["EXPOSITION_TYPE", "ApiMetrics", "MetricsRefresher", "RequestMetrics", "Snapshot", "snapshot_families"]
