"""Dashboard sessions on the injectable clock: idle and absolute expiry, the bound on their number,
logout, and the CSRF comparison (web/sessions.py)."""

from __future__ import annotations

import pytest

import tidekeep as tk
from tidekeep.web import sessions
from tidekeep.web.sessions import IDLE_MS, LIFETIME_MS, SessionStore
from tidekeep.web.throttle import LoginThrottle


def test_a_session_ends_after_its_idle_time_and_its_lifetime() -> None:
    clock = tk.ManualClock(1_000_000)
    store = SessionStore(clock)
    session_id, session = store.open(7)
    assert store.find(session_id) is session and session.token_id == 7
    clock.advance(IDLE_MS)
    assert store.find(session_id) is session  # used exactly at the limit: still live, and refreshed
    while clock.now_ms() + IDLE_MS - 1 - session.created_ms <= LIFETIME_MS:
        clock.advance(IDLE_MS - 1)  # used just in time, again and again
        assert store.find(session_id) is session
    clock.advance(IDLE_MS - 1)
    assert store.find(session_id) is None  # past the lifetime however busy
    assert len(store) == 0
    other_id, _ = store.open(8)
    clock.advance(IDLE_MS + 1)
    assert store.find(other_id) is None


def test_ids_are_random_and_unknown_or_closed_ids_find_nothing() -> None:
    store = SessionStore(tk.ManualClock(0))
    first, a = store.open(1)
    second, b = store.open(1)
    assert first != second and a.csrf != b.csrf and len(first) >= 40
    assert store.find(None) is None and store.find("") is None and store.find(first + "x") is None
    store.close(first)
    assert store.find(first) is None and store.find(second) is b


def test_the_oldest_session_goes_beyond_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "MAX_SESSIONS", 3)
    store = SessionStore(tk.ManualClock(0))
    opened = [store.open(i)[0] for i in range(3)]
    store.find(opened[0])  # used: no longer the oldest
    store.open(3)
    assert len(store) == 3
    assert store.find(opened[1]) is None and store.find(opened[0]) is not None


def test_csrf_matches_only_the_session_token() -> None:
    _, session = SessionStore(tk.ManualClock(0)).open(None)
    assert session.csrf_matches(session.csrf)
    assert not session.csrf_matches(None) and not session.csrf_matches("") and not session.csrf_matches(
        session.csrf[:-1])


def test_failed_logins_are_throttled_per_address_within_the_window() -> None:
    clock = tk.ManualClock(0)
    throttle = LoginThrottle(clock, limit=3, window_ms=60_000)
    for _ in range(3):
        assert throttle.wait_ms("10.0.0.1") == 0
        throttle.failed("10.0.0.1")
        clock.advance(1_000)
    assert throttle.wait_ms("10.0.0.1") == 60_000 - 3_000  # until the first failure leaves the window
    assert throttle.wait_ms("10.0.0.2") == 0  # another address is not held back
    clock.advance(57_000)
    assert throttle.wait_ms("10.0.0.1") == 0
    throttle.failed("10.0.0.1")
    assert throttle.wait_ms("10.0.0.1") == 1_000  # the second failure still counts
    throttle.succeeded("10.0.0.1")
    assert throttle.wait_ms("10.0.0.1") == 0  # a good token clears the address
