"""The dashboard's routers, one per area (docs/dashboard.md)."""

from fastapi import APIRouter

from .overview import router as overview
from .session import router as session

WEB_ROUTERS: list[APIRouter] = [session, overview]
