"""The store queries behind the dashboard's overview and hold list, on SQLite and PostgreSQL
(their SQL differs by dialect: JSON in the audit details, integer division for the hour), each
against a brute-force answer from the same store."""

from __future__ import annotations

import json
from collections import Counter

import tidekeep as tk
from tidekeep.store.audit import audit_rows
from tidekeep.store.holds import HoldFilter, active_holds_page, active_holds_summary, released_holds_page
from tidekeep.store.overview_queries import FAMILY_ACTIONS, HOUR_MS, deletions_by_hour, retained_bytes, stream_bytes


def filled(client: tk.Client) -> None:
    """Two scopes with data, a truncation, and holds of two kinds added and removed."""
    for name in ("o/a", "o/b", "p/c"):
        client.create_stream(name)
        with client.stream(name).writer("w") as writer:
            writer.write_many([name.encode() * 20] * (3 if name == "o/b" else 6))
    client.stream("o/a").truncate(client.stream("o/a").tail_cut(), reason="emptied")
    client.holds.add("stream", "o/b", "case Alpha")
    for kind, target in (("stream", "o/a"), ("records", 'feed = "X"'), ("stream", "p/c")):
        client.holds.remove(client.holds.add(kind, target, f"case {kind}"))


def test_retained_bytes_equal_the_streams_sizes(client: tk.Client) -> None:
    filled(client)
    sizes = {name: client.stream(name).describe()["size_bytes"] for name in ("o/a", "o/b", "p/c")}
    assert sizes["o/a"] == 0 and sizes["o/b"] > 0
    assert retained_bytes(client.workspace.db) == {"streams": sum(sizes.values()), "archives": 0, "catalog": 0}
    assert stream_bytes(client.workspace.db, "o") == sizes["o/b"]
    assert stream_bytes(client.workspace.db, "p") == sizes["p/c"]


def test_deletions_by_hour_count_the_audit_rows_of_the_window(client: tk.Client) -> None:
    filled(client)
    rows = audit_rows(client.workspace.db, limit=10_000)
    family_of = {action: family for family, actions in FAMILY_ACTIONS.items() for action in actions}
    for since, until, prefix in ((0, 2**62, None), (0, 2**62, "o/"), (0, 2**62, "p/"), (0, 0, None)):
        expected = Counter((row["time_ms"] // HOUR_MS * HOUR_MS, family_of[row["action"]]) for row in rows
                           if row["action"] in family_of and since <= row["time_ms"] <= until
                           and (prefix is None or row["target"].startswith(prefix)))
        assert deletions_by_hour(client.workspace.db, since, until, prefix) == dict(expected), prefix
    assert sum(deletions_by_hour(client.workspace.db, 0, 2**62).values()) == 1  # the one truncation


def test_hold_pages_filter_by_kind_text_and_prefix(client: tk.Client) -> None:
    filled(client)
    db = client.workspace.db
    assert [h.target for h in active_holds_page(db, HoldFilter(), 10)] == ["o/b"]
    assert active_holds_page(db, HoldFilter(kind="records"), 10) == []
    count, newest = active_holds_summary(db, HoldFilter(text="ALPHA"), 5)
    assert count == 1 and newest[0].reason == "case Alpha"
    released = released_holds_page(db, HoldFilter(), 10)
    assert [r["target"] for r in released] == ["p/c", 'feed = "X"', "o/a"]  # newest first
    for kind in ("stream", "records"):
        page = released_holds_page(db, HoldFilter(kind=kind), 10)
        assert {r["target"] for r in page} == {r["target"] for r in released
                                               if json.loads(r["details"])["kind"] == kind}, kind
    assert [r["target"] for r in released_holds_page(db, HoldFilter(target_prefix="o/"), 10)] == ["o/a"]
    assert [r["target"] for r in released_holds_page(db, HoldFilter(), 10, before_id=released[0]["id"])] == [
        'feed = "X"', "o/a"]
