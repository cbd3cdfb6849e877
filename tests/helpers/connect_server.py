"""A Spark Connect server from the pyspark install, on a free loopback port, for tests and benchmarks.

The pyspark wheel ships the server (its connect jar and `spark-submit`); nothing is fetched. The
server runs in the foreground of a process of its own (not through spark-daemon.sh, which would
detach it), so stopping it is killing that process group. Its Python workers run this interpreter
with the caller's PYTHONPATH, so they import the tidekeep under test.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from helpers.ports import unused_port

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
BIND_ATTEMPTS = 3  # a port taken between choosing and binding it: start again on another
BIND_FAILED = b"java.net.BindException"


@dataclass
class ConnectServer:
    url: str  # sc://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


class ConnectServerFailed(RuntimeError):
    pass


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def start_connect_server(log: Path, master: str = "local[2]", timeout: float = 180,
                         extra_env: dict[str, str] | None = None,
                         choose_port: Callable[[], int] = unused_port) -> ConnectServer:
    """Start a Connect server on `master` and wait until its port answers; ConnectServerFailed, with
    the end of its log, when it exits or does not answer within `timeout` seconds. When its port
    was taken before it could bind it, it starts again on another (BIND_ATTEMPTS in all).
    `extra_env`: set in the server's environment, which its Python workers inherit (e.g.
    TIDEKEEP_PAUSE)."""
    for attempt in range(1, BIND_ATTEMPTS + 1):
        try:
            return _start_once(log, master, timeout, extra_env or {}, choose_port())
        except _PortTaken:
            if attempt == BIND_ATTEMPTS:
                raise ConnectServerFailed(f"the Spark Connect server found its port taken {attempt} times:\n"
                                          f"{_tail(log)}") from None
    raise AssertionError("unreachable")


class _PortTaken(Exception):
    pass


def _start_once(log: Path, master: str, timeout: float, extra_env: dict[str, str], port: int) -> ConnectServer:
    home = spark_home()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    env.update({"SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                "SPARK_LOCAL_IP": "127.0.0.1"})
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_CONNECT_MODE_ENABLED", None)
    env.update(extra_env)
    command = [str(home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--master", master,
               "--name", "tidekeep-tests-connect",
               "--conf", f"spark.connect.grpc.binding.port={port}",
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", "spark.ui.enabled=false",
               "--conf", "spark.sql.session.timeZone=UTC",
               "--conf", "spark.driver.extraJavaOptions=-Duser.timezone=UTC",
               "--conf", "spark.executor.extraJavaOptions=-Duser.timezone=UTC"]
    handle = open(log, "wb")  # noqa: SIM115 - the server writes here until it is stopped
    try:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=env,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        handle.close()
    server = ConnectServer(f"sc://127.0.0.1:{port}", process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if BIND_FAILED in log.read_bytes():
                raise _PortTaken
            raise ConnectServerFailed(f"the Spark Connect server exited ({process.returncode}):\n{_tail(log)}")
        if _answers(port) and b"Spark Connect server started" in log.read_bytes():
            return server
        time.sleep(0.25)
    server.stop()
    raise ConnectServerFailed(f"the Spark Connect server did not answer within {timeout:.0f} s:\n{_tail(log)}")


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _tail(log: Path, lines: int = 30) -> str:
    """The end of the log, after its first exception line (the cause, which a long stack trace
    would push out of the end)."""
    text = log.read_text(errors="replace").splitlines()
    causes = [line for line in text if "Exception:" in line or line.startswith("Caused by:")][:3]
    return "\n".join([*causes, "...", *text[-lines:]] if causes else text[-lines:])
