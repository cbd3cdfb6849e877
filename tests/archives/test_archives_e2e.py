"""The archives family end to end, across real processes: a real `tidekeep archives search` that is
still reading holds the real archive collector back (docs/design/archives.md), and what the collector
may delete meanwhile is exactly what that search can never read."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import tidekeep as tk
from helpers.archives import make_archive
from helpers.procs import worker_env
from tidekeep.archives.model import JobState

CLI = [sys.executable, "-m", "tidekeep.cli.main"]
# A day: longer than pytest's timeout, so however slowly this machine starts the search process, the
# search is created while `readable` is still readable for it (the search runs on the wall clock).
TTL_MINUTES = 24 * 60
MINUTE = 60_000
TTL_MS = TTL_MINUTES * MINUTE


def test_a_running_search_process_holds_back_the_collector(tmp_path: Path, metadata_url: str) -> None:
    env = {**worker_env(metadata_url, tmp_path / "data", tmp_path / "ws"),
           "TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD": str(TTL_MINUTES)}
    assert subprocess.run([*CLI, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    setup_ms = int(time.time() * 1000)
    writer = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    # `readable` ends 30 s before set-up: a search created within the next day may read it (its end is
    # at or after creation - TTL); `stale` ended two TTLs before: expired for any search created now
    readable = make_archive(writer, "app", [(setup_ms - 40_000, "login ok"), (setup_ms - 30_000, "login failed")])
    stale = make_archive(writer, "app", [(setup_ms - 2 * TTL_MS, "login failed long ago")])
    writer.close()

    # the search waits in its archive task while the gate file exists, so it is RUNNING and reading
    # while the collector sweeps; its heartbeat promise and the collector's maximum run time are long
    # enough that the collector's jump of two TTLs below leaves it alive
    gate = tmp_path / "search-paused"
    gate.touch()
    search = subprocess.Popen([*CLI, "archives", "search", "app", "login", "--json"],
                              env={**env, "TIDEKEEP_PAUSE": f"search_archive=@{gate}",
                                   "TIDEKEEP_SEARCH_HEARTBEAT_INTERVAL": "30d"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clock = tk.ManualClock(setup_ms)
    collector = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                           clock=clock, settings={"archive_output.retention_period": TTL_MINUTES,
                                                  "search.max_runtime": "30d"}, create=True)
    try:
        # no deadline of our own: the search registers its job or exits (pytest's timeout ends a hang)
        while not collector.archives.jobs() and search.poll() is None:
            time.sleep(0.1)
        assert collector.archives.jobs(), search.communicate()
        job = collector.archives.jobs()[0]
        assert job.state is JobState.RUNNING and job.created_ms >= setup_ms
        # two TTLs after the search began, by the collector's clock: by now - TTL both archives have
        # expired, but the running search was created when `readable` was not expired and may still be
        # reading it
        clock.set(job.created_ms + 2 * TTL_MS)
        report = collector.archives.gc()
        assert report.archives.expiry_ms == job.created_ms - TTL_MS
        assert report.archives.held_back_by_job == job.id
        assert [c["archive_id"] for c in report.archives.candidates] == [stale.id]
        ids = {a.id for a in collector.archives.list("app")}
        assert ids == {readable.id}
        assert collector.workspace.storage.size(readable.path) > 0
        assert collector.archives.job(job.id).state is JobState.RUNNING  # the sweep ran mid-search

        gate.unlink()  # the search reads on
        out, err = search.communicate(timeout=180)
        assert search.returncode == 0, err
        finished = collector.archives.job(job.id)
        # it read `readable` whole (nothing vanished under it) and never `stale`
        assert finished.state is JobState.SUCCEEDED and finished.archives_searched == 1
        assert finished.results_count == 2
        assert json.loads(out)["job"]["results_count"] == 2

        # with the search over, the next sweep deletes `readable` too, file and all
        clock.advance(MINUTE)
        report = collector.archives.gc()
        assert [c["archive_id"] for c in report.archives.candidates] == [readable.id]
        assert collector.archives.list("app") == []
        assert collector.workspace.storage.list_files("archives/app") == []
    finally:
        if search.poll() is None:
            search.kill()
        collector.close()


def test_archives_gc_prints_its_report_once(tmp_path: Path, metadata_url: str) -> None:
    """The collectors log at garbage_collector.logging_level (INFO) for `serve`; on the command line
    the report goes to stdout and stderr stays quiet unless --verbose asks for the log lines."""
    env = {**worker_env(metadata_url, tmp_path / "data", tmp_path / "ws"),
           "TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD": "60"}
    assert subprocess.run([*CLI, "init"], env=env, capture_output=True, timeout=120).returncode == 0
    quiet = subprocess.run([*CLI, "archives", "gc", "--dry-run"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout.startswith("archives: would delete 0")
    verbose = subprocess.run([*CLI, "-v", "archives", "gc", "--dry-run"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert verbose.returncode == 0 and "INFO tidekeep.archives.gc: archive sweep (dry run)" in verbose.stderr
