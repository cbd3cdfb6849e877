"""Metadata tables: retention (issue 4)."""

from __future__ import annotations

import sqlalchemy as sa  # noqa: F401 - used once the tables are defined

from .schema import metadata  # noqa: F401
