"""The pool of PostgreSQL schemas at head (tests/helpers/pg_schemas.py) that the postgres side of
`metadata_url` comes from: a schema handed out again holds nothing a test left in it, and one a
test changed is never handed out again."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

import tidekeep as tk
from helpers.pg_schemas import HeadSchemas, url_in_schema
from tidekeep.store.schema import metadata


def rows_and_next_ids(url: str) -> tuple[dict[str, int], dict[str, int]]:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        rows = {name: conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                for name, table in metadata.tables.items()}
        sequences = conn.execute(sa.text("SELECT sequencename FROM pg_sequences "
                                         "WHERE schemaname = current_schema()")).scalars().all()
        next_ids = {name: conn.execute(sa.text(f"SELECT nextval('{name}')")).scalar_one() for name in sequences}
    engine.dispose()
    return rows, next_ids


def use_as_a_workspace(url: str, tmp_path: Path) -> None:
    with tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"),
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream("pool/s", tk.StreamConfig(segments=2))
        with client.stream("pool/s").writer("w") as writer:
            writer.write(b"event", "k")
        client.create_reader_group("g", tk.ReaderGroupConfig(streams=["pool/s"]))


def test_a_schema_comes_back_as_empty_as_a_new_one(head_schemas: HeadSchemas, tmp_path: Path) -> None:
    schema = head_schemas.take()
    url = url_in_schema(head_schemas.base_url, schema)
    new = rows_and_next_ids(url)
    assert not any(new[0].values()) and set(new[1].values()) == {1}
    use_as_a_workspace(url, tmp_path / "used")
    assert any(rows_and_next_ids(url)[0].values())
    head_schemas.give_back(schema)
    assert head_schemas.take() == schema  # the same schema, handed out again
    assert rows_and_next_ids(url) == new
    head_schemas.give_back(schema)


def test_a_schema_the_test_changed_is_dropped(head_schemas: HeadSchemas) -> None:
    schema = head_schemas.take()
    engine = head_schemas.engine
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE TABLE "{schema}".extra (x int)'))
    head_schemas.give_back(schema)
    assert schema not in head_schemas.free
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM pg_namespace WHERE nspname = :s"),
                            {"s": schema}).scalar_one() == 0
