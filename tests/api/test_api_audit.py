"""The audit trail through real HTTP: the rows `tidekeep audit list --json` prints, filtered by
target, action, actor and time (ms or ISO), newest first, keyset-paged; scoped tokens see their
scope's streams only."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from tests.helpers.api_server import LiveApi

import tidekeep as tk
from tidekeep.store.schema import audit
from tidekeep.streams.documents import audit_document
from tidekeep.units import iso_utc

PROBLEM = "application/problem+json"


def all_rows(client: tk.Client) -> list[dict[str, Any]]:
    return [audit_document(e) for e in client.audit(limit=1000)]


def seed(api: LiveApi, client: tk.Client) -> None:
    """Rows of several actions, targets and actors: holds by the API's legal token, truncations by
    the operator token, and a hold by the client itself."""
    legal, ops = api.as_role("legal"), api.as_role("operator")
    for name in ("mine/a", "other/b"):
        client.create_stream(name)
        with client.stream(name).writer("w") as writer:
            writer.write(b"event", routing_key="k")
        assert legal.post("/api/v1/holds", json={"kind": "stream", "target": name, "reason": "r"}).status_code == 201
        hold_id = client.holds.list("stream", name)[0].id
        assert legal.delete(f"/api/v1/holds/{hold_id}").status_code == 200
        scope, stream = name.split("/")
        assert ops.post(f"/api/v1/scopes/{scope}/streams/{stream}/truncate",
                        json={"cut": "tail", "reason": "done"}).status_code == 200
    client.holds.add("records", 'feed = "X"', "by the client")


def test_the_trail_newest_first_as_the_cli_prints_it(api: LiveApi, client: tk.Client) -> None:
    seed(api, client)
    page = api.as_role("viewer").get("/api/v1/audit", params={"limit": 1000})
    assert page.status_code == 200, page.text
    assert page.json() == {"items": all_rows(client), "next_cursor": None}
    assert {r["actor"] for r in page.json()["items"] if r["action"] == "hold_add" and "/" in r["target"]} == {"legal"}
    assert {r["actor"] for r in page.json()["items"] if r["action"] == "truncate"} == {"operator"}


def test_filters_match_a_brute_force_filter_of_every_row(api: LiveApi, client: tk.Client) -> None:
    viewer = api.as_role("viewer")  # first: creating its token is audited too
    seed(api, client)
    rows = all_rows(client)
    middle = sorted({r["time_ms"] for r in rows})[len(rows) // 2]
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"target": "mine/a"}, lambda r: r["target"] == "mine/a"),
        ({"action": "hold_add"}, lambda r: r["action"] == "hold_add"),
        ({"actor": "legal"}, lambda r: r["actor"] == "legal"),
        ({"action": "truncate", "actor": "operator", "target": "other/b"},
         lambda r: (r["action"], r["actor"], r["target"]) == ("truncate", "operator", "other/b")),
        ({"since": middle}, lambda r: r["time_ms"] >= middle),
        ({"until": middle}, lambda r: r["time_ms"] <= middle),
        ({"since": iso_utc(middle), "until": iso_utc(middle)}, lambda r: r["time_ms"] == middle),
        ({"actor": "nobody"}, lambda r: False),
    ]
    for params, keep in cases:
        got = viewer.get("/api/v1/audit", params={**params, "limit": 1000})
        assert got.status_code == 200, (params, got.text)
        assert got.json()["items"] == [r for r in rows if keep(r)], params


def test_pages_neither_repeat_nor_skip_while_rows_are_added(api: LiveApi, client: tk.Client) -> None:
    viewer = api.as_role("viewer")
    seed(api, client)
    expected = [r["id"] for r in all_rows(client)]
    seen: list[int] = []
    cursor = None
    while True:
        page = viewer.get("/api/v1/audit", params={"limit": 3} | ({"cursor": cursor} if cursor else {})).json()
        assert len(page["items"]) <= 3
        seen += [r["id"] for r in page["items"]]
        if not seen[3:]:  # after the first page: a new row goes on top, never into a later page
            client.holds.add("records", 'feed = "Y"', "meanwhile")
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == expected


def test_bad_input_is_a_422_problem(api: LiveApi) -> None:
    viewer = api.as_role("viewer")
    for params in ({"since": "yesterday"}, {"until": "2024-13-01"}, {"since": "-5"}, {"cursor": "%%%"},
                   {"cursor": "eyJhIjoxfQ"}, {"limit": 0}, {"limit": 1001}, {"since": "9" * 30},
                   {"target": "s/\x00"}, {"action": "\x00"}, {"actor": "a\x00b"}):
        response = viewer.get("/api/v1/audit", params=params)
        assert response.status_code == 422, (params, response.text)
        assert response.headers["content-type"] == PROBLEM and response.json()["error"] == "InvalidInput"
    assert api.http().get("/api/v1/audit").status_code == 401


def test_a_scoped_token_sees_only_its_scopes_streams(api: LiveApi, client: tk.Client) -> None:
    scoped = api.as_role("viewer", scope="mine")
    seed(api, client)
    items = scoped.get("/api/v1/audit", params={"limit": 1000}).json()["items"]
    assert items == [r for r in all_rows(client) if r["target"].startswith("mine/")] and items
    assert scoped.get("/api/v1/audit", params={"target": "other/b"}).json()["items"] == []


def test_the_chain_head_and_its_verification_as_the_client_gives_them(api: LiveApi, client: tk.Client) -> None:
    viewer = api.as_role("viewer")
    seed(api, client)
    head = viewer.get("/api/v1/audit/anchor")
    assert head.status_code == 200 and head.json() == client.audit_head()
    assert head.json()["hash"] == all_rows(client)[0]["hash"]  # the newest row's link is the head
    verdict = viewer.get("/api/v1/audit/verify", params={"anchor": head.json()["hash"]})
    assert verdict.status_code == 200 and verdict.json() == client.audit_verify(head.json()["hash"]).to_dict()
    assert verdict.json()["ok"] and verdict.json()["anchor_id"] == head.json()["id"]
    with client.workspace.db.engine.begin() as conn:  # tampering, around tidekeep
        conn.execute(sa.update(audit).where(audit.c.id == 2).values(reason="edited"))
    broken = viewer.get("/api/v1/audit/verify").json()
    assert not broken["ok"] and (broken["broken"]["kind"], broken["broken"]["row_id"]) == ("changed", 2)


def test_the_chain_is_the_workspaces_so_a_scoped_token_is_refused(api: LiveApi) -> None:
    scoped = api.as_role("viewer", scope="mine")
    for path in ("/api/v1/audit/anchor", "/api/v1/audit/verify"):
        response = scoped.get(path)
        assert response.status_code == 403 and response.json()["error"] == "PermissionDenied", path
    bad = api.as_role("viewer").get("/api/v1/audit/verify", params={"anchor": "xyz"})
    assert bad.status_code == 422 and bad.json()["detail"].startswith("invalid anchor 'xyz'")
