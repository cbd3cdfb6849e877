"""CPU seconds of a set of processes on this machine, from /proc/<pid>/stat (Linux only).

A process tree's CPU, including members that exited and were reaped by a live member, is the sum
over its live members of utime + stime + cutime + cstime: a parent's cutime/cstime accumulate each
waited-for child's own time and its children's. Figures are in clock ticks (usually 1/100 s), so
steps shorter than a second or so carry a visible rounding error. A process that is not waited for
by a member (reparented to init) is lost; a member that exits between two snapshots without being
reaped still shows its own time as a zombie.

Self-check by hand (burns CPU in a child and checks it is counted, while alive and after it exits):

    .venv/bin/python benchmarks/proc_cpu.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    pid: int
    ppid: int
    comm: str
    utime: int
    stime: int
    cutime: int
    cstime: int

    @property
    def own_ticks(self) -> int:
        return self.utime + self.stime

    @property
    def reaped_children_ticks(self) -> int:
        return self.cutime + self.cstime


def parse_stat(pid: int, text: str) -> ProcStat:
    # comm is in parentheses and may itself contain spaces and parentheses: split at the LAST ')'
    comm = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    # fields[0] is field 3 of proc(5) (state): ppid is field 4, utime..cstime fields 14..17
    return ProcStat(pid, int(fields[1]), comm, int(fields[11]), int(fields[12]), int(fields[13]), int(fields[14]))


def read_stat(pid: int) -> ProcStat | None:
    """The process's stat, or None when it has gone (or cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return parse_stat(pid, f.read())
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def read_cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def process_table() -> dict[int, ProcStat]:
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = read_stat(int(name))
            if stat is not None:
                table[stat.pid] = stat
    return table


def descendants(root: int, table: dict[int, ProcStat]) -> list[int]:
    """Every live process below root (not root itself)."""
    children: dict[int, list[int]] = {}
    for stat in table.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def tree_ticks(pids: Iterable[int], table: dict[int, ProcStat]) -> int:
    """Own and reaped-children ticks of the given live processes."""
    return sum(table[p].own_ticks + table[p].reaped_children_ticks for p in pids if p in table)


def tree_cpu_seconds(root: int) -> float | None:
    """CPU seconds of root and all its descendants, alive or reaped; None when root cannot be read."""
    table = process_table()
    if root not in table:
        return None
    return tree_ticks([root, *descendants(root, table)], table) / TICKS_PER_SECOND


def postmaster_of(backend_pid: int) -> int | None:
    """The PostgreSQL server process (the postmaster) that forked this backend, if visible here.

    None when the backend's /proc entry is not on this machine (a remote server, another PID
    namespace) or its parent does not look like PostgreSQL."""
    backend = read_stat(backend_pid)
    if backend is None:
        return None
    parent = read_stat(backend.ppid)
    if parent is None or "postgres" not in (parent.comm + " " + read_cmdline(parent.pid)).lower():
        return None
    return parent.pid


SPARK_PYTHON_WORKER_MARKERS = ("pyspark.daemon", "pyspark/worker", "pyspark.worker")


def spark_python_cpu_seconds(driver_pid: int) -> float | None:
    """CPU seconds of the local Spark JVM's Python workers, alive or exited.

    The JVM is the `java` descendant of the driver process; its Python daemon and workers are the
    JVM's descendants whose command line names pyspark's daemon or worker. Workers forked by the
    daemon and exited are in the daemon's cutime; a daemon that exited is in the JVM's cutime (the
    JVM's own time is not counted). None when no Spark JVM runs below the driver (e.g. a cluster
    master: the workers are elsewhere)."""
    table = process_table()
    jvms = [p for p in descendants(driver_pid, table) if table[p].comm == "java"]
    if not jvms:
        return None
    ticks = 0
    for jvm in jvms:
        ticks += table[jvm].reaped_children_ticks
        workers = [p for p in descendants(jvm, table)
                   if any(m in read_cmdline(p) for m in SPARK_PYTHON_WORKER_MARKERS)]
        ticks += tree_ticks(workers, table)
    return ticks / TICKS_PER_SECOND


class CpuMeter:
    """Before/after CPU seconds of one source; the difference is the step's CPU, None if unavailable."""

    def __init__(self, read: Callable[[], float | None]) -> None:
        self.read = read
        self.started: float | None = None

    def start(self) -> None:
        self.started = self.read()

    def stop(self) -> float | None:
        ended = self.read()
        if self.started is None or ended is None:
            return None
        return ended - self.started


def self_check() -> None:
    """Burn ~1 s of CPU in a child of a child: counted while alive, and after exiting (via cutime)."""
    burn = "import time\nend = time.process_time() + 1.0\nwhile time.process_time() < end: pass\n"
    # an intermediate parent that waits, so the burner's time ends in a live member's cutime
    parent_code = f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', {burn!r}])\ntime.sleep(30)\n"
    before = tree_cpu_seconds(os.getpid())
    assert before is not None
    parent = subprocess.Popen([sys.executable, "-c", parent_code])
    try:
        time.sleep(0.5)
        table = process_table()
        live = descendants(os.getpid(), table)
        print(f"live descendants while burning: {len(live)} (expect 2)")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until the burner has exited and been reaped
            table = process_table()
            if len(descendants(os.getpid(), table)) == 1 and table[parent.pid].reaped_children_ticks > 0:
                break
            time.sleep(0.1)
        after = tree_cpu_seconds(os.getpid())
        assert after is not None
        used = after - before
        print(f"tree CPU over the burn: {used:.2f} s (expect ~1.0 plus interpreter start-ups)")
        assert 0.95 <= used <= 2.0, used
    finally:
        parent.kill()
        parent.wait()
    # once the intermediate parent is reaped by us its time is in our cutime: still counted
    final = tree_cpu_seconds(os.getpid())
    assert final is not None
    assert final - before >= 0.95, final - before
    print(f"after the parent was reaped too: {final - before:.2f} s")
    meter = CpuMeter(lambda: tree_cpu_seconds(os.getpid()))
    meter.start()
    end = time.process_time() + 0.5
    while time.process_time() < end:
        pass
    step = meter.stop()
    print(f"CpuMeter over 0.5 s of burning in this process: {step:.2f} s")
    assert step is not None and 0.45 <= step <= 0.7, step
    parsed = parse_stat(1, "1 (a (b) c) S 0 1 1 0 -1 0 0 0 0 0 7 3 2 1 20 0 1 0 5 0 0")
    assert parsed.comm == "a (b) c" and (parsed.utime, parsed.stime, parsed.cutime, parsed.cstime) == (7, 3, 2, 1)
    print("self-check passed")


if __name__ == "__main__":
    self_check()
