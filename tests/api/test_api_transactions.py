"""Transactions through real HTTP: list (filtered, paged, scoped) and abort (audited with the
token's name); bad input, roles."""

from __future__ import annotations

from tests.helpers.api_server import LiveApi

import tidekeep as tk
from tidekeep.streams.documents import txn_record

PROBLEM = "application/problem+json"


def open_txn(client: tk.Client, stream: str, events: int = 2) -> str:
    """An OPEN transaction on `stream` with `events` staged 10-byte events; returns its id."""
    txn = client.stream(stream).transactional_writer("tw").begin()
    for _ in range(events):
        txn.write(b"x" * 2)
    txn.flush()
    return str(txn.info().id)


def test_list_and_abort_a_transaction(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    client.create_stream("s/b")
    first, second = open_txn(client, "s/a", 3), open_txn(client, "s/b")
    viewer = api.as_role("viewer")
    listed = viewer.get("/api/v1/transactions")
    assert listed.status_code == 200
    assert listed.json() == {"items": [txn_record(i) for i in client.transactions.list()], "next_cursor": None}
    assert [t["id"] for t in listed.json()["items"]] == [first, second]
    only_b = viewer.get("/api/v1/transactions", params={"stream": "s/b"}).json()["items"]
    assert [t["id"] for t in only_b] == [second]
    page = viewer.get("/api/v1/transactions", params={"limit": 1}).json()
    assert [t["id"] for t in page["items"]] == [first]
    rest = viewer.get("/api/v1/transactions", params={"limit": 1, "cursor": page["next_cursor"]}).json()
    assert [t["id"] for t in rest["items"]] == [second] and rest["next_cursor"] is None
    aborted = api.as_role("operator").post(f"/api/v1/transactions/{first}/abort")
    assert aborted.status_code == 200, aborted.text
    assert aborted.json() == {"id": first, "aborted": True, "files_left": []}
    info = client.transactions.info(first)
    assert info.state.value == "ABORTED" and info.staged_chunks == 0
    row = client.audit("s/a", limit=1)[0]
    assert (row["action"], row["actor"], row["bytes_freed"]) == ("txn_abort", "operator", 30)
    again = api.as_role("operator").post(f"/api/v1/transactions/{first}/abort")
    assert again.status_code == 200 and again.json()["aborted"] is False
    assert len([r for r in client.audit("s/a") if r["action"] == "txn_abort"]) == 1


def test_bad_input_is_a_problem_and_changes_nothing(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/a")
    txn_id = open_txn(client, "s/a")
    before = client.transactions.list()
    ops = api.as_role("operator")
    bad_id = ops.post("/api/v1/transactions/not-hex/abort")
    assert bad_id.status_code == 422 and bad_id.headers["content-type"] == PROBLEM
    unknown = ops.post(f"/api/v1/transactions/{'0' * 32}/abort")
    assert unknown.status_code == 404 and unknown.json()["error"] == "NotFound"
    assert ops.get("/api/v1/transactions", params={"stream": "s/missing"}).status_code == 404
    assert ops.get("/api/v1/transactions", params={"stream": "noslash"}).status_code == 422
    assert ops.get("/api/v1/transactions", params={"cursor": "ImEi"}).status_code == 422
    committed = client.stream("s/a").transactional_writer("tw2").begin()
    committed.write(b"y")
    committed.commit()
    refused = ops.post(f"/api/v1/transactions/{committed.info().id}/abort")
    assert refused.status_code == 422 and refused.json()["error"] == "TransactionClosed"
    assert [i for i in client.transactions.list() if i.id == txn_id] == [before[0]]


def test_roles_and_scopes(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("mine/a")
    client.create_stream("other/b")
    mine, other = open_txn(client, "mine/a"), open_txn(client, "other/b")
    refused = api.as_role("viewer").post(f"/api/v1/transactions/{mine}/abort")
    assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied"
    scoped = api.as_role("operator", scope="mine")
    assert [t["id"] for t in scoped.get("/api/v1/transactions").json()["items"]] == [mine]
    assert scoped.get("/api/v1/transactions", params={"stream": "other/b"}).status_code == 403
    assert scoped.post(f"/api/v1/transactions/{other}/abort").status_code == 403
    assert {i.id: i.state.value for i in client.transactions.list()} == {mine: "OPEN", other: "OPEN"}
    assert scoped.post(f"/api/v1/transactions/{mine}/abort").json()["aborted"] is True
    assert client.audit("mine/a", limit=1)[0]["actor"] == "operator-mine"
