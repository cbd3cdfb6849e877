"""Metadata table: the HTTP API's tokens (migration 0014).

One row per token ever created. Only a slow hash of the token's secret is kept (store/tokens.py:
argon2id); the secret itself is shown once, when the token is created. A revoked token keeps its
row (`revoked_ms` set), so its name stays taken and `token list` shows when it stopped working.
"""

from __future__ import annotations

import sqlalchemy as sa

from .schema import metadata

api_tokens = sa.Table(
    "api_tokens",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(255), nullable=False, unique=True),
    sa.Column("role", sa.String(16), nullable=False),  # viewer | operator | legal | admin
    sa.Column("scope", sa.String(255), nullable=True),  # NULL: every scope
    sa.Column("secret_hash", sa.String(255), nullable=False),  # argon2id, PHC string
    sa.Column("created_ms", sa.BigInteger, nullable=False),
    sa.Column("created_by", sa.String(255), nullable=False),
    sa.Column("revoked_ms", sa.BigInteger, nullable=True),
)
