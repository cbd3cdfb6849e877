"""The collectors' pure decisions (archives/expiry.py): the worked example of docs/archives-retention.md,
CLP's safe expiry, dead searches (no heartbeat) and overlong ones, and property tests against brute-force
oracles — above all, no archive a live RUNNING search may read is ever a candidate."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.archives.expiry import (
    MISSED_HEARTBEATS,
    is_expired,
    jobs_to_kill,
    jobs_without_heartbeat,
    plan_archive_sweep,
    recheck_candidates,
    results_to_expire,
    safe_expiry_ms,
)
from tidekeep.archives.model import Archive, JobState, SearchJob

HOUR = 3_600_000


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp() * 1000)


def archive(archive_id: str, end_ts: int | None, dataset: str = "d") -> Archive:
    return Archive(archive_id.rjust(32, "0"), dataset, end_ts, end_ts, 1, 1, 10, f"archives/{dataset}/{archive_id}",
                   0, "i" * 32)


def job(job_id: int, created_ms: int, state: JobState = JobState.RUNNING, completed_ms: int | None = None,
        results_expired_ms: int | None = None, heartbeat_ms: int | None = None,
        heartbeat_interval_ms: int | None = None) -> SearchJob:
    return SearchJob(job_id, "d", "q", False, False, None, None, state, created_ms, completed_ms, None, 0, 0, None,
                     results_expired_ms, None, "t", heartbeat_ms, heartbeat_interval_ms)


# ---- docs/archives-retention.md's example: TTL 1 h, archive end 16:00 UTC -----------------------
def test_the_worked_expiry_example_kept_at_1700_expired_after() -> None:
    end = ms(2024, 5, 1, 16, 0)
    assert not is_expired(end, safe_expiry_ms(ms(2024, 5, 1, 16, 59), 60, None))
    assert not is_expired(end, safe_expiry_ms(ms(2024, 5, 1, 17, 0), 60, None))  # T − archive.T = TTL: kept
    assert is_expired(end, safe_expiry_ms(ms(2024, 5, 1, 17, 0) + 1, 60, None))  # one ms later: expired
    assert is_expired(end, safe_expiry_ms(ms(2024, 5, 1, 18, 0), 60, None))


def test_archives_without_timestamps_never_expire() -> None:
    assert not is_expired(None, 10**15)
    plan = plan_archive_sweep(10**13, 1, HOUR, [archive("a", None)], [], set(), set())
    assert plan.candidates == [] and plan.held == []


def test_safe_expiry_uses_the_oldest_running_search() -> None:
    now = ms(2024, 5, 1, 17, 30)
    created = ms(2024, 5, 1, 16, 45)
    assert safe_expiry_ms(now, 60, None) == ms(2024, 5, 1, 16, 30)
    assert safe_expiry_ms(now, 60, created) == ms(2024, 5, 1, 15, 45)
    assert safe_expiry_ms(now, 60, now + 5) == ms(2024, 5, 1, 16, 30)  # created after now: holds nothing back
    # an archive ending 16:00 is past now − TTL but a search created 16:45 may read it: kept
    plan = plan_archive_sweep(now, 60, 10 * HOUR, [archive("a", ms(2024, 5, 1, 16, 0))],
                              [job(7, created), job(8, created + 1), job(9, ms(2024, 5, 1, 15), JobState.SUCCEEDED)],
                              set(), set())
    assert plan.candidates == [] and plan.expiry_ms == ms(2024, 5, 1, 15, 45)
    assert plan.held_back_by is not None and plan.held_back_by.id == 7


def test_an_overlong_search_is_killed_and_holds_nothing_back() -> None:
    now = ms(2024, 5, 1, 17, 30)
    hanging = job(3, now - HOUR - 1)  # ran one ms longer than max_runtime = 1 h
    on_time = job(4, now - HOUR)  # exactly max_runtime: not killed
    assert jobs_to_kill([hanging, on_time], now, HOUR) == [hanging]
    plan = plan_archive_sweep(now, 60, HOUR, [archive("a", now - 90 * 60_000)], [hanging], set(), set())
    assert plan.kill == [hanging] and plan.held_back_by is None
    assert [a.id for a in plan.candidates] == ["a".rjust(32, "0")]


def test_a_dead_search_is_failed_after_missed_heartbeats_and_holds_nothing_back() -> None:
    now = ms(2024, 5, 1, 17, 30)
    interval = 10_000
    silent = MISSED_HEARTBEATS * interval
    assert MISSED_HEARTBEATS == 3  # documented in docs/archives-retention.md
    dead = job(1, now - 5 * 60_000, heartbeat_ms=now - silent - 1, heartbeat_interval_ms=interval)
    boundary = job(2, now - 5 * 60_000, heartbeat_ms=now - silent, heartbeat_interval_ms=interval)  # exactly N: alive
    fresh = job(3, now - 5 * 60_000, heartbeat_ms=now - 1, heartbeat_interval_ms=interval)
    slower = job(4, now - 5 * 60_000, heartbeat_ms=now - silent - 1, heartbeat_interval_ms=2 * interval)  # its own
    legacy = job(5, now - 50 * 60_000)  # from before heartbeats: left to max_runtime, however long ago it started
    ended = job(6, now - 5 * 60_000, JobState.SUCCEEDED, completed_ms=now - silent - 10, heartbeat_ms=now - HOUR,
                heartbeat_interval_ms=interval)
    jobs = [ended, legacy, slower, fresh, boundary, dead]
    assert jobs_without_heartbeat(jobs, now) == [dead]
    assert jobs_without_heartbeat(jobs, now + 1) == [dead, boundary]
    # the dead job is the oldest RUNNING one; failed, the next oldest (the legacy job) holds expiry back
    plan = plan_archive_sweep(now, 60, HOUR, [archive("a", now - 70 * 60_000)], jobs, set(), set())
    assert plan.dead == [dead] and plan.kill == [] and plan.held_back_by == legacy
    oldest_live_first = [job(1, now - 90 * 60_000, heartbeat_ms=now - silent - 1, heartbeat_interval_ms=interval),
                         job(2, now - 30 * 60_000, heartbeat_ms=now, heartbeat_interval_ms=interval)]
    plan = plan_archive_sweep(now, 60, 10 * HOUR, [archive("a", now - 100 * 60_000), archive("b", now - 91 * 60_000)],
                              oldest_live_first, set(), set())
    assert [j.id for j in plan.dead] == [1] and plan.held_back_by is not None and plan.held_back_by.id == 2
    assert [a.id[-1] for a in plan.candidates] == ["a", "b"]  # the dead job's creation no longer counts
    # both dead and overlong: FAILED (its process died), not also KILLED
    both = job(7, now - 2 * HOUR, heartbeat_ms=now - HOUR, heartbeat_interval_ms=interval)
    plan = plan_archive_sweep(now, 60, HOUR, [], [both], set(), set())
    assert plan.dead == [both] and plan.kill == []


def test_held_archives_are_reported_not_deleted() -> None:
    now = ms(2024, 5, 1, 20)
    old = now - 5 * HOUR
    archives = [archive("a", old, "d1"), archive("b", old, "d2"), archive("c", old, "d2"), archive("e", now, "d1")]
    plan = plan_archive_sweep(now, 60, HOUR, archives, [], {"d1"}, {"c".rjust(32, "0")})
    assert [a.id[-1] for a in plan.candidates] == ["b"]
    assert sorted(a.id[-1] for a in plan.held) == ["a", "c"]


def test_results_expire_from_completion_in_every_final_state() -> None:
    now = ms(2024, 5, 1, 20)
    jobs = [job(1, now - 5 * HOUR, JobState.SUCCEEDED, completed_ms=now - HOUR - 1),
            job(2, now - 5 * HOUR, JobState.FAILED, completed_ms=now - 2 * HOUR),
            job(3, now - 5 * HOUR, JobState.CANCELLED, completed_ms=now - 3 * HOUR),
            job(4, now - 5 * HOUR, JobState.KILLED, completed_ms=now - 3 * HOUR),
            job(5, now - 5 * HOUR, JobState.SUCCEEDED, completed_ms=now - HOUR),  # exactly TTL: kept
            job(6, now - 5 * HOUR, JobState.RUNNING),
            job(7, now - 5 * HOUR, JobState.SUCCEEDED, completed_ms=now - 3 * HOUR, results_expired_ms=now - 1)]
    assert [j.id for j in results_to_expire(jobs, now, 60)] == [1, 2, 3, 4]


# ---- properties against brute force -----------------------------------------------------------
T0 = 1_700_000_000_000
times = st.integers(T0 - 20 * HOUR, T0 + 20 * HOUR)
archive_lists = st.lists(st.tuples(st.sampled_from(["d1", "d2", "d3"]), st.none() | times), max_size=12)
# (created, state, last heartbeat or None for a job from before heartbeats, interval)
job_lists = st.lists(st.tuples(times, st.sampled_from(list(JobState)), st.none() | times,
                               st.integers(1, 2 * HOUR)), max_size=6)


def build(archive_specs: list[tuple[str, int | None]],
          job_specs: list[tuple[int, JobState, int | None, int]]):
    archives = [archive(f"{i:x}", end, dataset) for i, (dataset, end) in enumerate(archive_specs)]
    jobs = [job(i + 1, created, state, heartbeat_ms=beat, heartbeat_interval_ms=None if beat is None else interval)
            for i, (created, state, beat, interval) in enumerate(job_specs)]
    return archives, jobs


@settings(max_examples=300, deadline=None)
@given(archive_lists, job_lists, times, st.integers(1, 600), st.integers(1, 20 * HOUR),
       st.sets(st.sampled_from(["d1", "d2", "d3"])), st.sets(st.integers(0, 11)))
def test_plan_matches_brute_force(archive_specs, job_specs, now, retention, max_runtime, held_datasets,
                                  held_indexes) -> None:
    archives, jobs = build(archive_specs, job_specs)
    held_ids = {f"{i:x}".rjust(32, "0") for i in held_indexes}
    plan = plan_archive_sweep(now, retention, max_runtime, archives, jobs, held_datasets, held_ids)
    ttl = retention * 60_000

    dead = {j.id for j in jobs if j.state is JobState.RUNNING and j.heartbeat_ms is not None
            and j.heartbeat_interval_ms is not None and now - j.heartbeat_ms > 3 * j.heartbeat_interval_ms}
    killed = {j.id for j in jobs if j.state is JobState.RUNNING and now - j.created_ms > max_runtime} - dead
    assert {j.id for j in plan.dead} == dead
    assert {j.id for j in plan.kill} == killed
    still_running = [j for j in jobs if j.state is JobState.RUNNING and j.id not in killed | dead]
    # the oracle: an archive may go iff it is below now − TTL and below every running search's lower bound
    def may_go(a: Archive) -> bool:
        return (a.end_ts is not None and now - a.end_ts > ttl
                and all(a.end_ts < j.created_ms - ttl for j in still_running))

    expected = {a.id for a in archives if may_go(a)}
    held = {a.id for a in archives if a.dataset in held_datasets or a.id in held_ids}
    assert {a.id for a in plan.candidates} == expected - held
    assert {a.id for a in plan.held} == expected & held
    # the invariant that matters: no running search's lower bound is above a candidate's end
    for a in plan.candidates:
        assert a.end_ts is not None
        for j in still_running:
            assert a.end_ts < j.created_ms - ttl
    assert plan.expiry_ms <= now - ttl


@settings(max_examples=200, deadline=None)
@given(archive_lists, times, st.integers(1, 600), st.sets(st.sampled_from(["d1", "d2", "d3"])))
def test_recheck_keeps_exactly_what_became_unexpired_or_held(archive_specs, expiry, _retention, held) -> None:
    archives, _ = build(archive_specs, [])
    delete, keep = recheck_candidates(archives, expiry, held, set())
    assert {a.id for a in delete} == {a.id for a in archives
                                      if a.end_ts is not None and a.end_ts < expiry and a.dataset not in held}
    assert {a.id for a in delete} | {a.id for a in keep} == {a.id for a in archives}
    assert not {a.id for a in delete} & {a.id for a in keep}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(times, st.sampled_from(list(JobState)), st.none() | times, st.booleans()), max_size=10),
       times, st.integers(1, 600))
def test_results_expiry_matches_brute_force(specs, now, retention) -> None:
    jobs = [job(i + 1, created, state, None if state is JobState.RUNNING else done, T0 if expired else None)
            for i, (created, state, done, expired) in enumerate(specs)]
    chosen = {j.id for j in results_to_expire(jobs, now, retention)}
    oracle = {j.id for j in jobs if j.state is not JobState.RUNNING and j.results_expired_ms is None
              and now - (j.completed_ms if j.completed_ms is not None else j.created_ms) > retention * 60_000}
    assert chosen == oracle


# ---- the orphan sweep -------------------------------------------------------------------------
def test_a_running_ingest_protects_its_dataset() -> None:
    from tidekeep.archives.expiry import StoredEntry, plan_orphans

    cutoff = 1000
    entries = [StoredEntry("archives/web/_ingest-1", 2000, 0, True),  # touched by a move a moment ago
               StoredEntry("archives/web/" + "a" * 32 + ".parquet", 10, 5, False),  # moved in, not yet registered
               StoredEntry("archives/db/_ingest-2", 10, 0, True),  # a crashed ingest, long ago
               StoredEntry("archives/db/_ingest-2/part-0.parquet", 10, 7, False),
               StoredEntry("archives/db/" + "b" * 32 + ".parquet", 10, 9, False),  # registered
               StoredEntry("archives/db/" + "c" * 32 + ".parquet", 999, 3, False),  # unnamed, old
               StoredEntry("archives/db/" + "e" * 32 + ".parquet", 5000, 3, False),  # registered just now
               StoredEntry("archives/app/" + "d" * 32 + ".parquet", 1000, 3, False)]  # unnamed, within the grace
    plan = plan_orphans(entries, {"archives/db/" + "b" * 32 + ".parquet", "archives/db/" + "e" * 32 + ".parquet"},
                        cutoff)
    assert [e.path for e in plan.files] == ["archives/db/_ingest-2/part-0.parquet",
                                            "archives/db/" + "c" * 32 + ".parquet"]
    assert plan.staging_dirs == ["archives/db/_ingest-2"] and plan.busy_datasets == ["app", "web"]


def test_on_an_object_store_a_file_just_moved_in_protects_the_files_still_staged() -> None:
    """An object store lists no directory times, and its move is a copy that gets a new time: an
    ingest that has begun moving its files in shows only as a young unnamed file in place, while its
    files still staged are as old as when its tasks wrote them. Those must stay."""
    from tidekeep.archives.expiry import StoredEntry, plan_orphans

    cutoff = 1000
    entries = [StoredEntry("archives/web", None, 0, True),
               StoredEntry("archives/web/_ingest-1", None, 0, True),
               StoredEntry("archives/web/_ingest-1/" + "b" * 32 + ".parquet", 10, 7, False),  # written long ago
               StoredEntry("archives/web/" + "a" * 32 + ".parquet", 1500, 5, False),  # its copy, just moved in
               StoredEntry("archives/db/_ingest-2/" + "c" * 32 + ".parquet", 10, 7, False),  # a crashed ingest
               StoredEntry("archives/db/" + "d" * 32 + ".parquet", 10, 7, False)]  # moved in by it, long ago
    plan = plan_orphans(entries, set(), cutoff)
    assert plan.busy_datasets == ["web"] and plan.staging_dirs == ["archives/db/_ingest-2"]
    assert [e.path for e in plan.files] == ["archives/db/_ingest-2/" + "c" * 32 + ".parquet",
                                            "archives/db/" + "d" * 32 + ".parquet"]
    # once the ingest is over (registered, or dead for longer than the grace) its files are judged
    registered = plan_orphans(entries, {"archives/web/" + "a" * 32 + ".parquet"}, cutoff)
    assert registered.busy_datasets == [] and "archives/web/_ingest-1/" + "b" * 32 + ".parquet" in {
        e.path for e in registered.files}
    dead = plan_orphans(entries, set(), 2000)
    assert dead.busy_datasets == [] and len(dead.files) == 4


def test_a_staging_file_of_unknown_age_protects_its_dataset() -> None:
    """A store that gives a file no modification time says nothing about its age: a staging file
    without one may be an ingest's upload in flight, so its dataset is busy and its staging
    directory stays (on an object store a "directory" never has a time, and says nothing)."""
    from tidekeep.archives.expiry import StoredEntry, plan_orphans

    entries = [StoredEntry("archives/web/_ingest-1", None, 0, True),
               StoredEntry("archives/web/_ingest-1/part-0.parquet", None, 7, False),
               StoredEntry("archives/web/" + "a" * 32 + ".parquet", 10, 5, False),  # moved in, not yet registered
               StoredEntry("archives/db/_ingest-2", None, 0, True)]  # an empty staging "directory", no time
    plan = plan_orphans(entries, set(), 10**15)
    assert plan.files == [] and plan.busy_datasets == ["web"]
    assert plan.staging_dirs == ["archives/db/_ingest-2"]


entry_specs = st.lists(st.tuples(st.sampled_from(["d1", "d2"]), st.sampled_from([None, "_ingest-1", "_ingest-2"]),
                                 st.integers(0, 5), st.none() | st.integers(0, 20), st.booleans()), max_size=15)


@settings(max_examples=300, deadline=None)
@given(entry_specs, st.integers(0, 20), st.sets(st.integers(0, 5)))
def test_orphans_match_brute_force(specs, cutoff, named_numbers) -> None:
    from tidekeep.archives.expiry import StoredEntry, plan_orphans

    entries, seen = [], set()
    for dataset, staging, number, mtime, is_dir in specs:
        base = f"archives/{dataset}" + (f"/{staging}" if staging else "")
        path = base if is_dir and staging else f"{base}/{number}.parquet"
        if path in seen or (is_dir and not staging):
            continue
        seen.add(path)
        entries.append(StoredEntry(path, mtime, 1, is_dir and bool(staging)))
    named = {f"archives/{d}/{n}.parquet" for d in ("d1", "d2") for n in named_numbers}
    plan = plan_orphans(entries, named, cutoff)

    def busy(dataset: str) -> bool:
        # a staging entry or an unnamed file in place changed within the grace, or a file of either
        # kind whose age the store does not give
        return any(e.path.startswith(f"archives/{dataset}/") and (e.path.startswith(f"archives/{dataset}/_ingest-")
                                                                   or e.path not in named)
                   and (e.mtime_ms >= cutoff if e.mtime_ms is not None else not e.is_dir) for e in entries)

    expected = {e.path for e in entries if not e.is_dir and e.path not in named and e.mtime_ms is not None
                and e.mtime_ms < cutoff and not busy(e.path.split("/")[1])}
    assert {e.path for e in plan.files} == expected
    for directory in plan.staging_dirs:
        assert not busy(directory.split("/")[1])
