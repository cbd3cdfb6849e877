"""The catalog's runs (retention job and purge, dry runs too), newest first and keyset-paged on the
run id as the API's runs list is, and one run with its report: the periods it processed with their
trackers, and rows and bytes per rule (catalog/runs.py, catalog/job.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from ...api.paging import decode_id_cursor, encode_cursor
from ...api.routes.catalog import RunId
from ..auth import UNSCOPED_PAGES, Look, Viewer
from ..render import render

router = APIRouter(dependencies=UNSCOPED_PAGES)

PAGE_SIZE = 50


def rule_names(report: Mapping[str, Any]) -> dict[str, str]:
    """Rule number (as the report's keys spell it) → name, from the periods' actions."""
    return {str(a["rule"]): a["name"] for p in report.get("periods", ()) for a in p.get("actions", ())}


def by_rule_chart(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """A chart spec (static/app.js) of the records a retention run deleted per rule; None if none."""
    by_rule = report.get("by_rule") or {}
    if not by_rule:
        return None
    names = rule_names(report)
    return {"type": "bar", "labels": [f"{n} {names.get(n, '')}".strip() for n in by_rule], "xTitle": "rule",
            "yTitle": "records", "datasets": [{"label": "Records", "data": [c["rows"] for c in by_rule.values()]}]}


@router.get("/catalog/runs", response_class=HTMLResponse)
def runs_page(request: Request, viewer: Viewer = Look,
              cursor: Annotated[str | None, Query(max_length=64)] = None) -> Response:
    found = viewer.client.catalog.runs(PAGE_SIZE + 1, decode_id_cursor(cursor or None))
    shown = [dict(r) for r in found[:PAGE_SIZE]]
    next_url = ("/catalog/runs?" + urlencode({"cursor": encode_cursor(shown[-1]["id"])})
                if len(found) > PAGE_SIZE else None)
    return render(request, "catalog/runs.html", viewer, area="catalog", runs=shown, next_url=next_url,
                  first_url="/catalog/runs" if cursor else None)


@router.get("/catalog/runs/{run_id}", response_class=HTMLResponse)
def run_page(request: Request, run_id: RunId, viewer: Viewer = Look) -> Response:
    run = dict(viewer.client.catalog.run_entry(run_id))
    report = run["report"] or {}
    return render(request, "catalog/run.html", viewer, area="catalog", run=run, report=report,
                  names=rule_names(report), chart=by_rule_chart(report) if run["kind"] == "retention" else None)
