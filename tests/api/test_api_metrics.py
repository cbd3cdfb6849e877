"""GET /metrics through real HTTP (SQLite and PostgreSQL): the Prometheus exposition parses, the
audit-derived counters move by exactly what the audit rows say (and survive a new server), the
store-wide gauges against what the client reports, the request histogram by route template, and the
viewer role (no token: 401; a scoped token: 403)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from tests.helpers.api_server import LiveApi, live_api

import tidekeep as tk
from helpers.archives import make_archive
from tidekeep.catalog.ages import Age
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.rules import RetentionRule
from tidekeep.store.chunks import build_chunk_table
from tidekeep.store.leases import LeaseStore

T0 = 1_700_000_000_000  # the ManualClock's start
HOUR = 3_600_000
DAY = 24 * HOUR
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def timed_client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    """A workspace on a ManualClock (ages are exact), archives expiring after 60 minutes."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), settings={"writer.linger": 0, "archive_output.retention_period": 60},
                   create=True)
    yield c
    c.close()


@pytest.fixture
def timed_api(timed_client: tk.Client) -> Iterator[LiveApi]:
    with live_api(timed_client.workspace) as served:
        yield served


def scrape(api: LiveApi, refresh: bool = True) -> Samples:
    """The samples of one scrape with a viewer token, after reading the figures again."""
    if refresh:
        api.server.state.metrics.refresher.refresh_now()
    response = api.as_role("viewer").get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def has(samples: Samples, name: str, **labels: str) -> bool:
    return (name, frozenset(labels.items())) in samples


def audit_of(client: tk.Client, action: str) -> list[dict]:
    return [e for e in client.audit(limit=10_000) if e["action"] == action]


def test_counters_move_by_exactly_what_the_audit_rows_say(timed_client: tk.Client, timed_api: LiveApi) -> None:
    client, clock = timed_client, timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    before = scrape(timed_api)
    assert value(before, "tidekeep_stream_truncations_total") == 0
    assert value(before, "tidekeep_freed_bytes_total", action="truncate") == 0
    assert value(before, "tidekeep_gc_deletions_total", action="archive_expire") == 0

    client.create_stream("s/x", tk.StreamConfig(segments=2))
    stream = client.stream("s/x")
    with stream.writer("w") as writer:
        writer.write_many([b"e" * 100] * 40, [f"k{i}" for i in range(40)])
        writer.flush()
        written = stream.describe()["size_bytes"]
        stream.truncate(stream.tail_cut(), "metrics test")
        writer.write_many([b"f" * 50] * 10, [f"k{i}" for i in range(10)])
        writer.flush()
    made = [make_archive(client, "web", [(T0 - 3 * HOUR, "a"), (T0 - 2 * HOUR, "b")]) for _ in range(2)]
    make_archive(client, "web", [(T0 + HOUR, "young")])
    clock.advance(1_000)
    report = client.archives.gc()
    assert report.archives.deleted == 2

    after = scrape(timed_api)
    truncations, expiries = audit_of(client, "truncate"), audit_of(client, "archive_expire")
    assert len(truncations) == 1 and truncations[0]["bytes_freed"] == written > 4_000

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("tidekeep_stream_truncations_total") == len(truncations) == 1
    assert moved("tidekeep_freed_bytes_total", action="truncate") == sum(e["bytes_freed"] for e in truncations)
    assert moved("tidekeep_freed_bytes_total", action="archive_expire") == sum(
        e["bytes_freed"] for e in expiries) == sum(a.stored_bytes for a in made)
    assert moved("tidekeep_gc_deletions_total", action="archive_expire") == sum(
        len(json.loads(e["details"])["archives"]) for e in expiries) == 2
    # the gauges of the stream and the archives against what the client reports
    described = stream.describe()
    assert value(after, "tidekeep_stream_retained_bytes", stream="s/x") == described["size_bytes"] > 500
    assert value(after, "tidekeep_stream_retained_events", stream="s/x") == 10
    assert value(after, "tidekeep_archives", state="stored") == len(client.archives.list()) == 1
    assert value(after, "tidekeep_archives", state="expiring") == 0

    # the counters come from the store, not from this process: a new server reports the same
    with live_api(client.workspace) as again:
        again.tokens.update(timed_api.tokens)  # tokens live in the store: the viewer's works here too
        restarted = scrape(again)
    for name, labels in (("tidekeep_stream_truncations_total", {}),
                         ("tidekeep_freed_bytes_total", {"action": "truncate"}),
                         ("tidekeep_gc_deletions_total", {"action": "archive_expire"})):
        assert value(restarted, name, **labels) == value(after, name, **labels)


