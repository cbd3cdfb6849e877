"""A figure that is costly to read (a sum over every catalog record) read at most once every
`max_age_ms` per server, as the API's /metrics reads its figures every `api.metrics_interval`
(api/metrics.py): however often the overview is opened, the store scans once per interval."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ..clock import Clock

T = TypeVar("T")


class Recent(Generic[T]):
    def __init__(self, read: Callable[[], T], clock: Clock, max_age_ms: int) -> None:
        self.read = read
        self.clock = clock
        self.max_age_ms = max_age_ms
        self._value: tuple[T, int] | None = None
        self._lock = threading.Lock()  # one read at a time: a second caller waits for the first's value

    def get(self) -> tuple[T, int]:
        """The value and when it was read (ms): read now if none is younger than `max_age_ms`."""
        with self._lock:
            now = self.clock.now_ms()
            if self._value is None or now - self._value[1] >= self.max_age_ms:
                self._value = (self.read(), now)
            return self._value


__all__ = ["Recent"]
