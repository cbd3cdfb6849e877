"""The HTTP API's tokens: created, listed, revoked and verified here; only a slow hash is kept.

A token reads `tk_<id>_<secret>`: the id finds the one row to check, so verifying costs one
argon2id verification, never one per token. The secret is 32 random bytes (URL-safe base64) and
is returned once, by `create`; the row keeps its argon2id hash (argon2-cffi's defaults, RFC 9106's
second recommended parameter set). Each create and revoke is audited in its transaction
(actions "token_create", "token_revoke", target "token:<name>"). docs/security.md says why.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..errors import AlreadyExists, InvalidInput, NotAuthenticated, NotFound
from ..names import check_name
from .audit import AuditEntry, AuditLog
from .database import Database
from .schema_tokens import api_tokens

TOKEN_PREFIX = "tk_"
_TOKEN_SHAPE = re.compile(r"tk_([1-9][0-9]{0,18})_([A-Za-z0-9_-]{43})")


class Role(StrEnum):
    """What a token may do. Each role may do what `viewer` may (read); `admin` may do everything."""

    VIEWER = "viewer"  # reads
    OPERATOR = "operator"  # writes data, truncates, runs retention, starts jobs
    LEGAL = "legal"  # adds and removes legal holds
    ADMIN = "admin"  # edits catalog rules, manages tokens; and all of the above

    @classmethod
    def parse(cls, text: object) -> Role:
        try:
            return cls(str(text))
        except ValueError:
            raise InvalidInput(f"unknown role {text!r}: expected one of "
                               f"{', '.join(r.value for r in cls)}") from None

    def may(self, needed: Role) -> bool:
        return needed is Role.VIEWER or self is needed or self is Role.ADMIN


@dataclass(frozen=True)
class TokenInfo:
    """A token as listed: never its secret nor its hash."""

    id: int
    name: str
    role: Role
    scope: str | None  # None: every scope
    created_ms: int
    created_by: str
    revoked_ms: int | None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "role": self.role.value}


def _info(row: Any) -> TokenInfo:
    return TokenInfo(row.id, row.name, Role(row.role), row.scope, row.created_ms, row.created_by, row.revoked_ms)


class TokenStore:
    """The tokens of one workspace's API."""

    # one hasher, thread-safe; argon2-cffi's defaults: argon2id, 64 MiB, 3 passes, 4 lanes
    _hasher = PasswordHasher()

    def __init__(self, db: Database, audit: AuditLog) -> None:
        self.db = db
        self.audit = audit

    def create(self, name: str, role: Role | str, scope: str | None = None) -> tuple[TokenInfo, str]:
        """A new token; returns it and its text, which is not kept anywhere and cannot be shown again."""
        check_name(name, "token name")
        role = Role.parse(role) if not isinstance(role, Role) else role
        if scope is not None:
            check_name(scope, "scope name")
        secret = secrets.token_urlsafe(32)
        secret_hash = self._hasher.hash(secret)  # before the transaction: slow on purpose
        now = self.audit.clock.now_ms()
        try:
            with self.db.write() as conn:
                if conn.execute(sa.select(api_tokens.c.id).where(api_tokens.c.name == name)).first() is not None:
                    raise AlreadyExists(f"token {name!r} already exists")
                inserted = conn.execute(sa.insert(api_tokens).values(
                    name=name, role=role.value, scope=scope, secret_hash=secret_hash, created_ms=now,
                    created_by=self.audit.actor, revoked_ms=None)).inserted_primary_key
                assert inserted is not None
                token_id = int(inserted[0])
                self.audit.append(conn, AuditEntry(
                    "token_create", f"token:{name}", f"token {name!r} created with role {role.value}"
                    + (f" limited to scope {scope}" if scope else ""),
                    details={"role": role.value, "scope": scope}, time_ms=now))
        except sa.exc.IntegrityError:
            raise AlreadyExists(f"token {name!r} already exists") from None
        info = TokenInfo(token_id, name, role, scope, now, self.audit.actor, None)
        return info, f"{TOKEN_PREFIX}{token_id}_{secret}"

    def list(self, include_revoked: bool = False) -> list[TokenInfo]:
        with self.db.read() as conn:
            query = sa.select(api_tokens).order_by(api_tokens.c.id)
            if not include_revoked:
                query = query.where(api_tokens.c.revoked_ms.is_(None))
            return [_info(r) for r in conn.execute(query)]

    def get(self, name: str) -> TokenInfo:
        with self.db.read() as conn:
            row = conn.execute(sa.select(api_tokens).where(api_tokens.c.name == name)).one_or_none()
        if row is None:
            raise NotFound(f"token {name!r} does not exist")
        return _info(row)

    def revoke(self, name: str) -> TokenInfo:
        """Revoke the token: every later request with it is refused. Idempotent; NotFound if unknown."""
        now = self.audit.clock.now_ms()
        with self.db.write() as conn:
            row = conn.execute(sa.select(api_tokens).where(api_tokens.c.name == name).with_for_update()).one_or_none()
            if row is None:
                raise NotFound(f"token {name!r} does not exist")
            if row.revoked_ms is not None:
                return _info(row)
            conn.execute(sa.update(api_tokens).where(api_tokens.c.id == row.id).values(revoked_ms=now))
            self.audit.append(conn, AuditEntry("token_revoke", f"token:{name}", f"token {name!r} revoked",
                                               time_ms=now))
            return TokenInfo(row.id, row.name, Role(row.role), row.scope, row.created_ms, row.created_by, now)

    def lookup(self, token_id: int) -> TokenInfo | None:
        """The row of a token id, revoked or not; None when there is none. Cheap: one primary-key read."""
        with self.db.read() as conn:
            row = conn.execute(sa.select(api_tokens).where(api_tokens.c.id == token_id)).one_or_none()
        return None if row is None else _info(row)

    def secret_hash(self, token_id: int) -> str | None:
        with self.db.read() as conn:
            return conn.execute(sa.select(api_tokens.c.secret_hash).where(api_tokens.c.id == token_id)).scalar()

    def verify(self, text: str) -> TokenInfo:
        """The live token `text` is; NotAuthenticated (never saying which part was wrong) otherwise."""
        token_id, secret = parse_token(text)
        secret_hash = self.secret_hash(token_id)
        if secret_hash is None:
            raise NotAuthenticated("invalid token")
        try:
            self._hasher.verify(secret_hash, secret)
        except (VerificationError, InvalidHashError):
            raise NotAuthenticated("invalid token") from None
        info = self.lookup(token_id)
        if info is None or info.revoked_ms is not None:
            raise NotAuthenticated("invalid token")
        return info


def parse_token(text: str) -> tuple[int, str]:
    """The id and the secret of a well-formed token text; NotAuthenticated for anything else."""
    match = _TOKEN_SHAPE.fullmatch(text)
    if match is None:
        raise NotAuthenticated("invalid token: expected 'tk_<id>_<secret>' as 'tidekeep token create' printed it")
    return int(match.group(1)), match.group(2)


__all__ = ["TOKEN_PREFIX", "Role", "TokenInfo", "TokenStore", "parse_token"]
