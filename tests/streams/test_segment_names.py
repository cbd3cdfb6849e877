"""Segments are written one way, `epoch.number`: in every CLI output, every JSON document and in
Python, where `Event.segment` and `Position.segment` are SegmentIds (print as `E.N`, are the 64-bit
id for int(), ==, hashing and arithmetic). Inputs that name a segment accept both forms."""

from __future__ import annotations

import json
import pickle
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.cli_runner import InProcess
from tidekeep.errors import InvalidInput, TruncatedData
from tidekeep.streams.model import MAX_EPOCH, MAX_NUMBER, SegmentId, segment_id

E_N = re.compile(r"\d+\.\d+")
epochs = st.integers(0, MAX_EPOCH)
numbers = st.integers(0, MAX_NUMBER)


# ---- the type ------------------------------------------------------------------------------------


@given(epochs, numbers)
def test_a_segment_id_is_its_integer_and_prints_as_epoch_number(epoch: int, number: int) -> None:
    raw = (epoch << 32) | number
    for seg in (SegmentId(raw), SegmentId(f"{epoch}.{number}"), SegmentId(str(raw))):
        assert int(seg) == seg == raw and hash(seg) == hash(raw)
        assert str(seg) == f"{seg}" == f"{epoch}.{number}" and repr(seg) == f"SegmentId('{epoch}.{number}')"
        assert (seg.epoch, seg.number) == (epoch, number) == (seg >> 32, seg & 0xFFFFFFFF)
        assert f"{seg:d}" == str(raw) and f"{seg:>25}" == f"{raw:>25}"
        assert SegmentId(str(seg)) == seg and SegmentId(seg) == seg
        assert pickle.loads(pickle.dumps(seg)) == seg and type(pickle.loads(pickle.dumps(seg))) is SegmentId
        assert {raw: "x"}[seg] == "x"


@given(st.one_of(st.text(alphabet="0123456789.-x ", max_size=25), st.integers(-2**64, 2**64), st.none(),
                 st.booleans(), st.floats()))
def test_segment_references_are_accepted_exactly_when_they_name_a_segment(ref: Any) -> None:
    def oracle() -> int | None:
        if isinstance(ref, bool) or not isinstance(ref, (int, str)):
            return None
        if isinstance(ref, int):
            return ref if ref >= 0 and ref >> 32 <= MAX_EPOCH else None
        text = ref.strip()
        if re.fullmatch(r"[0-9]{1,19}", text):
            return oracle_int(int(text))
        parts = text.split(".")
        if len(parts) == 2 and all(re.fullmatch(r"[0-9]{1,10}", p) for p in parts):
            e, n = int(parts[0]), int(parts[1])
            return segment_id(e, n) if e <= MAX_EPOCH and n <= MAX_NUMBER else None
        return None

    def oracle_int(value: int) -> int | None:
        return value if value >> 32 <= MAX_EPOCH else None

    expected = oracle()
    if expected is None:
        with pytest.raises(InvalidInput) as refused:
            SegmentId(ref)
        assert str(refused.value).startswith("invalid segment ") and "\n" not in str(refused.value)
    else:
        assert SegmentId(ref) == expected


# ---- Python --------------------------------------------------------------------------------------


def scaled_stream(client: tk.Client) -> None:
    """sc/s: 2 segments with events, 0.0 split into 1.2 and 1.3, more events."""
    client.create_stream("sc/s", tk.StreamConfig(segments=2))
    with client.stream("sc/s").writer("w1") as writer:
        for i in range(20):
            writer.write(b"a%d" % i, routing_key=f"k{i}")
    client.stream("sc/s").split("0.0", 2)
    with client.stream("sc/s").writer("w1") as writer:
        for i in range(20):
            writer.write(b"b%d" % i, routing_key=f"k{i}")


def test_events_and_positions_carry_segment_ids(sqlite_client: tk.Client) -> None:
    client = sqlite_client
    scaled_stream(client)
    events = list(client.stream("sc/s").read())
    names = {str(e.segment) for e in events}
    assert names == {"0.0", "0.1", "1.2", "1.3"}
    for event in events:
        assert isinstance(event.segment, SegmentId)
        assert f"{event.segment}" == f"{event.segment.epoch}.{event.segment.number}"
        assert int(event.segment) == segment_id(event.segment.epoch, event.segment.number)
    assert "segment=SegmentId('1.2')" in repr(next(e for e in events if e.segment == segment_id(1, 2)))

    group = client.create_reader_group("g", tk.ReaderGroupConfig(["sc/s"]))
    with group.reader("r1") as reader:
        read = reader.read_next_event(timeout_ms=0)
        assert read.position is not None and isinstance(read.position.segment, SegmentId)
        assert re.fullmatch(r"sc/s:\d+\.\d+@\d+", str(read.position))
        assert all(isinstance(seg, SegmentId) for _, seg in reader.segments())
        assert all(isinstance(seg, SegmentId) for segs in reader.positions().values() for seg in segs)


