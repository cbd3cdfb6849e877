"""The catalog's rules page: the saved rules in precedence order, and an editor that validates the
edited rules, previews their impact (records and bytes per rule) and saves them — through the same
client calls, documents and roles as the API's catalog routes (api/routes/catalog.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Form, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...api.jobs import Job, ProgressCallback
from ...api.routes.catalog import job_progress, saved_document
from ...catalog.rules import RuleSet, parse_rules_text, to_yaml_document
from ...errors import InvalidInput, NotFound
from ..auth import UNSCOPED_PAGES, AdminAction, Look, Operate, Viewer
from ..render import render

router = APIRouter(dependencies=UNSCOPED_PAGES)

IMPACT_JOB = "catalog_impact"  # the API's impact jobs have this kind too
MAX_RULES_TEXT = 1_000_000  # characters: a rule set far larger than any real one is refused
RulesText = Annotated[str, Form(description="the rule set as PUT /api/v1/catalog/rules takes it")]


def editor_text(ruleset: RuleSet) -> str:
    """The rule set as the editor shows it: the body of PUT /api/v1/catalog/rules (the YAML rule
    file's form, as JSON), which keeps disabled expression items (catalog/rules.py)."""
    return json.dumps(to_yaml_document(ruleset), indent=2, ensure_ascii=False)


def edited_rules(viewer: Viewer, text: str) -> RuleSet:
    """The editor's rules, checked as a save would check them (dictionaries too); InvalidInput with
    one line naming the rule and the field otherwise. Parsed as text only: never read as a path."""
    if len(text) > MAX_RULES_TEXT:
        raise InvalidInput(f"rules: {len(text):,} characters is more than the {MAX_RULES_TEXT:,} the editor takes")
    return viewer.client.catalog.validate_rules(parse_rules_text(text, "rules"))


def impact_by_rule(result: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An impact summary's rows (per rule, feed and type) summed per rule, in rule-number order."""
    totals: dict[int, dict[str, Any]] = {}
    for row in result["rows"]:
        entry = totals.setdefault(row["rule"], {"rule": row["rule"], "name": row["rule_name"], "age": row["age"],
                                                "rows": 0, "bytes": 0, "held_rows": 0})
        for key in ("rows", "bytes", "held_rows"):
            entry[key] += row[key]
    return [totals[number] for number in sorted(totals)]


def impact_charts(per_rule: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart specs (static/app.js) of records and of bytes per rule."""
    labels = [f"{r['rule']} {r['name']}" for r in per_rule]
    records = {"type": "bar", "labels": labels, "xTitle": "rule", "yTitle": "records",
               "datasets": [{"label": "Records", "data": [r["rows"] for r in per_rule]}]}
    sizes = {"type": "bar", "labels": labels, "xTitle": "rule", "yTitle": "bytes", "bytes": True,
             "datasets": [{"label": "Bytes", "data": [r["bytes"] for r in per_rule]}]}
    return records, sizes


@router.get("/catalog", response_class=HTMLResponse)
def rules_page(request: Request, viewer: Viewer = Look, saved: str | None = None) -> Response:
    current = viewer.client.catalog.saved_rules()
    return render(request, "catalog/rules.html", viewer, area="catalog", document=saved_document(current),
                  version=current.ruleset.version, editor=editor_text(current.ruleset),
                  just_saved=bool(saved) and saved == current.ruleset.version)


@router.post("/catalog/rules/validate", response_class=HTMLResponse)
def rules_validate(request: Request, rules: RulesText, viewer: Viewer = Look) -> Response:
    # the answer to "is this valid?" is the fragment either way: an error is shown where asked
    try:
        ruleset = edited_rules(viewer, rules)
    except InvalidInput as exc:
        return render(request, "catalog/fragments/validation.html", viewer, status_code=422,
                      error=type(exc).__name__, message=str(exc), count=0)
    return render(request, "catalog/fragments/validation.html", viewer, error=None, message="",
                  count=len(ruleset.rules))


@router.post("/catalog/rules/impact", response_class=HTMLResponse)
def start_impact(request: Request, rules: RulesText, viewer: Viewer = Operate) -> Response:
    """The impact of the edited rules, as the API's impact job computes it (an operator's job there
    too): the fragment follows the job until its result is there."""
    ruleset = edited_rules(viewer, rules)
    catalog = viewer.client.catalog

    def work(progress: ProgressCallback) -> Any:
        return catalog.impact(rules=ruleset, progress=job_progress(progress, "records")).to_dict()

    job = viewer.state.jobs.submit(IMPACT_JOB, viewer.principal.name, work)
    return _impact_fragment(request, viewer, job)


@router.get("/catalog/rules/impact/{job_id}", response_class=HTMLResponse)
def impact_progress(request: Request, job_id: Annotated[str, Path(max_length=64)], viewer: Viewer = Look) -> Response:
    job = viewer.state.jobs.get(job_id)
    if job.kind != IMPACT_JOB:
        raise NotFound(f"job {job_id!r} is no impact preview")
    return _impact_fragment(request, viewer, job)


def _impact_fragment(request: Request, viewer: Viewer, job: Job) -> Response:
    if job.state == "succeeded":
        per_rule = impact_by_rule(job.result)
        records, sizes = impact_charts(per_rule)
        return render(request, "catalog/fragments/impact.html", viewer, job=job, result=job.result,
                      per_rule=per_rule, records_chart=records, bytes_chart=sizes)
    return render(request, "catalog/fragments/impact_progress.html", viewer, job=job)


@router.post("/catalog/rules", response_class=HTMLResponse)
def save_rules(request: Request, rules: RulesText, version: Annotated[str, Form(max_length=64)] = "",
               viewer: Viewer = AdminAction) -> Response:
    """Save the edited rules if the saved version is still the one the editor was loaded with
    (StaleVersion otherwise, and nothing saved), as PUT with If-Match does."""
    ruleset = viewer.client.catalog.set_rules(edited_rules(viewer, rules), expected_version=version)
    target = f"/catalog?saved={ruleset.version}"
    if request.headers.get("hx-request") == "true":
        return Response(status_code=200, headers={"HX-Redirect": target})
    return RedirectResponse(target, status_code=303)
