"""Shared fixtures: real SQLite, real PostgreSQL, one Spark session for the whole run.

PostgreSQL: TIDEKEEP_TEST_PG_URL names a server (`.ci/run` starts one and exports it). Without it
the tests try the local default; when no server answers they skip with a loud reason, except in
CI (CI=true or TIDEKEEP_TEST_REQUIRE_PG=1), where an unreachable server fails them.
Each PostgreSQL-backed test gets its own schema, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

import tidekeep as tk

DEFAULT_PG_URL = "postgresql+psycopg://tidekeep:tidekeep@127.0.0.1:5432/tidekeep_test"


def _pg_required() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"} or bool(os.environ.get("TIDEKEEP_TEST_REQUIRE_PG"))


_pg_status: dict[str, object] = {}


def pg_base_url() -> str:
    """The PostgreSQL URL to test against; skips (or fails in CI) when none answers."""
    if "url" not in _pg_status:
        url = os.environ.get("TIDEKEEP_TEST_PG_URL", DEFAULT_PG_URL)
        try:
            engine = sa.create_engine(url)
            with engine.connect() as conn:
                conn.execute(sa.text("select 1"))
            engine.dispose()
            _pg_status["url"], _pg_status["error"] = url, None
        except Exception as exc:
            _pg_status["url"], _pg_status["error"] = url, f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    if _pg_status["error"]:
        message = f"PostgreSQL not reachable at {_pg_status['url']}: {_pg_status['error']}"
        if _pg_required():
            pytest.fail(message + " (required in CI)")
        pytest.skip(message + " — set TIDEKEEP_TEST_PG_URL")
    return str(_pg_status["url"])


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh schema, dropped after the test."""
    base = pg_base_url()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    engine = sa.create_engine(base)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    url = sa.make_url(base).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Parametrises a test over both metadata backends."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'metadata.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def clock() -> tk.ManualClock:
    return tk.ManualClock()


@pytest.fixture
def client(tmp_path: Path, metadata_url: str) -> Iterator[tk.Client]:
    """A client on a fresh workspace, on SQLite and on PostgreSQL."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   settings={"writer.linger": 0}, create=True)
    yield c
    c.close()


@pytest.fixture
def sqlite_client(tmp_path: Path) -> Iterator[tk.Client]:
    """A client on SQLite only, for tests whose subject is not the metadata backend."""
    c = tk.connect(home=tmp_path / "ws", settings={"writer.linger": 0}, create=True)
    yield c
    c.close()


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run (local[2], UTC)."""
    from tidekeep.spark.session import build_spark

    session = build_spark("local[2]", "tidekeep-tests")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests must not pick up the developer's TIDEKEEP_* settings."""
    for name in list(os.environ):
        if name.startswith("TIDEKEEP_") and not name.startswith("TIDEKEEP_TEST_"):
            monkeypatch.delenv(name, raising=False)
