"""Bad input through the real client, on SQLite and PostgreSQL: each case gets its typed error with a
precise one-line message, and leaves the metadata, the audit trail, the data and the files as they
were."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from strategies import GRID, ScaledStream, valid_cut_frontiers
from tidekeep.config import CONFIG_FILE_NAME, MAX_EVENT_SIZE
from tidekeep.streams.model import Segment, SegmentId
from tidekeep.streams.of_workspace import stream_controller

STREAM, OTHER = "sc/s", "sc/other"
WRITERS = ("w1", "w2")


@dataclass
class World:
    """sc/s: 2 segments, 20 events, 0.0 split into 1.2 and 1.3, 20 more events; sc/other: 1 segment,
    3 events. `boundaries` are each segment's event boundaries (event starts and the tail)."""

    client: tk.Client
    boundaries: dict[str, list[int]]
    tails: dict[str, int]

    def offset(self, segment: str, events: int) -> int:
        """The offset after the first `events` events of a segment."""
        assert len(self.boundaries[segment]) > events, f"segment {segment} has too few events for this case"
        return self.boundaries[segment][events]


def _write(client: tk.Client, stream: str, count: int, writer_id: str = "w1") -> None:
    with client.stream(stream).writer(writer_id) as writer:
        for i in range(count):
            writer.write(b"x" * 10, routing_key=f"k{i % 10}")


@pytest.fixture
def world(client: tk.Client) -> World:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    _write(client, STREAM, 20)
    client.stream(STREAM).split("0.0", 2)
    _write(client, STREAM, 20)
    client.create_stream(OTHER, tk.StreamConfig(segments=1))
    _write(client, OTHER, 3)
    described = client.stream(STREAM).describe()
    tails = {s["segment"]: s["tail"] for s in described["segments"]}
    starts: dict[str, list[int]] = {name: [] for name in tails}
    for ev in client.stream(STREAM).read():
        starts[str(ev.segment)].append(ev.offset)
    boundaries = {name: sorted({*starts[name], tails[name]}) for name in tails}
    assert sorted(tails) == ["0.0", "0.1", "1.2", "1.3"]
    return World(client, boundaries, tails)


def stored_files(client: tk.Client) -> list[tuple[str, int]]:
    root = client.settings.storage_uri
    found = []
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            found.append((os.path.relpath(path, root), os.path.getsize(path)))
    return sorted(found)


def snapshot(client: tk.Client) -> dict[str, Any]:
    streams = client.list_streams()
    return {
        "scopes": client.list_scopes(),
        "streams": [(s.name, s.uid, s.state, s.current_epoch, s.config, s.created_ms) for s in streams],
        "described": {s.name: client.stream(s.name).describe() for s in streams},
        "events": {s.name: [(e.segment, e.offset, e.payload, e.routing_key, e.writer_id)
                           for e in client.stream(s.name).read()]
                   for s in streams},
        "writers": {(s.name, w): stream_controller(client.workspace).last_sequence(s.name, w)[1]
                    for s in streams for w in WRITERS},
        "audit": client.audit(limit=10_000),
        "files": stored_files(client),
    }


def refused(client: tk.Client, error: type[tk.TidekeepError], action: Callable[[], object],
            *fragments: str) -> str:
    """Run `action`, expect `error` with every fragment in its one-line message, and check that
    nothing changed."""
    before = snapshot(client)
    with pytest.raises(error) as exc:
        result = action()
        if isinstance(result, Iterator):
            list(result)
    message = str(exc.value)
    assert message and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert snapshot(client) == before
    return message


def cut(world: World, **positions: int) -> str:
    """Compact cut string of sc/s, segments given as s0_1=offset for 0.1."""
    body = ",".join(f"{name[1:].replace('_', '.')}={offset}" for name, offset in positions.items())
    return f"{STREAM}:{body}"


# ---- names, scopes, streams ------------------------------------------------------------------------


