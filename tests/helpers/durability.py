"""Recording fsyncs and metadata commits, to check that what a commit names was on disk first.

- `os.fsync` (the standard library, not a tidekeep component) is wrapped: each call is recorded
  after the real fsync, with the path behind the descriptor and, for a file, its size; for a
  directory, the names in it at that moment (fsync_site/fsync_record.py).
- Spark executors are separate Python processes: `executor_fsyncs_recorded` puts fsync_site/ on
  their PYTHONPATH through the SparkContext's worker environment, so a sitecustomize there records
  their fsyncs into a file, in the order they happen (new workers start for the changed
  environment; the data sources are registered again so the sink's workers get it too).
- A SQLAlchemy "commit" listener runs a query in the committing transaction, just before it
  commits, and records what it returns with every fsync recorded so far (executors' included).
  The Spark sink commits in a Python worker of Spark's driver: with a `commit_query`, the workers
  record their commits into the same file, after the fsyncs that came before them.

`assert_on_disk` then states durability itself: the file was fsynced at its final size, and every
directory from the file's up to the storage root was fsynced while holding the next name down.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from helpers.fsync_site.fsync_record import describe_fd

SITE_DIR = Path(__file__).with_name("fsync_site")
EXECUTOR_LOG_ENV = "TIDEKEEP_TEST_FSYNC_LOG"
EXECUTOR_COMMIT_QUERY_ENV = "TIDEKEEP_TEST_COMMIT_QUERY"


@dataclass(frozen=True)
class Synced:
    pid: int
    path: str
    size: int | None  # a file's size when it was fsynced
    names: tuple[str, ...] | None  # a directory's entries when it was fsynced


@dataclass(frozen=True)
class Committed:
    visible: frozenset[Any]  # what the query returned inside the committing transaction
    synced_before: tuple[Synced, ...]  # every fsync recorded before the commit, here and in executors


def _synced(record: dict[str, Any]) -> Synced:
    names = record["names"]
    return Synced(record["pid"], record["path"], record["size"], None if names is None else tuple(names))


class DurabilityRecorder:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, executor_log: Path | None = None) -> None:
        self.synced: list[Synced] = []
        self.commits: list[Committed] = []
        self.executor_log = executor_log
        self._lock = threading.Lock()
        real_fsync = os.fsync

        def recording_fsync(fd: int) -> None:
            real_fsync(fd)
            record = _synced(describe_fd(fd))
            with self._lock:
                self.synced.append(record)

        monkeypatch.setattr(os, "fsync", recording_fsync)

    def executor_records(self) -> list[dict[str, Any]]:
        if self.executor_log is None or not self.executor_log.exists():
            return []
        return [json.loads(line) for line in self.executor_log.read_text().splitlines()]

    def executor_synced(self) -> list[Synced]:
        return [_synced(r) for r in self.executor_records() if "commit" not in r]

    def executor_commits(self) -> list[Committed]:
        """The commits Spark's Python workers recorded, each with the workers' fsyncs before it."""
        commits, synced = [], []
        for record in self.executor_records():
            if "commit" in record:
                commits.append(Committed(frozenset(record["commit"]), tuple(synced)))
            else:
                synced.append(_synced(record))
        return commits

    def all_synced(self) -> list[Synced]:
        with self._lock:
            return [*self.synced, *self.executor_synced()]

    @contextlib.contextmanager
    def commits_of(self, engine: Any, query: str) -> Iterator[None]:
        """Record every commit on `engine` with what `query` (one column) returns just before it.
        `engine` may be the Engine class: every engine, for commits made by clients the code under
        test opens itself (the Spark sink's driver)."""

        def on_commit(conn: Any) -> None:
            cursor = conn.connection.driver_connection.cursor()
            try:
                cursor.execute(query)
                visible = frozenset(row[0] for row in cursor.fetchall())
            finally:
                cursor.close()
            self.commits.append(Committed(visible, tuple(self.all_synced())))

        event.listen(engine, "commit", on_commit)
        try:
            yield
        finally:
            event.remove(engine, "commit", on_commit)

    def first_commit_showing(self, item: Any, in_executors: bool = False) -> Committed:
        for commit in self.executor_commits() if in_executors else self.commits:
            if item in commit.visible:
                return commit
        raise AssertionError(f"no recorded commit made {item!r} visible")


def assert_on_disk(synced: tuple[Synced, ...] | list[Synced], written: str, final: str, root: str) -> None:
    """`written` (where the file was written; `final` where it is now, after a rename if any) was
    fsynced at its final size, and each directory from `final`'s up to `root` was fsynced while it
    held the next name down: the file and the way to it survive a crash."""
    size = os.path.getsize(final)
    assert any(s.path == written and s.size == size for s in synced), \
        f"{written} was not fsynced at its size {size}: {[s for s in synced if s.path == written]}"
    child = final
    while child != root:
        parent, name = posixpath.dirname(child), posixpath.basename(child)
        assert any(s.path == parent and s.names is not None and name in s.names for s in synced), \
            f"directory {parent} was not fsynced while holding {name}"
        child = parent


@contextlib.contextmanager
def executor_fsyncs_recorded(spark: Any, log: Path, commit_query: str | None = None) -> Iterator[None]:
    """Spark Python workers started inside this block record their fsyncs into `log`, and with a
    `commit_query` their metadata commits too."""
    from tidekeep.catalog.source import CatalogDataSource
    from tidekeep.spark.datasource import TidekeepDataSource

    environment = spark.sparkContext.environment
    saved = {name: environment.get(name) for name in ("PYTHONPATH", EXECUTOR_LOG_ENV, EXECUTOR_COMMIT_QUERY_ENV)}

    def register_sources() -> None:
        # a Python data source's workers get the environment of when it was registered
        spark.dataSource.register(TidekeepDataSource)
        spark.dataSource.register(CatalogDataSource)

    environment["PYTHONPATH"] = os.pathsep.join(p for p in (str(SITE_DIR), saved["PYTHONPATH"]) if p)
    environment[EXECUTOR_LOG_ENV] = str(log)
    if commit_query is not None:
        environment[EXECUTOR_COMMIT_QUERY_ENV] = commit_query
    register_sources()
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        register_sources()
