"""The catalog (the CLI's `tidekeep catalog records list|explain|rules|impact|run|runs`): records,
explanations, the retention rule set (ETag = its version), the impact preview and the retention
job as jobs. The catalog belongs to no scope: every route refuses a scoped token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from ...catalog.records import MetaRecord
from ...catalog.rule_documents import ruleset_document
from ...catalog.rules import RuleSet, rules_from_document
from ...catalog.rules_store import SavedRules
from ...errors import InvalidInput
from ...integers import INT64_MAX
from ...times import parse_time_ms
from ...units import iso_utc
from ..etags import if_match_version, set_etag
from ..jobs import ProgressCallback
from ..models import Accepted, Page, accepted
from ..paging import DEFAULT_LIMIT, decode_id_cursor, encode_cursor
from ..state import UNSCOPED, Admin, Caller, Operator, Reader
from .streams import Cursor, Limit

router = APIRouter(tags=["catalog"], dependencies=UNSCOPED)

RecordId = Annotated[int, Path(ge=1, le=INT64_MAX, description="the record's id")]
RunId = Annotated[int, Path(ge=1, le=INT64_MAX, description="the run's id")]
RulesDocument = Annotated[dict[str, Any], Body(description=(
    "a rule set as `tidekeep catalog rules set` reads a file: the YAML form as JSON "
    "({\"rules\": [{\"number\": 1, \"name\": ..., \"expression\": ..., \"age\": \"30 days\"}]}) "
    "or Stroom's DataRetentionRules JSON"))]
Now = Field(None, description="the run's now: epoch milliseconds or an ISO-8601 time [default: the server's now]")


# ---- documents: the CLI's --json forms ---------------------------------------------------------------
def record_document(record: MetaRecord) -> dict[str, Any]:
    """A record as `tidekeep catalog records list --json` prints it."""
    doc = record.to_dict()
    for name in ("create_time", "effective_time", "status_time"):
        doc[name.replace("_time", "_iso")] = iso_utc(doc[name])
    return doc


def saved_document(saved: SavedRules) -> dict[str, Any]:
    return ruleset_document(saved.ruleset, saved.updated_ms, saved.updated_by)


def rules_of(document: Mapping[str, Any]) -> RuleSet:
    """The rules of a request body, parsed as `tidekeep catalog rules set` parses a file."""
    try:
        return rules_from_document(document)
    except RecursionError:  # an expression nested thousands deep: refused, not a crash
        raise InvalidInput("rules: an expression is nested too deeply") from None


def now_of(value: int | str | None) -> int | None:
    return None if value is None else parse_time_ms(value, "now")


def job_progress(progress: ProgressCallback, unit: str) -> Any:
    """The catalog's (done, total) progress fed into the API job's (done, total, message)."""
    def update(done: int, total: int) -> None:
        progress(done, total, unit)

    return update


# ---- records -------------------------------------------------------------------------------------
@router.get("/catalog/records", summary="Meta records in id order")
def list_records(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None,
                 feed: Annotated[str | None, Query(description="only this feed")] = None,
                 type: Annotated[str | None, Query(description="only this type")] = None,
                 status: Annotated[str | None, Query(description="only UNLOCKED, LOCKED or DELETED")] = None,
                 ) -> Page[dict[str, Any]]:
    call.principal.require_unscoped("the catalog")
    records = call.client.catalog.records(feed=feed, type=type, status=status, limit=limit + 1,
                                          after_id=decode_id_cursor(cursor))
    more = len(records) > limit
    records = records[:limit]
    return Page[dict[str, Any]](items=[record_document(r) for r in records],
                                next_cursor=encode_cursor(records[-1].id) if more else None)


@router.get("/catalog/records/{record_id}/explain",
            summary="Why a record is kept or deleted: the deciding rule, its age, retain-until, holds")
def explain_record(record_id: RecordId, call: Caller = Reader,
                   now: Annotated[str | None, Query(description="decide as of this time: epoch milliseconds or "
                                                                "ISO-8601 [default: the server's now]")] = None,
                   ) -> dict[str, Any]:
    call.principal.require_unscoped("the catalog")
    return call.client.catalog.explain(record_id, now_ms=now_of(now)).to_dict()


# ---- rules ---------------------------------------------------------------------------------------
@router.get("/catalog/rules", summary="The saved retention rules (ETag: the rules version)")
def get_rules(response: Response, call: Caller = Reader) -> dict[str, Any]:
    call.principal.require_unscoped("the catalog")
    saved = call.client.catalog.saved_rules()
    set_etag(response, saved.ruleset.version)
    return saved_document(saved)


@router.put("/catalog/rules", summary="Replace the retention rules (audited; a new version restarts every tracker)")
def put_rules(document: RulesDocument, response: Response, call: Caller = Admin,
              if_match: Annotated[str | None, Header(description="the ETag read before (\"\" when none was saved): "
                                                                 "a stale one gets 412 and nothing is saved")]
              = None) -> dict[str, Any]:
    call.principal.require_unscoped("the catalog")
    expected = if_match_version(if_match)
    ruleset = call.client.catalog.set_rules(rules_of(document), expected_version=expected)
    saved = call.client.catalog.saved_rules()
    set_etag(response, ruleset.version)
    if saved.ruleset.version == ruleset.version:
        return saved_document(saved)
    return ruleset_document(ruleset)  # saved again meanwhile: this save's rules, as saved


@router.post("/catalog/rules/validate", summary="Check rules as a save would (dictionaries too); save nothing")
def validate_rules(document: RulesDocument, call: Caller = Reader) -> dict[str, Any]:
    call.principal.require_unscoped("the catalog")
    ruleset = call.client.catalog.validate_rules(rules_of(document))
    return {"valid": True, **ruleset_document(ruleset)}


# ---- impact and runs -----------------------------------------------------------------------------
class ImpactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: dict[str, Any] | None = Field(None, description="rules to assess instead of the saved ones "
                                                           "(the body of PUT /catalog/rules)")
    now: int | str | None = Now


class RunBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dry_run: bool = Field(False, description="count what would be deleted; change nothing")
    now: int | str | None = Now


@router.post("/catalog/impact", status_code=202, summary="Start an impact preview (a job whose result is "
             "what a trackerless run would delete, per rule, feed and type)")
def start_impact(response: Response, call: Caller = Operator, body: ImpactBody | None = None) -> Accepted:
    call.principal.require_unscoped("the catalog")
    body = body or ImpactBody(rules=None, now=None)
    # checked now, so bad input is this request's 422 rather than a failed job
    rules = None if body.rules is None else call.client.catalog.validate_rules(rules_of(body.rules))
    now_ms = now_of(body.now)
    catalog = call.client.catalog

    def work(progress: ProgressCallback) -> Any:
        return catalog.impact(rules=rules, now_ms=now_ms, progress=job_progress(progress, "records")).to_dict()

    return accepted(response, call.state.jobs.submit("catalog_impact", call.principal.name, work).id)


@router.post("/catalog/runs", status_code=202, summary="Start the retention job (or a dry run); its result is "
             "the run's report")
def start_run(response: Response, call: Caller = Operator, body: RunBody | None = None) -> Accepted:
    call.principal.require_unscoped("the catalog")
    body = body or RunBody(dry_run=False, now=None)
    now_ms = now_of(body.now)
    catalog, dry_run = call.client.catalog, body.dry_run

    def work(progress: ProgressCallback) -> Any:
        return catalog.run(dry_run=dry_run, now_ms=now_ms, progress=job_progress(progress, "records")).to_dict()

    kind = "catalog_dry_run" if dry_run else "catalog_run"
    return accepted(response, call.state.jobs.submit(kind, call.principal.name, work).id)


@router.get("/catalog/runs", summary="Retention and purge runs, newest first")
def list_runs(call: Caller = Reader, limit: Limit = DEFAULT_LIMIT, cursor: Cursor = None) -> Page[dict[str, Any]]:
    call.principal.require_unscoped("the catalog")
    runs = call.client.catalog.runs(limit + 1, decode_id_cursor(cursor))
    more = len(runs) > limit
    runs = runs[:limit]
    return Page[dict[str, Any]](items=[dict(r) for r in runs],
                                next_cursor=encode_cursor(runs[-1]["id"]) if more else None)


@router.get("/catalog/runs/{run_id}", summary="One run with its report")
def get_run(run_id: RunId, call: Caller = Reader) -> dict[str, Any]:
    call.principal.require_unscoped("the catalog")
    return dict(call.client.catalog.run_entry(run_id))
