"""Search jobs on real archives, real Spark, SQLite and PostgreSQL: results equal a brute-force
filter of the archives' messages; expired archives are never searched even before they are
deleted; the lower bound is fixed at creation; cancel and KILLED stop a job with partial counts;
unreadable archives fail the job naming them; paging; expired results; bad input writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from test_archives_query import wildcard_oracle

import tidekeep as tk
from helpers.archives import make_archive
from tidekeep.archives.archive_format import GROUPED_FORMAT, TEMPLATE_FORMAT, TEXT_FORMAT
from tidekeep.archives.model import ARCHIVE_SCHEMA, JobState
from tidekeep.archives.results import result_files
from tidekeep.archives.search import _row_group_may_match
from tidekeep.archives.store import SearchJobStore
from tidekeep.archives.timerange import TimeRange
from tidekeep.errors import InvalidInput, NotFound
from tidekeep.store.schema_archives import archive_search_jobs

MINUTE = 60_000
HOUR = 60 * MINUTE

pytestmark = pytest.mark.usefixtures("spark")

ARCHIVES = {
    "a": [(1000, "GET /a 200"), (2000, "POST /b 500"), (3000, "get /c 404\nretry 500"), (3000, "GET /dup 200")],
    "b": [(2500, "GET /x 200 \u65e5\u672c"), (4000, "error: disk 100% full"), (5000, "file_1 written")],
    "none": [(None, "GET /none 200"), (None, "STRA\u00dfE")],
    # timestamp texts that are the messages' timestamps: format 2 takes them out of the text
    "stamped": [(1_728_309_336_123, "2024-10-07T13:55:36.123Z GET /t 200 node-17"),
                (1_728_309_337_000, "2024-10-07 13:55:37,000 ERROR [main] disk 99.5% on node-3 \\ \x12")],
}


def expected_rows(archives: dict[str, tk.Archive], query: str, regex: bool, ignore_case: bool,
                  begin: int | None, end: int | None) -> list[tuple[int | None, str, str]]:
    """Brute force over every message of every archive, in the documented result order."""
    found = []
    for name, archive in archives.items():
        messages = sorted(ARCHIVES[name], key=lambda m: (m[0] is None, m[0] or 0))  # the archive's order
        for position, (ts, text) in enumerate(messages):
            bounded = begin is not None or end is not None
            if bounded and (ts is None or (begin is not None and ts < begin) or (end is not None and ts > end)):
                continue
            if regex:
                hit = re.search(pattern=query, string=text, flags=re.IGNORECASE if ignore_case else 0) is not None
            else:
                hit = wildcard_oracle(query, text, ignore_case)
            if hit:
                found.append((ts, archive.id, position, text))
    found.sort(key=lambda r: (r[0] is None, -(r[0] or 0), r[1], r[2]))
    return [(ts, text, archive_id) for ts, archive_id, _, text in found]


def all_rows(client: tk.Client, job_id: int) -> list[tuple[int | None, str, str]]:
    page = client.archives.results(job_id, page_size=10_000)
    return [(r["timestamp"], r["message"], r["archive_id"]) for r in page.rows]


CASES = [
    ("GET", False, False, None, None),
    ("get", False, True, None, None),
    ("/? *00", False, False, None, None),
    ("100%", False, False, None, None),
    ("file_1", False, False, None, None),
    (r"\d{3}$", True, False, None, None),
    ("^get", True, True, None, None),
    ("500", False, False, 2000, 3000),  # both bounds inclusive: 2000 and 3000 are in
    ("*", False, False, 2500, 2500),
    ("stra\u00dfe", False, True, None, None),
    ("nothing like this", False, False, None, None),
    ("13:55", False, False, None, None),
    ("node-17", False, False, None, None),
    ("Z GET", False, False, None, None),
    ("99.5% on node-?", False, False, None, None),
    ("\\\\ \x12", False, False, None, None),
    ("error*node", False, True, None, None),
    (r"36\.123Z", True, False, None, None),
    # digits after a literal: compared as numbers before decoding (digit_filter.py), in timestamps too
    (r"disk [0-9]{3}", True, False, None, None),
    (r" [0-9]{3}$", True, False, None, None),
    (r":[0-9]{2}:[0-9]{2}", True, False, None, None),
    (r"DISK \d", True, True, None, None),
]


@pytest.mark.parametrize("archive_format", [TEXT_FORMAT, TEMPLATE_FORMAT, GROUPED_FORMAT])
def test_results_equal_a_brute_force_filter(client: tk.Client, archive_format: int) -> None:
    archives = {name: make_archive(client, "web", messages, archive_format=archive_format)
                for name, messages in ARCHIVES.items()}
    for query, regex, ignore_case, begin, end in CASES:
        job = client.archives.search("web", query, regex=regex, ignore_case=ignore_case, begin=begin, end=end)
        expected = expected_rows(archives, query, regex, ignore_case, begin, end)
        assert job.state is JobState.SUCCEEDED, (query, job.error)
        assert all_rows(client, job.id) == expected, query
        assert job.results_count == len(expected)
        time_range = TimeRange(begin, end)
        assert job.archives_searched == sum(time_range.overlaps(a.begin_ts, a.end_ts) for a in archives.values())
        assert (job.begin_ts, job.end_ts, job.results_path) == (begin, end, f"search-results/{job.id}")
        assert job.completed_ms is not None and job.completed_ms >= job.created_ms
    # archives without timestamps are searched only without a range: 'GET' with a range misses /none
    ranged = client.archives.search("web", "GET", begin=0, end="9999-12-31T23:59:59.999Z")
    assert "GET /none 200" not in [m for _, m, _ in all_rows(client, ranged.id)]
    assert ranged.archives_searched == 3


@pytest.fixture
def retention_client(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> tk.Client:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), clock=clock,
                   settings={"archive_output.retention_period": 60}, create=True)
    yield c
    c.close()


def test_expired_archives_are_never_searched_even_before_they_are_deleted(retention_client: tk.Client,
                                                                         clock: tk.ManualClock) -> None:
    client, now = retention_client, clock.now_ms()
    expired = make_archive(client, "app", [(now - 2 * HOUR, "hit old"), (now - 61 * MINUTE, "hit older end")])
    edge = make_archive(client, "app", [(now - 70 * MINUTE, "hit edge"), (now - 60 * MINUTE, "hit at the bound")])
    fresh = make_archive(client, "app", [(now - MINUTE, "hit fresh")])
    timeless = make_archive(client, "app", [(None, "hit without time")])

    def later(done: int, total: int) -> None:
        clock.advance(2 * HOUR)  # by completion `edge` is long expired: the bound must not move

    job = client.archives.search("app", "hit", progress=later)
    assert job.state is JobState.SUCCEEDED
    assert job.lower_bound_ms == job.created_ms - 60 * MINUTE == now - 60 * MINUTE
    assert job.completed_ms is not None and job.completed_ms > job.created_ms + HOUR
    assert job.archives_searched == 3  # edge (end exactly at the bound), fresh, timeless
    searched = {archive_id for _, _, archive_id in all_rows(client, job.id)}
    assert searched == {edge.id, fresh.id, timeless.id}
    assert job.results_count == 4
    # the expired archive is still there: not deleted, just never searched
    assert expired.id in {a.id for a in client.archives.list("app")}
    assert Path(client.workspace.storage.full_path(expired.path)).is_file()
    # a job created now has a later bound: the edge archive is out, the clock having moved 2 hours
    again = client.archives.search("app", "hit")
    assert again.lower_bound_ms == clock.now_ms() - 60 * MINUTE
    assert {a for _, _, a in all_rows(client, again.id)} == {timeless.id}


def test_no_retention_means_no_lower_bound(client: tk.Client) -> None:
    old = make_archive(client, "app", [(5, "ancient hit")])
    make_archive(client, "app", [(6, "another")])
    seen: list[tuple[int, int]] = []
    job = client.archives.search("app", "hit", progress=lambda done, total: seen.append((done, total)))
    assert job.lower_bound_ms is None
    assert seen[0] == (0, 2) and seen[-1] == (2, 2)  # archives searched out of archives chosen
    assert all_rows(client, job.id) == [(5, "ancient hit", old.id)]


def test_no_archives_to_search_succeeds_with_no_results(client: tk.Client) -> None:
    make_archive(client, "app", [(10_000, "x")])
    job = client.archives.search("app", "x", begin=20_000)
    assert (job.state, job.archives_searched, job.results_count) == (JobState.SUCCEEDED, 0, 0)
    page = client.archives.results(job.id)
    assert (page.total, page.rows, page.pages) == (0, [], 1)


def _running_job_id(client: tk.Client) -> int:
    running = client.archives.jobs(state="RUNNING")
    assert len(running) == 1
    return running[0].id


@pytest.mark.parametrize("ending", [JobState.CANCELLED, JobState.KILLED])
def test_a_job_ended_elsewhere_keeps_that_state_with_partial_counts(client: tk.Client, ending: JobState) -> None:
    for i in range(8):
        make_archive(client, "app", [(1000 + i, f"hit one {i}"), (2000 + i, f"hit two {i}"), (3000 + i, "miss")])
    seen: list[tuple[int, int]] = []

    def end_it_after_the_first_archive(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= 1 and len([s for s in seen if s[0] >= 1]) == 1:
            job_id = _running_job_id(client)
            if ending is JobState.CANCELLED:
                assert client.archives.cancel(job_id).state is JobState.CANCELLED
            else:  # what the archive collector does to a search past search.max_runtime
                with client.workspace.db.write() as conn:
                    conn.execute(sa.update(archive_search_jobs).where(archive_search_jobs.c.id == job_id)
                                 .values(state=str(JobState.KILLED), completed_ms=client.clock.now_ms()))

    job = client.archives.search("app", "hit", progress=end_it_after_the_first_archive)
    assert job.state is ending
    assert 1 <= job.archives_searched <= 8
    assert job.results_count == 2 * job.archives_searched
    assert job.error is None and job.completed_ms is not None
    assert seen[0] == (0, 8) and all(total == 8 for _, total in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)  # progress never goes back
    # what was written stays readable until it expires
    assert len(result_files(client.workspace, job.results_path or "")) >= job.archives_searched
    assert client.archives.results(job.id).total >= job.results_count
    with pytest.raises(InvalidInput, match=f"search job {job.id} already ended: {ending}"):
        client.archives.cancel(job.id)


def test_a_missing_archive_file_fails_the_job_naming_it(client: tk.Client) -> None:
    good = make_archive(client, "app", [(1000, "hit good")])
    gone = make_archive(client, "app", [(2000, "hit gone")])
    Path(client.workspace.storage.full_path(gone.path)).unlink()
    job = client.archives.search("app", "hit")
    assert job.state is JobState.FAILED
    assert job.error is not None and gone.id in job.error and "the archive file is missing" in job.error
    assert good.id not in job.error
    assert (job.archives_searched, job.results_count) == (1, 1)
    assert all_rows(client, job.id) == [(1000, "hit good", good.id)]


def test_a_corrupt_archive_fails_the_job_naming_it(sqlite_client: tk.Client) -> None:
    client = sqlite_client
    bad = make_archive(client, "app", [(2000, "hit")])
    Path(client.workspace.storage.full_path(bad.path)).write_bytes(b"this is not parquet at all")
    job = client.archives.search("app", "hit")
    assert job.state is JobState.FAILED
    assert job.error is not None and job.error.startswith(f"archive {bad.id} (file://")
    assert "\n" not in job.error


def test_paging_walks_the_results_in_order(client: tk.Client) -> None:
    first = make_archive(client, "app", [(t, f"hit {t}") for t in (5, 1, 3)] + [(3, "hit 3 again")])
    second = make_archive(client, "app", [(3, "hit 3 other"), (9, "hit 9")])
    third = make_archive(client, "app", [(None, "hit untimed")])
    job = client.archives.search("app", "hit")
    three = [(3, "hit 3", first.id), (3, "hit 3 again", first.id), (3, "hit 3 other", second.id)]
    if second.id < first.id:  # equal timestamps: archive id order
        three = [three[2], three[0], three[1]]
    everything = [(9, "hit 9", second.id), (5, "hit 5", first.id), *three, (1, "hit 1", first.id),
                  (None, "hit untimed", third.id)]
    assert all_rows(client, job.id) == everything
    pages = [client.archives.results(job.id, page=p, page_size=3) for p in (1, 2, 3, 4)]
    assert [p.total for p in pages] == [7] * 4 and pages[0].pages == 3
    walked = [(r["timestamp"], r["message"], r["archive_id"]) for p in pages for r in p.rows]
    assert walked == everything and pages[3].rows == []
    assert pages[0].to_dict()["job"]["state"] == "SUCCEEDED"
    for page, size in ((0, 10), (1, 0), (1, 10_001), (-1, 5)):
        with pytest.raises(InvalidInput, match="invalid page"):
            client.archives.results(job.id, page=page, page_size=size)
    with pytest.raises(NotFound, match="search job 999 does not exist"):
        client.archives.results(999)


def test_expired_results_are_not_found_saying_when(client: tk.Client) -> None:
    make_archive(client, "app", [(1000, "hit")])
    job = client.archives.search("app", "hit")
    with client.workspace.db.write() as conn:  # what the search-result collector records when it deletes them
        conn.execute(sa.update(archive_search_jobs).where(archive_search_jobs.c.id == job.id)
                     .values(results_expired_ms=1_700_000_000_000))
    with pytest.raises(NotFound, match=rf"the results of search job {job.id} expired at 2023-11-14T22:13:20.000Z"):
        client.archives.results(job.id)


def test_a_running_job_shows_what_is_written_so_far(sqlite_client: tk.Client) -> None:
    from tidekeep.archives.query import compile_query
    from tidekeep.archives.search import ArchiveTask, search_archive

    client = sqlite_client
    archive = make_archive(client, "app", [(1, "hit a"), (2, "hit b")])
    jobs = SearchJobStore(client.workspace)
    job = jobs.create("app", "hit", regex=False, ignore_case=False, begin_ts=None, end_ts=None, retention_minutes=None)
    jobs.set_results_path(job.id, f"search-results/{job.id}")
    assert client.archives.results(job.id).total == 0  # nothing written yet: no directory at all
    task = ArchiveTask(archive.id, archive.path, client.workspace.storage.uri_of(""),
                       f"search-results/{job.id}", fsync=True)
    assert search_archive(task, job.id, compile_query("hit"), TimeRange()) == 2
    page = client.archives.results(job.id)
    assert page.job.state is JobState.RUNNING
    assert [r["message"] for r in page.rows] == ["hit b", "hit a"]


def test_a_time_range_skips_row_groups_outside_it(sqlite_client: tk.Client) -> None:
    client = sqlite_client
    archive = make_archive(client, "app", [(t * 1000, f"hit {t}") for t in range(10)])
    full = client.workspace.storage.full_path(archive.path)
    table = pq.read_table(full)
    pq.write_table(table, full, row_group_size=2, compression="zstd")  # five groups of two
    meta = pq.ParquetFile(full).metadata
    assert [_row_group_may_match(meta, g, TimeRange(3000, 4000)) for g in range(5)] == [False, True, True, False,
                                                                                        False]
    assert [_row_group_may_match(meta, g, TimeRange()) for g in range(5)] == [True] * 5
    job = client.archives.search("app", "hit", begin=3000, end=4000)
    assert all_rows(client, job.id) == [(4000, "hit 4", archive.id), (3000, "hit 3", archive.id)]
    untimed = pa.table({"timestamp": pa.array([None, None], pa.int64()), "message": ["x", "y"], "source": ["s", "s"]},
                       schema=ARCHIVE_SCHEMA)
    path = Path(full).with_name("untimed.parquet")
    pq.write_table(untimed, path)
    assert _row_group_may_match(pq.ParquetFile(path).metadata, 0, TimeRange(0, None)) is False


@pytest.mark.parametrize(("dataset", "query", "kwargs", "error", "message"), [
    ("app", "", {}, InvalidInput, "it is empty"),
    ("app", "abc\\", {}, InvalidInput, "lone"),
    ("app", "(", {"regex": True}, InvalidInput, "invalid regex query '('"),
    ("app", "x", {"begin": "soon"}, InvalidInput, "invalid --begin 'soon'"),
    ("app", "x", {"begin": 10, "end": 5}, InvalidInput, "invalid --begin 10: it is after --end 5"),
    ("app", "x", {"end": -1}, InvalidInput, "invalid --end -1: before 1970"),
    ("nope", "x", {}, NotFound, "dataset 'nope' does not exist"),
    ("bad/name", "x", {}, InvalidInput, "dataset name"),
])
def test_bad_input_creates_no_job(client: tk.Client, dataset: str, query: str, kwargs: dict, error: type,
                                  message: str) -> None:
    make_archive(client, "app", [(1, "x")])
    with pytest.raises(error) as info:
        client.archives.search(dataset, query, **kwargs)
    assert message in str(info.value)
    assert client.archives.jobs() == []
    assert client.workspace.storage.list_files("search-results") == []


@pytest.mark.parametrize(("interruption", "state"), [(KeyboardInterrupt, JobState.CANCELLED),
                                                     (RuntimeError, JobState.FAILED)])
def test_a_search_interrupted_in_its_process_never_stays_running(sqlite_client: tk.Client, interruption: type,
                                                                  state: JobState) -> None:
    """Ctrl-C (or any error) in the searching process ends the job, so it cannot hold the archive
    collector back until search.max_runtime."""
    make_archive(sqlite_client, "app", [(1, "hit")])

    def interrupt(done: int, total: int) -> None:
        raise interruption("stop right there")

    with pytest.raises(interruption):
        sqlite_client.archives.search("app", "hit", progress=interrupt)
    [job] = sqlite_client.archives.jobs()
    assert job.state is state and job.completed_ms is not None
    assert job.error == f"{interruption.__name__}: stop right there"


def test_results_of_a_real_search_expire_with_the_collector(retention_client: tk.Client,
                                                            clock: tk.ManualClock) -> None:
    """End to end with the search-result collector: results_cache.retention_period (default 60
    minutes) after the job's completion its directory is gone and results are NotFound."""
    client = retention_client
    make_archive(client, "app", [(clock.now_ms() - MINUTE, "hit")])
    job = client.archives.search("app", "hit")
    assert job.completed_ms is not None and client.archives.results(job.id).total == 1
    clock.set(job.completed_ms + 60 * MINUTE)
    client.archives.gc()
    assert client.archives.results(job.id).total == 1  # exactly at the TTL: kept
    clock.advance(1)
    client.archives.gc()
    expired_at = client.archives.job(job.id).results_expired_ms
    assert expired_at == job.completed_ms + 60 * MINUTE + 1
    with pytest.raises(NotFound, match=f"the results of search job {job.id} expired at "):
        client.archives.results(job.id)
    assert client.workspace.storage.list_files(f"search-results/{job.id}") == []


def test_a_started_search_is_running_before_it_runs_and_abandoning_it_fails_it(sqlite_client: tk.Client) -> None:
    """start_search creates the job (the HTTP API answers with its id) and run() runs it later; a
    search whose runner never starts is abandoned as FAILED, never left RUNNING, and its heartbeat
    stops."""
    make_archive(sqlite_client, "app", [(1, "hit one"), (2, "hit two")])
    started = sqlite_client.archives.start_search("app", "hit")
    assert sqlite_client.archives.job(started.job.id).state is JobState.RUNNING
    assert started.heartbeat.is_alive()
    ran = started.run()
    assert ran.state is JobState.SUCCEEDED and ran.results_count == 2
    assert not started.heartbeat.is_alive()

    left = sqlite_client.archives.start_search("app", "hit")
    left.abandon("the runner could not start")
    job = sqlite_client.archives.job(left.job.id)
    assert job.state is JobState.FAILED and job.error == "the runner could not start"
    assert not left.heartbeat.is_alive()
