"""What an fsync made durable, recorded at the moment of the call: the path behind the descriptor
(/proc/self/fd) and, for a file, its size; for a directory, the names in it. Shared by the
in-process recorder (helpers/durability.py) and the executor recorder (sitecustomize.py)."""

from __future__ import annotations

import os
import stat
from typing import Any


def describe_fd(fd: int) -> dict[str, Any]:
    path = os.readlink(f"/proc/self/fd/{fd}")
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        return {"pid": os.getpid(), "path": path, "size": None, "names": sorted(os.listdir(path))}
    return {"pid": os.getpid(), "path": path, "size": info.st_size, "names": None}
