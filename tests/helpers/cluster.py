"""A Spark standalone cluster from the pyspark install, for tests and benchmarks: a master and two
workers with one core each, on loopback; the second worker shares no file with the driver.

- The master listens on 127.0.0.1 (ports from helpers.ports; its web UI too, which
  `wait_for_workers` reads).
- Worker 1 runs on 127.0.0.1, worker 2 on 127.0.0.2 (Linux routes all of 127/8 to loopback), so
  the host of a task — in the driver's event log — says which worker ran it.
- Worker 2 starts inside a mount namespace of its own (`unshare -m --propagation private`) with an
  empty tmpfs over /tmp and over the test run's base temporary directory (the code it runs — the
  virtualenv, the checkout — is mounted back when it lives there): the driver's workspace,
  its Spark temporary files and every test's tmp_path are not there. It sees the installed code
  (the virtualenv, the repository) as a node with tidekeep installed would. Its files are reached
  from here through /proc/<pid>/root (`isolated_path`), which is how a test opens a gate in it.
- Every process runs in a session of its own and carries a marker variable; `stop` ends the
  process groups and then any process still carrying the marker (executors, Python workers).

Executors run this interpreter with the caller's PYTHONPATH (the code under test), the AWS
variables of the S3 test server and the metadata password by reference (TIDEKEEP_METADATA_PASSWORD,
docs/security.md): the workers' environment is handed to the executors they start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.ports import unused_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
SHARED_HOST, ISOLATED_HOST = "127.0.0.1", "127.0.0.2"
MARKER = "TIDEKEEP_TEST_CLUSTER_ID"  # every process of one cluster carries it, so stop() finds stragglers
WORKER_MEMORY = "1536m"  # one 1 GiB executor each (spark.executor.memory's default)
DAEMON_MEMORY = "256m"  # master and workers only schedule
# worker 2's scratch directory, on its own tmpfs
ISOLATED_WORK_DIR = "/tmp/tidekeep-isolated-worker"
START_TIMEOUT_S = 120.0
# Spark would move a master whose port is taken to the next port, where no worker looks for it:
# it exits instead, and start_cluster starts again on other ports
MASTER_FAILS_ON_A_TAKEN_PORT = "-Dspark.port.maxRetries=0"
BIND_ATTEMPTS = 3
BIND_FAILED = b"java.net.BindException"
# the gate worker 2's sink tasks wait at (TIDEKEEP_PAUSE=sink.task_written=@...) while it exists in its /tmp
CLUSTER_SINK_GATE = "/tmp/tidekeep-sink-gate"


class ClusterFailed(RuntimeError):
    pass


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class StandaloneCluster:
    master_url: str  # spark://127.0.0.1:PORT
    web_url: str  # the master's web UI, http://127.0.0.1:PORT
    log_dir: Path
    marker: str
    env: dict[str, str]  # the variables given to every process of the cluster (and so to every executor)
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def isolated_pid(self) -> int:
        """The process id of worker 2's JVM (spark-class ends in exec: the started process itself)."""
        return self.processes["worker-isolated"].pid

    def isolated_path(self, path: str | Path) -> Path:
        """`path` as worker 2 sees it, reached from outside its mount namespace."""
        return Path(f"/proc/{self.isolated_pid}/root") / Path(path).relative_to("/")

    def workers(self) -> list[dict[str, object]]:
        """The master's view of its workers (its web UI's JSON)."""
        with urllib.request.urlopen(f"{self.web_url}/json", timeout=10) as answer:
            return list(json.load(answer).get("workers", []))

    def executor_pids(self, host: str) -> list[int]:
        """The executor JVMs running now on the worker of `host`."""
        found = []
        for pid, command in _marked_processes(self.marker):
            if "CoarseGrainedExecutorBackend" in command and f"--hostname {host} " in command + " ":
                found.append(pid)
        return found

    def wait_for_workers(self, timeout: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.check_running()
            with contextlib.suppress(OSError, ValueError):
                alive = {str(w.get("host")) for w in self.workers() if w.get("state") == "ALIVE"}
                if alive >= {SHARED_HOST, ISOLATED_HOST}:
                    return
            if time.monotonic() > deadline:
                raise ClusterFailed(f"the workers did not register within {timeout:.0f} s:\n{self.log_tails()}")
            time.sleep(0.25)

    def check_running(self) -> None:
        for name, process in self.processes.items():
            if process.poll() is not None:
                raise ClusterFailed(f"the cluster's {name} exited ({process.returncode}):\n{self.log_tails()}")

    def log_tails(self, lines: int = 25) -> str:
        parts = []
        for log in sorted(self.log_dir.glob("*.log")):
            text = log.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {log.name}\n" + "\n".join(text))
        return "\n".join(parts)

    def save_isolated_logs(self) -> None:
        """Copy worker 2's executor logs out of its tmpfs (they vanish with its namespace)."""
        source = self.isolated_path(ISOLATED_WORK_DIR)
        target = self.log_dir / "worker-isolated-work"
        with contextlib.suppress(OSError):
            for path in source.rglob("std*"):
                destination = target / path.relative_to(source)
                destination.parent.mkdir(parents=True, exist_ok=True)
                destination.write_bytes(path.read_bytes())

    def stop(self) -> None:
        if self.processes.get("worker-isolated") is not None and self.processes["worker-isolated"].poll() is None:
            self.save_isolated_logs()
        for process in reversed(list(self.processes.values())):  # workers first, then the master
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        kill_marked(self.marker)


def _marked_processes(marker: str) -> Iterator[tuple[int, str]]:
    """(pid, command line) of every process whose environment carries MARKER=marker."""
    needle = f"{MARKER}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        yield int(entry.name), command


def kill_marked(marker: str, timeout: float = 30) -> None:
    """SIGKILL every process left that carries the marker, and wait until none is."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid, _ in _marked_processes(marker)]
        if not left:
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise ClusterFailed(f"cluster processes {left} did not end")
        time.sleep(0.1)


def start_process(command: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as handle:
        return subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=dict(env),
                                stdin=subprocess.DEVNULL, start_new_session=True)


def hidden_directories(base_temp: Path) -> list[str]:
    """What worker 2 gets an empty tmpfs over: /tmp, and the test run's base temporary directory
    when it is elsewhere (the workspaces of the tests live there)."""
    hidden = ["/tmp"]
    base = base_temp.resolve()
    if not base.is_relative_to("/tmp"):
        hidden.append(str(base))
    return hidden


def kept_directories(hidden: list[str], needed: list[str]) -> list[str]:
    """Of the directories worker 2 needs (`needed`: the interpreter, the virtualenv, the code on
    PYTHONPATH), those a hidden directory would cover — a checkout under /tmp, as CI may clone
    into — outermost only, sorted: they are mounted back over worker 2's empty tmpfs."""
    def under(path: str, top: str) -> bool:
        return path == top or path.startswith(top.rstrip("/") + "/")

    covered = sorted({os.path.realpath(p) for p in needed if any(under(os.path.realpath(p), h) for h in hidden)})
    return [p for p in covered if not any(p != other and under(p, other) for other in covered)]


def isolation_script(hidden: list[str], kept: list[str]) -> str:
    """The shell lines worker 2 starts with, in its own mount namespace: each kept directory is
    opened first (fd 3, 4, …), an empty tmpfs goes over every hidden directory, and each kept
    directory is mounted back from its open descriptor (`--no-canonicalize`: the path behind the
    descriptor, not the name, which now names the empty tmpfs)."""
    opens = [f"exec {3 + i}< {shlex.quote(path)}" for i, path in enumerate(kept)]
    mounts = [f"mount -t tmpfs -o mode=1777 tidekeep-isolated {shlex.quote(d)}" for d in hidden]
    back = [f"mkdir -p {shlex.quote(path)} && mount --no-canonicalize --bind /proc/self/fd/{3 + i} "
            f"{shlex.quote(path)} && exec {3 + i}<&-" for i, path in enumerate(kept)]
    return " && ".join([*opens, *mounts, *back, f"mkdir -p {ISOLATED_WORK_DIR}", 'exec "$@"'])


def start_cluster(log_dir: Path, base_temp: Path, env: Mapping[str, str],
                  isolated_env: Mapping[str, str] | None = None,
                  choose_port: Callable[[], int] = unused_port) -> StandaloneCluster:
    """Start the master and both workers and wait until both registered; ClusterFailed (with the
    ends of their logs) when one exits or they do not register in time. When a port of the
    master's was taken before it could bind it, the cluster starts again on others (BIND_ATTEMPTS
    in all). `env`: variables every cluster process (and so every executor) gets; `isolated_env`:
    more for worker 2 only."""
    for attempt in range(1, BIND_ATTEMPTS + 1):
        try:
            return _start_cluster_once(log_dir, base_temp, env, isolated_env, choose_port)
        except ClusterFailed:
            master_log = log_dir / "master.log"
            if attempt == BIND_ATTEMPTS or BIND_FAILED not in master_log.read_bytes():
                raise
    raise AssertionError("unreachable")


def _start_cluster_once(log_dir: Path, base_temp: Path, env: Mapping[str, str],
                        isolated_env: Mapping[str, str] | None,
                        choose_port: Callable[[], int]) -> StandaloneCluster:
    home = spark_home()
    log_dir.mkdir(parents=True, exist_ok=True)
    conf_dir = log_dir / "conf"  # empty: no spark-defaults.conf of the machine's is read
    conf_dir.mkdir(exist_ok=True)
    marker = uuid.uuid4().hex
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_") or k.startswith("TIDEKEEP_TEST_")}
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
        base_env.pop(name, None)
    base_env.update({"SPARK_HOME": str(home), "SPARK_CONF_DIR": str(conf_dir), "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                     "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1", MARKER: marker, **env})
    spark_class = str(home / "bin" / "spark-class")
    master_port, web_port = choose_port(), choose_port()
    while web_port == master_port:
        web_port = choose_port()
    cluster = StandaloneCluster(f"spark://{SHARED_HOST}:{master_port}", f"http://{SHARED_HOST}:{web_port}",
                                log_dir, marker, dict(env))
    try:
        master = [spark_class, MASTER_CLASS, "--host", SHARED_HOST, "--port", str(master_port),
                  "--webui-port", str(web_port)]
        cluster.processes["master"] = start_process(
            master,
            {**base_env, "SPARK_LOCAL_IP": SHARED_HOST, "SPARK_MASTER_OPTS": MASTER_FAILS_ON_A_TAKEN_PORT},
            log_dir / "master.log")
        worker = [spark_class, WORKER_CLASS, "--cores", "1", "--memory", WORKER_MEMORY, "--webui-port", "0"]
        shared_work = log_dir / "worker-shared-work"
        cluster.processes["worker-shared"] = start_process(
            [*worker, "--host", SHARED_HOST, "--work-dir", str(shared_work), cluster.master_url],
            {**base_env, "SPARK_LOCAL_IP": SHARED_HOST}, log_dir / "worker-shared.log")
        hidden = hidden_directories(base_temp)
        needed = [sys.prefix, sys.base_prefix, str(home), os.getcwd(),
                  *filter(None, base_env.get("PYTHONPATH", "").split(os.pathsep))]
        script = isolation_script(hidden, kept_directories(hidden, needed))
        cluster.processes["worker-isolated"] = start_process(
            ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "isolated-worker",
             *worker, "--host", ISOLATED_HOST, "--work-dir", ISOLATED_WORK_DIR, cluster.master_url],
            {**base_env, "SPARK_LOCAL_IP": ISOLATED_HOST, **(isolated_env or {})}, log_dir / "worker-isolated.log")
        cluster.wait_for_workers()
    except BaseException:
        cluster.stop()
        raise
    return cluster


# ---- the driver's side: its Spark configuration, and where its tasks ran -----------------------------


def event_log_conf(event_log_dir: Path) -> dict[str, str]:
    """Spark configuration for an event log in `event_log_dir`: one plain JSON file per application."""
    event_log_dir.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": event_log_dir.as_uri(),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


def driver_conf(cluster: StandaloneCluster, event_log_dir: Path) -> dict[str, str]:
    """Spark configuration of a driver on `cluster`: both executors registered before the first job
    (so a two-task job runs one task on each worker), on loopback, with an event log to tell which
    executor ran each task."""
    return {"spark.master": cluster.master_url, "spark.cores.max": "2", "spark.executor.cores": "1",
            "spark.executor.memory": "1g",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "120s",
            "spark.driver.host": SHARED_HOST, "spark.driver.bindAddress": SHARED_HOST,
            **event_log_conf(event_log_dir)}


def write_spark_defaults(conf_dir: Path, conf: Mapping[str, str]) -> Path:
    """A SPARK_CONF_DIR whose spark-defaults.conf holds `conf`, as a deployment configures its driver."""
    conf_dir.mkdir(parents=True, exist_ok=True)
    (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in conf.items()))
    return conf_dir


STEP_PROPERTY = "tidekeep.test.step"  # a Spark local property: the step of a driver script a job belongs to


def _events(event_log_dir: Path) -> Iterator[dict[str, Any]]:
    """The events of every event log file under `event_log_dir` (one JSON object a line)."""
    for log in sorted(path for path in event_log_dir.rglob("*") if path.is_file()):
        for line in log.read_text(errors="replace").splitlines():
            yield json.loads(line)


def task_hosts_by_step(event_log_dir: Path) -> dict[str, list[str]]:
    """From the driver's event log(s): for each step (the STEP_PROPERTY of the job), the hosts whose
    executors finished a task of it successfully, sorted."""
    stage_step: dict[int, str] = {}
    hosts: dict[str, set[str]] = {}
    for event in _events(event_log_dir):
        kind = event.get("Event")
        if kind == "SparkListenerJobStart":
            step = (event.get("Properties") or {}).get(STEP_PROPERTY)
            if step is not None:
                for stage in event.get("Stage IDs", []):
                    stage_step[int(stage)] = step
        elif kind == "SparkListenerTaskEnd" and _reason(event) == "Success":
            step = stage_step.get(int(event["Stage ID"]))
            if step is not None:
                hosts.setdefault(step, set()).add(str(event["Task Info"]["Host"]))
    return {step: sorted(found) for step, found in hosts.items()}


def _reason(task_end: dict[str, Any]) -> str:
    return str(task_end.get("Task End Reason", {}).get("Reason"))


def failed_tasks(event_log_dir: Path) -> list[dict[str, str]]:
    """The tasks of the event log(s) that did not succeed: host and reason."""
    return [{"host": str(event["Task Info"]["Host"]), "reason": _reason(event)} for event in _events(event_log_dir)
            if event.get("Event") == "SparkListenerTaskEnd" and _reason(event) != "Success"]
