"""Schemathesis fuzzes the whole OpenAPI schema through real HTTP: for any input the schema
allows (and much it does not), no route answers 5xx and every response conforms to the schema the
route declares. An admin token reaches every route; the workspace holds a stream, so the stream
routes meet real data as well as made-up names."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import checks
from schemathesis.specs.openapi import checks as openapi_checks
from tests.helpers.api_server import LiveApi, live_api

import tidekeep as tk

EXAMPLES = 25  # per operation
# what the API promises for any input: no server error, and every status, content type, header and
# body as the schema declares. Not schemathesis' "a schema-valid request is accepted": the schema
# cannot say everything a name, a cut or a cursor must be, and those get 422 by design.
CHECKS = [checks.not_a_server_error, openapi_checks.status_code_conformance,
          openapi_checks.content_type_conformance, openapi_checks.response_headers_conformance,
          openapi_checks.response_schema_conformance]


@pytest.fixture(scope="module")
def fuzzed_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveApi]:
    home = tmp_path_factory.mktemp("fuzz")
    client = tk.connect(home=home / "ws", settings={"writer.linger": 0}, create=True)
    client.create_stream("s/a")
    with client.stream("s/a").writer("w") as writer:
        writer.write(b"event", routing_key="k")
    with live_api(client.workspace) as served:
        served.token("fuzzer", "admin")
        yield served
    client.close()


def fuzz_operation(operation: schemathesis.APIOperation, headers: dict[str, str]) -> None:
    @given(operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    def run(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    run()


def test_no_server_error_and_every_response_conforms(fuzzed_api: LiveApi) -> None:
    # the schema is loaded from the live server, so no pytest plugin is involved (schemathesis'
    # own does not load under pytest 9); each operation is fuzzed by hypothesis in turn
    schema = schemathesis.openapi.from_url(f"{fuzzed_api.url}/openapi.json")
    headers = {"Authorization": f"Bearer {fuzzed_api.tokens['fuzzer']}"}
    failures = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, "the schema lists the API's operations"
    for operation in operations:
        try:
            fuzz_operation(operation, headers)
        except Exception as exc:  # every operation is fuzzed; all failures are reported together
            failures.append(f"{operation.label}: {type(exc).__name__}: {str(exc)[:2000]}")
    assert not failures, "\n\n".join(failures)
