"""The API's routers, one module per resource family; app.py mounts each under /api/v1."""

from __future__ import annotations

from fastapi import APIRouter

from . import streams, tokens

ROUTERS: list[APIRouter] = [streams.router, tokens.router]
