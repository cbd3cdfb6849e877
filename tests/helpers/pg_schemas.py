"""PostgreSQL schemas at tidekeep's head revision, kept per test process and emptied between tests.

Creating the schema (27 tables with their indexes) costs about 0.2 s on PostgreSQL, more than most
tests that use it; emptying one costs about 0.01 s. A schema comes back to the pool only when it is
exactly what it was handed out as: at head, the declared tables and no other, every row deleted and
every sequence back at its start. Anything else — a test that changed the schema,
or left a session holding a lock past `lock_timeout` — and the schema is dropped instead, so one
test's leftovers never reach the next.

Creating a store from nothing (the migrations, `tidekeep init` on an empty database) is tested on
a schema of its own: the `new_store_url` and `pg_url` fixtures in tests/conftest.py."""

from __future__ import annotations

import uuid

import sqlalchemy as sa

from tidekeep.store.database import Database, head_revision
from tidekeep.store.schema import metadata

VERSION_TABLE = "alembic_version"


def new_schema_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


def url_in_schema(base_url: str, schema: str) -> str:
    url = sa.make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
    return url.render_as_string(hide_password=False)


class HeadSchemas:
    """Hands out empty schemas at head; `give_back` empties one for the next test, or drops it."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.engine = sa.create_engine(base_url, poolclass=sa.pool.NullPool)
        self.tables = frozenset(metadata.tables) | {VERSION_TABLE}
        self.free: list[str] = []
        self.made: set[str] = set()

    def take(self) -> str:
        """The name of an empty schema at head."""
        if self.free:
            return self.free.pop()
        schema = new_schema_name()
        with self.engine.begin() as conn:
            conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        self.made.add(schema)
        database = Database(url_in_schema(self.base_url, schema), create=True)
        try:
            database.ensure_schema()  # the path every new store takes
        finally:
            database.dispose()
        return schema

    def give_back(self, schema: str) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(sa.text("SET LOCAL lock_timeout = '5s'"))
                if self.tables_of(conn, schema) != self.tables or self.versions_of(conn, schema) != [head_revision()]:
                    raise LookupError(f"schema {schema} was changed by the test")
                sequences = conn.execute(sa.text("SELECT sequencename FROM pg_sequences WHERE schemaname = :s"),
                                         {"s": schema}).scalars().all()
                # DELETE, children first, rather than TRUNCATE: on these few rows it costs a quarter as
                # much, as TRUNCATE gives every table and index a new file
                conn.exec_driver_sql("; ".join(
                    [f'DELETE FROM "{schema}"."{table.name}"' for table in reversed(metadata.sorted_tables)]
                    + [f"SELECT setval('\"{schema}\".\"{sequence}\"', 1, false)" for sequence in sequences]))
        except (LookupError, sa.exc.DBAPIError):
            self.drop(schema)
            return
        self.free.append(schema)

    @staticmethod
    def tables_of(conn: sa.Connection, schema: str) -> set[str]:
        return set(conn.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = :s"),
                                {"s": schema}).scalars())

    @staticmethod
    def versions_of(conn: sa.Connection, schema: str) -> list[str]:
        if not sa.inspect(conn).has_table(VERSION_TABLE, schema=schema):
            return []
        return list(conn.execute(sa.text(f'SELECT version_num FROM "{schema}".{VERSION_TABLE}')).scalars())

    def drop(self, schema: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        self.made.discard(schema)

    def close(self) -> None:
        for schema in sorted(self.made):
            self.drop(schema)
        self.free.clear()
        self.engine.dispose()
