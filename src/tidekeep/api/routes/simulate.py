"""What-if retention (the CLI's `tidekeep retention simulate`, docs/api.md#what-if-retention): what a
proposed policy, retention period or rule set would delete now and on each of the next N days, for
a stream, a dataset or the catalog. It changes nothing, so a reader may ask; a scoped token reaches
the streams of its scope only. The catalog's forecast is a Spark job, started as the impact preview
is (an operator's, answered 202); a stream's and a dataset's are answered at once."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from ...errors import InvalidInput
from ...forecast import DEFAULT_DAYS, check_days
from ...store.tokens import Role
from ..jobs import ProgressCallback
from ..models import PolicyBody, accepted
from ..state import Caller, Reader
from .catalog import job_progress, rules_of
from .retention import decision_time
from .streams import policy_of

router = APIRouter(tags=["retention"])

CATALOG_JOB = "catalog_forecast"


class SimulateBody(BaseModel):
    """One target: `stream` (with a `policy`), `dataset` (with a `retention` period) or `catalog`
    (with `rules`); each proposal defaults to the target's current one."""

    model_config = ConfigDict(extra="forbid")
    stream: str | None = Field(default=None, description="scope/stream: simulate its retention cycles")
    policy: PolicyBody | None = Field(default=None, description="the stream's proposed policy (default: its own)")
    dataset: str | None = Field(default=None, description="a dataset: which of its archives expire")
    retention: str | int | None = Field(
        default=None, description="the dataset's proposed retention period: minutes or a duration like 30d "
                                  "(default: archive_output.retention_period)")
    catalog: bool = Field(default=False, description="the catalog: which records the retention job deletes")
    rules: dict[str, Any] | None = Field(
        default=None, description="the catalog's proposed rules (the body of PUT /catalog/rules; default: the saved "
                                  "rules)")
    days: int = Field(default=DEFAULT_DAYS, description="days after now to forecast, 0..366")
    at: str | int | None = Field(
        default=None, description="now, for the forecast: +DURATION from now, ISO-8601 or epoch ms")


def target_of(body: SimulateBody) -> str:
    """Which family the body asks about; a proposal for another family is refused, naming it."""
    given = [name for name, value in (("stream", body.stream), ("dataset", body.dataset),
                                      ("catalog", body.catalog or None)) if value is not None]
    if len(given) != 1:
        raise InvalidInput("give one of stream, dataset or catalog" if not given
                           else f"give only one of stream, dataset and catalog, not {' and '.join(given)}")
    for proposal, value, family in (("policy", body.policy, "stream"), ("retention", body.retention, "dataset"),
                                    ("rules", body.rules, "catalog")):
        if value is not None and family != given[0]:
            raise InvalidInput(f"{proposal} is a proposal for a {family}, not for the {given[0]}")
    return given[0]


@router.post("/retention/simulate",
             summary="What a proposed policy, retention period or rule set would delete now and day by day "
                     "(changes nothing; the catalog's is a job)",
             responses={202: {"description": "the catalog's forecast was started as a job"}})
def simulate(body: SimulateBody, response: Response, call: Caller = Reader) -> dict[str, Any]:
    target = target_of(body)
    days = check_days(body.days)
    now = None if body.at is None else decision_time(str(body.at), call.client.clock.now_ms())
    if target == "stream":
        assert body.stream is not None
        call.principal.require_stream(body.stream)
        simulation = call.client.stream(body.stream).retention.simulate(policy_of(body.policy), now, days)
        return simulation.forecast().to_dict()
    if target == "dataset":
        assert body.dataset is not None
        call.principal.require_unscoped("archives")
        return call.client.archives.forecast(body.dataset, body.retention, now, days).to_dict()
    call.principal.require_unscoped("the catalog")
    call.principal.require(Role.OPERATOR)  # a Spark job over the records, as the impact preview
    # checked now, so bad rules are this request's 422 rather than a failed job
    rules = None if body.rules is None else call.client.catalog.validate_rules(rules_of(body.rules))
    workspace = call.client.workspace

    def work(progress: ProgressCallback) -> Any:
        from ...catalog.forecast_document import catalog_forecast_of

        return catalog_forecast_of(workspace, rules, now, days, job_progress(progress, "records")).to_dict()

    response.status_code = 202
    return accepted(response, call.state.jobs.submit(CATALOG_JOB, call.principal.name, work).id).model_dump()