def test_a_cut_map_takes_segments_in_either_form(sqlite_client: tk.Client) -> None:
    client = sqlite_client
    scaled_stream(client)
    tail = client.stream("sc/s").tail_cut()
    by_name = {str(SegmentId(seg)): off for seg, off in tail.positions.items()}
    by_event = {SegmentId(seg): off for seg, off in tail.positions.items()}
    by_id = {int(seg): off for seg, off in tail.positions.items()}
    for form in (by_name, by_event, by_id):
        assert client.stream("sc/s").resolve_cut(form) == tail  # type: ignore[arg-type]
    for bad, fragment in [({"0.x": 0}, "invalid segment '0.x'"), ({"0.1": "7"}, "invalid offset '7'"),
                          ({"0.1": -1}, "invalid offset -1")]:
        with pytest.raises(InvalidInput) as refused:
            client.stream("sc/s").resolve_cut(bad)  # type: ignore[arg-type]
        assert fragment in str(refused.value)


def test_a_crashed_readers_last_position_takes_segments_in_either_form(sqlite_client: tk.Client) -> None:
    client = sqlite_client
    scaled_stream(client)
    group = client.create_reader_group("g", tk.ReaderGroupConfig(["sc/s"]))
    reader = group.reader("r1")
    first = reader.read_next_event(timeout_ms=0)
    assert first.position is not None and first.next_offset is not None
    segment = first.position.segment
    group.reader_offline("r1", {"sc/s": {str(segment): first.next_offset}})
    with group.reader("r2") as again:
        seen = []
        while (event := again.read_next_event(timeout_ms=0)).is_event:
            seen.append(event.payload)
    assert first.payload not in seen and len(seen) == 39  # resumed after the first event, by "E.N"
    with pytest.raises(InvalidInput, match="expected a segment"):
        group.reader_offline("r2", {"sc/s": {"x.1": 0}})


# ---- the CLI: every output writes E.N --------------------------------------------------------------

RAW_IDS = {segment_id(1, 2), segment_id(1, 3), segment_id(2, 4), segment_id(2, 5)}  # the epoch >= 1 segments


def segment_problems(document: Any, where: str = "") -> list[str]:
    """Places where a JSON document writes a segment other than as "E.N"."""
    found = []
    if isinstance(document, dict):
        for key, value in document.items():
            if re.fullmatch(r"\d+", str(key)):
                found.append(f"{where}: key {key}")
            if key == "segment" and not (isinstance(value, str) and E_N.fullmatch(value)):
                found.append(f"{where}.segment = {value!r}")
            if key == "id" and value in RAW_IDS:
                found.append(f"{where}.id = {value!r}")
            found += segment_problems(value, f"{where}.{key}")
    elif isinstance(document, list):
        for i, value in enumerate(document):
            found += segment_problems(value, f"{where}[{i}]")
    elif isinstance(document, int) and not isinstance(document, bool) and document in RAW_IDS:
        found.append(f"{where} = {document}")
    return found


