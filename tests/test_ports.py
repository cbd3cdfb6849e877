"""The ports test servers bind (tests/helpers/ports.py) and what their helpers do when one was taken
between choosing and binding it. CI once lost its four Connect tests that way: the server's port,
probed free through port 0, was in the kernel's ephemeral range and taken before the JVM bound it
(`java.net.BindException`), and the fixture gave up."""

from __future__ import annotations

import os
import random
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers.cluster import BIND_FAILED, MASTER_CLASS, MASTER_FAILS_ON_A_TAKEN_PORT, spark_home, start_process
from helpers.connect_server import start_connect_server
from helpers.ports import DEFAULT_EPHEMERAL, LOWEST, candidate_ports, ephemeral_range, unused_port


@given(low=st.integers(1024, 65000), width=st.integers(0, 30000))
def test_candidates_never_overlap_the_ephemeral_range(low: int, width: int) -> None:
    high = min(low + width, 65535)
    candidates = candidate_ports((low, high))
    assert len(candidates) > 0
    assert all(not (low <= port <= high) for port in (candidates.start, candidates.stop - 1))
    assert candidates.start >= LOWEST and candidates.stop <= 65536


def test_the_range_is_read_from_the_kernel_with_a_default(tmp_path: Path) -> None:
    source = tmp_path / "ip_local_port_range"
    source.write_text("40000\t50000\n")
    assert ephemeral_range(source) == (40000, 50000)
    assert ephemeral_range(tmp_path / "missing") == DEFAULT_EPHEMERAL


class Sequence(random.Random):
    """Chooses the given ports in order."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__()
        self.ports = iter(ports)

    def choice(self, seq):  # type: ignore[no-untyped-def, override]
        return next(self.ports)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", unused_port()))
        holder.listen()
        yield int(holder.getsockname()[1])


def test_a_bound_port_is_never_chosen(taken_port: int) -> None:
    free = unused_port()
    low, high = ephemeral_range()
    assert not low <= free <= high
    assert unused_port(chooser=Sequence([taken_port, taken_port, free])) == free


def test_the_connect_server_starts_on_another_port_when_its_port_was_taken(tmp_path: Path, taken_port: int) -> None:
    ports = iter([taken_port])
    server = start_connect_server(tmp_path / "server.log", choose_port=lambda: next(ports, None) or unused_port())
    try:
        assert not server.url.endswith(f":{taken_port}")
        assert server.process.poll() is None
    finally:
        server.stop()


def test_a_master_whose_port_was_taken_exits_instead_of_moving(tmp_path: Path, taken_port: int) -> None:
    """start_cluster starts again on other ports when the master exits on a BindException; Spark's
    own answer — the next port up, where no worker looks — is turned off."""
    log = tmp_path / "master.log"
    process = start_process([str(spark_home() / "bin" / "spark-class"), MASTER_CLASS, "--host", "127.0.0.1",
                             "--port", str(taken_port), "--webui-port", str(unused_port())],
                            {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_CONF_DIR": str(tmp_path),
                             "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                             "SPARK_MASTER_OPTS": MASTER_FAILS_ON_A_TAKEN_PORT, "SPARK_DAEMON_MEMORY": "256m"},
                            log)
    try:
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0
    assert BIND_FAILED in log.read_bytes()
