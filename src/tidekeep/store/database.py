"""The metadata database: engine set-up (SQLite or PostgreSQL), transactions, and migrations.

SQLite runs in WAL mode with a busy timeout and foreign keys on; write transactions start with
BEGIN IMMEDIATE so two writers never deadlock on a lock upgrade. With durable commits (the
storage.fsync setting, on by default) connections run with synchronous=FULL, so every commit
syncs the WAL before it returns; without, synchronous=NORMAL syncs it only at checkpoints, and
the last commits before a power failure can be lost (the database stays consistent). PostgreSQL runs at READ
COMMITTED; code that must serialise on a row takes it with SELECT ... FOR UPDATE, always in
ascending key order so two transactions never wait on each other in a cycle.

Every error of the store itself reaches callers typed: a busy store (SQLite's lock, PostgreSQL's
deadlock or serialisation failure) as ConflictError — the transaction did not happen, retry —
and an unreachable store or a lost connection as StoreUnavailable, whose outcome is unknown when
it hit a commit (writers and transactions resolve that, docs/streams.md "Failures and retries").
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from ..errors import (
    ConfigError,
    ConflictError,
    InvalidInput,
    NotFound,
    ReadOnlyWorkspace,
    SchemaError,
    StoreUnavailable,
)
from ..redaction import redact
from .local_dirs import ensure_directory
from .private import create_private_file, open_private_lock_file
from .sqlite_regexp import register_sqlite_functions

if TYPE_CHECKING:
    from alembic.config import Config

_PG_MIGRATION_LOCK = 0x7469_6465  # advisory lock key: "tide"
RETRY_ATTEMPTS = 5

log = logging.getLogger("tidekeep.store")
T = TypeVar("T")


# The newest migration's revision. Kept here so that opening a workspace at the current schema (every
# CLI command) reads one row and never imports Alembic, whose import alone costs a command ~0.2 s
# (docs/benchmarks.md, "The demo"); tests/store/test_store.py checks it is the migrations' head.
SCHEMA_HEAD = "0018"
_VERSION_TABLE = sa.table("alembic_version", sa.column("version_num", sa.String))


def alembic_config() -> Config:
    """Alembic's configuration for tidekeep's migrations (hand it a connection in `attributes`)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(resources.files("tidekeep.store") / "migrations"))
    return config


def holds_no_tidekeep_table(conn: Connection) -> bool:
    """Neither Alembic's version table nor any table of the declared schema exists."""
    from .schema import metadata

    present = set(sa.inspect(conn).get_table_names())
    return "alembic_version" not in present and not present & set(metadata.tables)


def head_revision() -> str:
    return SCHEMA_HEAD


def migration_revisions() -> list[str]:
    """Every revision the migrations know, newest first (loads Alembic and the migration scripts)."""
    from alembic.script import ScriptDirectory

    return [script.revision for script in ScriptDirectory.from_config(alembic_config()).walk_revisions()]


def _sqlite_path(url: sa.URL) -> Path | None:
    database = url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return Path(database)