def test_every_cli_output_writes_segments_as_epoch_number(in_process: InProcess) -> None:
    def ok(*args: str, stdin: bytes = b"") -> str:
        done = in_process(*args, stdin=stdin)
        assert done.code == 0 and done.stderr == "", f"{args}: exit {done.code}\n{done.stderr}"
        return done.stdout

    ok("init")
    ok("stream", "create", "sc/s", "--segments", "2")
    ok("stream", "write", "sc/s", "--key-field", "1", stdin=b"".join(b"k%d,a\n" % i for i in range(20)))
    outputs: dict[str, str] = {}
    outputs["split"] = ok("stream", "split", "sc/s", "0.0", "--json")
    ok("stream", "write", "sc/s", "--key-field", "1", stdin=b"".join(b"k%d,b\n" % i for i in range(20)))
    outputs["rg create"] = ok("rg", "create", "g", "--stream", "sc/s", "--retention-type",
                              "MANUAL_RELEASE_AT_USER_STREAMCUT", "--json")
    ok("watermark", "note", "sc/s", "1000", "--writer", "w9")
    outputs["rg read"] = ok("rg", "read", "g", "--reader", "r1", "--limit", "30", "--timeout", "0", "--json")
    tail = ok("stream", "tail", "sc/s").strip()
    ok("rg", "retention-cut", "g", tail)
    commands = {
        "stream describe": ("stream", "describe", "sc/s"),
        "stream head": ("stream", "head", "sc/s"),
        "stream tail": ("stream", "tail", "sc/s"),
        "stream read": ("stream", "read", "sc/s"),
        "rg describe": ("rg", "describe", "g"),
        "rg checkpoint": ("rg", "checkpoint", "g", "cp1", "--wait", "0"),
        "watermark list": ("watermark", "list", "sc/s"),
        "watermark writers": ("watermark", "writers", "sc/s"),
        "retention preview": ("retention", "preview", "sc/s"),
        "retention subscribers": ("retention", "subscribers", "sc/s"),
        "txn list": ("txn", "list"),
    }
    texts = {name: ok(*args) for name, args in commands.items() if name != "rg checkpoint"}
    for name, args in commands.items():
        outputs[name] = ok(*args, "--json") if name != "rg checkpoint" else ok(*args[:3], "cp2", "--json")
    outputs["merge"] = ok("stream", "merge", "sc/s", "1.2", "1.3", "--json")
    outputs["truncate"] = ok("stream", "truncate", "sc/s", tail, "--json")
    texts["audit list"] = ok("audit", "list")
    outputs["audit list"] = ok("audit", "list", "--json")
    outputs["retention history"] = ok("retention", "history", "sc/s", "--json")

    for name, text in outputs.items():
        documents = [json.loads(line) for line in text.splitlines()] if name in ("stream read", "rg read") \
            else [json.loads(text)]
        assert segment_problems(documents) == [], f"{name} --json"
    for name, text in texts.items():
        assert not any(str(raw) in text for raw in RAW_IDS), f"{name}: {text}"
    described = json.loads(outputs["stream describe"])
    assert [s["segment"] for s in described["segments"]] == ["0.0", "0.1", "1.2", "1.3"]
    assert json.loads(outputs["rg describe"])["config"]["streams"]["sc/s"]["start"] == {"0.0": 0, "0.1": 0}
    assert {json.loads(line)["segment"] for line in outputs["stream read"].splitlines()} == {
        "0.0", "0.1", "1.2", "1.3"}
    assert [s["segment"] for s in json.loads(outputs["merge"])["new_segments"]] == ["2.4"]


# ---- what the store keeps: SegmentIds handed back in are stored as ids ---------------------------


def test_positions_keyed_by_segment_ids_are_stored_and_read_back(client: tk.Client) -> None:
    """A cut, a reader group's start and a crashed reader's position built from the SegmentIds the API
    hands out are stored as the integer id: the store reads them back (a stored "E.N" key broke every
    later read of the stream or group)."""
    scaled_stream(client)
    events = list(client.stream("sc/s").read())
    fifth = events[4]
    assert isinstance(fifth.segment, SegmentId)
    head = client.stream("sc/s").head_cut()
    start = tk.StreamCut("sc/s", {SegmentId(seg): off for seg, off in head.positions.items()}, uid=head.uid)
    manual = tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT
    group = client.create_reader_group("g", tk.ReaderGroupConfig({"sc/s": (start, None)}, retention_type=manual))
    reader = group.reader("r1")
    first = reader.read_next_event(timeout_ms=0)
    assert first.position is not None and first.next_offset is not None
    group.reader_offline("r1", {"sc/s": {first.position.segment: first.next_offset}})

    tail_before = client.stream("sc/s").tail_cut()
    cut = {**{SegmentId(seg): off for seg, off in head.positions.items()}, fifth.segment: fifth.offset}
    client.stream("sc/s").truncate(tk.StreamCut("sc/s", cut, uid=head.uid))
    new_head = client.stream("sc/s").head_cut()
    assert new_head.positions[int(fifth.segment)] == fifth.offset
    assert client.stream("sc/s").tail_cut() == tail_before
    assert client.stream("sc/s").describe()["name"] == "sc/s"
    group.update_retention_stream_cut({"sc/s": client.stream("sc/s").tail_cut()})
    assert "sc/s" in group.describe()["streams"]
    with group.reader("r2") as again:
        # r1's stored position is before the new head: reading r2's segments (in whatever order the
        # reader fills them, which a sync may change) meets it once as TruncatedData
        with pytest.raises(TruncatedData):
            for _ in range(len(events) + 1):
                again.read_next_event(timeout_ms=0)
        assert again.read_next_event(timeout_ms=0).is_event
