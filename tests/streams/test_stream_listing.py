"""Streams listed with their sizes in a few queries (streams/listing.py), on SQLite and PostgreSQL:
retained bytes equal to what `describe` computes from the topology (after scaling and a truncation),
the policy kind matched in the stored config as StreamConfig writes it, filters, keyset pages."""

from __future__ import annotations

import pytest

import tidekeep as tk
from tidekeep.errors import InvalidInput
from tidekeep.streams.listing import StreamQuery, StreamSort


def test_sizes_match_describe_after_scaling_and_truncation(client: tk.Client) -> None:
    client.create_stream("s/grown", tk.StreamConfig(segments=2))
    client.create_stream("s/empty")
    handle = client.stream("s/grown")
    with handle.writer("w") as writer:
        for i in range(60):
            writer.write(b"a" * 30, routing_key=str(i))
    handle.split("0.0")
    handle.merge(["1.2", "1.3"])
    with handle.writer("w") as writer:
        for i in range(40):
            writer.write(b"b" * 25, routing_key=str(i))
    middle = handle.tail_cut()
    with handle.writer("w") as writer:
        for i in range(10):
            writer.write(b"c" * 10, routing_key=str(i))
    handle.truncate(middle, "half")
    described = handle.describe()
    rows = {r.full_name: r for r in client.stream_listing().rows}
    grown = rows["s/grown"]
    assert grown.retained_bytes == described["size_bytes"] > 0
    assert grown.truncated_bytes == described["truncated_bytes"] > 0
    assert grown.segments == len(described["segments"]) == 5
    assert grown.active_segments == sum(1 for s in described["segments"] if not s["sealed"]) == 2
    assert grown.current_epoch == 2 and grown.events == 10  # the chunks left after the head
    assert (rows["s/empty"].retained_bytes, rows["s/empty"].segments, rows["s/empty"].events) == (0, 1, 0)


@pytest.mark.parametrize("sort", list(StreamSort))
@pytest.mark.parametrize("descending", [False, True])
def test_keyset_pages_cover_every_stream_once_in_order(client: tk.Client, sort: StreamSort, descending: bool) -> None:
    policies = [None, tk.RetentionPolicy.by_size("1MiB", "2MiB"), tk.RetentionPolicy.by_time("1h")]
    for i in range(13):
        client.create_stream(f"{'ab'[i % 2]}/n{i:02d}", tk.StreamConfig(segments=1 + i % 3, retention=policies[i % 3]))
    client.stream("a/n04").seal()
    with client.stream("b/n05").writer("w") as writer:
        writer.write(b"x" * 100)
    whole = client.stream_listing(StreamQuery(sort=sort, descending=descending, limit=100)).rows
    pages, after = [], None
    while True:
        listing = client.stream_listing(StreamQuery(sort=sort, descending=descending, after=after, limit=4))
        assert listing.total == 13
        pages.append(listing.rows)
        if not listing.more:
            break
        after = listing.rows[-1].key
    assert [len(p) for p in pages] == [4, 4, 4, 1]
    assert [r.full_name for p in pages for r in p] == [r.full_name for r in whole]
    values = {StreamSort.NAME: lambda r: (r.name, r.scope), StreamSort.SCOPE: lambda r: (r.scope, r.name),
              StreamSort.SEGMENTS: lambda r: (r.active_segments, r.scope, r.name),
              StreamSort.RETAINED: lambda r: (r.retained_bytes, r.scope, r.name),
              StreamSort.POLICY: lambda r: (r.policy_kind, r.scope, r.name),
              StreamSort.STATE: lambda r: (r.state.value, r.scope, r.name)}[sort]
    assert [values(r) for r in whole] == sorted((values(r) for r in whole), reverse=descending)


def test_the_policy_kind_is_read_from_the_stored_config(client: tk.Client) -> None:
    client.create_stream("p/none")
    client.create_stream("p/size", tk.StreamConfig(retention=tk.RetentionPolicy.by_size("1KiB")))
    client.create_stream("p/time", tk.StreamConfig(retention=tk.RetentionPolicy.by_time("1d", "2d")))
    client.stream("p/none").update(tk.StreamConfig(retention=tk.RetentionPolicy.by_time("1h")))
    rows = client.stream_listing(StreamQuery(sort=StreamSort.POLICY)).rows
    # the kind the database sorted on is the kind of the config as read back
    assert [(r.name, r.key[0]) for r in rows] == [("size", "size"), ("none", "time"), ("time", "time")]
    assert all(r.key[0] == r.policy_kind for r in rows)


def test_filters_by_scope_and_name_text(client: tk.Client) -> None:
    for name in ("x/Orders_EU", "x/orders-us", "y/orders_eu", "y/clicks"):
        client.create_stream(name)
    found = client.stream_listing(StreamQuery(text="orders_")).rows  # "_" is a character, not a wildcard
    assert {r.full_name for r in found} == {"x/Orders_EU", "y/orders_eu"}
    assert [r.full_name for r in client.stream_listing(StreamQuery(scope="y")).rows] == ["y/clicks", "y/orders_eu"]
    assert client.stream_listing(StreamQuery(scope="y", text="ORDERS")).total == 1


@pytest.mark.parametrize("after", [["only-one"], [1, "a", "b"], [True, "a"], [None, "a"], [[1], "a"]])
def test_a_cursor_of_another_list_is_refused(sqlite_client: tk.Client, after: list[object]) -> None:
    with pytest.raises(InvalidInput, match="invalid cursor"):
        sqlite_client.stream_listing(StreamQuery(after=after))  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="invalid limit"):
        StreamQuery(limit=0)
