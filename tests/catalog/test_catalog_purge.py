"""The catalog purge (docs/design/catalog.md#purge; Stroom's TestPhysicalDeleteExecutor scenarios): records
DELETED for longer than catalog.purge_age lose their data files, then their rows; batches slide
down by status time; failures are excluded and counted; every scenario runs twice to show the
second run finds nothing to do. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tidekeep as tk
from tidekeep.store.schema import audit as audit_table
from tidekeep.store.schema_catalog import catalog_records, catalog_runs

DAY = 86_400_000
NOW = 1_750_000_000_000


@pytest.fixture
def purge_client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(NOW), settings={"catalog.purge_batch_size": 5}, create=True)
    yield c
    c.close()


def add_records(client: tk.Client, rows: list[dict[str, Any]], with_files: bool = True) -> list[int]:
    """Insert catalog rows directly; for each row with a location, write its data file."""
    ids = []
    with client.workspace.db.write() as conn:
        for row in rows:
            values = {"feed": "FEED", "type": "Raw Events", "create_time": NOW - 400 * DAY, "status": "DELETED",
                      "status_time": NOW - 30 * DAY, "file_size": 100, **row}
            ids.append(int(conn.execute(sa.insert(catalog_records).values(**values)).inserted_primary_key[0]))
    if with_files:
        for row in rows:
            location = row.get("location")
            if location and "://" not in location and not location.startswith("/"):
                path = Path(client.workspace.storage.full_path(location))
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(b"x" * int(row.get("file_size", 100)))
    return ids


def deleted_rows(count: int, *, days_ago: int = 30, prefix: str = "d") -> list[dict[str, Any]]:
    # distinct status times (one minute apart), so batch boundaries are not ties
    return [{"status_time": NOW - days_ago * DAY - i * 60_000, "location": f"catalog/{prefix}{i}.dat",
             "file_size": 10 + i} for i in range(count)]


def remaining_ids(client: tk.Client) -> set[int]:
    with client.workspace.db.read() as conn:
        return {r.id for r in conn.execute(sa.select(catalog_records.c.id))}


def data_files(client: tk.Client) -> set[str]:
    return {f.path for f in client.workspace.storage.list_files("catalog")}


def purge_audit(client: tk.Client) -> list[dict[str, Any]]:
    with client.workspace.db.read() as conn:
        rows = conn.execute(sa.select(audit_table).where(audit_table.c.action == "catalog_purge")
                            .order_by(audit_table.c.id))
        return [dict(r._mapping) for r in rows]


def test_one_batch_purges_files_then_rows_and_a_rerun_does_nothing(purge_client: tk.Client) -> None:
    client = purge_client
    ids = add_records(client, deleted_rows(4))
    keep = add_records(client, [{"status": "UNLOCKED", "status_time": NOW - 90 * DAY, "location": "catalog/u.dat"},
                                {"status": "LOCKED", "status_time": NOW - 90 * DAY, "location": "catalog/l.dat"}])
    report = client.catalog.purge()
    assert (report.purged, report.batches, report.failures, report.aborted) == (4, 1, 0, False)
    assert report.bytes == sum(10 + i for i in range(4))
    assert report.threshold_ms == NOW - 7 * DAY
    assert remaining_ids(client) == set(keep)
    assert data_files(client) == {"catalog/u.dat", "catalog/l.dat"}
    [entry] = purge_audit(client)
    details = json.loads(entry["details"])
    assert (details["count"], details["min_id"], details["max_id"]) == (4, min(ids), max(ids))
    assert entry["bytes_freed"] == report.bytes and entry["target"] == "catalog"

    again = client.catalog.purge()
    assert (again.purged, again.bytes, again.batches, again.failures) == (0, 0, 0, 0)
    assert remaining_ids(client) == set(keep) and len(purge_audit(client)) == 1


def test_no_data(purge_client: tk.Client) -> None:
    for _ in range(2):
        report = purge_client.catalog.purge()
        assert (report.eligible, report.purged, report.batches, report.failures) == (0, 0, 0, 0)
    assert purge_audit(purge_client) == []


def test_two_batches_of_five_and_a_remainder_take_three_batches(purge_client: tk.Client) -> None:
    client = purge_client
    add_records(client, deleted_rows(12))
    seen: list[tuple[int, int]] = []
    report = client.catalog.purge(progress=lambda done, total: seen.append((done, total)))
    assert (report.purged, report.batches, report.eligible) == (12, 3, 12)
    assert seen == [(5, 12), (10, 12), (12, 12), (12, 12)]
    assert [json.loads(a["details"])["count"] for a in purge_audit(client)] == [5, 5, 2]
    assert remaining_ids(client) == set() and data_files(client) == set()
    assert client.catalog.purge().purged == 0


def test_a_full_last_batch_is_followed_by_an_empty_fetch_that_ends_the_loop(purge_client: tk.Client) -> None:
    add_records(purge_client, deleted_rows(10))
    seen: list[tuple[int, int]] = []
    report = purge_client.catalog.purge(progress=lambda done, total: seen.append((done, total)))
    assert (report.purged, report.batches) == (10, 2)  # batches count non-empty fetches
    assert seen == [(5, 10), (10, 10), (10, 10), (10, 10)]  # the third, empty fetch reports too


def test_only_rows_deleted_before_the_purge_age_go(purge_client: tk.Client) -> None:
    client = purge_client
    add_records(client, deleted_rows(3, days_ago=8, prefix="old"))
    # a status time exactly at the threshold counts as old enough; one ms younger does not
    add_records(client, [{"status_time": NOW - 7 * DAY, "location": "catalog/edge.dat"}])
    young = add_records(client, [*deleted_rows(3, days_ago=6, prefix="young"),
                                 {"status_time": NOW - 7 * DAY + 1, "location": "catalog/just.dat"}])
    assert [client.catalog.purge().purged for _ in range(2)] == [4, 0]
    assert remaining_ids(client) == set(young)
    assert data_files(client) == {f"catalog/young{i}.dat" for i in range(3)} | {"catalog/just.dat"}
    client.clock.advance(DAY)  # type: ignore[attr-defined]
    assert client.catalog.purge().purged == 4 and remaining_ids(client) == set()


def test_missing_files_and_records_without_location_count_as_success(purge_client: tk.Client) -> None:
    client = purge_client
    add_records(client, [{"location": "catalog/never-written.dat"}, {"location": None}], with_files=False)
    report = client.catalog.purge()
    assert (report.purged, report.failures) == (2, 0) and remaining_ids(client) == set()


def test_absolute_locations_are_deleted_where_they_point_under_a_data_root(tmp_path: Path, metadata_url: str) -> None:
    outside, other = tmp_path / "elsewhere", tmp_path / "elsewhere2"  # other only shares a prefix with the root
    outside.mkdir()
    other.mkdir()
    (outside / "a.dat").write_bytes(b"a")
    (outside / "b.dat").write_bytes(b"b")
    (other / "c.dat").write_bytes(b"c")
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=tk.ManualClock(NOW), settings={"catalog.data_roots": [str(outside)]}, create=True)
    try:
        add_records(client, [{"location": str(outside / "a.dat")}, {"location": f"file://{outside / 'b.dat'}"}])
        [kept] = add_records(client, [{"location": str(other / "c.dat")}])
        report = client.catalog.purge()
        assert (report.purged, report.failures) == (2, 1) and remaining_ids(client) == {kept}
        assert list(outside.iterdir()) == [] and (other / "c.dat").read_bytes() == b"c"
        assert report.failed[0]["error"] == (
            f"location {str(other / 'c.dat')!r} is not under any catalog.data_roots entry")
    finally:
        client.close()


def test_failures_keep_their_rows_are_excluded_and_reported(purge_client: tk.Client, tmp_path: Path) -> None:
    client = purge_client
    (Path(client.workspace.storage.full_path("catalog/adir"))).mkdir(parents=True)
    bad = add_records(client, [
        {"location": "nosuchscheme://bucket/x.dat", "status_time": NOW - 20 * DAY},
        {"location": "../escape.dat", "status_time": NOW - 20 * DAY - 1},
        {"location": "catalog/adir", "status_time": NOW - 20 * DAY - 2},  # a directory is never deleted
    ], with_files=False)
    good = add_records(client, deleted_rows(9))
    (tmp_path / "escape.dat").write_bytes(b"keep me")
    report = client.catalog.purge()
    assert (report.purged, report.failures, report.aborted) == (9, 3, False)
    assert sorted(f["id"] for f in report.failed) == sorted(bad)
    assert remaining_ids(client) == set(bad) and set(good).isdisjoint(remaining_ids(client))
    assert (tmp_path / "escape.dat").read_bytes() == b"keep me"
    assert Path(client.workspace.storage.full_path("catalog/adir")).is_dir()
    errors = {f["location"]: f["error"] for f in report.failed}
    assert errors["../escape.dat"] == "location '../escape.dat' is outside the storage root"
    assert errors["catalog/adir"] == "'catalog/adir' is not a file"
    again = client.catalog.purge()
    assert (again.purged, again.failures) == (0, 3) and remaining_ids(client) == set(bad)


def test_the_purge_stops_once_failures_exceed_the_threshold(tmp_path: Path, metadata_url: str) -> None:
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                        clock=tk.ManualClock(NOW),
                        settings={"catalog.purge_batch_size": 2, "catalog.purge_failure_threshold": 2}, create=True)
    try:
        # newest first: two failing batches (4 failures > 2) come before the good, older records
        add_records(client, [{"location": f"bad{i}://x/y", "status_time": NOW - 10 * DAY - i} for i in range(4)])
        good = add_records(client, deleted_rows(3, days_ago=20))
        report = client.catalog.purge()
        # batch 1: 2 failures (not above 2, go on); batch 2: 4 failures, stop before the good ones
        assert (report.aborted, report.failures, report.batches, report.purged) == (True, 4, 2, 0)
        assert set(good) <= remaining_ids(client)
        with client.workspace.db.read() as conn:
            run = conn.execute(sa.select(catalog_runs).where(catalog_runs.c.id == report.run_id)).one()
        assert (run.kind, run.state, run.dry_run) == ("purge", "FAILED", False)
        assert json.loads(run.report)["aborted"] is True
    finally:
        client.close()


def test_dry_run_counts_and_changes_nothing(purge_client: tk.Client) -> None:
    client = purge_client
    add_records(client, deleted_rows(12) + deleted_rows(2, days_ago=1, prefix="young"))
    before = (remaining_ids(client), data_files(client))
    report = client.catalog.purge(dry_run=True)
    assert (report.dry_run, report.purged, report.batches) == (True, 12, 3)
    assert report.bytes == sum(10 + i for i in range(12))
    assert (remaining_ids(client), data_files(client)) == before and purge_audit(client) == []
    with purge_client.workspace.db.read() as conn:
        run = conn.execute(sa.select(catalog_runs)).one()
    assert (run.kind, run.state, run.dry_run, run.now_ms) == ("purge", "SUCCEEDED", True, NOW)


def test_runs_are_recorded_with_their_report(purge_client: tk.Client) -> None:
    add_records(purge_client, deleted_rows(3))
    report = purge_client.catalog.purge(now_ms=NOW + DAY)
    with purge_client.workspace.db.read() as conn:
        run = conn.execute(sa.select(catalog_runs).where(catalog_runs.c.id == report.run_id)).one()
    assert (run.kind, run.state, run.now_ms, run.finished_ms is not None) == ("purge", "SUCCEEDED", NOW + DAY, True)
    assert json.loads(run.report) == report.to_dict()
    assert report.threshold_ms == NOW + DAY - 7 * DAY
