"""POST /api/v1/retention/simulate through real HTTP, on SQLite and PostgreSQL: a stream's, a dataset's
and the catalog's forecast (a job) answer what the library computes; a reader may ask for a stream or
a dataset, the catalog's Spark job is an operator's; a scoped token reaches its own scope's streams
only; bad input is a one-line problem; nothing is written."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from tests.api.test_api_catalog import finished, started
from tests.helpers.api_server import LiveApi
from tests.helpers.archives import make_archive

import tidekeep as tk
from tidekeep.catalog.ages import Age, TimeUnit
from tidekeep.catalog.expressions import parse
from tidekeep.catalog.forecast_document import catalog_forecast_of
from tidekeep.catalog.rules import RetentionRule, RuleSet, to_yaml_document
from tidekeep.store.schema import audit
from tidekeep.store.schema_archives import archives
from tidekeep.store.schema_catalog import catalog_records
from tidekeep.store.schema_holds import holds
from tidekeep.store.schema_retention import retention_set

PROBLEM = "application/problem+json"
SIMULATE = "/api/v1/retention/simulate"
HOUR = 3_600_000
DAY = 24 * HOUR
T0 = 1_700_000_000_000
AT = T0 + 2 * DAY
RULES = RuleSet("", (RetentionRule(1, "two days", True, parse('feed = "F"'), Age(2, TimeUnit.DAYS)),))


def populate(client: tk.Client) -> None:
    client.create_stream("s/r", tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(10**9)))
    handle = client.stream("s/r")
    for hour in range(0, 30, 6):  # cycles that record the tail and delete nothing
        with handle.writer("w") as writer:
            writer.write_many([b"x" * 40] * 4, [f"k{i}" for i in range(4)])
        handle.retention.run(T0 + hour * HOUR)
    handle.update(tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(100, 400)))
    for hours in (70, 40, 30, 10):
        make_archive(client, "web", [(AT - hours * HOUR, f"line {hours}")])
    client.catalog.add([{"feed": "F", "type": "T", "create_time": AT - d * DAY - HOUR, "file_size": 10 * d}
                        for d in range(1, 6)])


def stored(client: tk.Client) -> dict[str, list[tuple[Any, ...]]]:
    with client.workspace.db.read() as conn:
        return {table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
                for table in (audit, retention_set, holds, archives, catalog_records)}


def test_each_family_answers_what_the_library_computes(api: LiveApi, client: tk.Client) -> None:
    populate(client)
    client.holds.add("stream", "s/r", "case 9")
    viewer, operator = api.as_role("viewer"), api.as_role("operator")  # (creating a token is audited)
    before = stored(client)
    stream = viewer.post(SIMULATE, json={"stream": "s/r", "days": 3, "at": str(AT)})
    assert stream.status_code == 200, stream.text
    assert stream.json() == client.stream("s/r").retention.simulate(now=AT, days=3).forecast().to_dict()
    assert stream.json()["details"]["now"]["rule"] == "held" and stream.json()["totals"]["held_bytes"] > 0
    proposed = viewer.post(SIMULATE, json={"stream": "s/r", "policy": {"kind": "time", "min": "6h"}, "at": AT})
    assert proposed.status_code == 200, proposed.text
    assert proposed.json() == client.stream("s/r").retention.simulate(
        tk.RetentionPolicy.by_time("6h"), AT).forecast().to_dict()
    relative = viewer.post(SIMULATE, json={"stream": "s/r", "at": "+1h"})
    assert relative.status_code == 200 and relative.json()["now_ms"] > client.clock.now_ms()
    dataset = viewer.post(SIMULATE, json={"dataset": "web", "retention": "36h", "days": 2, "at": AT})
    assert dataset.status_code == 200, dataset.text
    assert dataset.json() == client.archives.forecast("web", "36h", AT, 2).to_dict()
    assert dataset.json()["totals"]["items"] == 4
    # the catalog's forecast is a job, started by an operator
    assert viewer.post(SIMULATE, json={"catalog": True}).status_code == 403
    location = started(operator.post(SIMULATE, json={"catalog": True, "rules": to_yaml_document(RULES), "days": 2,
                                                     "at": AT}))
    job = finished(operator, location)
    assert job["state"] == "succeeded", job
    assert job["result"] == catalog_forecast_of(client.workspace, RULES, AT, 2).to_dict()
    assert job["result"]["totals"]["items"] == 5
    assert stored(client) == before


def test_scoped_tokens_reach_their_own_streams_only(api: LiveApi, client: tk.Client) -> None:
    populate(client)
    client.create_stream("t/r")
    mine = api.as_role("viewer", "t")
    assert mine.post(SIMULATE, json={"stream": "t/r"}).status_code == 200
    for body in ({"stream": "s/r"}, {"dataset": "web"}, {"catalog": True}):
        refused = mine.post(SIMULATE, json=body)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", body


@pytest.mark.parametrize(("body", "status", "detail"), [
    ({}, 422, "give one of stream, dataset or catalog"),
    ({"stream": "s/r", "dataset": "web"}, 422, "give only one of stream, dataset and catalog, not stream and dataset"),
    ({"dataset": "web", "policy": {"kind": "size", "min": 5}}, 422, "policy is a proposal for a stream, not for the "
                                                                    "dataset"),
    ({"stream": "s/r", "retention": "1d"}, 422, "retention is a proposal for a dataset, not for the stream"),
    ({"stream": "s/r", "days": 367}, 422, "invalid days 367: expected a whole number of days from 0 to 366"),
    ({"stream": "s/r", "at": "whenever"}, 422, "invalid at 'whenever'"),
    ({"stream": "s/r", "policy": {"kind": "size", "min": 9, "max": 3}}, 422, "max 3 B is less than min 9 B"),
    ({"stream": "s/missing"}, 404, "stream 's/missing' does not exist"),
    ({"dataset": "nope"}, 404, "dataset 'nope' does not exist"),
    ({"dataset": "web", "retention": "90s"}, 422, "not a whole number of minutes"),
    ({"catalog": True, "rules": {"rules": [{"number": 1}]}}, 422, "rule"),
])
def test_bad_input_is_a_one_line_problem_and_changes_nothing(api: LiveApi, client: tk.Client, body: dict[str, Any],
                                                            status: int, detail: str) -> None:
    populate(client)
    operator = api.as_role("operator")
    before = stored(client)
    refused = operator.post(SIMULATE, json=body)
    assert refused.status_code == status and refused.headers["content-type"] == PROBLEM, refused.text
    assert detail in refused.json()["detail"] and "\n" not in refused.json()["detail"]
    assert stored(client) == before


def test_an_unknown_field_is_refused(api: LiveApi, client: tk.Client) -> None:
    populate(client)
    refused = api.as_role("viewer").post(SIMULATE, json={"stream": "s/r", "size": "1GB"})
    assert refused.status_code == 422 and refused.headers["content-type"] == PROBLEM
