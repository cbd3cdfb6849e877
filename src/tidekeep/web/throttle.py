"""Failed logins slow down per client address: after `limit` failures within `window_ms` the
login form answers 429 without checking the token, until the oldest failure leaves the window.
Each check of a token costs an argon2id hash (64 MiB, api/auth.py), so an unthrottled form would
let anyone spend the server's CPU and memory (docs/dashboard.md, "Security")."""

from __future__ import annotations

import threading
from collections import OrderedDict, deque

from ..clock import Clock

FAILURES_ALLOWED = 10
WINDOW_MS = 5 * 60_000
ADDRESSES_KEPT = 10_000  # the least recently failing address is forgotten beyond this


class LoginThrottle:
    def __init__(self, clock: Clock, limit: int = FAILURES_ALLOWED, window_ms: int = WINDOW_MS) -> None:
        self.clock = clock
        self.limit = limit
        self.window_ms = window_ms
        self._failures: OrderedDict[str, deque[int]] = OrderedDict()
        self._lock = threading.Lock()

    def wait_ms(self, address: str) -> int:
        """0 when `address` may try a token now; otherwise how long until it may."""
        now = self.clock.now_ms()
        with self._lock:
            failures = self._recent(address, now)
            if len(failures) < self.limit:
                return 0
            return failures[0] + self.window_ms - now

    def failed(self, address: str) -> None:
        now = self.clock.now_ms()
        with self._lock:
            failures = self._recent(address, now)
            failures.append(now)
            self._failures[address] = failures
            self._failures.move_to_end(address)
            while len(self._failures) > ADDRESSES_KEPT:
                self._failures.popitem(last=False)

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._failures.pop(address, None)

    def _recent(self, address: str, now: int) -> deque[int]:
        failures = self._failures.get(address, deque())
        while failures and failures[0] <= now - self.window_ms:
            failures.popleft()
        return failures