BAD_STREAM_NAMES = [
    ("sc/a/b", ["'sc/a/b'", "expected 'scope/stream'"]),
    ("sc\\a", ["expected 'scope/stream'"]),
    ("../x", ["invalid scope name '..'", "contains '.'"]),
    ("sc/..", ["invalid stream name '..'", "contains '.'"]),
    ("", ["invalid stream name ''", "expected 'scope/stream'"]),
    ("sc/", ["invalid stream name ''", "is empty"]),
    ("/s", ["invalid scope name ''", "is empty"]),
    ("sc/" + "x" * 256, ["is 256 characters long (at most 255)"]),
    ("y" * 300 + "/s", ["invalid scope name", "is 300 characters long"]),
    ("sc/a b", ["contains ' '"]),
    ("sc/naïve", ["contains 'ï'"]),
]


def test_invalid_stream_names(world: World) -> None:
    c = world.client
    for name, fragments in BAD_STREAM_NAMES:
        refused(c, tk.InvalidName, lambda name=name: c.create_stream(name), *fragments)
        refused(c, tk.InvalidName, lambda name=name: c.stream(name).describe(), *fragments)
        refused(c, tk.InvalidName, lambda name=name: c.stream(name).writer("w1"), *fragments)


def test_invalid_scope_and_writer_names(world: World) -> None:
    c = world.client
    refused(c, tk.InvalidName, lambda: c.create_scope("a/b"), "invalid scope name 'a/b'", "contains '/'")
    refused(c, tk.InvalidName, lambda: c.create_scope(".."), "invalid scope name '..'")
    refused(c, tk.InvalidName, lambda: c.list_streams(scope="a/b"), "invalid scope name 'a/b'")
    refused(c, tk.InvalidName, lambda: c.stream(STREAM).writer("w/1"), "invalid writer id 'w/1'")
    refused(c, tk.InvalidName, lambda: c.stream(STREAM).writer(""), "invalid writer id ''", "is empty")


def test_unknown_stream_or_scope(world: World) -> None:
    c = world.client
    for action in (lambda: c.stream("sc/nope").describe(), lambda: c.stream("sc/nope").writer("w1"),
                   lambda: c.stream("sc/nope").read(), lambda: c.stream("sc/nope").truncate("sc/nope:0.0=0"),
                   lambda: c.stream("sc/nope").head_cut(), lambda: c.stream("sc/nope").split("0.0"),
                   lambda: c.stream("sc/nope").seal()):
        refused(c, tk.NotFound, action, "stream 'sc/nope' does not exist")
    for action in (lambda: c.stream("nosc/s").describe(), lambda: c.stream("nosc/s").writer("w1"),
                   lambda: c.stream("nosc/s").read(), lambda: c.stream("nosc/s").truncate("nosc/s:0.0=0"),
                   lambda: c.list_streams(scope="nosc"), lambda: c.delete_scope("nosc")):
        refused(c, tk.NotFound, action, "scope 'nosc' does not exist")


def test_duplicate_create(world: World) -> None:
    c = world.client
    refused(c, tk.AlreadyExists, lambda: c.create_stream(STREAM), "stream 'sc/s' already exists")
    refused(c, tk.AlreadyExists, lambda: c.create_stream(STREAM, tk.StreamConfig(segments=7)),
            "stream 'sc/s' already exists")


def test_bad_segment_counts(world: World) -> None:
    c = world.client
    for segments in (0, -1, True, 2.5, "3", None, 10_001):
        refused(c, tk.InvalidInput, lambda n=segments: c.create_stream("sc/new", tk.StreamConfig(segments=n)),
                "invalid segment count", repr(segments) if segments != 10_001 else "at most 10000")
    assert "sc/new" not in [s.name for s in c.list_streams()]


def test_bad_stream_config_object(world: World) -> None:
    c = world.client
    refused(c, tk.InvalidInput, lambda: c.create_stream("sc/new", {"segments": 2}),  # type: ignore[arg-type]
            "invalid stream config", "use tidekeep.StreamConfig")


# ---- scaling ---------------------------------------------------------------------------------------
# sc/s active segments: 0.1 [0.5, 1), 1.2 [0, 0.25), 1.3 [0.25, 0.5); 0.0 is sealed.


