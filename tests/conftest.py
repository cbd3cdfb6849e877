"""Shared fixtures: real SQLite, real PostgreSQL, one Spark session for the whole run; markers
applied from what a test uses; the hypothesis profiles.

PostgreSQL: TIDEKEEP_TEST_PG_URL names a server (`.ci/run` starts one and exports it). Without it
the tests try the local default; when no server answers they skip with a loud reason, except in
CI (CI=true or TIDEKEEP_TEST_REQUIRE_PG=1), where an unreachable server fails them.
Each PostgreSQL-backed test gets a schema of its own: `pg_url` a new empty one, dropped afterwards;
the postgres side of `metadata_url` (and so of `client`) an empty one already at head, taken from
a per-process pool and emptied afterwards (tests/helpers/pg_schemas.py); `new_store_url` is both
backends with nothing in them, for the tests of creating and migrating a store.

In parallel (pytest-xdist, `-n`): every worker process is a pytest session of its own, so it starts
its own Spark session and gets its own temporary base directory (`popen-gwN`); schema names are
random and each pool belongs to one worker, so workers never share one (tests/test_parallel.py checks all three).

Object storage: `s3_server` is this process's S3-protocol server on loopback (moto in server mode,
tests/helpers/s3.py; one per pytest process, like the Spark session, so it does not make a test
`slow`); `s3_bucket` a new bucket with the AWS credential variables set; `storage_uri` parametrises
a test over a local directory and an S3 prefix, and `storage_client` is `client` on both. Without a
server the S3 tests skip, except in CI (CI=true or TIDEKEEP_TEST_REQUIRE_S3=1), where they fail.
Outside CI the S3 side of `storage_uri` runs with SQLite metadata only (the pair postgres x s3 is
deselected; TIDEKEEP_TEST_FULL_MATRIX=1 keeps it).

Markers are never written by hand; collection applies them (docs/testing.md):
- `spark`: the test uses the `spark` fixture or the `connect_server` one (a Spark Connect server);
- `postgres`: it uses PostgreSQL (`pg_url`, the postgres side of `metadata_url` or of another
  fixture parametrised over backends by name);
- `slow`: it starts a process (a worker, the CLI, a crash test): its code, the test-module and helper
  functions it calls, or its fixtures reach `subprocess`, `multiprocessing`, `os.fork`/`spawn*`/
  `system`/`popen` or `sys.executable`;
- `cli`: it runs the `tidekeep` command line (in a subprocess, with typer's CliRunner, or by calling
  a function of tidekeep.cli).
An unmarked test that starts a process anyway fails (an audit hook sees it), so `make test-fast`
(`-m "not spark and not slow"`) cannot silently start running processes.

Hypothesis: profile `dev` (the default) and `ci` (selected when CI=true, or HYPOTHESIS_PROFILE=ci):
CI derandomises and prints the reproduction blob of a failure; no deadline on either, since a loaded
machine must not turn slowness into a failure.
"""

from __future__ import annotations

import dis
import inspect
import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import settings as hypothesis_settings

import tidekeep as tk
from helpers.cli_runner import InProcess
from helpers.cluster import CLUSTER_SINK_GATE, StandaloneCluster
from helpers.pg_schemas import HeadSchemas, new_schema_name, url_in_schema
from helpers.s3 import S3Server, drop_bucket, moto_server, new_bucket
from helpers.s3 import ci as _in_ci
from helpers.s3 import environment as s3_environment
from tidekeep.spark.credentials import PASSWORD_ENV

TESTS_DIR = Path(__file__).resolve().parent

# ---- hypothesis profiles ------------------------------------------------------------------------
hypothesis_settings.register_profile("dev", deadline=None)
hypothesis_settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE")
                                 or ("ci" if os.environ.get("CI", "").lower() in {"1", "true", "yes"} else "dev"))

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
    schema = new_schema_name()
    engine = sa.create_engine(base)
    with engine.begin() as conn:
        conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield url_in_schema(base, schema)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA "{schema}" CASCADE'))
        engine.dispose()


@pytest.fixture(scope="session")
def head_schemas() -> Iterator[HeadSchemas]:
    """This test process's pool of empty PostgreSQL schemas at head (tests/helpers/pg_schemas.py)."""
    pool = HeadSchemas(pg_base_url())
    yield pool
    pool.close()


@pytest.fixture
def pg_head_url(head_schemas: HeadSchemas) -> Iterator[str]:
    """A PostgreSQL URL whose search_path is an empty schema at head, emptied (or dropped) after."""
    schema = head_schemas.take()
    try:
        yield url_in_schema(head_schemas.base_url, schema)
    finally:
        head_schemas.give_back(schema)


