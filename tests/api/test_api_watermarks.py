"""Watermarks through real HTTP: list (paged by revision), latest, writers, compute, note; bad input,
roles, scoped tokens. (A reader group's time window: test_api_readergroups.py.)"""

from __future__ import annotations

from tests.helpers.api_server import LiveApi

import tidekeep as tk
from tidekeep.streams.documents import writer_json

PROBLEM = "application/problem+json"
BASE = "/api/v1/scopes/s/streams/w/watermarks"


def write(client: tk.Client, count: int) -> str:
    with client.stream("s/w").writer("w") as writer:
        writer.write_many([b"x" * 2] * count)
    return str(client.stream("s/w").tail_cut())


def test_note_compute_list_latest_and_writers(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/w")
    ops, viewer = api.as_role("operator"), api.as_role("viewer")
    assert viewer.get(BASE).json() == {"items": [], "next_cursor": None}
    assert viewer.get(f"{BASE}/latest").status_code == 404
    nothing = ops.post(f"{BASE}/compute")
    assert nothing.status_code == 200 and nothing.json() == {"emitted": False, "watermark": None, "writers": []}
    cuts = []
    for time_ms in (1_000, 2_000, 3_000):
        cuts.append(write(client, 2))
        noted = ops.post(f"{BASE}/notes", json={"writer": "batch", "time": time_ms, "position": cuts[-1]})
        assert noted.status_code == 201, noted.text
        assert noted.json()["time_ms"] == time_ms
        computed = ops.post(f"{BASE}/compute")
        assert computed.status_code == 200 and computed.json()["emitted"] is True, computed.text
    handle = client.stream("s/w").watermarks
    assert viewer.get(BASE).json() == {"items": [m.to_dict() for m in handle.list()], "next_cursor": None}
    assert [m["lower_time_ms"] for m in viewer.get(BASE).json()["items"]] == [1_000, 2_000, 3_000]
    first = viewer.get(BASE, params={"limit": 2}).json()
    assert [m["revision"] for m in first["items"]] == [m.revision for m in handle.list()][:2]
    rest = viewer.get(BASE, params={"limit": 2, "cursor": first["next_cursor"]}).json()
    assert rest["items"] == [handle.list()[-1].to_dict()] and rest["next_cursor"] is None
    latest = handle.latest()
    assert latest is not None and viewer.get(f"{BASE}/latest").json() == latest.to_dict()
    writers = viewer.get(f"{BASE}/writers").json()
    assert writers == {"items": [writer_json(s) for s in handle.writers()], "next_cursor": None}
    iso = ops.post(f"{BASE}/notes", json={"writer": "batch", "time": "1970-01-01T00:00:04Z"})
    assert iso.status_code == 201 and iso.json()["time_ms"] == 4_000


def test_bad_input_is_a_problem_and_changes_nothing(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/w")
    cut = write(client, 2)
    ops = api.as_role("operator")
    ops.post(f"{BASE}/notes", json={"writer": "batch", "time": 5_000, "position": cut})
    marks = client.stream("s/w").watermarks.marks()
    for body in ({"writer": "batch", "time": "noon"}, {"writer": "batch", "time": 4_000},  # time goes back
                 {"writer": "batch", "time": 6_000, "position": "other/x:0.0=0"},
                 {"writer": "bad name!", "time": 6_000}, {"writer": "batch"}, {"time": 6_000}):
        refused = ops.post(f"{BASE}/notes", json=body)
        assert refused.status_code == 422 and refused.headers["content-type"] == PROBLEM, (body, refused.text)
    assert client.stream("s/w").watermarks.marks() == marks
    assert ops.get("/api/v1/scopes/s/streams/missing/watermarks").status_code == 404
    for cursor in ("%%%", "ImEi", "LTE"):  # not base64 JSON; a string; -1
        assert ops.get(BASE, params={"cursor": cursor}).status_code == 422, cursor


def test_roles_and_scopes(api: LiveApi, client: tk.Client) -> None:
    client.create_stream("s/w")
    viewer = api.as_role("viewer")
    for path, body in (("/notes", {"writer": "batch", "time": 1}), ("/compute", None)):
        refused = viewer.post(BASE + path, json=body)
        assert refused.status_code == 403 and refused.json()["error"] == "PermissionDenied", path
    assert client.stream("s/w").watermarks.marks() == []
    other = api.as_role("operator", scope="other")
    for method, path in (("GET", ""), ("GET", "/latest"), ("GET", "/writers"), ("POST", "/compute")):
        assert other.request(method, BASE + path).status_code == 403, path
    assert other.post(f"{BASE}/notes", json={"writer": "batch", "time": 1}).status_code == 403
    assert client.stream("s/w").watermarks.marks() == []
    assert api.as_role("operator", scope="s").post(f"{BASE}/notes", json={"writer": "b", "time": 1}).status_code == 201