BAD_SCALES: list[tuple[list[str], list[Any], str]] = [
    (["0.1"], [(0.5, 0.7)], "key ranges end at 0.7 but must end at 1.0"),
    (["0.1"], [(0.5, 0.6), (0.7, 1.0)], "leave the gap [0.6, 0.7) uncovered"),
    (["0.1"], [(0.5, 0.8), (0.7, 1.0)], "key ranges [0.5, 0.8) and [0.7, 1.0) overlap"),
    (["0.1"], [(0.5, 1.5)], "key range [0.5, 1.5) is empty or outside [0, 1)"),
    (["0.1"], [(0.4, 1.0)], "key ranges start at 0.4 but must start at 0.5"),
    (["0.1"], [(0.6, 0.6), (0.5, 1.0)], "key range [0.6, 0.6) is empty"),
    (["0.1"], [], "no key ranges given"),
    (["0.1"], [0.5, 1.0], "each new range must be a (low, high) pair"),
    (["1.2", "0.1"], [(0.0, 0.25), (0.5, 1.0)], "the segments to seal are not adjacent"),
    (["0.0"], [(0.0, 0.5)], "segment 0.0 is not active"),
    (["7.7"], [(0.0, 0.5)], "segment 7.7 does not exist"),
    ([], [(0.0, 0.5)], "no segments to seal"),
    (["0.1", "0.1"], [(0.5, 1.0)], "listed twice"),
    (["x.y"], [(0.5, 1.0)], "invalid segment 'x.y'"),
    (["0.1"], None, "seal and new_ranges must be lists"),
    ("0.1", [(0.5, 1.0)], "seal and new_ranges must be lists"),
]


def test_bad_scale_requests(world: World) -> None:
    c = world.client
    for seal, new_ranges, fragment in BAD_SCALES:
        refused(c, tk.InvalidInput, lambda seal=seal, new_ranges=new_ranges: c.stream(STREAM).scale(seal, new_ranges),
                fragment)


def test_bad_split_and_merge(world: World) -> None:
    c = world.client
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).split("9.9"), "segment 9.9 does not exist")
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).split("0.0"), "segment 0.0 is not active")
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).split("0.1", 0), "invalid number of parts 0")
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).merge(["1.2"]), "give at least two adjacent segments")
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).merge(["1.2", "0.1"]), "not adjacent")
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).merge(["1.3", "9.9"]), "segment 9.9 does not exist")


# ---- stream cuts -----------------------------------------------------------------------------------


def test_cuts_from_another_stream(world: World) -> None:
    c = world.client
    theirs = c.stream(OTHER).head_cut()
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(theirs),
            "stream cut is for 'sc/other', not 'sc/s'")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(str(c.stream(OTHER).tail_cut())),
            "for 'sc/other'")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).read(start=theirs), "for 'sc/other'")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).resolve_cut(theirs.to_json()), "for 'sc/other'")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).size_between(c.stream(STREAM).head_cut(), theirs),
            "different streams")


def test_cut_of_an_earlier_stream_with_the_same_name(world: World) -> None:
    c = world.client
    c.create_stream("sc/again", tk.StreamConfig(segments=2))
    old = c.stream("sc/again").head_cut()
    c.stream("sc/again").seal()
    c.stream("sc/again").delete()
    c.create_stream("sc/again", tk.StreamConfig(segments=4))
    new_uid = c.stream("sc/again").state().info.uid
    refused(c, tk.InvalidStreamCut, lambda: c.stream("sc/again").truncate(old),
            f"cut of an earlier incarnation of stream sc/again (uid {old.uid}), the stream now has uid {new_uid}")
    # the same cut as an older client wrote it, without the uid: its key ranges give it away
    without_uid = json.dumps({k: v for k, v in old.to_dict().items() if k != "uid"})
    refused(c, tk.InvalidStreamCut, lambda: c.stream("sc/again").truncate(without_uid),
            "segment 0.0 has another key range")


