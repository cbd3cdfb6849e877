"""Named fault points for crash tests.

`TIDEKEEP_FAULT=name` (comma-separated for several) makes the process die with exit code 77 the
moment it reaches `fault_point(name)`, as a kill -9 would: no cleanup, no flush, no atexit.
"""

from __future__ import annotations

import os

FAULT_EXIT_CODE = 77
GATE_LIMIT_S = 600  # a gate a test forgot to open never hangs a process for good


def fault_point(name: str) -> None:
    armed = os.environ.get("TIDEKEEP_FAULT")
    if armed and name in armed.split(","):
        os._exit(FAULT_EXIT_CODE)


def fault_error(name: str, error: type[Exception], message: str) -> None:
    """`TIDEKEEP_FAULT_RAISE=name` makes the process raise `error` at this point instead of dying,
    e.g. to lose the acknowledgement of a commit that did land."""
    armed = os.environ.get("TIDEKEEP_FAULT_RAISE")
    if armed and name in armed.split(","):
        raise error(f"{message} (fault point {name})")


def pause_point(name: str) -> None:
    """`TIDEKEEP_PAUSE=name=ms` (comma-separated for several) makes the process sleep `ms` at this
    point, e.g. to keep a search running long enough for a test to cancel it midway.
    `TIDEKEEP_PAUSE=name=@/path/to/gate` makes it wait here while that file exists (at most ten
    minutes): the test removes the file once it has done what must happen during the pause, so the
    outcome never depends on how fast the machine is. While it waits, `<gate>.reached` exists, so
    the test knows the process is at the point; it has one line per arrival (threads too)."""
    armed = os.environ.get("TIDEKEEP_PAUSE")
    if not armed:
        return
    import time

    for item in armed.split(","):
        point, _, value = item.partition("=")
        if point != name:
            continue
        if value.isdigit():
            time.sleep(int(value) / 1000)
        elif value.startswith("@"):
            gate = value[1:]
            with open(gate + ".reached", "a") as reached:  # one line per arrival: a test can count them
                reached.write(f"{os.getpid()}\n")
            deadline = time.monotonic() + GATE_LIMIT_S
            while os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.01)


def fault_active(name: str) -> bool:
    """Whether `TIDEKEEP_FAULT` names `name`, for a seam that misbehaves on purpose instead of
    dying: e.g. `sink.private_storage` makes a Spark sink task write its chunk files into a
    directory private to its worker, as a worker isolated from the driver's disk would."""
    armed = os.environ.get("TIDEKEEP_FAULT")
    return bool(armed and name in armed.split(","))