@pytest.fixture(params=["sqlite", "postgres"])
def metadata_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Parametrises a test over both metadata backends: a store no workspace uses yet. On SQLite a new
    file; on PostgreSQL an empty schema at head — creating the schema costs more than most tests, so
    the tests whose subject is creating a store from nothing use `new_store_url`."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'metadata.db'}"
    return request.getfixturevalue("pg_head_url")


@pytest.fixture(params=["sqlite", "postgres"])
def new_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both metadata backends with nothing in them: a new SQLite file, an empty PostgreSQL schema."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'metadata.db'}"
    return request.getfixturevalue("pg_url")


# ---- object storage ----------------------------------------------------------------------------
_s3_status: dict[str, str] = {}


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """This test process's S3-protocol server on loopback (moto, tests/helpers/s3.py), started on
    first use. One that cannot start skips the S3 tests — and fails them in CI."""
    if "error" in _s3_status:
        _s3_unavailable(_s3_status["error"])
    log = tmp_path_factory.mktemp("s3-server") / "moto.log"
    try:
        with moto_server(log) as server:
            yield server
            return
    except (OSError, RuntimeError) as exc:
        _s3_status["error"] = f"{type(exc).__name__}: {exc}"
    _s3_unavailable(_s3_status["error"])


def _s3_unavailable(reason: str) -> None:
    if _in_ci():
        pytest.fail(f"the S3 test server is required in CI and did not start: {reason}")
    pytest.skip(f"the S3 test server did not start: {reason}")


@pytest.fixture
def s3_bucket(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A new empty bucket on the test server, with the AWS credential variables set in the
    environment (processes the test starts inherit them); the bucket is dropped afterwards."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)  # a developer's own AWS set-up must not redirect the tests
    for name, value in s3_environment(s3_server).items():
        monkeypatch.setenv(name, value)
    bucket = new_bucket(s3_server)
    yield bucket
    drop_bucket(s3_server, bucket)


@pytest.fixture(params=["local", "s3"])
def storage_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Parametrises a test over storage: a local directory, and a prefix in a new S3 bucket."""
    if request.param == "local":
        return str(tmp_path / "data")
    server: S3Server = request.getfixturevalue("s3_server")
    return server.uri(request.getfixturevalue("s3_bucket"), "data")


@pytest.fixture
def storage_client(tmp_path: Path, metadata_url: str, storage_uri: str) -> Iterator[tk.Client]:
    """`client` over both storages as well: the test modules whose subject depends on storage
    name it as their `client`."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri,
                   settings={"writer.linger": 0}, create=True)
    yield c
    c.close()


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


SPARK_WITHOUT_UI = "--conf spark.ui.enabled=false pyspark-shell"


