"""The markers tests/conftest.py applies at collection (docs/testing.md): each test here asserts the
markers it was given, so a change to the detection that misses a case fails here."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import run_cli


def markers(request: pytest.FixtureRequest) -> set[str]:
    return {mark.name for mark in request.node.iter_markers()} & {"spark", "postgres", "slow", "cli"}


def test_a_pure_test_gets_no_marker(request: pytest.FixtureRequest) -> None:
    assert markers(request) == set()


def test_a_test_starting_a_process_is_slow(request: pytest.FixtureRequest) -> None:
    assert subprocess.run([sys.executable, "-c", "pass"], check=False).returncode == 0
    assert markers(request) == {"slow"}


def start_python() -> int:
    return subprocess.run([sys.executable, "-c", "pass"], check=False).returncode


def via_a_helper() -> int:
    return start_python()


def test_a_process_started_two_helpers_down_is_seen(request: pytest.FixtureRequest) -> None:
    assert via_a_helper() == 0
    assert markers(request) == {"slow"}


def test_running_the_cli_in_a_subprocess_is_cli_and_slow(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    assert run_cli(tmp_path / "ws", "--help").returncode == 0
    assert markers(request) == {"cli", "slow"}


def test_the_cli_in_process_is_cli_only(request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]) -> None:
    from tidekeep.cli.main import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0 and "Usage" in capsys.readouterr().out
    assert markers(request) == {"cli"}


@pytest.fixture
def started_process() -> int:
    return start_python()


def test_a_fixture_that_starts_a_process_makes_the_test_slow(request: pytest.FixtureRequest,
                                                            started_process: int) -> None:
    assert started_process == 0 and markers(request) == {"slow"}


def test_the_postgres_side_of_metadata_url_is_postgres(request: pytest.FixtureRequest, metadata_url: str) -> None:
    assert ("postgres" in markers(request)) == metadata_url.startswith("postgresql")


def test_pg_url_is_postgres(request: pytest.FixtureRequest, pg_url: str) -> None:
    assert markers(request) == {"postgres"}


def collected(*args: str) -> list[str]:
    """The test ids `pytest --collect-only` selects with `args` (collection starts no cluster)."""
    done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                          cwd=Path(__file__).parents[1], capture_output=True, text=True, check=False)
    assert done.returncode in (0, 5), done.stdout[-2000:] + done.stderr[-2000:]  # 5: nothing selected
    return [line for line in done.stdout.splitlines() if "::" in line]


def test_the_cluster_tests_are_cluster_slow_and_postgres(request: pytest.FixtureRequest) -> None:
    """A test using the `cluster` fixture is marked cluster, and slow (the fixture starts processes),
    so `make test-fast` leaves it out; it uses PostgreSQL, so postgres too."""
    everything = collected("tests/cluster")
    assert everything
    assert collected("-m", "cluster and slow and postgres", "tests/cluster") == everything
    assert collected("-m", "not slow", "tests/cluster") == []
    assert markers(request) == {"slow"}
