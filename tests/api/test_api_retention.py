"""Retention through real HTTP: preview, run (audited with the token's name), history, the
retention set and subscribers; bad input, roles, scoped tokens."""

from __future__ import annotations

from tests.helpers.api_server import LiveApi

import tidekeep as tk
from tidekeep.streams.documents import decision_document, history_record

PROBLEM = "application/problem+json"
STREAM = "s/r"
BASE = "/api/v1/scopes/s/streams/r"


def write(client: tk.Client, count: int) -> None:
    with client.stream(STREAM).writer("w") as writer:
        writer.write_many([b"x" * 2] * count)  # 10-byte events


def sized_stream(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(retention=tk.RetentionPolicy.by_size(100, 300)))


def test_run_preview_history_and_records(api: LiveApi, client: tk.Client) -> None:
    sized_stream(client)
    write(client, 30)
    ops = api.as_role("operator")
    first = ops.post(f"{BASE}/retention/run")
    assert first.status_code == 200, first.text
    assert (first.json()["dry_run"], first.json()["rule"], first.json()["cut"]) == (False, "no-cmin", None)
    assert first.json()["recorded"]["recording_size"] == 300
    write(client, 30)
    viewer = api.as_role("viewer")
    at = client.clock.now_ms() + 7_200_000
    preview = viewer.get(f"{BASE}/retention/preview", params={"at": str(at)})
    assert preview.status_code == 200, preview.text
    assert preview.json() == decision_document(client.stream(STREAM).retention.preview(at), dry_run=True)
    assert (preview.json()["rule"], preview.json()["cut"], preview.json()["freed_bytes"]) == (
        "above-max", {"0.0": 300}, 300)
    relative = viewer.get(f"{BASE}/retention/preview", params={"at": "+2h"})
    assert relative.status_code == 200 and relative.json()["rule"] == "above-max"
    records = viewer.get(f"{BASE}/retention/records").json()
    assert records == {"items": [r.to_dict() for r in client.stream(STREAM).retention.records()], "next_cursor": None}
    assert client.stream(STREAM).head_cut().positions == {tk.SegmentId("0.0"): 0}  # previews change nothing
    run = ops.post(f"{BASE}/retention/run")
    assert run.status_code == 200, run.text
    assert (run.json()["rule"], run.json()["cut"], run.json()["freed_bytes"]) == ("above-max", {"0.0": 300}, 300)
    row = client.audit(STREAM, limit=1)[0]
    assert (row["action"], row["actor"], row["bytes_freed"]) == ("truncate", "operator", 300)
    history = viewer.get(f"{BASE}/retention/history").json()
    assert history == {"items": [history_record(e) for e in client.stream(STREAM).retention.history()],
                       "next_cursor": None}
    assert history["items"][0]["actor"] == "operator" and history["items"][0]["new_head"] == f"{STREAM}:0.0=300"


def test_history_pages_newest_first(api: LiveApi, client: tk.Client) -> None:
    client.create_stream(STREAM)
    write(client, 5)
    handle = client.stream(STREAM)
    for offset in (10, 20, 30):
        handle.truncate(f"{STREAM}:0.0={offset}", f"by hand to {offset}")
    viewer = api.as_role("viewer")
    first = viewer.get(f"{BASE}/retention/history", params={"limit": 2}).json()
    assert [e["reason"] for e in first["items"]] == ["by hand to 30", "by hand to 20"]
    rest = viewer.get(f"{BASE}/retention/history", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert [e["reason"] for e in rest["items"]] == ["by hand to 10"] and rest["next_cursor"] is None


def test_bad_input_is_a_problem_and_changes_nothing(api: LiveApi, client: tk.Client) -> None:
    sized_stream(client)
    write(client, 30)
    ops = api.as_role("operator")
    missing = ops.post("/api/v1/scopes/s/streams/missing/retention/run")
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM
    for params in ({"at": "yesterday-ish"}, {"at": "+forever"}, {"at": "-5"}):
        refused = ops.get(f"{BASE}/retention/preview", params=params)
        assert refused.status_code == 422 and refused.json()["error"] == "InvalidInput", (params, refused.text)
    for cursor in ("%%%", "WzFd", "ImEi"):  # not base64 JSON; a list; a string
        refused = ops.get(f"{BASE}/retention/history", params={"cursor": cursor})
        assert refused.status_code == 422 and refused.json()["error"] == "InvalidInput", (cursor, refused.text)
    assert ops.get(f"{BASE}/retention/history", params={"limit": 0}).status_code == 422
    assert client.stream(STREAM).retention.records() == [] and client.audit(STREAM) == []


def test_a_viewer_may_not_run_retention_and_a_scoped_token_stays_in_its_scope(api: LiveApi, client: tk.Client) -> None:
    sized_stream(client)
    write(client, 30)
    refused = api.as_role("viewer").post(f"{BASE}/retention/run")
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"
    assert client.stream(STREAM).retention.records() == []
    other = api.as_role("operator", scope="other")
    for method, path in (("POST", "/retention/run"), ("GET", "/retention/preview"), ("GET", "/retention/history"),
                         ("GET", "/retention/records"), ("GET", "/subscribers")):
        assert other.request(method, BASE + path).status_code == 403, path
    assert client.stream(STREAM).retention.records() == []
    mine = api.as_role("operator", scope="s")
    assert mine.post(f"{BASE}/retention/run").status_code == 200
    assert len(client.stream(STREAM).retention.records()) == 1
