"""The catalog through real HTTP: records, explain, the rule set (ETag = its version, If-Match,
audit actor), validation, the impact preview and the retention job as jobs whose results equal
what the client reports; roles and scoped tokens."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from tests.helpers.api_server import LiveApi

import tidekeep as tk
from helpers.catalog_job import NOW
from tidekeep.catalog.rule_documents import ruleset_document
from tidekeep.cli.catalog_records import record_document

PROBLEM = "application/problem+json"
DAY = 86_400_000
RULES = {"rules": [{"number": 1, "name": "short", "expression": 'feed = "A"', "age": "2 days"},
                   {"number": 2, "name": "rest", "expression": "all", "age": "forever"}]}


def add_records(client: tk.Client) -> list[int]:
    """Feeds A and B, 1 to 5 days old at NOW."""
    return client.catalog.add([{"feed": feed, "type": "Events", "create_time": NOW - days * DAY, "file_size": 10}
                               for feed in ("A", "B") for days in range(1, 6)])


def as_json(value: Any) -> Any:
    """A value as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def finished(http: httpx.Client, location: str) -> dict[str, Any]:
    """Poll a job until it has finished (a bounded number of polls, not a wall-clock window)."""
    for _ in range(1200):
        job = http.get(location).json()
        if job["state"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {location} did not finish: {job}")


def started(response: httpx.Response) -> str:
    assert response.status_code == 202, response.text
    location = response.json()["location"]
    assert response.headers["location"] == location == f"/api/v1/jobs/{response.json()['job']}"
    return location


def test_records_are_listed_and_paged_as_the_cli_lists_them(api: LiveApi, client: tk.Client) -> None:
    add_records(client)
    viewer = api.as_role("viewer")
    pages, cursor = [], None
    while True:
        page = viewer.get("/api/v1/catalog/records",
                          params={"feed": "A", "limit": 2} | ({"cursor": cursor} if cursor else {})).json()
        pages += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [record_document(r) for r in client.catalog.records(feed="A")] and len(pages) == 5
    deleted = viewer.get("/api/v1/catalog/records", params={"status": "DELETED"}).json()
    assert deleted == {"items": [], "next_cursor": None}
    for params in ({"status": "GONE"}, {"cursor": "bm90IGFuIGlk"}, {"limit": 0}, {"feed": "A\x00"}, {"type": "\x00"}):
        bad = viewer.get("/api/v1/catalog/records", params=params)
        assert bad.status_code == 422 and bad.headers["content-type"] == PROBLEM, params


def test_explain_answers_as_the_client_does(api: LiveApi, client: tk.Client) -> None:
    ids = add_records(client)
    client.catalog.set_rules(RULES)
    viewer = api.as_role("viewer")
    for record_id in (ids[0], ids[-1]):
        answer = viewer.get(f"/api/v1/catalog/records/{record_id}/explain", params={"now": NOW})
        assert answer.status_code == 200, answer.text
        assert answer.json() == as_json(client.catalog.explain(record_id, now_ms=NOW).to_dict())
    assert viewer.get("/api/v1/catalog/records/999999/explain").json()["error"] == "NotFound"
    assert viewer.get("/api/v1/catalog/records/0/explain").status_code == 422
    assert viewer.get(f"/api/v1/catalog/records/{ids[0]}/explain", params={"now": "soon"}).status_code == 422


def test_rules_are_read_saved_with_if_match_and_audited(api: LiveApi, client: tk.Client) -> None:
    admin = api.as_role("admin")
    empty = admin.get("/api/v1/catalog/rules")
    assert empty.headers["etag"] == '""' and empty.json()["version"] is None and empty.json()["rules"] == []
    saved = admin.put("/api/v1/catalog/rules", json=RULES, headers={"If-Match": empty.headers["etag"]})
    assert saved.status_code == 200, saved.text
    version = client.catalog.rules().version
    assert saved.headers["etag"] == f'"{version}"'
    stored = client.catalog.saved_rules()
    expected = ruleset_document(stored.ruleset, stored.updated_ms, stored.updated_by)  # `rules show --json`
    assert saved.json() == expected and stored.updated_by == "admin"
    read = api.as_role("viewer").get("/api/v1/catalog/rules")
    assert read.json() == expected and read.headers["etag"] == f'"{version}"'
    row = next(e for e in client.audit("catalog") if e["action"] == "catalog_rules")
    assert row["actor"] == "admin"

    stale = admin.put("/api/v1/catalog/rules", json={"rules": []}, headers={"If-Match": empty.headers["etag"]})
    assert stale.status_code == 412 and stale.json()["error"] == "StaleVersion"
    assert stale.json()["current_version"] == version
    assert client.catalog.rules().version == version and len(client.catalog.rules().rules) == 2
    unconditional = admin.put("/api/v1/catalog/rules", json={"rules": []})
    assert unconditional.status_code == 200 and unconditional.json()["rules"] == []


def test_bad_rules_are_a_422_problem_and_save_nothing(api: LiveApi, client: tk.Client) -> None:
    admin = api.as_role("admin")
    before = client.catalog.set_rules(RULES).version
    bad_documents = [{"rules": [{"number": 1, "name": "x", "expression": "feed = ", "age": "1 days"}]},
                     {"rules": [{"number": 1, "name": "x", "expression": "all", "age": "ten days"}]},
                     {"rules": [{"number": 1, "name": "x", "expression": "feed in dictionary nope", "age": "1 days"}]},
                     {"rules": [{"number": 2**31, "name": "x", "expression": "all", "age": "1 days"}]},
                     {"rules": "all"}, {"rulez": []}, {"type": "Other", "rules": []}]
    for document in bad_documents:
        for method, path in (("PUT", "/api/v1/catalog/rules"), ("POST", "/api/v1/catalog/rules/validate")):
            response = admin.request(method, path, json=document)
            assert response.status_code == 422, (method, document, response.text)
            assert response.headers["content-type"] == PROBLEM and response.json()["error"] == "InvalidInput"
    assert admin.put("/api/v1/catalog/rules", json=[1, 2]).status_code == 422
    assert admin.put("/api/v1/catalog/rules", json=RULES, headers={"If-Match": "W/\"x\""}).status_code == 422
    assert client.catalog.rules().version == before


def test_validate_checks_and_saves_nothing(api: LiveApi, client: tk.Client) -> None:
    checked = api.as_role("viewer").post("/api/v1/catalog/rules/validate", json=RULES)
    assert checked.status_code == 200, checked.text
    expected = ruleset_document(client.catalog.validate_rules(RULES))
    assert checked.json() == {"valid": True, **expected}
    assert client.catalog.rules().version == ""


def test_roles_and_scopes(api: LiveApi, client: tk.Client) -> None:
    for role in ("viewer", "operator", "legal"):
        refused = api.as_role(role).put("/api/v1/catalog/rules", json=RULES)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", role
    for role in ("viewer", "legal"):
        assert api.as_role(role).post("/api/v1/catalog/runs", json={"dry_run": True}).status_code == 403
        assert api.as_role(role).post("/api/v1/catalog/impact", json={}).status_code == 403
    scoped = api.as_role("admin", scope="s")
    for method, path in (("GET", "/api/v1/catalog/records"), ("GET", "/api/v1/catalog/rules"),
                         ("GET", "/api/v1/catalog/runs"), ("GET", "/api/v1/catalog/records/1/explain"),
                         ("GET", "/api/v1/catalog/runs/1")):
        refused = scoped.request(method, path)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", path
    for path, body in (("/api/v1/catalog/rules/validate", RULES), ("/api/v1/catalog/runs", {}),
                       ("/api/v1/catalog/impact", {})):
        assert scoped.post(path, json=body).status_code == 403, path
    assert scoped.put("/api/v1/catalog/rules", json=RULES).status_code == 403
    assert client.catalog.rules().version == "" and client.catalog.runs() == []
    assert api.server.state.jobs.list() == []


def test_a_run_job_reports_progress_to_completion_and_the_runs_report(api: LiveApi, client: tk.Client) -> None:
    add_records(client)
    client.catalog.set_rules(RULES)
    ops = api.as_role("operator")
    location = started(ops.post("/api/v1/catalog/runs", json={"dry_run": False, "now": NOW}))
    job = finished(ops, location)
    assert job["state"] == "succeeded", job
    assert job["kind"] == "catalog_run" and job["actor"] == "operator"
    result = job["result"]
    entry = client.catalog.run_entry(result["run_id"])
    assert result == entry["report"] and result["rows"] == 3  # A records 3, 4 and 5 days old
    assert job["progress"]["done"] == job["progress"]["total"] and job["progress"]["total"] > 0
    assert api.as_role("viewer").get(location).json() == job

    viewer = api.as_role("viewer")
    runs = viewer.get("/api/v1/catalog/runs").json()
    assert runs["items"] == as_json([dict(r) for r in client.catalog.runs()]) and runs["next_cursor"] is None
    one = viewer.get(f"/api/v1/catalog/runs/{result['run_id']}")
    assert one.status_code == 200 and one.json() == as_json(dict(entry))
    assert viewer.get("/api/v1/catalog/runs/999999").json()["error"] == "NotFound"
    deleted = viewer.get("/api/v1/catalog/records", params={"status": "DELETED"}).json()["items"]
    assert [r["id"] for r in deleted] == [r.id for r in client.catalog.records(status="DELETED")]
    rows = [e for e in client.audit("catalog") if e["action"] == "catalog_delete"]
    assert rows and {e["actor"] for e in rows} == {"operator"}


def test_a_dry_run_and_the_impact_preview_change_nothing(api: LiveApi, client: tk.Client) -> None:
    add_records(client)
    client.catalog.set_rules(RULES)
    ops = api.as_role("operator")
    dry = finished(ops, started(ops.post("/api/v1/catalog/runs", json={"dry_run": True, "now": NOW})))
    assert dry["state"] == "succeeded" and dry["kind"] == "catalog_dry_run", dry
    assert dry["result"] == client.catalog.run_entry(dry["result"]["run_id"])["report"]
    assert dry["result"]["dry_run"] is True and dry["result"]["rows"] == 3
    impact = finished(ops, started(ops.post("/api/v1/catalog/impact", json={"now": NOW})))
    assert impact["state"] == "succeeded", impact
    assert impact["result"] == as_json(client.catalog.impact(now_ms=NOW).to_dict())
    other = {"rules": [{"number": 1, "name": "all", "expression": "all", "age": "1 days"}]}
    assessed = finished(ops, started(ops.post("/api/v1/catalog/impact", json={"rules": other, "now": NOW})))
    assert assessed["result"] == as_json(client.catalog.impact(rules=other, now_ms=NOW).to_dict())
    assert assessed["result"]["total_rows"] == 8  # a record exactly 1 day old is kept
    assert client.catalog.records(status="DELETED") == []


def test_bad_job_requests_start_nothing(api: LiveApi, client: tk.Client) -> None:
    ops = api.as_role("operator")
    for path, body in (("/api/v1/catalog/runs", {"dry_run": "maybe"}), ("/api/v1/catalog/runs", {"now": "soon"}),
                       ("/api/v1/catalog/runs", {"now": -1}), ("/api/v1/catalog/runs", {"extra": 1}),
                       ("/api/v1/catalog/impact", {"rules": {"rules": "x"}}),
                       ("/api/v1/catalog/impact", {"now": "2024-99-01"})):
        response = ops.post(path, json=body)
        assert response.status_code == 422 and response.headers["content-type"] == PROBLEM, (path, body)
    assert api.server.state.jobs.list() == [] and client.catalog.runs() == []
