"""What-if archive retention (archives/expiry_days.py, expiry_forecast.py): the day an archive expires
against the collector's own test tried day by day; the forecast of generated archives and holds
against a brute-force one; on real stores and files (SQLite and PostgreSQL) day 0 is exactly the
collector's dry run (a running search holding the expiry back, dataset, archive and records holds),
later days assume that search finished, a proposed period is simulated without being set, and
nothing is written; bad input is one line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import make_archive
from tidekeep.archives.expiry import is_expired, is_held, plan_archive_sweep, retention_ms
from tidekeep.archives.expiry_days import HELD, RULE, expiry_day, expiry_forecast
from tidekeep.archives.gc import collect_archives
from tidekeep.archives.model import Archive
from tidekeep.archives.store import SearchJobStore
from tidekeep.errors import InvalidInput, NotFound
from tidekeep.forecast import DAY_MS, day_end
from tidekeep.store.schema import audit
from tidekeep.store.schema_archives import archive_gc_journal, archive_search_jobs, archives
from tidekeep.store.schema_holds import holds

MIN = 60_000
HOUR = 60 * MIN
T0 = 1_700_000_000_000


# ---- pure ---------------------------------------------------------------------------------------------
@given(st.none() | st.integers(T0 - 40 * DAY_MS, T0 + 5 * DAY_MS), st.integers(1, 60 * 24 * 30))
def test_the_expiry_day_is_the_first_day_whose_end_expires_the_archive(end_ts: int | None, minutes: int) -> None:
    expected = next((d for d in range(1, 400) if is_expired(end_ts, day_end(T0, d) - retention_ms(minutes))), None)
    found = expiry_day(end_ts, minutes, T0)
    assert found == expected or (expected is None and found is not None and found >= 400)


def archive(n: int, end_ts: int | None, dataset: str = "web") -> Archive:
    return Archive(f"{n:032x}", dataset, None if end_ts is None else end_ts - MIN, end_ts, 1, 10, 100 + n, f"p{n}",
                   T0, "i")


@given(st.lists(st.none() | st.integers(T0 - 10 * DAY_MS, T0 + 3 * DAY_MS), max_size=12),
       st.integers(1, 3 * 24 * 60), st.integers(0, 6), st.sets(st.integers(0, 11)), st.booleans(),
       st.none() | st.integers(T0 - 3 * DAY_MS, T0))
def test_the_forecast_matches_the_collector_tried_day_by_day(ends: list[int | None], minutes: int, days: int,
                                                             held_numbers: set[int], dataset_held: bool,
                                                             running_since: int | None) -> None:
    found = [archive(n, end) for n, end in enumerate(ends)]
    held_ids = {archive(n, None).id for n in held_numbers}
    held_datasets = {"web"} if dataset_held else set()
    jobs = [] if running_since is None else [search_job(running_since)]
    plan = plan_archive_sweep(T0, minutes, 10 * DAY_MS, found, jobs, held_datasets, held_ids)
    forecast = expiry_forecast("web", found, minutes, True, plan, held_datasets, held_ids, {}, T0, days)
    got = {(line.day, line.rule): (sorted(line.ids), line.bytes, line.items, line.held_bytes, line.held_items)
           for line in forecast.lines}
    expected: dict[tuple[int, str], list[Archive]] = {}
    for a in found:  # day 0 as the sweep's plan (the search may hold it back), then the day ends without it
        expiry_0 = plan.expiry_ms
        day = 0 if is_expired(a.end_ts, expiry_0) else next(
            (d for d in range(1, days + 1) if is_expired(a.end_ts, day_end(T0, d) - retention_ms(minutes))), None)
        if day is not None:
            expected.setdefault((day, HELD if is_held(a, held_datasets, held_ids) else RULE), []).append(a)
    assert got == {key: (sorted(a.id for a in group), 0 if key[1] == HELD else sum(a.stored_bytes for a in group),
                         0 if key[1] == HELD else len(group),
                         sum(a.stored_bytes for a in group) if key[1] == HELD else 0,
                         len(group) if key[1] == HELD else 0) for key, group in expected.items()}


def search_job(created_ms: int) -> Any:
    from tidekeep.archives.model import JobState, SearchJob

    return SearchJob(1, "web", "x", False, False, None, None, JobState.RUNNING, created_ms, None, None, 0, 0, None,
                     None, None, "t", None, None)


# ---- on real stores -----------------------------------------------------------------------------------
@pytest.fixture
def fc_client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=tk.ManualClock(T0), create=True,
                   settings={"archive_output.retention_period": 24 * 60, "search.max_runtime": "2d"})
    yield c
    c.close()


def ending(client: tk.Client, dataset: str, end_ms: int | None) -> Archive:
    if end_ms is None:
        return make_archive(client, dataset, [(None, "no time here")])
    return make_archive(client, dataset, [(end_ms - 5 * MIN, "first"), (end_ms, "last")])


def stored(client: tk.Client) -> dict[str, list[tuple[Any, ...]]]:
    with client.workspace.db.read() as conn:
        return {table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
                for table in (archives, archive_search_jobs, archive_gc_journal, audit, holds)}


def test_day_0_is_the_collectors_dry_run_and_later_days_follow(fc_client: tk.Client) -> None:
    c = fc_client
    # retention 1 day; now = T0 + 5h, so now − TTL = T0 − 19h
    old, late = ending(c, "web", T0 - 3 * DAY_MS), ending(c, "web", T0 - 20 * HOUR)
    soon, fresh = ending(c, "web", T0 - 10 * HOUR), ending(c, "web", T0 - 40 * MIN)
    ahead, timeless, other = ending(c, "web", T0 + 20 * HOUR), ending(c, "web", None), ending(c, "db", T0 - 3 * DAY_MS)
    held = ending(c, "web", T0 - 50 * HOUR)
    c.holds.add("archive", held.id, "incident 7")
    # a search created at T0 may read what ends from T0 − 1 day on: `late` is past retention now, yet kept
    job = SearchJobStore(c.workspace).create("web", "x", regex=False, ignore_case=False, begin_ts=None, end_ts=None,
                                             retention_minutes=24 * 60)
    clock_of(c).advance(5 * HOUR)
    before = stored(c)
    forecast = c.archives.forecast("web", days=2).to_dict()
    assert stored(c) == before
    dry = collect_archives(c.workspace, dry_run=True)
    assert stored(c) == before and dry.held_back_by_job == job.id
    day0 = {line["rule"]: set(line["ids"]) for line in forecast["lines"] if line["day"] == 0}
    assert day0["retention-period"] == {x["archive_id"] for x in dry.candidates if x["dataset"] == "web"} == {old.id}
    assert day0["held"] == {x["archive_id"] for x in dry.held if x["dataset"] == "web"} == {held.id}
    assert (forecast["details"]["expiry_ms"], forecast["details"]["held_back_by_job"]) == (dry.expiry_ms, job.id)
    by_day = {(line["day"], line["rule"]): set(line["ids"]) for line in forecast["lines"]}
    # by day 1 that search is taken to have finished: `late` goes, with what passes 1 day during it
    assert by_day == {(0, "retention-period"): {old.id}, (0, "held"): {held.id},
                      (1, "retention-period"): {late.id, soon.id, fresh.id}, (2, "retention-period"): {ahead.id}}
    assert timeless.id not in str(forecast) and other.id not in str(forecast)
    assert forecast["totals"]["items"] == 5 and forecast["totals"]["held_items"] == 1
    assert forecast["totals"]["bytes"] == sum(a.stored_bytes for a in (old, late, soon, fresh, ahead))
    assert forecast["totals"]["held_bytes"] == held.stored_bytes
    assert any("without timestamps never expire" in note for note in forecast["notes"])
    assert any(f"running search {job.id} holds the expiry back" in note for note in forecast["notes"])


@pytest.mark.parametrize(("kind", "target", "why"), [("dataset", "web", "dataset hold"),
                                                      ("records", 'feed = "web" and type = "Archive"', "records hold")])
def test_held_archives_are_apart_as_the_dry_run_says(fc_client: tk.Client, kind: str, target: str, why: str) -> None:
    c = fc_client
    made = [ending(c, "web", T0 - h * HOUR) for h in (10, 25, 26, 70)]
    c.holds.add(kind, target, "litigation")
    forecast = c.archives.forecast("web", days=1).to_dict()
    dry = collect_archives(c.workspace, dry_run=True)
    assert {a for line in forecast["lines"] if line["day"] == 0 for a in line["ids"]} == {
        x["archive_id"] for x in dry.held} == {a.id for a in made[1:]}
    assert all(f"({why})" in x["why"] for x in dry.held)
    assert forecast["totals"]["bytes"] == 0 and forecast["totals"]["held_items"] == 4
    assert {(line["rule"], line["name"]) for line in forecast["lines"]} == {("held", why)}


def clock_of(client: tk.Client) -> tk.ManualClock:
    assert isinstance(client.clock, tk.ManualClock)
    return client.clock


def test_a_proposed_period_is_simulated_without_being_set(fc_client: tk.Client) -> None:
    c = fc_client
    made = [ending(c, "web", T0 - h * HOUR) for h in (2, 10, 30)]
    before = stored(c)
    forecast = c.archives.forecast("web", "6h", days=1).to_dict()
    assert stored(c) == before and c.workspace.settings["archive_output.retention_period"] == 24 * 60
    assert forecast["proposal"] == {"current": False, "retention_minutes": 360}
    assert {line["day"]: set(line["ids"]) for line in forecast["lines"]} == {0: {made[1].id, made[2].id},
                                                                             1: {made[0].id}}
    assert c.archives.forecast("web", 60 * 24, days=1).to_dict()["lines"] == c.archives.forecast(
        "web", days=1).to_dict()["lines"]


def test_without_a_retention_period_nothing_expires(client: tk.Client) -> None:
    make_archive(client, "web", [(1, "very old")])
    forecast = client.archives.forecast("web").to_dict()
    assert forecast["lines"] == [] and forecast["proposal"] == {"current": True, "retention_minutes": None}
    assert "kept forever" in forecast["notes"][0]


@pytest.mark.parametrize(("args", "error", "message"), [
    (("nope",), NotFound, "dataset 'nope' does not exist"),
    (("web", "90s"), InvalidInput, "invalid retention period: invalid duration '90s': not a whole number of minutes"),
    (("web", 0), InvalidInput, "invalid retention period: must be a whole number of minutes above zero, got 0"),
    (("web", None, None, 400), InvalidInput, "invalid days 400"),
    (("web", None, -3), InvalidInput, "invalid time -3"),
    (("bad name!",), InvalidInput, "dataset name"),
])
def test_bad_input_is_one_line_and_changes_nothing(fc_client: tk.Client, args: tuple[Any, ...], error: type,
                                                    message: str) -> None:
    ending(fc_client, "web", T0 - 3 * DAY_MS)
    before = stored(fc_client)
    with pytest.raises(error) as raised:
        fc_client.archives.forecast(*args)
    assert message in str(raised.value) and "\n" not in str(raised.value)
    assert stored(fc_client) == before
