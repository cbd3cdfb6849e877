"""Rendering the dashboard's pages: Jinja2 templates from the package, autoescaped, with the
filters the pages share (sizes, times, durations) and what every page needs (the viewer, the CSRF
token, the current area for the navigation)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from ..units import format_duration, human_size, iso_utc
from .auth import CSRF_FIELD, CSRF_HEADER, Viewer

AREAS = (("overview", "Overview", "/"), ("streams", "Streams", "/streams"),
         ("readergroups", "Reader groups", "/readergroups"), ("catalog", "Catalog", "/catalog"),
         ("archives", "Archives", "/archives"), ("holds", "Holds", "/holds"), ("audit", "Audit", "/audit"))


def _time(ms: int | None) -> str:
    return "—" if ms is None else iso_utc(ms).replace("T", " ").replace(".000Z", "Z")


def _size(n: int | None) -> str:
    return "—" if n is None else human_size(n)


def _duration(ms: int | None) -> str:
    """An exact duration as settings show it ("30m"); a measured one (a lag, an age) in its two
    largest units ("1m 31s", "2d 3h"), which people read at a glance."""
    if ms is None:
        return "—"
    exact = format_duration(ms)
    if not exact.endswith("ms") or ms < 1000:
        return exact
    parts: list[str] = []
    rest = ms
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if rest >= size or parts:
            parts.append(f"{rest // size}{unit}")
            rest %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def _json_attribute(value: Any) -> Markup:
    """Data for a chart, as the value of a data- attribute (autoescaping turns quotes into entities)."""
    return Markup.escape(json.dumps(value, separators=(",", ":")))


environment = Environment(loader=PackageLoader("tidekeep.web", "templates"),
                          autoescape=select_autoescape(default=True, default_for_string=True),
                          undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
environment.filters.update(time=_time, size=_size, duration=_duration, json_attr=_json_attribute)
environment.globals.update(AREAS=AREAS, CSRF_FIELD=CSRF_FIELD, CSRF_HEADER=CSRF_HEADER)


def render(request: Request, template: str, viewer: Viewer | None, status_code: int = 200,
           area: str | None = None, **context: Any) -> HTMLResponse:
    """A page (or an htmx fragment: templates under `fragments/` have no layout)."""
    html = environment.get_template(template).render(
        request=request, viewer=viewer, area=area, csrf=viewer.session.csrf if viewer else "",
        htmx=request.headers.get("hx-request") == "true", **context)
    return HTMLResponse(html, status_code=status_code)