@pytest.fixture(scope="session")
def spark():
    """The one Spark session of the test run (local[2], UTC). Its JVM and Python workers start with
    the S3 test server's AWS variables, as every node of a deployment has its own credentials chain
    (docs/storage.md): the workers outlive the test that first starts them, so a test's `s3_bucket`
    could not reach them later. This process itself gets them only from `s3_bucket`."""
    from tidekeep.spark.session import build_spark

    with pytest.MonkeyPatch.context() as patch:
        for name, value in s3_environment().items():
            patch.setenv(name, value)
        session = build_spark("local[2]", "tidekeep-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL (sc://127.0.0.1:PORT) of a Spark Connect server on local[2], started from the pyspark
    install once per test process and stopped at its end. A server that cannot start fails the
    tests that need it (never a skip: nothing outside this machine is needed to start one)."""
    from helpers.connect_server import start_connect_server

    server = start_connect_server(tmp_path_factory.mktemp("connect") / "server.log")
    yield server.url
    server.stop()


def _cluster_required() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"} or bool(
        os.environ.get("TIDEKEEP_TEST_REQUIRE_CLUSTER"))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory, s3_server: S3Server) -> Iterator[StandaloneCluster]:
    """A Spark standalone cluster from the pyspark install (tests/helpers/cluster.py): a master and
    two one-core workers on loopback, worker 2 (host 127.0.0.2) in a mount namespace of its own with
    an empty tmpfs over /tmp and the run's temporary directories, so it shares no file with the
    driver. Executors reach the S3 test server (the AWS variables) and PostgreSQL (the password by
    reference, TIDEKEEP_METADATA_PASSWORD). Worker 2's sink tasks wait at `sink.task_written` while
    its gate file CLUSTER_SINK_GATE exists in worker 2's /tmp (cluster.isolated_path). Started once per
    test process, stopped at its end with every process it started. One that cannot start fails
    the tests in CI (CI=true or TIDEKEEP_TEST_REQUIRE_CLUSTER=1) and skips them elsewhere."""
    from helpers.cluster import ClusterFailed, start_cluster

    env = dict(s3_environment(s3_server))
    password = sa.make_url(pg_base_url()).password
    if password:
        env[PASSWORD_ENV] = str(password)
    try:
        running = start_cluster(tmp_path_factory.mktemp("cluster"), tmp_path_factory.getbasetemp(), env,
                                isolated_env={"TIDEKEEP_PAUSE": f"sink.task_written=@{CLUSTER_SINK_GATE}"})
    except (ClusterFailed, OSError) as exc:
        if _cluster_required():
            pytest.fail(f"the Spark standalone cluster is required in CI and did not start: {exc}")
        pytest.skip(f"the Spark standalone cluster did not start: {exc}")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests must not pick up the developer's TIDEKEEP_* settings."""
    for name in list(os.environ):
        if name.startswith("TIDEKEEP_") and not name.startswith("TIDEKEEP_TEST_"):
            monkeypatch.delenv(name, raising=False)


# ---- markers from what a test uses ------------------------------------------------------------
# names whose use starts a process: modules, and attributes of os / sys
_SPAWNING_MODULES = {"subprocess", "multiprocessing", "concurrent.futures.process"}
_SPAWNING_ATTRIBUTES = {"executable", "fork", "forkpty", "posix_spawn", "posix_spawnp", "spawnv", "spawnve",
                        "spawnl", "spawnle", "spawnlp", "spawnvp", "system", "popen", "execv", "execve"}
_CLI_NAMES = {"CliRunner", "tidekeep.cli.main", "tidekeep.cli"}


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _functions_of(value: Any) -> list[types.FunctionType]:
    """The test-suite functions behind a referenced name: a function, a fixture's function, or the
    methods of a class defined in the tests."""
    value = getattr(value, "__func__", value)  # a method of a test class
    if callable(value) and not isinstance(value, type):
        value = inspect.unwrap(value)
    if isinstance(value, types.FunctionType):
        return [value]
    if isinstance(value, type):
        return [member for member in vars(value).values() if isinstance(member, types.FunctionType)]
    return []


def _in_tests(function: types.FunctionType) -> bool:
    try:
        return Path(inspect.getfile(function)).resolve().is_relative_to(TESTS_DIR)
    except (TypeError, OSError):
        return False


_uses_cache: dict[types.CodeType, frozenset[str]] = {}


def _uses(function: types.FunctionType, seen: set[types.CodeType] | None = None) -> frozenset[str]:
    """What a test-suite function reaches, following the test-suite functions and classes it names
    (never into tidekeep or libraries): {"slow", "cli"} or a part of it."""
    code = function.__code__
    if code in _uses_cache:
        return _uses_cache[code]
    top = seen is None
    seen = set() if seen is None else seen
    if code in seen:
        return frozenset()
    seen.add(code)
    found: set[str] = set()
    for inner in _code_objects(code):
        names = set(inner.co_names)
        if names & _SPAWNING_ATTRIBUTES and names & {"os", "sys"}:
            found.add("slow")
        strings = {const for const in inner.co_consts if isinstance(const, str)}
        if (names | strings) & _CLI_NAMES:
            found.add("cli")
        for instruction in dis.get_instructions(inner):
            if instruction.opname == "IMPORT_NAME" and instruction.argval in _SPAWNING_MODULES:
                found.add("slow")  # `import subprocess` inside the function
            if instruction.opname not in {"LOAD_GLOBAL", "LOAD_NAME"}:
                continue
            value = function.__globals__.get(str(instruction.argval))
            referenced = [value]
            if isinstance(value, types.ModuleType):
                if value.__name__ in _SPAWNING_MODULES:
                    found.add("slow")
                # a test-suite module used as `procs.run_worker(...)`: the attributes it names
                module_file = getattr(value, "__file__", None)
                in_suite = module_file is not None and Path(module_file).resolve().is_relative_to(TESTS_DIR)
                referenced = [getattr(value, name, None) for name in names] if in_suite else []
            elif getattr(value, "__module__", None) in _SPAWNING_MODULES:  # `from subprocess import run`
                found.add("slow")
            elif str(getattr(value, "__module__", "")).startswith("tidekeep.cli"):  # the CLI in-process
                found.add("cli")
            for target in referenced:
                for called in _functions_of(target):
                    if _in_tests(called):
                        found |= _uses(called, seen)
    result = frozenset(found)
    if top:  # a result inside a traversal may lack what a function on the current path reaches
        _uses_cache[code] = result
    return result


# Session fixtures that start one server for the whole test process, as the Spark session does:
# starting it is not the test's doing, and the tests that merely use it stay fast.
_PER_PROCESS_SERVERS = {"s3_server"}


def _fixture_functions(item: pytest.Function) -> list[types.FunctionType]:
    functions = []
    for name, definitions in item._fixtureinfo.name2fixturedefs.items():
        if name in _PER_PROCESS_SERVERS:
            continue
        for definition in definitions:
            functions.extend(_functions_of(definition.func))
    return functions


def _uses_postgres(item: pytest.Function) -> bool:
    if {"pg_url", "pg_head_url", "head_schemas"} & set(item.fixturenames):
        return True
    params = getattr(item, "callspec", None)
    return params is not None and any(
        isinstance(value, str) and value in {"postgres", "pg", "postgresql", "pg_backend"}
        for value in params.params.values())


def pytest_configure(config: pytest.Config) -> None:
    for line in ("spark: uses the shared Spark session or a Connect server (applied from the spark and "
                 "connect_server fixtures)",
                 "postgres: uses PostgreSQL (applied from pg_url and postgres-parametrised fixtures)",
                 "slow: starts a process: a worker, the CLI, a crash test (applied from subprocess use)",
                 "cli: runs the tidekeep command line (applied from run_cli / CliRunner use)",
                 "cluster: runs on the Spark standalone cluster (applied from the cluster fixture; slow too)",
                 "browser: drives Chromium against a live `tidekeep serve` (applied from the served, browser and "
                 "login fixtures of tests/web; slow too)"):
        config.addinivalue_line("markers", line)
    # The Spark UI is on by default (the spark.ui setting leaves it to Spark): the suite's Spark
    # drivers, the CLI subprocesses' among them (this names no tidekeep setting, so they keep it),
    # start without it. Tests of the UI remove it (tests/spark/test_spark_settings.py).
    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", SPARK_WITHOUT_UI)


def _postgres_on_s3(item: pytest.Item) -> bool:
    params = getattr(item, "callspec", None)
    return params is not None and params.params.get("storage_uri") == "s3" and params.params.get(
        "metadata_url") == "postgres"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("CI", "").lower() not in {"1", "true", "yes"} and not os.environ.get(
            "TIDEKEEP_TEST_FULL_MATRIX"):
        # Storage and metadata backend are independent paths: outside CI, S3 runs with SQLite only
        # (postgres x s3 would add a minute to make test-fast and no path); CI runs every pair
        dropped = [item for item in items if _postgres_on_s3(item)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if not _postgres_on_s3(item)]
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if "spark" in item.fixturenames or "connect_server" in item.fixturenames:
            item.add_marker(pytest.mark.spark)
        if "cluster" in item.fixturenames:
            item.add_marker(pytest.mark.cluster)
        if {"served", "browser", "login"} & set(item.fixturenames):
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)
        if _uses_postgres(item):
            item.add_marker(pytest.mark.postgres)
        found: set[str] = set()
        for function in [*_functions_of(item.obj), *_fixture_functions(item)]:
            if _in_tests(function):
                found |= _uses(function)
        for name in sorted(found):
            item.add_marker(getattr(pytest.mark, name))


# ---- the guard: an unmarked test that starts a process fails ------------------------------------
_current_test: dict[str, pytest.Item | None] = {"item": None}
_spawned_by: dict[str, list[str]] = {}


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event in {"subprocess.Popen", "os.fork", "os.posix_spawn", "os.system", "os.exec"}:
        item = _current_test["item"]
        if item is not None:
            _spawned_by.setdefault(item.nodeid, []).append(f"{event} {str(args[:2])[:120]}")


sys.addaudithook(_audit)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """The test body only: the shared Spark session starting in a fixture is not the test's doing."""
    _current_test["item"] = item
    try:
        result = yield
    finally:
        _current_test["item"] = None
    spawned = _spawned_by.pop(item.nodeid, [])
    if spawned and item.get_closest_marker("slow") is None and item.get_closest_marker("spark") is None:
        pytest.fail(f"this test started a process ({spawned[0]}) but collection did not mark it slow: "
                    "call it through a helper conftest recognises (tests/helpers/procs.py, cli.py) or "
                    "extend conftest's detection", pytrace=False)
    return result


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> InProcess:
    """The CLI's entry point run inside the test process, on a workspace home in tmp_path."""
    return InProcess(monkeypatch, tmp_path / "ws")
