"""Injectable clocks. All time inside tidekeep is integer milliseconds since the epoch, UTC."""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock tests move by hand; thread-safe so background threads see a consistent time."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a clock never goes backwards")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, ms: int) -> None:
        with self._lock:
            if ms < self._now:
                raise ValueError("a clock never goes backwards")
            self._now = ms


SYSTEM_CLOCK = SystemClock()