def test_cuts_naming_unknown_segments(world: World) -> None:
    c = world.client
    bad = cut(world, s0_0=0, s0_1=0, s5_9=0)
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(bad), "invalid stream cut for sc/s",
            "segment 5.9 does not exist")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).read(start=bad), "segment 5.9 does not exist")


def test_cuts_off_an_event_boundary(world: World) -> None:
    c = world.client
    inside = world.offset("0.1", 1) + 5
    assert inside not in world.boundaries["0.1"]
    bad = cut(world, s0_0=0, s0_1=inside)
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(bad),
            f"offset {inside} in segment 0.1 is not at an event boundary")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).resolve_cut(bad), "not at an event boundary")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).read(end=bad), "not at an event boundary")


def test_cuts_beyond_the_tail(world: World) -> None:
    c = world.client
    tail = world.tails["1.3"]
    bad = cut(world, s1_2=0, s1_3=tail + 18, s0_1=0)
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(bad),
            f"offset {tail + 18} in segment 1.3 is beyond its tail {tail}")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).read(end=bad), "beyond its tail")


def test_cuts_that_do_not_cover_or_overlap(world: World) -> None:
    c = world.client
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(cut(world, s0_1=0)),
            "key range [0.0, 0.5) is not covered")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(cut(world, s0_0=0, s1_2=0, s0_1=0)), "overlap")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(cut(world, s0_0=0, s1_3=0, s0_1=0)), "overlap")


def test_truncation_behind_or_across_the_head(world: World) -> None:
    c = world.client
    first = cut(world, s0_0=world.offset("0.0", 0), s0_1=world.offset("0.1", 2))
    assert c.stream(STREAM).truncate(first).bytes_freed == world.offset("0.1", 2)
    behind = cut(world, s0_0=0, s0_1=world.offset("0.1", 1))
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(behind), "cannot truncate sc/s at",
            "behind the head", c.stream(STREAM).head_cut().display())
    across = cut(world, s0_0=world.offset("0.0", 1), s0_1=world.offset("0.1", 1))
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(across), "partly behind the head")
    refused(c, tk.TruncatedData, lambda: c.stream(STREAM).read(start=behind), "has been truncated")
    # truncating at the head itself is allowed and changes nothing
    before = snapshot(c)
    assert c.stream(STREAM).truncate(c.stream(STREAM).head_cut()).bytes_freed == 0
    assert snapshot(c) == before


MALFORMED_CUTS = [
    ("garbage", "malformed stream cut 'garbage'"),
    ("sc/s:", "bad entry ''"),
    ("sc/s:0.0=", "bad entry '0.0='"),
    ("sc/s:0.0=-5,0.1=0", "bad entry '0.0=-5'"),
    ("sc/s:0.0=0,0.0=0", "appears twice"),
    ("sc/s:0.0=99999999999999999999", "bad entry"),
    ('{"stream": "sc/s", "positions": []}', "'positions' must be a non-empty list"),
    ("{not json", "malformed stream cut JSON"),
]


def test_malformed_cut_strings(world: World) -> None:
    c = world.client
    for text, fragment in MALFORMED_CUTS:
        refused(c, tk.InvalidStreamCut, lambda text=text: c.stream(STREAM).truncate(text), fragment)
        refused(c, tk.InvalidStreamCut, lambda text=text: c.stream(STREAM).read(start=text), fragment)
        refused(c, tk.InvalidStreamCut, lambda text=text: c.stream(STREAM).resolve_cut(text), fragment)


def test_a_cut_that_is_not_a_cut(world: World) -> None:
    c = world.client
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(42), "invalid stream cut 42")  # type: ignore[arg-type]
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).truncate(None), "invalid stream cut None")  # type: ignore[arg-type]


def test_read_and_size_with_start_after_end(world: World) -> None:
    c = world.client
    head, tail = c.stream(STREAM).head_cut(), c.stream(STREAM).tail_cut()
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).read(start=tail, end=head), "is not at or before end cut")
    refused(c, tk.InvalidStreamCut, lambda: c.stream(STREAM).size_between(tail, head), "is not at or before")
    assert c.stream(STREAM).size_between(head, tail) == sum(world.tails.values())


