"""Run locks (store/run_lock.py) on real SQLite files (by path and by `file:` URI) and PostgreSQL:
one holder per name and store, never waiting; another name or another store (a PostgreSQL schema
of its own in the same database) is independent; released when the block ends, and when the
holding process is killed with SIGKILL; a lock file that cannot be created is ReadOnlyWorkspace."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from helpers.readonly import read_only
from tidekeep.errors import ReadOnlyWorkspace
from tidekeep.store.database import Database
from tidekeep.store.run_lock import RUN_LOCK_NAMESPACE, advisory_key, lock_file_path, run_lock, sqlite_database_file

HOLD = """
import sys, time
from tidekeep.store.database import Database
from tidekeep.store.run_lock import run_lock
with run_lock(Database(sys.argv[1]), "job") as held:
    print("held" if held else "refused", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def store_url(new_store_url: str) -> Iterator[str]:
    Database(new_store_url, create=True).dispose()  # the SQLite file must exist (the lock file goes beside it)
    yield new_store_url


def is_free(url: str, name: str = "job") -> bool:
    db = Database(url)
    try:
        with run_lock(db, name) as held:
            return held
    finally:
        db.dispose()


def test_one_holder_per_name_and_store(store_url: str) -> None:
    first, second = Database(store_url), Database(store_url)
    try:
        with run_lock(first, "job") as held:
            assert held
            with run_lock(second, "job") as again:
                assert not again  # another open of the same store: refused at once
            with run_lock(first, "job") as again:
                assert not again  # the holder's own Database too: a lock is not re-entrant
            with run_lock(second, "other") as other:
                assert other
        with run_lock(second, "job") as held:
            assert held  # released with the block
    finally:
        first.dispose()
        second.dispose()


def test_a_lock_is_released_when_its_block_raises(store_url: str) -> None:
    db = Database(store_url)
    try:
        with pytest.raises(RuntimeError), run_lock(db, "job"):
            raise RuntimeError("the run failed")
        assert is_free(store_url)
    finally:
        db.dispose()


def test_the_sqlite_lock_file_is_beside_the_database_and_owner_only(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    Database(url, create=True).dispose()
    with run_lock(Database(url), "job") as held:
        assert held
        mode = os.stat(lock_file_path(tmp_path / "m.db", "job")).st_mode
        assert lock_file_path(tmp_path / "m.db", "job") == str(tmp_path / "m.db.job.lock")
        assert stat.S_IMODE(mode) == 0o600


def test_a_lock_file_that_cannot_be_created_is_a_read_only_error(tmp_path: Path) -> None:
    directory = tmp_path / "meta"
    directory.mkdir()
    url = f"sqlite:///{directory / 'm.db'}"
    Database(url, create=True).dispose()
    db = Database(url)
    try:
        with read_only(directory), pytest.raises(ReadOnlyWorkspace) as refused, run_lock(db, "job"):
            pytest.fail("the lock was taken")
    finally:
        db.dispose()
    assert refused.value.path == str(directory / "m.db.job.lock")
    assert str(refused.value).startswith(f"read-only: cannot open the run lock file {directory / 'm.db.job.lock'} (")
    assert is_free(url)


def test_a_file_uri_store_locks_its_file_across_processes(tmp_path: Path) -> None:
    url = f"sqlite:///file:{tmp_path / 'm.db'}?uri=true"
    db = Database(url, create=True)
    db.ensure_schema()  # SQLite creates the file
    db.dispose()
    assert sqlite_database_file(sa.make_url(url)) == str(tmp_path / "m.db")
    holder = subprocess.Popen([sys.executable, "-c", HOLD, url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert not is_free(url)  # another process: refused
        assert not is_free(f"sqlite:///{tmp_path / 'm.db'}")  # the same file by its plain path
    finally:
        holder.kill()
        holder.wait(timeout=60)
    assert is_free(url)


def test_the_database_file_of_sqlite_urls() -> None:
    assert sqlite_database_file(sa.make_url("sqlite:////a/b.db")) == "/a/b.db"
    assert sqlite_database_file(sa.make_url("sqlite:///file:/a/b%20c.db?uri=true&mode=ro")) == "/a/b c.db"
    assert sqlite_database_file(sa.make_url("sqlite:///file:///a/b.db?uri=true")) == "/a/b.db"
    for memory in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:m?mode=memory&cache=shared&uri=true",
                   "sqlite:///file::memory:?uri=true"):
        assert sqlite_database_file(sa.make_url(memory)) is None, memory


def test_postgres_stores_in_two_schemas_of_one_database_do_not_share_a_lock(pg_url: str, pg_head_url: str) -> None:
    with run_lock(Database(pg_url), "job") as held, run_lock(Database(pg_head_url), "job") as other:
        assert held and other
    assert advisory_key("a", "job") != advisory_key("b", "job")
    assert RUN_LOCK_NAMESPACE == 0x746B726E  # documented in docs/catalog.md


def test_the_lock_of_a_process_killed_with_sigkill_is_released(store_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, store_url], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert not is_free(store_url)
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
    # PostgreSQL ends the session as soon as it sees the connection closed: poll for that (pytest's
    # timeout ends a hang)
    while not is_free(store_url):
        time.sleep(0.02)
