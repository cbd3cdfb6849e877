"""End-to-end smoke: create, write, scale, read in per-key order, truncate — on both backends."""

from __future__ import annotations

from collections import defaultdict

import pytest

import tidekeep as tk


def _write(client: tk.Client, stream: str, first: int, last: int) -> None:
    with client.stream(stream).writer("w1") as writer:
        for i in range(first, last):
            writer.write(f"ev{i}".encode(), routing_key=f"k{i % 10}")


def test_write_scale_read_truncate(client: tk.Client) -> None:
    client.create_stream("iot/sensors", tk.StreamConfig(segments=2))
    _write(client, "iot/sensors", 0, 300)
    client.stream("iot/sensors").split("0.0", 2)
    _write(client, "iot/sensors", 300, 600)

    events = list(client.stream("iot/sensors").read())
    assert sorted(int(e.payload[2:]) for e in events) == list(range(600))
    by_key: dict[str, list[int]] = defaultdict(list)
    for event in events:
        by_key[event.routing_key].append(int(event.payload[2:]))
    assert all(values == sorted(values) for values in by_key.values())

    in_segment_1 = [e for e in events if e.segment == 1]
    cut = client.stream("iot/sensors").resolve_cut(f"iot/sensors:0.0=0,0.1={in_segment_1[10].offset}")
    result = client.stream("iot/sensors").truncate(cut)
    assert result.bytes_freed == in_segment_1[10].offset
    remaining = list(client.stream("iot/sensors").read())
    assert len(remaining) == 590
    with pytest.raises(tk.TruncatedData):
        list(client.stream("iot/sensors").read(start="iot/sensors:0.0=0,0.1=0"))
    assert client.audit()[0]["bytes_freed"] == result.bytes_freed
