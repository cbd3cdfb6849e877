"""A figure that is costly to read (a sum over every catalog record) read at most once every
`max_age_ms` per server, as the API's /metrics reads its figures every `api.metrics_interval`
(api/metrics.py): however often the overview is opened, the store scans once per interval.

Only the first read makes a request wait. Once a value exists, a request that finds it older than
`max_age_ms` gets it at once (with the time it was read, which the page shows) and starts one
refresh in the background, so no overview pays the scan (docs/benchmarks.md, "Dashboard at scale")."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from ..clock import Clock

T = TypeVar("T")
log = logging.getLogger("tidekeep.web")


class Recent(Generic[T]):
    def __init__(self, read: Callable[[], T], clock: Clock, max_age_ms: int) -> None:
        self.read = read
        self.clock = clock
        self.max_age_ms = max_age_ms
        self._value: tuple[T, int] | None = None
        self._lock = threading.Lock()  # guards _value and _refresh
        self._first = threading.Lock()  # one first read at a time: a second caller waits for its value
        self._refresh: threading.Thread | None = None

    def get(self) -> tuple[T, int]:
        """The value and when it was read (ms); the first call reads it, later ones never wait."""
        with self._lock:
            value = self._value
            if value is not None:
                if self.clock.now_ms() - value[1] >= self.max_age_ms and self._refresh is None:
                    self._refresh = threading.Thread(target=self._read_again, name="recent-figures", daemon=True)
                    self._refresh.start()
                return value
        with self._first:
            if self._value is None:
                read_ms = self.clock.now_ms()
                self._value = (self.read(), read_ms)
            return self._value

    def wait_for_refresh(self, timeout: float = 60) -> None:
        """Until the background refresh a stale `get` started is over (for tests and shutdown)."""
        refresh = self._refresh
        if refresh is not None:
            refresh.join(timeout)

    def _read_again(self) -> None:
        try:
            read_ms = self.clock.now_ms()
            value = self.read()
            with self._lock:
                self._value = (value, read_ms)
        except Exception:  # the store was unreachable: the old value stays, the next request tries again
            log.warning("could not read the overview's figures again", exc_info=True)
        finally:
            with self._lock:
                self._refresh = None


__all__ = ["Recent"]
