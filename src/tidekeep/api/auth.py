"""Who is calling, and what they may do: tokens, roles and scopes (docs/security.md).

Every request but the health check and the OpenAPI documents carries `Authorization: Bearer
<token>`. A token is checked with argon2id once per process; afterwards a SHA-256 digest of its
text finds it in a bounded in-memory map, and each request still reads its row (one primary-key
read), so a revoked token stops working at once. With `api.auth` false (allowed on a loopback
address only, api/server.py) every caller is the administrator "anonymous"."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass

from ..errors import NotAuthenticated, PermissionDenied
from ..names import split_stream_name
from ..store.tokens import Role, TokenStore, parse_token

ANONYMOUS = "anonymous"
_VERIFIED_KEPT = 1024  # tokens verified by argon2 whose digest is remembered


@dataclass(frozen=True)
class Principal:
    """The caller: its token's name (the audit actor), role and scope (None: every scope)."""

    name: str
    role: Role
    scope: str | None = None

    def require(self, needed: Role) -> None:
        if not self.role.may(needed):
            raise PermissionDenied(f"token {self.name!r} has role {self.role.value}; this needs {needed.value}"
                                   + ("" if needed is Role.ADMIN else " or admin"))

    def sees_scope(self, scope: str) -> bool:
        return self.scope is None or self.scope == scope

    def require_scope(self, scope: str) -> None:
        if not self.sees_scope(scope):
            raise PermissionDenied(f"token {self.name!r} is limited to scope {self.scope!r}, not {scope!r}")

    def require_stream(self, stream: str) -> None:
        """PermissionDenied unless the stream ("scope/name") lies in the token's scope."""
        if self.scope is not None:
            self.require_scope(split_stream_name(stream)[0])

    def require_unscoped(self, what: str) -> None:
        """For what belongs to no scope (catalog, archives, tokens, workspace-wide lists)."""
        if self.scope is not None:
            raise PermissionDenied(f"token {self.name!r} is limited to scope {self.scope!r}: {what} "
                                   "needs a token without a scope")


ANONYMOUS_ADMIN = Principal(ANONYMOUS, Role.ADMIN)


class Authenticator:
    """Turns an Authorization header into a Principal, or raises NotAuthenticated."""

    def __init__(self, tokens: TokenStore | None) -> None:
        self.tokens = tokens  # None: authentication is off
        self._verified: OrderedDict[bytes, int] = OrderedDict()  # digest of a token text -> its id
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.tokens is not None

    def principal(self, authorization: str | None) -> Principal:
        if self.tokens is None:
            return ANONYMOUS_ADMIN
        if not authorization:
            raise NotAuthenticated("no token: send 'Authorization: Bearer <token>' "
                                   "(create one with 'tidekeep token create')")
        kind, _, text = authorization.strip().partition(" ")
        if kind.lower() != "bearer" or not text.strip():
            raise NotAuthenticated("expected 'Authorization: Bearer <token>'")
        text = text.strip()
        digest = hashlib.sha256(text.encode()).digest()
        with self._lock:
            token_id = self._verified.get(digest)
            if token_id is not None:
                self._verified.move_to_end(digest)
        if token_id is None:
            info = self.tokens.verify(text)
            with self._lock:
                self._verified[digest] = info.id
                while len(self._verified) > _VERIFIED_KEPT:
                    self._verified.popitem(last=False)
        else:
            if parse_token(text)[0] != token_id:  # a digest collision would be needed; refuse anyway
                raise NotAuthenticated("invalid token")
            found = self.tokens.lookup(token_id)
            if found is None or found.revoked_ms is not None:
                with self._lock:
                    self._verified.pop(digest, None)
                raise NotAuthenticated("invalid token")
            info = found
        return Principal(info.name, info.role, info.scope)

    def principal_of_token(self, token_id: int | None) -> Principal:
        """The principal of a token known by id (a dashboard session's): its row is read again, so a
        revoked token stops working at once. None stands for the anonymous caller when
        authentication is off."""
        if self.tokens is None:
            return ANONYMOUS_ADMIN
        found = None if token_id is None else self.tokens.lookup(token_id)
        if found is None or found.revoked_ms is not None:
            raise NotAuthenticated("the session's token was revoked; log in again")
        return Principal(found.name, found.role, found.scope)
