"""Crash safety of the collectors: a real `tidekeep archives gc` process dies at each step of a
sweep (exit 77 at a fault point, like kill -9, or a real SIGKILL); the next sweep finishes the
work. No file of a deleted archive remains; every unexpired, timeless or held archive keeps its
row, its catalog record and its file; no journal row is left. SQLite and PostgreSQL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk
from helpers.archives import make_archive
from helpers.procs import worker_env
from tidekeep.archives.model import Archive, JobState, results_dir
from tidekeep.archives.store import SearchJobStore
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.store.schema_archives import archive_gc_journal, archive_search_jobs, archives
from tidekeep.store.schema_catalog import catalog_records

GC = [sys.executable, "-m", "tidekeep.cli.main", "archives", "gc"]
MIN = 60_000
HOUR = 60 * MIN


def gc_env(tmp_path: Path, metadata_url: str, storage: str | Path | None = None) -> dict[str, str]:
    env = worker_env(metadata_url, tmp_path / "data" if storage is None else storage, tmp_path / "ws")
    env["TIDEKEEP_ARCHIVE_OUTPUT_RETENTION_PERIOD"] = "60"
    return env


def run_gc(env: dict[str, str], fault: str | None = None) -> subprocess.CompletedProcess[str]:
    if fault is not None:
        env = {**env, "TIDEKEEP_FAULT": fault}
    return subprocess.run([*GC, "--json"], env=env, capture_output=True, text=True, timeout=180, check=False)


def state(client: tk.Client) -> tuple[set[str], set[int], set[str]]:
    """(archive ids with rows, catalog record ids, journaled archive ids)."""
    with client.workspace.db.read() as conn:
        return (set(conn.execute(sa.select(archives.c.id)).scalars()),
                set(conn.execute(sa.select(catalog_records.c.id)).scalars()),
                set(conn.execute(sa.select(archive_gc_journal.c.archive_id)).scalars()))


def has_file(client: tk.Client, archive: Archive) -> bool:
    return client.workspace.storage.exists(archive.path)


class Corpus:
    """Expired archives in two datasets, plus ones that must survive: unexpired, timeless, held."""

    def __init__(self, client: tk.Client, expired_count: int = 4) -> None:
        now = int(time.time() * 1000)
        self.expired = [make_archive(client, "web" if i % 2 else "db", [(now - 3 * HOUR - i * MIN, f"old {i}")])
                        for i in range(expired_count)]
        self.young = make_archive(client, "web", [(now - 10 * MIN, "young")])
        self.timeless = make_archive(client, "db", [(None, "no time")])
        self.held = make_archive(client, "audit", [(now - 5 * HOUR, "held")])
        client.holds.add("dataset", "audit", "litigation")
        self.survivors = [self.young, self.timeless, self.held]

    def check_finished(self, client: tk.Client) -> None:
        rows, records, journal = state(client)
        assert rows == {a.id for a in self.survivors}
        assert records == {a.catalog_record_id for a in self.survivors}
        assert journal == set()
        assert not any(has_file(client, a) for a in self.expired), "a deleted archive's file remains"
        assert all(has_file(client, a) for a in self.survivors)

    def check_no_live_archive_lost(self, client: tk.Client) -> None:
        rows, records, _ = state(client)
        assert {a.id for a in self.survivors} <= rows
        with client.workspace.db.read() as conn:
            live = [r for r in conn.execute(sa.select(archives))]
        for row in live:
            assert client.workspace.storage.exists(row.path), \
                f"archive {row.id} has a row but no file"
            assert row.catalog_record_id in records


@pytest.mark.parametrize("fault", ["archive_gc.after_journal", "archive_gc.after_metadata", "archive_gc.mid_files"])
def test_killed_at_each_fault_point_the_next_sweep_finishes(fault: str, metadata_url: str, storage_uri: str,
                                                            tmp_path: Path) -> None:
    env = gc_env(tmp_path, metadata_url, storage_uri)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri, create=True)
    try:
        corpus = Corpus(client)
        expired_ids = {a.id for a in corpus.expired}
        crashed = run_gc(env, fault)
        assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
        rows, _, journal = state(client)
        assert journal == expired_ids  # the write-ahead list is there in every case
        files_left = {a.id for a in corpus.expired if has_file(client, a)}
        if fault == "archive_gc.after_journal":
            assert expired_ids <= rows and files_left == expired_ids  # nothing deleted yet
        elif fault == "archive_gc.after_metadata":
            assert not rows & expired_ids and files_left == expired_ids  # rows gone, files still there
        else:
            assert not rows & expired_ids and len(files_left) == len(expired_ids) - 1  # died after the first file
        corpus.check_no_live_archive_lost(client)

        rerun = run_gc(env)
        assert rerun.returncode == 0, rerun.stderr
        corpus.check_finished(client)
        expires = [e for e in client.audit(limit=1000) if e["action"] == "archive_expire"]
        # the metadata was deleted exactly once, by whichever sweep committed it
        assert sorted(i for e in expires for i in json.loads(e["details"])["archives"]) == sorted(expired_ids)
        assert run_gc(env).returncode == 0
        corpus.check_finished(client)
    finally:
        client.close()


def test_sigkill_mid_sweep_then_the_next_sweep_finishes(metadata_url: str, tmp_path: Path) -> None:
    """A real SIGKILL the moment the sweep has started deleting (the journal has rows)."""
    env = gc_env(tmp_path, metadata_url)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        corpus = Corpus(client, expired_count=40)
        proc = subprocess.Popen([*GC], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        killed = False
        while time.monotonic() < deadline and proc.poll() is None:
            if state(client)[2]:  # the journal is written: the sweep is deleting
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
            time.sleep(0.002)
        proc.wait(timeout=60)
        assert killed and proc.returncode == -signal.SIGKILL, "the sweep ended before it could be killed"
        corpus.check_no_live_archive_lost(client)
        rerun = run_gc(env)
        assert rerun.returncode == 0, rerun.stderr
        corpus.check_finished(client)
    finally:
        client.close()


def test_result_collector_killed_between_marking_and_deleting(metadata_url: str, storage_uri: str,
                                                             tmp_path: Path) -> None:
    env = worker_env(metadata_url, storage_uri, tmp_path / "ws")
    now = int(time.time() * 1000)
    clock = tk.ManualClock(now - 3 * HOUR)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri, clock=clock,
                        create=True)

    def has_results(job_id: int) -> bool:
        return bool(client.workspace.storage.list_files(results_dir(job_id)))

    try:
        make_archive(client, "web", [(None, "x")])
        jobs = SearchJobStore(client.workspace)
        done = [jobs.create("web", f"q{i}", regex=False, ignore_case=False, begin_ts=None, end_ts=None,
                            retention_minutes=None) for i in range(3)]
        running = jobs.create("web", "still", regex=False, ignore_case=False, begin_ts=None, end_ts=None,
                              retention_minutes=None)
        for job in [*done, running]:
            client.workspace.storage.write(f"{results_dir(job.id)}/{'a' * 32}.parquet", b"results")
        jobs.finish(done[0].id, JobState.SUCCEEDED, archives_searched=1, results_count=1)
        jobs.finish(done[1].id, JobState.FAILED, archives_searched=1, results_count=0, error="boom")
        jobs.cancel(done[2].id)
        crashed = run_gc(env, "search_result_gc.after_mark")
        assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
        with client.workspace.db.read() as conn:
            marked = {r.id: r.results_expired_ms for r in conn.execute(sa.select(archive_search_jobs))}
        assert {j for j, v in marked.items() if v is not None} == {j.id for j in done}
        # not yet deleted
        assert all(has_results(j.id) for j in done)
        rerun = run_gc(env)
        assert rerun.returncode == 0, rerun.stderr
        assert '"finished": 3' in rerun.stdout
        assert not any(has_results(j.id) for j in done)
        assert has_results(running.id)
        with client.workspace.db.read() as conn:
            after = {r.id: r.results_expired_ms for r in conn.execute(sa.select(archive_search_jobs))}
        assert after == marked  # the rows stay as history; nothing marked twice
        assert len([e for e in client.audit(limit=1000) if e["action"] == "search_results_expire"]) == 3
    finally:
        client.close()


def test_two_collectors_at_once_delete_each_archive_exactly_once(metadata_url: str, tmp_path: Path) -> None:
    """`tidekeep archives gc` started beside another (say, serve's): both finish, every expired
    archive is deleted once (one audit entry names it), every survivor is intact."""
    env = gc_env(tmp_path, metadata_url)
    client = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"), create=True)
    try:
        corpus = Corpus(client, expired_count=30)
        procs = [subprocess.Popen([*GC, "--json"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
        outputs = [p.communicate(timeout=180) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [err for _, err in outputs]
        corpus.check_finished(client)
        deleted = [json.loads(out)["archives"]["deleted"] for out, _ in outputs]
        assert sum(deleted) == 30
        expires = [e for e in client.audit(limit=1000) if e["action"] == "archive_expire"]
        named = [i for e in expires for i in json.loads(e["details"])["archives"]]
        assert sorted(named) == sorted(a.id for a in corpus.expired)
    finally:
        client.close()
