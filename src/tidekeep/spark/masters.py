"""Which Spark masters run their executors on the driver's machine (a pure decision).

Local masters are `local`, `local[N]`, `local[*]`, `local[N,F]`, `local[*,F]` and
`local-cluster[...]` (Spark's test cluster: executor processes on this machine, so they share its
disk). Everything else — `spark://`, `yarn`, `k8s://`, `mesos://`, a Spark Connect `sc://` URL —
may run executors elsewhere. Both the file-reach check (cluster.py) and the password reference
(credentials.py) ask this question, so it lives apart from both.
"""

from __future__ import annotations

import re

_LOCAL_MASTER = re.compile(r"local(\[[^\[\]]*\])?|local-cluster\[[^\[\]]*\]")


def is_local_master(master: str) -> bool:
    """True for the masters whose executors run on the driver's machine (see the module docstring)."""
    return _LOCAL_MASTER.fullmatch(master) is not None


__all__ = ["is_local_master"]
