"""The metadata store on SQLite and PostgreSQL: migrations, schema fidelity, SQLite settings,
refusing an unknown schema, and an idempotent workspace init."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import traceback
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import tidekeep as tk
from tidekeep.errors import SchemaError
from tidekeep.store import schema as t
from tidekeep.store.database import alembic_config, head_revision, migration_revisions

DDL_WORDS = ("CREATE", "ALTER", "DROP")


@pytest.fixture
def metadata_url(new_store_url: str) -> str:
    """This module's subject is creating a store, so both backends start with nothing in them."""
    return new_store_url


def _connect(tmp_path: Path, metadata_url: str, **settings: object) -> tk.Client:
    return tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                      settings={"writer.linger": 0, **settings}, create=True)


def _version_rows(client: tk.Client) -> list[str]:
    with client.workspace.db.engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars())


def test_the_schema_head_is_the_newest_migration() -> None:
    # opening a workspace compares with SCHEMA_HEAD without loading the migrations: it must be theirs
    assert head_revision() == migration_revisions()[0]


def test_opening_a_workspace_at_the_current_schema_never_imports_alembic(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    tk.connect(home=home, create=True).close()
    script = ("import sys, tidekeep as tk; tk.connect(home=sys.argv[1]).list_streams(); "
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'alembic'))")
    done = subprocess.run([sys.executable, "-c", script, str(home)], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_init_applies_the_migrations_and_reconnect_is_a_noop(tmp_path: Path, metadata_url: str) -> None:
    first = _connect(tmp_path, metadata_url)  # create=True: what `tidekeep init` does
    assert first.workspace.db.current_revision() == head_revision()
    first.create_stream("s/a", tk.StreamConfig(segments=2))
    assert _version_rows(first) == [head_revision()]
    first.close()

    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement)

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)  # every engine: connecting included
    try:
        second = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"))
        assert [s.name for s in second.list_streams()] == ["s/a"]
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
    assert statements
    assert not [s for s in statements if s.lstrip().upper().startswith(DDL_WORDS)]
    assert _version_rows(second) == [head_revision()]
    second.close()


def schema_snapshot(conn: sa.Connection) -> dict[str, dict[str, object]]:
    """Every table as the database reflects it: columns with types, nullability and defaults, the
    primary key, foreign keys, indexes, unique and check constraints, with their names."""
    inspector = sa.inspect(conn)
    snapshot: dict[str, dict[str, object]] = {}
    for table in sorted(inspector.get_table_names()):
        snapshot[table] = {
            "columns": [(c["name"], str(c["type"]), c["nullable"], str(c.get("default")))
                        for c in inspector.get_columns(table)],
            "primary key": inspector.get_pk_constraint(table)["constrained_columns"],
            "foreign keys": sorted((fk["name"] or "", tuple(fk["constrained_columns"]), fk["referred_table"],
                                    tuple(fk["referred_columns"]), str(sorted(fk.get("options", {}).items())))
                                   for fk in inspector.get_foreign_keys(table)),
            "indexes": sorted((ix["name"] or "", tuple(str(c) for c in ix["column_names"]), bool(ix["unique"]))
                              for ix in inspector.get_indexes(table)),
            "unique": sorted((u["name"] or "", tuple(u["column_names"]))
                             for u in inspector.get_unique_constraints(table)),
            "checks": sorted((c["name"] or "", " ".join(str(c["sqltext"]).split()))
                             for c in inspector.get_check_constraints(table)),
        }
    return snapshot


def test_a_new_database_gets_in_one_step_the_schema_every_migration_gives(tmp_path: Path, metadata_url: str) -> None:
    """A database holding no tidekeep table is created from the declared schema and stamped at head
    (store/database.py) instead of running every migration in turn: both ways must give the same
    tables, columns, types, defaults, keys, indexes and constraints, by name, so that a later
    migration finds what it alters in either."""
    engine = sa.create_engine(metadata_url)
    with engine.connect() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, "head")
        conn.commit()
        migrated = schema_snapshot(conn)
        assert compare_metadata(MigrationContext.configure(conn), t.metadata) == []
    with engine.begin() as conn:
        t.metadata.drop_all(conn)
        conn.execute(sa.text("DROP TABLE alembic_version"))
        assert sa.inspect(conn).get_table_names() == []
    engine.dispose()

    statements: list[str] = []

    def record(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement.lstrip().upper())

    sa.event.listen(sa.engine.Engine, "before_cursor_execute", record)
    try:
        client = _connect(tmp_path, metadata_url)
    finally:
        sa.event.remove(sa.engine.Engine, "before_cursor_execute", record)
    with client.workspace.db.engine.connect() as conn:
        declared = schema_snapshot(conn)
    assert _version_rows(client) == [head_revision()]
    client.close()
    assert not [s for s in statements if s.startswith(("ALTER", "DROP"))]  # the one-step path was taken
    assert declared == migrated


def test_concurrent_first_use_migrates_once(tmp_path: Path, metadata_url: str) -> None:
    # several clients opening one new database at the same moment; on SQLite that races the switch to
    # WAL mode too, which fails only now and then, so it is repeated on fresh database files
    sqlite = metadata_url.startswith("sqlite")
    for round_number in range(10 if sqlite else 1):
        url = f"sqlite:///{tmp_path / f'fresh-{round_number}.db'}" if sqlite else metadata_url
        storage = tmp_path / f"data-{round_number}"
        clients: list[tk.Client] = []
        errors: list[str] = []

        def first_use(errors: list[str] = errors, url: str = url, storage: Path = storage,
                      clients: list[tk.Client] = clients) -> None:
            try:  # init of a new workspace by four at once: one schema, one workspace id
                c = tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(storage), create=True)
                clients.append(c)
                c.list_scopes()
            except BaseException:  # collected and asserted below
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=first_use) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert _version_rows(clients[0]) == [head_revision()]
        assert len({c.workspace_id for c in clients}) == 1 and clients[0].workspace_id is not None
        for c in clients:
            c.close()