# ---- writing ---------------------------------------------------------------------------------------


def test_oversized_events_are_refused_and_the_limit_itself_is_accepted(world: World) -> None:
    c = world.client
    with c.stream(STREAM).writer("w2") as writer:
        refused(c, tk.EventTooLarge, lambda: writer.write(b"x" * (MAX_EVENT_SIZE + 1), routing_key="k1"),
                f"event of {MAX_EVENT_SIZE + 1} bytes is above the {MAX_EVENT_SIZE}-byte limit")
        refused(c, tk.EventTooLarge, lambda: writer.write_batch([(b"y" * (MAX_EVENT_SIZE + 1), None)]),
                "above the 8388608-byte limit")
        writer.write(b"z" * MAX_EVENT_SIZE, routing_key="k1")
    big = [e for e in c.stream(STREAM).read() if e.payload[:1] == b"z"]
    assert len(big) == 1 and len(big[0].payload) == MAX_EVENT_SIZE and big[0].routing_key == "k1"
    assert len([e for e in c.stream(STREAM).read() if e.writer_id == "w2"]) == 1


def test_non_bytes_payloads(world: World) -> None:
    c = world.client
    with c.stream(STREAM).writer("w2") as writer:
        for payload in ("text", 5, None, 1.5, ["b"]):
            name = type(payload).__name__
            refused(c, tk.InvalidInput, lambda p=payload: writer.write(p, routing_key="k"),
                    f"event payload must be bytes, got {name}")
            refused(c, tk.InvalidInput, lambda p=payload: writer.write_batch([(p, "k")]),
                    f"event payload must be bytes, got {name}")
    assert stream_controller(c.workspace).last_sequence(STREAM, "w2")[1] == 0


def test_non_string_routing_keys(world: World) -> None:
    c = world.client
    with c.stream(STREAM).writer("w2") as writer:
        for key in (5, b"k1", 1.5, ["k"]):
            name = type(key).__name__
            refused(c, tk.InvalidInput, lambda k=key: writer.write(b"x", routing_key=k),
                    f"routing key must be a string or None, got {name}")
            refused(c, tk.InvalidInput, lambda k=key: writer.write_batch([(b"x", k)]),
                    f"routing key must be a string or None, got {name}")
    assert stream_controller(c.workspace).last_sequence(STREAM, "w2")[1] == 0


def test_writing_to_a_sealed_stream(world: World) -> None:
    c = world.client
    writer = c.stream(STREAM).writer("w2")
    assert c.stream(STREAM).seal()
    writer.write(b"late", routing_key="k1")
    refused(c, tk.StreamSealed, writer.flush, "stream 'sc/s' is sealed")
    assert writer.unflushed() == [(b"late", "k1")]  # never written, never silently dropped
    refused(c, tk.StreamSealed, writer.close, "stream 'sc/s' is sealed")
    assert writer.unflushed() == [(b"late", "k1")]
    again = c.stream(STREAM).writer("w1")
    again.write(b"later", routing_key="k2")
    refused(c, tk.StreamSealed, again.flush, "stream 'sc/s' is sealed")
    refused(c, tk.StreamSealed, again.close, "stream 'sc/s' is sealed")
    refused(c, tk.StreamSealed, lambda: c.stream(STREAM).split("0.1"), "stream 'sc/s' is sealed")
    refused(c, tk.StreamSealed, lambda: c.stream(STREAM).truncate(c.stream(STREAM).tail_cut()), "is sealed")
    assert not [e for e in c.stream(STREAM).read() if e.payload.startswith(b"late")]


