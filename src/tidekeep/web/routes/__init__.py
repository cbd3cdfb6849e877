"""The dashboard's routers, one per area (docs/dashboard.md)."""

from fastapi import APIRouter

from .catalog import router as catalog
from .catalog_records import router as catalog_records
from .catalog_runs import router as catalog_runs
from .overview import router as overview
from .session import router as session
from .streams import router as streams

WEB_ROUTERS: list[APIRouter] = [session, overview, streams, catalog, catalog_records, catalog_runs]