def test_sqlite_runs_with_wal_busy_timeout_and_foreign_keys(tmp_path: Path) -> None:
    client = _connect(tmp_path, f"sqlite:///{tmp_path / 'meta.db'}", **{"metadata.busy_timeout": "7s"})
    client.create_stream("s/a", tk.StreamConfig(segments=1))
    with client.workspace.db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 7000
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    # foreign keys are enforced, not just switched on: a chunk of a segment that does not exist is refused
    stream_id = client.stream("s/a").state().stream_id
    with pytest.raises(sa.exc.IntegrityError), client.workspace.db.write() as conn:
        conn.execute(sa.insert(t.chunks).values(
            stream_id=stream_id, segment_id=999, base_offset=0, length=8, event_count=1, path="x.parquet",
            writer_id="w", sequence=1, committed_ms=0))
    assert client.workspace.db.is_sqlite
    client.close()


def test_sqlite_waits_for_a_busy_database_before_switching_to_wal(tmp_path: Path) -> None:
    # another connection is writing to a database still in rollback-journal mode (as the first client
    # of a new workspace does while it switches it to WAL): SQLite refuses the switch at once instead of
    # calling the busy handler, and connecting must wait for the writer rather than fail. The writer
    # commits only once the switch has been tried twice (seen by a trace on every new connection):
    # the first try met the lock, and connecting went on trying.
    path = tmp_path / "meta.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("CREATE TABLE unrelated (x INTEGER)")
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO unrelated VALUES (1)")
    switches: list[str] = []
    tried_twice = threading.Event()

    def on_statement(statement: str) -> None:
        if statement.strip().upper() == "PRAGMA JOURNAL_MODE=WAL":
            switches.append(statement)
            if len(switches) >= 2:
                tried_twice.set()

    def trace(dbapi_connection: sqlite3.Connection, _record: object) -> None:
        dbapi_connection.set_trace_callback(on_statement)

    connected: list[tk.Client] = []
    failures: list[str] = []

    def connect() -> None:
        try:
            client = _connect(tmp_path, f"sqlite:///{path}", **{"metadata.busy_timeout": "10min"})  # init migrates
            client.create_stream("s/a")
            connected.append(client)
        except BaseException:
            failures.append(traceback.format_exc())
        finally:
            tried_twice.set()  # never leave the writer waiting

    # class-level pool listeners run before the store's own connect listener, which switches to WAL
    sa.event.listen(sa.pool.Pool, "connect", trace)
    connecting = threading.Thread(target=connect)
    try:
        connecting.start()
        tried_twice.wait()  # no deadline: pytest's timeout ends a hang
        holder.execute("COMMIT")
        connecting.join()
    finally:
        sa.event.remove(sa.pool.Pool, "connect", trace)
        holder.close()
    assert not failures, failures[0]
    assert len(switches) >= 2  # it really was blocked, and tried again instead of failing
    [client] = connected
    with client.workspace.db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    assert [s.name for s in client.list_streams()] == ["s/a"]
    client.close()


def test_foreign_keys_cascade_on_postgres_too(client: tk.Client) -> None:
    client.create_stream("s/a", tk.StreamConfig(segments=2))
    stream_id = client.stream("s/a").state().stream_id
    with pytest.raises(sa.exc.IntegrityError), client.workspace.db.write() as conn:
        conn.execute(sa.insert(t.chunks).values(
            stream_id=stream_id, segment_id=999, base_offset=0, length=8, event_count=1, path="x.parquet",
            writer_id="w", sequence=1, committed_ms=0))
    with client.workspace.db.read() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.chunks)).scalar_one() == 0


def test_database_at_an_unknown_newer_revision_is_refused(tmp_path: Path, metadata_url: str) -> None:
    first = _connect(tmp_path, metadata_url)
    first.create_stream("s/a", tk.StreamConfig(segments=1))
    with first.workspace.db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999_from_the_future'"))
    first.close()

    with pytest.raises(SchemaError, match=r"schema revision '9999_from_the_future'.*upgrade tidekeep") as info:
        tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"))
    assert "\n" not in str(info.value)
    with pytest.raises(SchemaError):  # refused every time, by init too, not only once
        _connect(tmp_path, metadata_url)
    engine = sa.create_engine(metadata_url)
    try:
        with engine.connect() as conn:
            assert list(conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars()) == [
                "9999_from_the_future"]
            assert list(conn.execute(sa.select(t.streams.c.name)).scalars()) == ["a"]
    finally:
        engine.dispose()


def test_init_workspace_is_idempotent(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    settings, created = tk.init_workspace(home)
    assert created
    config_file = home / "tidekeep.yaml"
    assert config_file.is_file()
    assert (home / "metadata.db").is_file()
    assert (home / "data").is_dir()
    with tk.connect(home, create=True) as client:
        assert client.workspace.db.current_revision() == head_revision()
        client.create_stream("s/a")

    config_file.write_text(config_file.read_text() + "# edited by hand\n")
    edited = config_file.read_text()
    again, created_again = tk.init_workspace(home)
    assert not created_again
    assert config_file.read_text() == edited  # never overwritten
    assert again.metadata_url == settings.metadata_url
    with tk.connect(home, create=True) as client:
        assert [s.name for s in client.list_streams()] == ["s/a"]  # data survives a second init
        assert _version_rows(client) == [head_revision()]
