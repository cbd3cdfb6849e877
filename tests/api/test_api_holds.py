"""Legal holds through real HTTP: add, list, read, remove as `tidekeep hold` does; roles (legal
holds, operator and viewer may not), scoped tokens, If-Match on removal, audit actor."""

from __future__ import annotations

from tests.helpers.api_server import LiveApi

import tidekeep as tk
from tidekeep.cli.holds import hold_record

PROBLEM = "application/problem+json"


def test_add_read_list_and_remove_a_hold(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    legal = api.as_role("legal")
    added = legal.post("/api/v1/holds", json={"kind": "stream", "target": "s/a", "reason": "case 7"})
    assert added.status_code == 201, added.text
    hold = client.holds.list()[0]
    assert added.json() == hold_record(hold)  # what `tidekeep hold add --json` prints
    assert added.headers["etag"] == f'"{hold.id}"' and added.headers["location"] == f"/api/v1/holds/{hold.id}"
    assert hold.created_by == "legal"
    row = client.audit("s/a", limit=1)[0]
    assert row["action"] == "hold_add" and row["actor"] == "legal"

    viewer = api.as_role("viewer")
    read = viewer.get(f"/api/v1/holds/{hold.id}")
    assert read.status_code == 200 and read.json() == hold_record(hold) and read.headers["etag"] == f'"{hold.id}"'
    assert viewer.get("/api/v1/holds").json() == {"items": [hold_record(hold)], "next_cursor": None}

    removed = legal.delete(f"/api/v1/holds/{hold.id}", headers={"If-Match": read.headers["etag"]})
    assert removed.status_code == 200 and removed.json() == hold_record(hold)
    assert client.holds.list() == []
    row = client.audit("s/a", limit=1)[0]
    assert row["action"] == "hold_remove" and row["actor"] == "legal"


def test_the_list_filters_by_kind_and_target_and_pages_oldest_first(api: LiveApi, client: tk.Client) -> None:
    for name in ("a", "b", "c"):
        client.create_stream(f"s/{name}")
        client.holds.add("stream", f"s/{name}", f"hold {name}")
    client.holds.add("records", 'feed = "X"', "records")
    viewer = api.as_role("viewer")
    first = viewer.get("/api/v1/holds", params={"kind": "stream", "limit": 2}).json()
    second = viewer.get("/api/v1/holds", params={"kind": "stream", "limit": 2, "cursor": first["next_cursor"]}).json()
    assert second["next_cursor"] is None
    assert first["items"] + second["items"] == [hold_record(h) for h in client.holds.list("stream")]
    only_b = viewer.get("/api/v1/holds", params={"target": "s/b"}).json()["items"]
    assert [h["target"] for h in only_b] == ["s/b"]
    everything = viewer.get("/api/v1/holds").json()["items"]
    assert everything == [hold_record(h) for h in client.holds.list()]


def test_bad_input_is_a_problem_and_adds_or_removes_nothing(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    legal = api.as_role("legal")
    cases = [({"kind": "nope", "target": "s/a", "reason": "r"}, 422, "InvalidInput"),
             ({"kind": "stream", "target": "s/a", "reason": "  "}, 422, "InvalidInput"),
             ({"kind": "stream", "target": "s/missing", "reason": "r"}, 404, "NotFound"),
             ({"kind": "records", "target": "feed = ", "reason": "r"}, 422, None),
             ({"kind": "stream", "target": "s/a", "reason": "nul \x00 inside"}, 422, "InvalidInput"),
             ({"kind": "stream", "target": "s/a"}, 422, "InvalidInput"),
             ({"kind": "stream", "target": "s/a", "reason": "r", "extra": 1}, 422, "InvalidInput")]
    for body, status, error in cases:
        response = legal.post("/api/v1/holds", json=body)
        assert response.status_code == status, (body, response.text)
        assert response.headers["content-type"] == PROBLEM
        if error is not None:
            assert response.json()["error"] == error, body
    lone_surrogate = legal.post("/api/v1/holds", headers={"content-type": "application/json"},
                                content=b'{"kind": "stream", "target": "s/a", "reason": "x\\ud800"}')
    assert lone_surrogate.status_code == 422 and lone_surrogate.json()["error"] == "InvalidInput"
    assert client.holds.list() == []
    assert [e for e in client.audit() if e["action"] == "hold_add"] == []
    for params in ({"kind": "nope"}, {"target": "s/\x00"}):
        listed = legal.get("/api/v1/holds", params=params)
        assert listed.status_code == 422 and listed.json()["error"] == "InvalidInput", params
    for path in ("/api/v1/holds/999", "/api/v1/holds/0", "/api/v1/holds/x", f"/api/v1/holds/{2**63}"):
        assert legal.get(path).status_code in (404, 422), path
        assert legal.delete(path).status_code in (404, 422), path
    assert legal.get("/api/v1/holds/999").json()["error"] == "NotFound"


def test_a_stale_if_match_removes_nothing(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    first = client.holds.add("stream", "s/a", "one")
    second = client.holds.add("stream", "s/a", "two")
    legal = api.as_role("legal")
    stale = legal.delete(f"/api/v1/holds/{second}", headers={"If-Match": f'"{first}"'})
    assert stale.status_code == 412 and stale.json()["error"] == "StaleVersion"
    assert stale.json()["current_version"] == str(second)
    assert [h.id for h in client.holds.list()] == [first, second]
    assert legal.delete(f"/api/v1/holds/{second}", headers={"If-Match": "*"}).status_code == 200
    assert [h.id for h in client.holds.list()] == [first]


def test_legal_and_admin_may_hold_operator_and_viewer_may_not(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    body = {"kind": "stream", "target": "s/a", "reason": "r"}
    for role in ("viewer", "operator"):
        refused = api.as_role(role).post("/api/v1/holds", json=body)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"
    assert client.holds.list() == []
    hold_id = api.as_role("admin").post("/api/v1/holds", json=body).json()["id"]
    for role in ("viewer", "operator"):
        assert api.as_role(role).delete(f"/api/v1/holds/{hold_id}").status_code == 403
    assert [h.id for h in client.holds.list()] == [hold_id]
    assert api.http().get("/api/v1/holds").status_code == 401


def test_a_scoped_token_holds_and_sees_only_its_scopes_streams(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("mine/a")
    client.create_stream("other/b")
    other = client.holds.add("stream", "other/b", "theirs")
    records = client.holds.add("records", 'feed = "X"', "workspace-wide")
    scoped = api.as_role("legal", scope="mine")
    added = scoped.post("/api/v1/holds", json={"kind": "stream", "target": "mine/a", "reason": "ours"})
    assert added.status_code == 201, added.text
    for body in ({"kind": "stream", "target": "other/b", "reason": "r"},
                 {"kind": "records", "target": 'feed = "Y"', "reason": "r"}):
        refused = scoped.post("/api/v1/holds", json=body)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", body
    assert [h["target"] for h in scoped.get("/api/v1/holds").json()["items"]] == ["mine/a"]
    for hold_id in (other, records):
        assert scoped.get(f"/api/v1/holds/{hold_id}").status_code == 403
        assert scoped.delete(f"/api/v1/holds/{hold_id}").status_code == 403
    assert scoped.delete(f"/api/v1/holds/{added.json()['id']}").status_code == 200
    assert sorted(h.id for h in client.holds.list()) == [other, records]
