"""The streams resource through real HTTP: happy paths, bad input, ETags, scopes, audit actor."""

from __future__ import annotations

import time

from tests.helpers.api_server import LiveApi

import tidekeep as tk

PROBLEM = "application/problem+json"


def test_create_describe_list_and_truncate_a_stream(api: LiveApi, client: tk.Client) -> None:
    ops = api.as_role("operator")
    created = ops.post("/api/v1/scopes/s/streams", json={"name": "a", "segments": 2,
                                                         "retention": {"kind": "size", "min": "1KiB"}})
    assert created.status_code == 201, created.text
    assert created.json()["retention"] == {"kind": "size", "min": 1024, "max": None}
    assert created.headers["etag"] == '"1"'
    with client.stream("s/a").writer("w") as writer:
        for i in range(10):
            writer.write(f"event-{i}".encode(), routing_key=str(i))
    viewer = api.as_role("viewer")
    described = viewer.get("/api/v1/scopes/s/streams/a")
    assert described.status_code == 200
    assert described.json() == client.stream("s/a").describe()
    listed = viewer.get("/api/v1/scopes/s/streams").json()
    assert [s["name"] for s in listed["items"]] == ["s/a"] and listed["next_cursor"] is None
    tail = viewer.get("/api/v1/scopes/s/streams/a/tail").json()["cut"]
    truncated = ops.post("/api/v1/scopes/s/streams/a/truncate", json={"cut": tail, "reason": "test"})
    assert truncated.status_code == 200, truncated.text
    assert truncated.json()["bytes_freed"] == described.json()["size_bytes"]
    row = client.audit("s/a", limit=1)[0]
    assert row["action"] == "truncate" and row["actor"] == "operator"


def test_unknown_stream_is_a_404_problem(api: LiveApi) -> None:
    response = api.as_role("viewer").get("/api/v1/scopes/s/streams/missing")
    assert response.status_code == 404
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["error"] == "NotFound" and "does not exist" in response.json()["detail"]


def test_bad_input_is_a_422_problem_and_changes_nothing(api: LiveApi, client: tk.Client) -> None:
    ops = api.as_role("operator")
    bad_name = ops.post("/api/v1/scopes/s/streams", json={"name": "no/slash"})
    assert bad_name.status_code == 422 and bad_name.json()["error"] == "InvalidName"
    bad_body = ops.post("/api/v1/scopes/s/streams", json={"name": "a", "segments": 0})
    assert bad_body.status_code == 422 and bad_body.json()["error"] == "InvalidInput"
    assert bad_body.headers["content-type"] == PROBLEM
    assert client.list_scopes() == []


def test_a_stale_if_match_is_refused_with_412(api: LiveApi, client: tk.Client) -> None:
    ops = api.as_role("operator")
    ops.post("/api/v1/scopes/s/streams", json={"name": "a"})
    etag = ops.get("/api/v1/scopes/s/streams/a").headers["etag"]
    first = ops.put("/api/v1/scopes/s/streams/a", headers={"If-Match": etag},
                    json={"retention": {"kind": "time", "min": "1d"}})
    assert first.status_code == 200 and first.headers["etag"] == '"2"'
    stale = ops.put("/api/v1/scopes/s/streams/a", headers={"If-Match": etag},
                    json={"retention": {"kind": "size", "min": "1GB"}})
    assert stale.status_code == 412 and stale.json()["error"] == "StaleVersion"
    policy = client.stream("s/a").describe()["retention"]
    assert policy is not None and "by time" in policy


def test_a_policy_update_keeps_the_rest_of_the_config(api: LiveApi, client: tk.Client) -> None:
    ops = api.as_role("operator")
    ops.post("/api/v1/scopes/s/streams", json={"name": "a", "segments": 3, "timestamp_aggregation_timeout": "5m"})
    updated = ops.put("/api/v1/scopes/s/streams/a", json={"retention": {"kind": "size", "min": "1GB"}})
    assert updated.status_code == 200, updated.text
    config = client.stream("s/a").state().info.config
    assert (config.segments, config.timestamp_aggregation_timeout_ms) == (3, 300_000)
    assert config.retention is not None and config.retention.min == 10**9


def test_no_token_is_401_and_a_viewer_may_not_write(api: LiveApi) -> None:
    assert api.http().get("/api/v1/streams").status_code == 401
    assert api.http("tk_1_" + "x" * 43).get("/api/v1/streams").status_code == 401
    refused = api.as_role("viewer").post("/api/v1/scopes/s/streams", json={"name": "a"})
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"


