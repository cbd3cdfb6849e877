"""Reader groups through real HTTP: create, list, describe, reset, delete, checkpoints, a subscriber's
acknowledged cuts and the group's time window; bad input, roles, scoped tokens, audit actor."""

from __future__ import annotations

from tests.helpers.api_server import LiveApi

import tidekeep as tk
from tidekeep.streams.documents import checkpoint_document

PROBLEM = "application/problem+json"
MANUAL = "MANUAL_RELEASE_AT_USER_STREAMCUT"


def write(client: tk.Client, stream: str, count: int) -> str:
    """`count` 10-byte events; returns the tail cut after them."""
    with client.stream(stream).writer("w") as writer:
        writer.write_many([b"x" * 2] * count)
    return str(client.stream(stream).tail_cut())


def test_create_list_describe_and_delete_a_group(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    client.create_stream("s/b")
    write(client, "s/a", 5)
    ops = api.as_role("operator")
    created = ops.post("/api/v1/reader-groups", json={"name": "g", "streams": ["s/a", "s/b"],
                                                      "retention_type": MANUAL, "checkpoint_interval": "30s",
                                                      "skip_truncated": True})
    assert created.status_code == 201, created.text
    assert created.headers["location"] == "/api/v1/reader-groups/g"
    assert created.json() == client.reader_group("g").describe()
    config = created.json()["config"]
    assert (config["retention_type"], config["automatic_checkpoint_interval_ms"], config["skip_truncated"]) == (
        MANUAL, 30_000, True)
    viewer = api.as_role("viewer")
    assert viewer.get("/api/v1/reader-groups").json() == {
        "items": [{"name": "g", "streams": ["s/a", "s/b"]}], "next_cursor": None}
    described = viewer.get("/api/v1/reader-groups/g")
    assert described.status_code == 200 and described.json() == client.reader_group("g").describe()
    assert described.json()["streams"]["s/a"]["unread_bytes"] == 50
    deleted = ops.delete("/api/v1/reader-groups/g")
    assert deleted.status_code == 200 and deleted.json() == {"deleted": "g"}
    assert client.list_reader_groups() == []
    assert viewer.get("/api/v1/reader-groups/g").status_code == 404


def test_create_at_start_cuts_and_reset_to_head(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    middle = write(client, "s/a", 3)
    write(client, "s/a", 2)
    ops = api.as_role("operator")
    created = ops.post("/api/v1/reader-groups", json={"name": "g", "streams": {"s/a": middle}})
    assert created.status_code == 201, created.text
    assert created.json()["streams"]["s/a"] == {"position": middle, "unread_bytes": 20, "subscriber": None}
    dry = ops.post("/api/v1/reader-groups/g/reset", json={"to": "head", "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["new_generation"] is None
    assert client.reader_group("g").describe()["streams"]["s/a"]["position"] == middle  # nothing changed
    done = ops.post("/api/v1/reader-groups/g/reset", json={"to": "head"})
    assert done.status_code == 200 and done.json()["new_generation"] == 1
    assert done.json()["streams"] == {"s/a": {"current": middle, "new": str(client.stream("s/a").head_cut())}}
    assert client.reader_group("g").describe()["streams"]["s/a"]["unread_bytes"] == 50
    back = ops.post("/api/v1/reader-groups/g/reset", json={"cuts": [middle]})
    assert back.status_code == 200 and back.json()["new_generation"] == 2
    assert client.reader_group("g").describe()["streams"]["s/a"]["position"] == middle


def test_checkpoints_are_initiated_and_listed(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    write(client, "s/a", 4)
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=["s/a"]))
    ops = api.as_role("operator")
    made = ops.post("/api/v1/reader-groups/g/checkpoints", json={"name": "c1", "wait": 5})
    assert made.status_code == 201, made.text  # no reader online: complete at once
    assert made.json() == checkpoint_document(client.reader_group("g").checkpoint("c1"))
    assert made.json()["cuts"] == {"s/a": str(client.stream("s/a").head_cut())}
    with client.reader_group("g").reader("r1") as reader:  # an online reader that does not read
        pending = ops.post("/api/v1/reader-groups/g/checkpoints", json={"name": "c2", "wait": 0})
        assert pending.status_code == 202, pending.text
        assert pending.json() == {"name": "c2", "created": None, "completed": None, "cuts": {}}
        listed = api.as_role("viewer").get("/api/v1/reader-groups/g/checkpoints").json()
        assert listed == {"reader_group": "g", "completed": [made.json()], "pending": ["c2"]}
        assert reader.reader_id == "r1"
    again = ops.post("/api/v1/reader-groups/g/checkpoints", json={"name": "c1"})
    assert again.status_code == 409 and again.json()["error"] == "AlreadyExists"


def test_a_subscriber_acknowledges_cuts(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=["s/a"], retention_type=tk.RetentionType(MANUAL)))
    cut = write(client, "s/a", 5)
    ops = api.as_role("operator")
    acked = ops.post("/api/v1/reader-groups/g/retention-cut", json={"cuts": [cut]})
    assert acked.status_code == 200, acked.text
    assert acked.json() == {"reader_group": "g", "acknowledged": {"s/a": cut}}
    [subscriber] = client.stream("s/a").subscribers()
    assert subscriber.to_dict()["acknowledged"] == cut
    subscribers = api.as_role("viewer").get("/api/v1/scopes/s/streams/a/subscribers").json()["items"]
    assert [(s["reader_group"], s["acknowledged"], s["unconsumed_bytes"]) for s in subscribers] == [("g", cut, 0)]


def test_the_time_window_of_a_group(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=["s/a"]))
    viewer = api.as_role("viewer")
    assert viewer.get("/api/v1/reader-groups/g/window").json() == {
        "reader_group": "g", "generation": 0, "streams": {"s/a": {"lower_ms": None, "upper_ms": None}}}
    handle = client.stream("s/a")
    first = write(client, "s/a", 2)
    handle.watermarks.note("w1", 1_000, first)
    assert handle.watermarks.compute() is not None
    second = write(client, "s/a", 2)
    handle.watermarks.note("w1", 2_000, second)
    assert handle.watermarks.compute() is not None
    # at the head the group has passed no watermark; the first one is ahead of it
    at_head = viewer.get("/api/v1/reader-groups/g/window").json()["streams"]["s/a"]
    assert at_head == {"lower_ms": None, "upper_ms": 1_000}
    api.as_role("operator").post("/api/v1/reader-groups/g/reset", json={"cuts": [first]})
    past_first = viewer.get("/api/v1/reader-groups/g/window").json()
    assert past_first["generation"] == 1 and past_first["streams"]["s/a"] == {"lower_ms": 1_000, "upper_ms": 2_000}


def test_bad_input_is_a_problem_and_changes_nothing(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    ops = api.as_role("operator")
    for body, error in (({"name": "g", "streams": ["s/missing"]}, "NotFound"),
                        ({"name": "g", "streams": ["s/a"], "retention_type": "SOMETIMES"}, "InvalidInput"),
                        ({"name": "g", "streams": []}, "InvalidInput"),
                        ({"name": "g", "streams": ["no-slash"]}, "InvalidName"),
                        ({"name": "g", "streams": ["s/a"], "checkpoint_interval": "0s"}, "InvalidInput"),
                        ({"name": "g", "streams": ["s/a"], "colour": "red"}, "InvalidInput")):
        refused = ops.post("/api/v1/reader-groups", json=body)
        assert refused.headers["content-type"] == PROBLEM, (body, refused.text)
        assert refused.json()["error"] == error, (body, refused.text)
        assert refused.status_code == (404 if error == "NotFound" else 422)
    assert client.list_reader_groups() == []
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=["s/a"]))
    before = client.reader_group("g").describe()
    for path, body in (("reset", {}), ("reset", {"to": "head", "cuts": ["s/a:0.0=0"]}),
                       ("reset", {"to": "checkpoint", "checkpoint": "never"}),
                       ("reset", {"to": "checkpoint"}),  # found by the schema fuzzing: was a 500
                       ("retention-cut", {"cuts": ["not a cut"]}),
                       ("retention-cut", {"cuts": ["s/a:0.0=0"]}),  # not a MANUAL group
                       ("checkpoints", {"name": "c", "wait": -1})):
        refused = ops.post(f"/api/v1/reader-groups/g/{path}", json=body)
        assert refused.status_code in (404, 409, 422), (path, body, refused.text)
        assert refused.headers["content-type"] == PROBLEM
    assert client.reader_group("g").describe() == before
    assert ops.get("/api/v1/reader-groups/missing").status_code == 404
    assert ops.delete("/api/v1/reader-groups/missing").json()["error"] == "NotFound"
    assert ops.get("/api/v1/reader-groups?cursor=%%%").status_code == 422


