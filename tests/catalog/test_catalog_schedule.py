"""The catalog schedule: cron parsing and next fire times (examples, bad input, a property test
against a brute-force minute walk), and the catalog task under the service: two services on one
store run the job and the purge exactly once per fire time, failures are retried with backoff."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.catalog.schedule import is_due, next_fire, parse_cron
from tidekeep.errors import ConfigError
from tidekeep.service.assembly import CATALOG_RESOURCE, catalog_task
from tidekeep.service.scheduler import RetentionService
from tidekeep.service.tasks import CronTask
from tidekeep.store.leases import LeaseStore

MINUTE = 60_000


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)  # type: ignore[misc]


def at(ms_value: int) -> datetime:
    return datetime.fromtimestamp(ms_value / 1000, UTC)


# ---- cron examples ----------------------------------------------------------------------------
@pytest.mark.parametrize(("cron", "after", "expected"), [
    ("0 0 * * *", ms(2024, 3, 31, 12, 0), ms(2024, 4, 1)),
    ("0 0 * * *", ms(2024, 4, 1), ms(2024, 4, 2)),  # strictly after: a run at midnight waits a day
    ("0 0 * * *", ms(2024, 3, 31, 23, 59, 59), ms(2024, 4, 1)),
    ("*/15 * * * *", ms(2024, 3, 31, 12, 0, 1), ms(2024, 3, 31, 12, 15)),
    ("5/20 * * * *", ms(2024, 3, 31, 12, 6), ms(2024, 3, 31, 12, 25)),
    ("0 0 29 2 *", ms(2024, 3, 1), ms(2028, 2, 29)),
    ("0 0 29 2 *", ms(2096, 3, 1), ms(2104, 2, 29)),  # 2100 is not a leap year
    ("0 12 * * MON-FRI", ms(2024, 3, 29, 12, 0), ms(2024, 4, 1, 12)),  # Friday noon → Monday noon
    ("0 9 * * 7", ms(2024, 3, 25), ms(2024, 3, 31, 9)),  # 7 is Sunday
    ("0 9 * * sun", ms(2024, 3, 25), ms(2024, 3, 31, 9)),
    ("30 4 1,15 * 5", ms(2024, 3, 27), ms(2024, 3, 29, 4, 30)),  # both day fields set: either (a Friday)
    ("30 4 1,15 * *", ms(2024, 3, 27), ms(2024, 4, 1, 4, 30)),
    ("0 0 1 jan-mar/2 *", ms(2024, 1, 2), ms(2024, 3, 1)),
    ("@hourly", ms(2024, 3, 31, 12, 30), ms(2024, 3, 31, 13)),
    ("@weekly", ms(2024, 3, 27), ms(2024, 3, 31)),
    ("@yearly", ms(2024, 3, 27), ms(2025, 1, 1)),
    ("0 0 1 1-1/6 *", ms(2024, 1, 2), ms(2025, 1, 1)),  # a one-value range with a step is that value
    ("0 0 */31 2 1", ms(2027, 3, 1), ms(2038, 2, 1)),  # Feb 1 on a Monday: 11 years apart, not "never"
])
def test_next_fire_examples(cron: str, after: int, expected: int) -> None:
    assert at(next_fire(cron, after)) == at(expected)


def test_is_due() -> None:
    last = ms(2024, 3, 31, 0, 0, 5)  # the run at midnight began 5 s late
    assert not is_due("0 0 * * *", last, ms(2024, 3, 31, 23, 59, 59))
    assert is_due("0 0 * * *", last, ms(2024, 4, 1))
    assert is_due("0 0 * * *", last, ms(2024, 4, 5))  # several missed fire times: due, once


@pytest.mark.parametrize(("cron", "message"), [
    ("", "bad value for 'catalog.schedule': expected a cron expression like '0 0 * * *'"),
    ("0 0 * *", "bad value for 'catalog.schedule': '0 0 * *': expected 5 fields (minute hour day-of-month "
                "month day-of-week), got 4"),
    ("60 0 * * *", "bad value for 'catalog.schedule': '60 0 * * *': minute 60 is outside 0-59"),
    ("0 24 * * *", "bad value for 'catalog.schedule': '0 24 * * *': hour 24 is outside 0-23"),
    ("0 0 0 * *", "bad value for 'catalog.schedule': '0 0 0 * *': day of month 0 is outside 1-31"),
    ("0 0 * 13 *", "bad value for 'catalog.schedule': '0 0 * 13 *': month 13 is outside 1-12"),
    ("0 0 * * 8", "bad value for 'catalog.schedule': '0 0 * * 8': day of week 8 is outside 0-7"),
    ("0 0 * * FUN", "bad value for 'catalog.schedule': '0 0 * * FUN': day of week 'FUN' is not a number"),
    ("*/0 * * * *", "bad value for 'catalog.schedule': '*/0 * * * *': minute step '0' must be a whole number "
                    "above zero"),
    ("0 5-1 * * *", "bad value for 'catalog.schedule': '0 5-1 * * *': hour range '5-1' runs backwards"),
    ("0 0 30 2 *", "bad value for 'catalog.schedule': '0 0 30 2 *' never fires (no such day in those months)"),
])
def test_bad_cron_is_a_config_error_naming_the_setting(cron: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_cron(cron)
    assert str(caught.value) == message


def test_a_bad_schedule_is_refused_when_settings_load(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        tk.connect(home=tmp_path / "ws", settings={"catalog.schedule": "0 0 31 4 *"}, create=True)
    assert str(caught.value) == ("bad value for 'catalog.schedule' in flags: '0 0 31 4 *' never fires "
                                 "(no such day in those months)")
    (tmp_path / "ws2").mkdir()
    (tmp_path / "ws2" / "tidekeep.yaml").write_text("catalog:\n  schedule: '* * * *'\n")
    with pytest.raises(ConfigError, match=r"^bad value for 'catalog.schedule' in .*tidekeep.yaml: '\* \* \* \*': "
                                          r"expected 5 fields"):
        tk.connect(home=tmp_path / "ws2", create=True)
    assert tk.connect(home=tmp_path / "ws3", settings={"catalog.schedule": " 30  2 * * * "}, create=True) \
        .settings["catalog.schedule"] == "30 2 * * *"


# ---- property: next_fire against a minute walk -------------------------------------------------
def field_values(low: int, high: int, max_size: int) -> st.SearchStrategy[frozenset[int] | None]:
    return st.one_of(st.none(), st.frozensets(st.integers(low, high), min_size=1, max_size=max_size))


def render(values: frozenset[int] | None) -> str:
    return "*" if values is None else ",".join(str(v) for v in sorted(values))


@settings(max_examples=120, deadline=None)
@given(minutes=field_values(0, 59, 4), hours=field_values(0, 23, 4), days=field_values(1, 28, 3),
       weekdays=field_values(0, 6, 3), after=st.integers(ms(2020, 1, 1), ms(2030, 1, 1)))
def test_next_fire_is_the_first_matching_minute_after(minutes: frozenset[int] | None, hours: frozenset[int] | None,
                                                      days: frozenset[int] | None, weekdays: frozenset[int] | None,
                                                      after: int) -> None:
    cron = f"{render(minutes)} {render(hours)} {render(days)} * {render(weekdays)}"

    def fires(t: int) -> bool:  # the oracle: cron's rule written out from the generated sets
        moment = at(t)
        day_ok = days is None or moment.day in days
        weekday_ok = weekdays is None or (moment.weekday() + 1) % 7 in weekdays
        both_set = days is not None and weekdays is not None
        return ((minutes is None or moment.minute in minutes) and (hours is None or moment.hour in hours)
                and ((day_ok or weekday_ok) if both_set else (day_ok and weekday_ok)))

    t = (after // MINUTE + 1) * MINUTE
    while not fires(t):  # a day of the month up to 28 comes within 31 days
        t += MINUTE
    assert next_fire(cron, after) == t
    assert is_due(cron, after, t) and not is_due(cron, after, t - 1)


# ---- the task under the service ---------------------------------------------------------------
@pytest.fixture
def two_clients(tmp_path: Path, metadata_url: str) -> Iterator[tuple[tk.Client, tk.Client, tk.ManualClock]]:
    clock = tk.ManualClock(ms(2024, 3, 31, 23, 41))
    a = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
        create=True)
    b = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
        create=True)
    yield a, b, clock
    a.close()
    b.close()


def service(client: tk.Client, owner: str, task: CronTask) -> RetentionService:
    return RetentionService(LeaseStore(client.workspace.db, client.clock), client.clock, owner,
                            ttl_ms=30_000, tasks=[task])


def test_two_services_run_the_job_and_the_purge_once_per_fire_time(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock]) -> None:
    a, b, clock = two_clients
    calls: list[tuple[str, str, int]] = []

    def task(owner: str) -> CronTask:
        return catalog_task("*/10 * * * *",
                            run_job=lambda: calls.append((owner, "job", clock.now_ms())),
                            purge=lambda: calls.append((owner, "purge", clock.now_ms())))

    services = [service(a, "A", task("A")), service(b, "B", task("B"))]
    start = clock.now_ms()
    for step in range(41):  # 23:41 → 01:41 in 3-minute steps, both services looking each time
        for s in services if step % 2 else reversed(services):
            s.run_pass()
        last_look = clock.now_ms()
        clock.advance(3 * MINUTE)
    jobs = [c for c in calls if c[1] == "job"]
    fire_times = []
    t = start
    while (t := next_fire("*/10 * * * *", t)) <= last_look:
        fire_times.append(t)
    assert len(fire_times) == 12 and len(jobs) == len(fire_times)  # 23:50, 00:00 ... 01:40
    for (_, _, ran_at), fire in zip(jobs, fire_times, strict=True):
        assert fire <= ran_at < fire + 10 * MINUTE  # each fire time run once, before the next one
    assert [c[1] for c in calls] == ["job", "purge"] * 12  # the purge after each job, by the same owner
    assert all(calls[i][0] == calls[i + 1][0] for i in range(0, len(calls), 2))
    assert {c[0] for c in calls} == {"A", "B"}  # whichever looked first when it was due
    lease = LeaseStore(a.workspace.db, clock).get(CATALOG_RESOURCE)
    assert lease is not None and lease.owner is None and lease.work_done_ms == jobs[-1][2]


def test_a_schedule_never_run_waits_for_its_first_fire_time(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock]) -> None:
    a, _, clock = two_clients
    calls: list[int] = []
    s = service(a, "A", catalog_task("0 0 * * *", run_job=lambda: calls.append(clock.now_ms()),
                                     purge=lambda: None))
    s.run_pass()
    clock.advance(18 * MINUTE)  # 23:59
    s.run_pass()
    assert calls == []
    clock.advance(MINUTE)
    s.run_pass()
    s.run_pass()
    assert calls == [ms(2024, 4, 1)]


def test_a_failing_job_is_retried_with_backoff_and_never_stops_the_service(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock]) -> None:
    a, _, clock = two_clients
    attempts: list[int] = []
    purges: list[int] = []

    def flaky_job() -> str:
        attempts.append(clock.now_ms())
        if len(attempts) < 3:
            raise RuntimeError("store hiccup")
        return "ok"

    task = catalog_task("0 0 * * *", run_job=flaky_job, purge=lambda: purges.append(clock.now_ms()),
                        retry_base_ms=MINUTE, retry_cap_ms=10 * MINUTE)
    s = service(a, "A", task)
    s.run_pass()
    clock.advance(19 * MINUTE)  # midnight
    for _ in range(10):
        s.run_pass()  # passes between retries do nothing
        clock.advance(30_000)
    # attempt 1 at 00:00 fails (retry after 1 min), 2 at 00:01 fails (retry after 2 min), 3 at 00:03
    assert attempts == [ms(2024, 4, 1), ms(2024, 4, 1, 0, 1), ms(2024, 4, 1, 0, 3)]
    assert purges == [ms(2024, 4, 1, 0, 3)]  # no purge after a failed job
    assert (task.failures, task.retry_at_ms) == (0, None)
    lease = LeaseStore(a.workspace.db, clock).get(CATALOG_RESOURCE)
    assert lease is not None and lease.work_done_ms == ms(2024, 4, 1, 0, 3) and lease.owner is None


def test_a_failing_purge_fails_the_run_and_both_are_retried(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock]) -> None:
    a, _, clock = two_clients
    calls: list[str] = []

    def purge() -> None:
        calls.append("purge")
        if calls.count("purge") == 1:
            raise OSError("storage unreachable")

    task = catalog_task("0 0 * * *", run_job=lambda: calls.append("job"), purge=purge,
                        retry_base_ms=MINUTE)
    s = service(a, "A", task)
    s.run_pass()
    clock.advance(19 * MINUTE)
    s.run_pass()
    assert calls == ["job", "purge"] and task.failures == 1
    lease = LeaseStore(a.workspace.db, clock).get(CATALOG_RESOURCE)
    assert lease is not None and lease.work_done_ms is None  # not recorded as run
    clock.advance(MINUTE)
    s.run_pass()
    assert calls == ["job", "purge", "job", "purge"] and task.failures == 0


def test_a_held_catalog_lease_keeps_other_services_out(
        two_clients: tuple[tk.Client, tk.Client, tk.ManualClock]) -> None:
    a, b, clock = two_clients
    calls: list[str] = []
    s = service(b, "B", catalog_task("0 0 * * *", run_job=lambda: calls.append("job"),
                                     purge=lambda: None))
    s.run_pass()
    assert LeaseStore(a.workspace.db, clock).acquire(CATALOG_RESOURCE, "A-running-long", 3_600_000).granted
    clock.advance(19 * MINUTE)
    s.run_pass()
    assert calls == []  # A holds the lease (a long run): B does not start a second one