def test_writing_to_a_deleted_stream(world: World) -> None:
    c = world.client
    writer = c.stream(STREAM).writer("w2")
    c.stream(STREAM).seal()
    c.stream(STREAM).delete()
    writer.write(b"ghost", routing_key="k1")
    refused(c, tk.NotFound, writer.flush, "stream 'sc/s' does not exist")
    refused(c, tk.NotFound, writer.close, "stream 'sc/s' does not exist")
    assert writer.unflushed() == [(b"ghost", "k1")]
    refused(c, tk.NotFound, lambda: c.stream(STREAM).writer("w2"), "stream 'sc/s' does not exist")
    refused(c, tk.NotFound, lambda: c.stream(STREAM).describe(), "stream 'sc/s' does not exist")
    assert not [f for f, _ in stored_files(c) if "/sc/s-" in f]


def test_deleting_an_unsealed_stream(world: World) -> None:
    c = world.client
    refused(c, tk.InvalidInput, lambda: c.stream(STREAM).delete(), "stream 'sc/s' is not sealed; seal it first, or "
            "delete it with force (CLI: --force), which seals and deletes it in one step")


def test_a_broken_config_file_is_refused_by_connect(world: World) -> None:
    c = world.client
    config = Path(c.settings.home) / CONFIG_FILE_NAME
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("writer:\n  batch_size: [1MiB\n", encoding="utf-8")
    url = c.settings.metadata_url
    message = refused(c, tk.ConfigError, lambda: tk.connect(home=c.settings.home, metadata_url=url, create=True),
                      f"broken {config}", "at line")
    assert config.read_text(encoding="utf-8") == "writer:\n  batch_size: [1MiB\n", message
    config.write_text("writer:\n  batch_sise: 1MiB\n", encoding="utf-8")
    refused(c, tk.ConfigError, lambda: tk.connect(home=c.settings.home, metadata_url=url, create=True),
            "unknown setting 'writer.batch_sise'")


# ---- every cut the client accepts is exactly what the oracle calls valid ---------------------------


def as_scaled_stream(world: World) -> tuple[ScaledStream, dict[str, int]]:
    described = world.client.stream(STREAM).describe()
    segments, grid, ids = {}, {}, {}
    for s in described["segments"]:
        low, high = s["key_range"]
        seg = int(SegmentId(s["segment"]))
        grid[seg] = (int(low * GRID), int(high * GRID))
        assert grid[seg] == (low * GRID, high * GRID)
        segments[seg] = Segment(seg, low, high, tail=s["tail"], sealed=s["sealed"])
        ids[s["segment"]] = seg
    return ScaledStream(segments, grid, described["current_epoch"]), ids


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_resolve_cut_accepts_exactly_the_valid_cuts(world: World, data: st.DataObject) -> None:
    c = world.client
    stream, ids = as_scaled_stream(world)
    valid = set(valid_cut_frontiers(stream))
    names = sorted(ids)
    name_of = {seg: name for name, seg in ids.items()}
    valid_names = sorted(sorted(name_of[seg] for seg in segs) for segs in valid)
    chosen = data.draw(st.sampled_from(valid_names) | st.sets(st.sampled_from(names), min_size=1))
    positions = {}
    for name in sorted(chosen):
        at_boundary = data.draw(st.integers(0, 5)) > 0  # mostly on boundaries, so valid cuts are common
        positions[name] = data.draw(st.sampled_from(world.boundaries[name]) if at_boundary
                                    else st.integers(0, world.tails[name] + 20))
    text = f"{STREAM}:" + ",".join(f"{name}={offset}" for name, offset in positions.items())
    expected = frozenset(ids[n] for n in chosen) in valid and all(
        offset in world.boundaries[name] for name, offset in positions.items())
    try:
        resolved = c.stream(STREAM).resolve_cut(text)
    except tk.InvalidStreamCut as exc:
        event("refused")
        assert not expected, f"{text} refused: {exc}"
        assert "\n" not in str(exc)
        return
    event("accepted")
    assert expected, f"{text} accepted"
    assert resolved.display() == text and resolved.ranges is not None
    assert str(resolved) == f"{text}@{c.stream(STREAM).state().info.uid}"
    assert c.stream(STREAM).head_cut() <= resolved <= c.stream(STREAM).tail_cut()
