"""Dashboard sessions: a token typed once at the login form becomes a random session id in an
HttpOnly, SameSite=Strict cookie, so the token itself never lives in the browser (docs/dashboard.md).

Sessions are kept in the server's memory (a restart logs everyone out) and remember only the token's
id: every request reads the token's row again (api/auth.py), so revoking a token ends its sessions
at once. Each session carries its own CSRF token, which every form and htmx request sends back."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..clock import Clock

SESSION_COOKIE = "tidekeep_session"
IDLE_MS = 8 * 3_600_000  # a session unused this long is over
LIFETIME_MS = 24 * 3_600_000  # and every session ends this long after the login
MAX_SESSIONS = 10_000  # the oldest is dropped beyond this


@dataclass
class Session:
    token_id: int | None  # None: the anonymous administrator (authentication off)
    csrf: str
    created_ms: int
    seen_ms: int

    def csrf_matches(self, offered: str | None) -> bool:
        return offered is not None and hmac.compare_digest(offered.encode(), self.csrf.encode())


def _key(session_id: str) -> bytes:
    # the map holds digests, never the ids a browser presents
    return hashlib.sha256(session_id.encode()).digest()


class SessionStore:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._sessions: OrderedDict[bytes, Session] = OrderedDict()
        self._lock = threading.Lock()

    def open(self, token_id: int | None) -> tuple[str, Session]:
        """A new session; returns the id for the cookie and the session."""
        session_id = secrets.token_urlsafe(32)
        now = self.clock.now_ms()
        session = Session(token_id, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._sessions[_key(session_id)] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session_id, session

    def find(self, session_id: str | None) -> Session | None:
        """The live session of a cookie's id, its last use now; None when unknown or expired."""
        if not session_id:
            return None
        key = _key(session_id)
        now = self.clock.now_ms()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if now - session.seen_ms > IDLE_MS or now - session.created_ms > LIFETIME_MS:
                del self._sessions[key]
                return None
            session.seen_ms = now
            self._sessions.move_to_end(key)
            return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._sessions.pop(_key(session_id), None)

    def __len__(self) -> int:
        return len(self._sessions)
