"""The reader group pages: the list filtered by scope (a scoped token sees the groups inside its
scope only), a group's readers, segment assignments, positions and checkpoints as the API
describes them (docs/dashboard.md, "Reader groups"). Real HTTP against a live server."""

from __future__ import annotations

import re
from contextlib import closing

from tests.helpers.api_server import LiveApi
from tests.helpers.web_client import logged_in

import tidekeep as tk
from tidekeep.units import human_size


def setup_groups(web: LiveApi, client: tk.Client) -> None:
    for name in ("g/a", "g/b", "h/c"):
        client.create_stream(name)
        with client.stream(name).writer("w") as writer:
            for i in range(5):
                writer.write(f"event-{i}".encode(), routing_key=str(i))
    ops = web.as_role("operator")
    for group, streams in (("alpha", ["g/a", "g/b"]), ("mixed", ["g/a", "h/c"]), ("hotel", ["h/c"])):
        assert ops.post("/api/v1/reader-groups", json={"name": group, "streams": streams}).status_code == 201
    assert ops.post("/api/v1/reader-groups/alpha/checkpoints", json={"name": "cp-1", "wait": 5}).status_code == 201


def group_names(page: str) -> list[str]:
    return re.findall(r'<td><a href="/readergroups/[^/"]+/([^"]+)">', page)


def test_the_list_filtered_by_scope(web: LiveApi, sqlite_client: tk.Client) -> None:
    setup_groups(web, sqlite_client)
    browser, _ = logged_in(web, "viewer")
    with closing(browser):
        page = browser.get("/readergroups").text
        assert group_names(page) == ["alpha", "hotel", "mixed"]
        assert 'href="/readergroups/g/alpha"' in page and 'href="/readergroups/h/hotel"' in page
        assert group_names(browser.get("/readergroups", params={"scope": "g"}).text) == ["alpha", "mixed"]
        assert group_names(browser.get("/readergroups", params={"scope": "h"}).text) == ["hotel", "mixed"]
        assert group_names(browser.get("/readergroups", params={"scope": "zz"}).text) == []


def test_a_group_page_shows_what_the_api_describes(web: LiveApi, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    setup_groups(web, client)
    browser, _ = logged_in(web, "viewer")
    with closing(browser), client.reader_group("alpha").reader("reader-7") as reader:
        reader.read_next_event(timeout_ms=500)  # online, with segments assigned
        described = client.reader_group("alpha").describe()
        page = browser.get("/readergroups/g/alpha")
        assert page.status_code == 200, page.text
        text = page.text
    assert "<h1>Reader group alpha</h1>" in text and "reader-7" in text
    for stream, shown in described["streams"].items():
        assert shown["position"] in text and human_size(shown["unread_bytes"]) in text, stream
    [online] = described["readers"]
    assert online["segments"] and all(segment in text for segment in online["segments"])
    assert [g["owner"] for g in described["segments"]].count("reader-7") == len(online["segments"])
    [checkpoint] = client.reader_group("alpha").checkpoints()
    assert "cp-1" in text and all(str(cut) in text for cut in checkpoint.cuts.values())
    # the same group under a scope it does not read: not found
    with closing(logged_in(web, "viewer")[0]) as other:
        assert other.get("/readergroups/h/alpha").status_code == 404
        assert other.get("/readergroups/g/nothing").status_code == 404


def test_a_scoped_token_sees_the_groups_inside_its_scope_only(web: LiveApi, sqlite_client: tk.Client) -> None:
    setup_groups(web, sqlite_client)
    scoped, _ = logged_in(web, "scoped", token=web.token("g-viewer", "viewer", "g"))
    with closing(scoped):
        assert group_names(scoped.get("/readergroups").text) == ["alpha"]
        assert scoped.get("/readergroups/g/alpha").status_code == 200
        assert scoped.get("/readergroups/h/hotel").status_code == 403  # the address's scope is another
        assert scoped.get("/readergroups/g/mixed").status_code == 403  # it reads h/c too
