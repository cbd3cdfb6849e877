"""Small shared thread pools for the stream data paths (a batch's chunk files written in parallel,
chunk files read ahead), made on first use.

A forked child has none of its parent's threads: a pool inherited through fork would take work
and never run it. So the pools are forgotten in the child at fork (`os.register_at_fork`), and
the child makes its own on first use.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

_pools: dict[str, ThreadPoolExecutor] = {}
_lock = threading.Lock()


def shared_pool(name: str, workers: int) -> ThreadPoolExecutor:
    """The process's pool called `name` (its threads are named tidekeep-<name>)."""
    with _lock:
        pool = _pools.get(name)
        if pool is None:
            pool = _pools[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"tidekeep-{name}")
        return pool


def _forget_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # another thread may have held it at the fork
    _pools.clear()


os.register_at_fork(after_in_child=_forget_in_child)

__all__ = ["shared_pool"]