def test_a_viewer_may_read_but_not_change_groups(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    client.create_reader_group("g", tk.ReaderGroupConfig(streams=["s/a"]))
    viewer = api.as_role("viewer")
    for method, path, body in (("POST", "/api/v1/reader-groups", {"name": "h", "streams": ["s/a"]}),
                               ("POST", "/api/v1/reader-groups/g/reset", {"to": "tail"}),
                               ("POST", "/api/v1/reader-groups/g/checkpoints", {"name": "c"}),
                               ("POST", "/api/v1/reader-groups/g/retention-cut", {"cuts": ["s/a:0.0=0"]}),
                               ("DELETE", "/api/v1/reader-groups/g", None)):
        refused = viewer.request(method, path, json=body)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", (path, refused.text)
    assert client.list_reader_groups() == ["g"] and client.reader_group("g").generation == 0
    assert client.reader_group("g").pending_checkpoints() == [] and client.reader_group("g").checkpoints() == []


def test_a_scoped_token_reaches_only_groups_inside_its_scope(api: LiveApi, client: tk.Client) -> None:
    for stream in ("mine/a", "mine/b", "other/c"):
        client.create_stream(stream)
    client.create_reader_group("inside", tk.ReaderGroupConfig(streams=["mine/a", "mine/b"]))
    client.create_reader_group("across", tk.ReaderGroupConfig(streams=["mine/a", "other/c"]))
    scoped = api.as_role("operator", scope="mine")
    assert [g["name"] for g in scoped.get("/api/v1/reader-groups").json()["items"]] == ["inside"]
    assert scoped.get("/api/v1/reader-groups/inside").status_code == 200
    assert scoped.get("/api/v1/reader-groups/across").status_code == 403
    assert scoped.delete("/api/v1/reader-groups/across").status_code == 403
    assert scoped.post("/api/v1/reader-groups", json={"name": "n", "streams": ["other/c"]}).status_code == 403
    assert sorted(client.list_reader_groups()) == ["across", "inside"]
    made = scoped.post("/api/v1/reader-groups", json={"name": "n", "streams": ["mine/b"]})
    assert made.status_code == 201
    assert [g["name"] for g in api.as_role("viewer").get("/api/v1/reader-groups").json()["items"]] == [
        "across", "inside", "n"]
