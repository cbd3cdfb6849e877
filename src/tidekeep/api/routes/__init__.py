"""The API's routers, one module per resource family; app.py mounts each under /api/v1."""

from __future__ import annotations

from fastapi import APIRouter

from . import (
    archives,
    audit,
    catalog,
    holds,
    jobs,
    readergroups,
    retention,
    simulate,
    streams,
    tokens,
    transactions,
    watermarks,
)

ROUTERS: list[APIRouter] = [
    streams.router,
    readergroups.router,
    retention.router,
    simulate.router,
    watermarks.router,
    transactions.router,
    holds.router,
    audit.router,
    jobs.router,
    catalog.router,
    archives.router,
    tokens.router,
]
