"""Run locks: at most one holder of a named lock per metadata store, and a holder that dies (even by
SIGKILL) releases it without anybody's help, because the operating system or the database server
ends what held it. `run_lock` never waits: it tells the caller whether it got the lock.

- PostgreSQL: a session-level advisory lock, `pg_try_advisory_lock(namespace, key)`, taken on a
  connection of its own that the holder keeps for as long as it holds the lock; the server drops
  the lock when that session ends, with the process or its connection. The key is the two-int form:
  `RUN_LOCK_NAMESPACE` (0x746B726E, "tkrn") and `advisory_key(schema, name)`, a 32-bit hash of the
  store's schema and the lock's name — advisory locks belong to the whole database, which several
  stores can share in schemas of their own. The two-int key space never meets the one-bigint key of
  the migration lock (store/database.py).
- SQLite in a file (a path, or a `file:` URI): `flock(LOCK_EX | LOCK_NB)` on the lock file
  `<database file>.<name>.lock` beside it, created owner-only (store/private.py); the kernel drops
  the lock when the file's last descriptor closes, which a dying process does. flock locks belong
  to the open file, so two opens in one process exclude each other too.
- SQLite in memory: the store lives in this process only, and so does its lock (a
  `threading.Lock` per Database and name).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import threading
import weakref
from collections.abc import Iterator
from urllib.parse import unquote, urlsplit

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import ReadOnlyWorkspace
from .database import Database, store_errors
from .private import open_private_lock_file

RUN_LOCK_NAMESPACE = 0x746B_726E  # "tkrn": the first int of every run lock's advisory key
_READ_ONLY = {errno.EACCES, errno.EPERM, errno.EROFS}

_local_guard = threading.Lock()
_local_locks: weakref.WeakKeyDictionary[Database, dict[str, threading.Lock]] = weakref.WeakKeyDictionary()


def advisory_key(schema: str, name: str) -> int:
    """The second int of the advisory key of lock `name` in a store whose tables are in `schema`."""
    digest = hashlib.blake2b(f"{schema}/{name}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def lock_file_path(database_file: str | os.PathLike[str], name: str) -> str:
    return f"{os.fspath(database_file)}.{name}.lock"


@contextlib.contextmanager
def run_lock(db: Database, name: str) -> Iterator[bool]:
    """Try to take lock `name` of the store `db` for the block: yields True when this block holds
    it (released when the block ends, or when the process dies), False when another holder has it."""
    if not db.is_sqlite:
        with _advisory_lock(db, name) as held:
            yield held
        return
    database_file = sqlite_database_file(db.url)
    lock = _file_lock(database_file, name) if database_file is not None else _local_lock(db, name)
    with lock as held:
        yield held


def sqlite_database_file(url: sa.URL) -> str | None:
    """The file of a SQLite store: a plain path, or the path of a `file:` URI (`?uri=true`); None
    for a store in memory."""
    database = url.database or ""
    if not database.startswith("file:"):
        return None if database in ("", ":memory:") else database
    path = unquote(urlsplit(database).path)
    return None if url.query.get("mode") == "memory" or path in ("", ":memory:") else path


@contextlib.contextmanager
def _advisory_lock(db: Database, name: str) -> Iterator[bool]:
    with store_errors(db.read_only_target):
        conn = db.engine.connect()
    try:
        with store_errors(db.read_only_target):
            schema = conn.execute(sa.text("SELECT coalesce(current_schema(), '')")).scalar_one()
            key = advisory_key(str(schema), name)
            held = bool(conn.execute(sa.text("SELECT pg_try_advisory_lock(:namespace, :key)"),
                                     {"namespace": RUN_LOCK_NAMESPACE, "key": key}).scalar_one())
            conn.commit()  # the lock is the session's; no transaction stays open while it is held
        if not held:
            yield False
            return
        try:
            yield True
        finally:
            _advisory_unlock(conn, key)
    finally:
        conn.close()


def _advisory_unlock(conn: Connection, key: int) -> None:
    try:
        conn.execute(sa.text("SELECT pg_advisory_unlock(:namespace, :key)"),
                     {"namespace": RUN_LOCK_NAMESPACE, "key": key})
        conn.commit()
    except sa.exc.DBAPIError:
        # the session may still hold the lock: it must end, never go back to the pool with it
        conn.invalidate()


@contextlib.contextmanager
def _file_lock(database_file: str, name: str) -> Iterator[bool]:
    path = lock_file_path(database_file, name)
    try:
        handle = open_private_lock_file(path)
    except OSError as exc:
        if exc.errno in _READ_ONLY:
            raise ReadOnlyWorkspace(f"read-only: cannot open the run lock file {path} ({exc.strerror})",
                                    path) from None
        raise
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held = True
        except BlockingIOError:
            held = False
        yield held
    finally:
        os.close(handle)  # closing the only descriptor of this open file drops its lock


@contextlib.contextmanager
def _local_lock(db: Database, name: str) -> Iterator[bool]:
    with _local_guard:
        lock = _local_locks.setdefault(db, {}).setdefault(name, threading.Lock())
    held = lock.acquire(blocking=False)
    try:
        yield held
    finally:
        if held:
            lock.release()


__all__ = ["RUN_LOCK_NAMESPACE", "advisory_key", "lock_file_path", "run_lock", "sqlite_database_file"]