class Database:
    """The metadata store at `url`. Without `create` it must already hold a tidekeep schema (an older
    one is migrated): a SQLite file that does not exist, or a store without the schema, is NotFound
    and nothing is created — a typo in a URL never conjures an empty workspace. `durable_commits`:
    SQLite syncs every commit (synchronous=FULL; docs/configuration.md "Durability")."""

    def __init__(self, url: str, busy_timeout_ms: int = 30_000, create: bool = False,
                 durable_commits: bool = True) -> None:
        try:
            parsed = sa.make_url(url)
        except (sa.exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
            raise ConfigError(f"bad value for 'metadata.url': {url!r} is not a database URL") from None
        self.url = parsed
        self.create = create
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite:
            path = _sqlite_path(parsed)
            if path is not None and create:
                # owner-only (store/private.py); SQLite gives its -wal, -shm and -journal files the
                # database file's own mode, so they are owner-only too
                ensure_directory(path.parent, "'metadata.url'")
                create_private_file(path)
            elif path is not None and not path.is_file():
                raise NotFound(f"no tidekeep workspace at {self.shown}: the metadata database {path} does not "
                               "exist; run 'tidekeep init' first, or check metadata.url")
            self.engine = sa.create_engine(
                parsed,
                connect_args={"timeout": busy_timeout_ms / 1000, "check_same_thread": False},
                pool_size=8,
                max_overflow=8,
            )
            self._configure_sqlite(self.engine, busy_timeout_ms, durable_commits)
        elif parsed.get_backend_name() == "postgresql":
            if parsed.drivername == "postgresql":
                parsed = parsed.set(drivername="postgresql+psycopg")
            self.url = parsed
            self.engine = sa.create_engine(parsed, pool_pre_ping=True, pool_size=5, max_overflow=10)
        else:
            raise ConfigError(f"bad value for 'metadata.url': backend {parsed.get_backend_name()!r} "
                              "is not supported (use sqlite or postgresql)")
        self._upgraded = False
        self._upgrade_lock = threading.Lock()

    @property
    def read_only_target(self) -> str:
        """What a read-only error names: the SQLite file, or the server's URL (password hidden)."""
        path = _sqlite_path(self.url) if self.is_sqlite else None
        return f"the metadata database {path}" if path is not None else f"the metadata store {self.shown}"

    @property
    def shown(self) -> str:
        """The URL fit to print: the password hidden (also one given as a query parameter)."""
        return redact(self.url.render_as_string(hide_password=True))

    @staticmethod
    def sqlite_file(url: str) -> Path | None:
        """The database file of a SQLite URL; None for other backends, memory and `file:` URIs."""
        try:
            parsed = sa.make_url(url)
        except (sa.exc.ArgumentError, ValueError):  # not a URL: the store says so when it opens
            return None
        return _sqlite_path(parsed) if parsed.get_backend_name() == "sqlite" else None

    @staticmethod
    def shown_url(url: str) -> str:
        try:
            return redact(sa.make_url(url).render_as_string(hide_password=True))
        except (sa.exc.ArgumentError, ValueError):
            raise ConfigError(f"bad value for 'metadata.url': {url!r} is not a database URL") from None

    @staticmethod
    def _configure_sqlite(engine: Engine, busy_timeout_ms: int, durable_commits: bool) -> None:
        # per connection, at connect: synchronous only matters when a transaction commits (and at
        # checkpoints), so reads pay nothing for FULL
        synchronous = "FULL" if durable_commits else "NORMAL"

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection, _record) -> None:  # type: ignore[no-untyped-def]
            dbapi_connection.isolation_level = None  # we issue BEGIN ourselves
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            _enable_wal(cursor, busy_timeout_ms)
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            cursor.close()
            register_sqlite_functions(dbapi_connection)  # RE2 regexp(), store/sqlite_regexp.py

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            immediate = conn.get_execution_options().get("tidekeep_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    # ---- transactions --------------------------------------------------------------------------
    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A read-write transaction; commits on success, rolls back on any exception."""
        self.ensure_schema()
        with (store_errors(self.read_only_target),
              self.engine.connect().execution_options(tidekeep_write=True) as conn, conn.begin()):
            steps: dict[str, Callable[[Connection], None]] = {}
            _BEFORE_COMMIT[conn] = steps
            try:
                yield conn
                # last, so the locks they take are the last the transaction waits for (store/audit.py)
                for finish in steps.values():
                    finish(conn)
            finally:
                _BEFORE_COMMIT.pop(conn, None)

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        self.ensure_schema()
        with store_errors(self.read_only_target), self.engine.connect() as conn, conn.begin():
            yield conn

    # ---- schema ----------------------------------------------------------------------------------
    def current_revision(self) -> str | None:
        with store_errors(self.read_only_target), self.engine.connect() as conn:
            if not sa.inspect(conn).has_table("alembic_version"):
                return None
            versions = conn.execute(sa.select(_VERSION_TABLE.c.version_num)).scalars().all()
            if len(versions) > 1:
                raise SchemaError(f"the metadata database has several schema revisions {sorted(versions)}")
            return versions[0] if versions else None

    def ensure_schema(self) -> None:
        """Apply migrations on first use; refuse a database from a newer tidekeep."""
        if self._upgraded:
            return
        with self._upgrade_lock, store_errors(self.read_only_target):
            if self._upgraded:
                return
            current = self.current_revision()
            head = head_revision()
            if current is None and not self.create:
                raise NotFound(f"no tidekeep workspace at {self.shown}: the database holds no tidekeep schema; run "
                               "'tidekeep init' first, or check metadata.url")
            if current != head:
                known = set(migration_revisions())
                if current is not None and current not in known:
                    raise SchemaError(
                        f"the metadata database is at schema revision {current!r}, which this tidekeep "
                        "does not know; upgrade tidekeep"
                    )
                self.upgrade()
            self._upgraded = True

    def upgrade(self) -> None:
        """Bring the schema to head, holding a lock so concurrent first uses do not race. A database
        holding no tidekeep table gets the declared schema in one step, stamped at head — the schema
        every migration in turn would give (tests/store/test_store.py compares the two), in a
        fraction of the statements; one at an older revision runs the migrations from there."""
        from alembic import command

        with self._migration_lock(), self.engine.connect() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            if holds_no_tidekeep_table(conn):
                from .schema import metadata

                metadata.create_all(conn)
                command.stamp(config, "head")
            else:
                command.upgrade(config, "head")
            conn.commit()

    @contextlib.contextmanager
    def _migration_lock(self) -> Iterator[None]:
        if self.is_sqlite:
            path = _sqlite_path(self.url)
            if path is None:
                yield
                return
            handle = open_private_lock_file(str(path) + ".migrate.lock")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
            finally:
                os.close(handle)
        else:
            with self.engine.connect() as conn:
                conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
                conn.commit()
                try:
                    yield
                finally:
                    conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_MIGRATION_LOCK})
                    conn.commit()

    def dispose(self) -> None:
        self.engine.dispose()


def _enable_wal(cursor: sqlite3.Cursor, busy_timeout_ms: int) -> None:
    """Switch to WAL mode. The switch needs an exclusive lock and SQLite answers "database is locked"
    at once, without the busy handler, when connections open a new database together; so wait and
    retry here, for at most the busy timeout."""
    deadline = time.monotonic() + busy_timeout_ms / 1000
    delay = 0.005
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.1)


# the finishing steps of each open write transaction, by its connection: {name: step(conn)}, run in
# order of first registration after the transaction's body and before its commit (`before_commit`).
# Not conn.info: that belongs to the pooled DBAPI connection and outlives the transaction
_BEFORE_COMMIT: weakref.WeakKeyDictionary[Connection, dict[str, Callable[[Connection], None]]] = \
    weakref.WeakKeyDictionary()

Step = TypeVar("Step", bound=Callable[[Connection], None])


def before_commit(conn: Connection, name: str, step: Callable[[], Step]) -> Step | None:
    """The step registered under `name` in this write transaction (made by `step()` the first
    time), run just before it commits; None for a connection outside `Database.write`."""
    steps: dict[str, Any] | None = _BEFORE_COMMIT.get(conn)
    if steps is None:
        return None
    if name not in steps:
        steps[name] = step()
    found: Step = steps[name]
    return found


def retry_store(action: Callable[[], T], what: str, attempts: int = RETRY_ATTEMPTS, first_delay_s: float = 0.05) -> T:
    """Run `action` again while the store is busy or lost (ConflictError, StoreUnavailable), with
    doubling pauses; the last failure is raised. Only for actions that are safe to repeat: the
    caller's action must recognise an earlier attempt that landed (by its files, its id or its
    sequence), because after a lost connection nobody knows whether it did."""
    delay = first_delay_s
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except (ConflictError, StoreUnavailable) as exc:
            if attempt == attempts:
                raise
            log.info("%s failed (%s), trying again (%d of %d)", what, exc, attempt + 1, attempts)
            time.sleep(delay)
            delay *= 2
    raise AssertionError("unreachable")


def check_storable_text(text: str | None, what: str) -> None:
    """InvalidInput for text no metadata store can hold or compare: PostgreSQL's text refuses the
    NUL character, and neither store can encode a lone surrogate (a JSON "\\ud800" escape decodes
    to one), so such a value (a reason, or a filter of a list) is refused on both stores alike."""
    if text is None:
        return
    if "\x00" in text:
        raise InvalidInput(f"invalid {what}: contains a NUL character")
    if _LONE_SURROGATE.search(text):
        raise InvalidInput(f"invalid {what}: contains a lone surrogate (text that is not Unicode)")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def inserted_id(result: sa.CursorResult[Any]) -> int:
    """The integer primary key of the one row an INSERT statement added."""
    key = result.inserted_primary_key
    if key is None:  # pragma: no cover - only an executemany INSERT has no single key
        raise AssertionError("inserted_id() needs a single-row INSERT")
    return int(key[0])


@contextlib.contextmanager
def store_errors(target: str = "the metadata store") -> Iterator[None]:
    """Turn the store's own failures into typed errors; anything else (integrity errors our code
    handles, programming errors) passes through unchanged. `target` is what a read-only error names."""
    try:
        yield
    except sa.exc.DBAPIError as exc:
        if _is_read_only(exc):
            raise ReadOnlyWorkspace(f"read-only: {target} cannot be written ({_first_line(exc.orig or exc)})",
                                    target) from exc
        if isinstance(exc, sa.exc.OperationalError):
            if _is_transient(exc):
                raise ConflictError(
                    f"the metadata store was busy, try again ({_first_line(exc.orig or exc)})") from exc
            raise StoreUnavailable(f"metadata store unavailable: {_first_line(exc.orig or exc)}") from exc
        if isinstance(exc, sa.exc.InterfaceError) or exc.connection_invalidated:
            raise StoreUnavailable(f"metadata store unavailable: {_first_line(exc.orig or exc)}") from exc
        raise


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _is_read_only(exc: sa.exc.DBAPIError) -> bool:
    """SQLite's SQLITE_READONLY family (a read-only file or directory, an immutable file, a read-only
    filesystem) and PostgreSQL's read_only_sql_transaction (a standby, default_transaction_read_only)."""
    code = getattr(exc.orig, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF == sqlite3.SQLITE_READONLY
    return getattr(exc.orig, "sqlstate", None) == "25006"


def _is_transient(exc: sa.exc.OperationalError) -> bool:
    text = str(exc.orig).lower()
    return "database is locked" in text or "deadlock detected" in text or "could not serialize" in text