def test_stream_gauges_follow_the_clock_the_leases_and_the_subscribers(timed_client: tk.Client,
                                                                       timed_api: LiveApi) -> None:
    client, clock = timed_client, timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    client.create_stream("s/x")
    client.create_stream("s/quiet")
    stream = client.stream("s/x")
    group = client.create_reader_group("billing", tk.ReaderGroupConfig(
        streams=["s/x"], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    with stream.writer("w") as writer:
        writer.write_many([b"e" * 100] * 30)
        writer.flush()
    stream.watermarks.note("w", T0 - 30_000)
    assert stream.watermarks.compute() is not None
    txn = stream.transactional_writer("t").begin()
    leases = LeaseStore(client.workspace.db, clock)
    granted = leases.acquire("retention:s/x", "host:1:abc", 60_000)
    assert leases.record_work_done("retention:s/x", "host:1:abc", granted.lease.version, T0 - 5_000)
    group.update_retention_stream_cut({"s/x": "s/x:0.0=1080"})

    samples = scrape(timed_api)
    assert value(samples, "tidekeep_stream_watermark_lag_seconds", stream="s/x") == 30
    assert value(samples, "tidekeep_stream_retention_run_age_seconds", stream="s/x") == 5
    assert not has(samples, "tidekeep_stream_watermark_lag_seconds", stream="s/quiet")
    assert not has(samples, "tidekeep_stream_retention_run_age_seconds", stream="s/quiet")
    assert value(samples, "tidekeep_subscriber_lag_bytes", stream="s/x", reader_group="billing") == (
        stream.subscribers()[0].unconsumed_bytes) == stream.describe()["size_bytes"] - 1_080
    assert value(samples, "tidekeep_leases_held", owner="host:1:abc", kind="retention") == 1
    assert value(samples, "tidekeep_stream_transactions_open", stream="s/x") == 1
    assert value(samples, "tidekeep_stream_retained_bytes", stream="s/quiet") == 0

    clock.advance(10_000)
    later = scrape(timed_api)
    assert value(later, "tidekeep_stream_watermark_lag_seconds", stream="s/x") == 40
    assert value(later, "tidekeep_stream_retention_run_age_seconds", stream="s/x") == 15
    txn.abort()
    clock.advance(60_000)  # the lease expired: nobody holds it any more
    expired = scrape(timed_api)
    assert not has(expired, "tidekeep_leases_held", owner="host:1:abc", kind="retention")
    assert value(expired, "tidekeep_stream_transactions_open", stream="s/x") == 0


def test_a_scrape_reads_the_last_snapshot_not_the_store(timed_client: tk.Client, timed_api: LiveApi) -> None:
    scrape(timed_api)
    timed_client.create_stream("s/new")
    assert not has(scrape(timed_api, refresh=False), "tidekeep_stream_retained_bytes", stream="s/new")
    assert has(scrape(timed_api), "tidekeep_stream_retained_bytes", stream="s/new")


def test_requests_are_counted_under_their_route_template(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/x")
    viewer = api.as_role("viewer")
    for _ in range(2):
        assert viewer.get("/api/v1/scopes/s/streams/x").status_code == 200
    assert viewer.get("/api/v1/scopes/s/streams/nope").status_code == 404
    assert viewer.get("/no/such/path").status_code == 404
    samples = scrape(api, refresh=False)
    template = "/api/v1/scopes/{scope}/streams/{stream}"
    count = "tidekeep_api_request_duration_seconds_count"
    assert value(samples, count, method="GET", route=template, status="200") == 2
    assert value(samples, count, method="GET", route=template, status="404") == 1
    assert value(samples, count, method="GET", route="unmatched", status="404") == 1
    routes = {dict(labels).get("route") for name, labels in samples if name == count}
    assert not any(route and ("/s/streams/x" in route or "/no/such" in route) for route in routes)


def test_a_viewer_token_scrapes_and_no_token_gets_401(api: LiveApi) -> None:
    assert api.as_role("viewer").get("/metrics").status_code == 200
    anonymous = api.http(None).get("/metrics")
    assert anonymous.status_code == 401
    assert anonymous.headers["content-type"] == "application/problem+json"
    assert anonymous.json()["error"] == "NotAuthenticated"
    scoped = api.as_role("viewer", scope="s").get("/metrics")
    assert scoped.status_code == 403 and scoped.json()["error"] == "PermissionDenied"


def test_catalog_figures_follow_the_job_and_the_purge(timed_client: tk.Client, timed_api: LiveApi) -> None:
    client, clock = timed_client, timed_client.clock
    assert isinstance(clock, tk.ManualClock)
    client.catalog.set_rules([RetentionRule(1, "old feed", True, parse('feed = "OLD"'), Age(1, "days")),
                              RetentionRule(2, "the rest", True, parse("all"), None)])
    client.catalog.add([{"feed": feed, "type": "Raw Events", "create_time": T0 - 10 * DAY, "file_size": 100}
                        for feed in ["OLD"] * 7 + ["NEW"] * 3])
    client.catalog.run()
    client.catalog.run(dry_run=True)  # changes nothing: not counted
    clock.advance(8 * DAY)  # past catalog.purge_age (7 days)
    client.catalog.purge()

    samples = scrape(timed_api)
    deletes, purges = audit_of(client, "catalog_delete"), audit_of(client, "catalog_purge")
    assert value(samples, "tidekeep_catalog_deleted_rows_total") == sum(
        rule["rows"] for e in deletes for rule in json.loads(e["details"])["rules"].values()) == 7
    assert value(samples, "tidekeep_gc_deletions_total", action="catalog_purge") == sum(
        json.loads(e["details"])["count"] for e in purges) == 7
    assert value(samples, "tidekeep_freed_bytes_total", action="catalog_purge") == sum(e["bytes_freed"] for e in purges)
    assert value(samples, "tidekeep_catalog_runs", kind="retention", state="SUCCEEDED") == 1
    assert value(samples, "tidekeep_catalog_runs", kind="purge", state="SUCCEEDED") == 1
    assert value(samples, "tidekeep_catalog_runs", kind="retention", state="FAILED") == 0
    newest = {r["kind"]: r for r in reversed(client.catalog.runs()) if not r["dry_run"]}
    for kind in ("retention", "purge"):
        assert value(samples, "tidekeep_catalog_last_run_duration_seconds", kind=kind) == (
            newest[kind]["finished_ms"] - newest[kind]["started_ms"]) / 1000


def test_the_server_starts_its_refresher_and_stops_it(timed_client: tk.Client) -> None:
    """Started with the server (its lifespan): the first figures are read without refresh_now."""
    with live_api(timed_client.workspace) as served:
        refresher = served.server.state.metrics.refresher
        for _ in range(600):  # the first read happens at once; this only waits for a busy machine
            if refresher.snapshot is not None:
                break
            time.sleep(0.05)
        assert refresher.snapshot is not None and refresher.snapshot.taken_ms == T0
        assert has(scrape(served, refresh=False), "tidekeep_metrics_refresh_timestamp_seconds")
    assert not refresher.running


def test_the_orphan_sweep_counts_the_files_it_deleted(timed_client: tk.Client, timed_api: LiveApi) -> None:
    client, clock = timed_client, timed_client.clock
    client.create_stream("s/x", tk.StreamConfig(segments=2))
    directory = client.stream("s/x").state().storage_dir()
    table, _ = build_chunk_table([b"orphan"], ["k"])
    two_hours_ago = (clock.now_ms() - 2 * HOUR) / 1000
    for path in (f"{directory}/0.0/crashed-1-aaaa.parquet", f"{directory}/0.1/crashed-2-bbbb.parquet"):
        client.workspace.storage.write_chunk(path, table)
        os.utime(client.workspace.storage.full_path(path), (two_hours_ago, two_hours_ago))
    assert client.sweep(grace="1h").files_deleted == 2

    samples = scrape(timed_api)
    sweeps = audit_of(client, "sweep")
    assert value(samples, "tidekeep_gc_deletions_total", action="sweep") == sum(
        json.loads(e["details"])["files"] for e in sweeps) == 2
    assert value(samples, "tidekeep_freed_bytes_total", action="sweep") == sum(e["bytes_freed"] for e in sweeps) > 0