def test_a_scoped_token_sees_only_its_scope(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("mine/a")
    client.create_stream("other/b")
    scoped = api.as_role("operator", scope="mine")
    assert [s["name"] for s in scoped.get("/api/v1/streams").json()["items"]] == ["mine/a"]
    assert scoped.get("/api/v1/scopes/mine/streams/a").status_code == 200
    assert scoped.get("/api/v1/scopes/other/streams/b").status_code == 403
    assert scoped.post("/api/v1/scopes/other/streams", json={"name": "c"}).status_code == 403


def test_a_revoked_token_is_refused_at_once(api: LiveApi) -> None:
    viewer = api.as_role("viewer")
    assert viewer.get("/api/v1/streams").status_code == 200
    api.token_store.revoke("viewer")
    assert viewer.get("/api/v1/streams").status_code == 401


def test_the_list_of_every_stream_pages_through_scopes_that_sort_before_the_slash(
        sqlite_api: LiveApi, sqlite_client: tk.Client) -> None:
    """Scopes "a" and "a-b": "a-b/…" sorts before "a/…" as text but after it as (scope, name); every
    stream is on exactly one page whatever the characters."""
    names = ["a/x", "a/z", "a-b/y", "a_c/w", "b/v"]
    for name in names:
        sqlite_client.create_stream(name)
    http = sqlite_api.as_role("viewer")
    seen: list[str] = []
    cursor = None
    for _ in range(len(names) + 1):
        page = http.get("/api/v1/streams", params={"limit": 1, **({"cursor": cursor} if cursor else {})}).json()
        seen += [item["name"] for item in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == sorted(names) and len(seen) == len(names)
    assert seen == [i.name for i in sqlite_client.list_streams()]  # (scope, name) order


def test_events_written_through_the_api_are_read_back_in_order(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("w/orders", tk.StreamConfig(segments=2))
    operator = api.as_role("operator")
    answer = operator.post("/api/v1/scopes/w/streams/orders/events", json={"events": [
        {"data": "first", "routing_key": "k1"}, {"data": "second", "routing_key": "k1"},
        {"data": "ünïcode", "routing_key": "k2"}]})
    assert answer.status_code == 201, answer.text
    document = answer.json()
    assert document["events"] == 3 and document["writer_id"] == "api-operator"
    binary = operator.post("/api/v1/scopes/w/streams/orders/events",
                           json={"encoding": "base64", "writer_id": "bin", "events": [{"data": "AAH/"}]})
    assert binary.status_code == 201 and binary.json()["tail"] == str(client.stream("w/orders").tail_cut())
    events = list(client.stream("w/orders").read())
    assert sorted(e.payload for e in events) == sorted([b"first", b"second", "ünïcode".encode(), b"\x00\x01\xff"])
    k1 = [e.payload for e in events if e.routing_key == "k1"]
    assert k1 == [b"first", b"second"]  # one key, the order written
    assert {e.writer_id for e in events} == {"api-operator", "bin"}


def test_writing_events_refuses_bad_input_with_nothing_written(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("w/bad")
    operator = api.as_role("operator")
    cases = [({"events": []}, 422), ({"events": [{"data": "x", "extra": 1}]}, 422),
             ({"encoding": "base64", "events": [{"data": "b2s="}, {"data": "!!!"}]}, 422),
             ({"encoding": "hex", "events": [{"data": "00"}]}, 422)]
    for body, status in cases:
        answer = operator.post("/api/v1/scopes/w/streams/bad/events", json=body)
        assert answer.status_code == status, (body, answer.text)
        assert answer.headers["content-type"] == "application/problem+json"
    assert "events[1].data: not base64" in operator.post(
        "/api/v1/scopes/w/streams/bad/events", json=cases[2][0]).json()["detail"]
    assert operator.post("/api/v1/scopes/w/streams/nosuch/events", json={"events": [{"data": "x"}]}).status_code == 404
    assert api.as_role("viewer").post("/api/v1/scopes/w/streams/bad/events",
                                      json={"events": [{"data": "x"}]}).status_code == 403
    assert list(client.stream("w/bad").read()) == []


def test_compaction_is_a_job_and_refuses_bad_input_before_it_starts(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/c", tk.StreamConfig(segments=1))
    with client.stream("s/c").writer("w") as writer:
        for i in range(6):
            writer.write(f"event-{i}".encode(), routing_key="k")
            writer.flush()
    before = list(client.stream("s/c").read())
    ops = api.as_role("operator")
    for body, status in (({"target_size": 0}, 422), ({"target_size": "lots"}, 422), ({"nope": 1}, 422)):
        refused = ops.post("/api/v1/scopes/s/streams/c/compact", json=body)
        assert refused.status_code == status and refused.headers["content-type"] == PROBLEM, refused.text
    assert ops.post("/api/v1/scopes/s/streams/missing/compact").status_code == 404
    assert api.as_role("viewer").post("/api/v1/scopes/s/streams/c/compact").status_code == 403
    assert client.stream("s/c").describe()["chunks"]["count"] == 6  # nothing changed so far

    started = ops.post("/api/v1/scopes/s/streams/c/compact", json={"target_size": "1MiB"})
    assert started.status_code == 202 and started.headers["location"] == started.json()["location"]
    for _ in range(1200):
        job = ops.get(started.json()["location"]).json()
        if job["state"] in ("succeeded", "failed"):
            break
        time.sleep(0.05)
    assert job["state"] == "succeeded", job
    assert job["result"] == {"stream": "s/c", "chunks_before": 6, "chunks_after": 1, "groups_merged": 1,
                             "groups_skipped": 0, "bytes_merged": sum(8 + len(e.payload) for e in before)}
    assert list(client.stream("s/c").read()) == before
    assert client.stream("s/c").describe()["chunks"]["compacted"] == 1
