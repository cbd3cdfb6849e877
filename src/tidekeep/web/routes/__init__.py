"""The dashboard's routers, one per area (docs/dashboard.md)."""

from fastapi import APIRouter

from .archives import router as archives
from .audit import router as audit
from .catalog import router as catalog
from .catalog_records import router as catalog_records
from .catalog_runs import router as catalog_runs
from .holds import router as holds
from .overview import router as overview
from .readergroups import router as readergroups
from .session import router as session
from .streams import router as streams

WEB_ROUTERS: list[APIRouter] = [session, overview, streams, readergroups, catalog, catalog_records, catalog_runs,
                                archives, holds, audit]
