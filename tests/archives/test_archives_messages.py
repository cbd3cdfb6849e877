"""Lines into messages (archives/messages.py): a line-by-line oracle, any block split, encodings and
line endings."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.archives.messages import messages_of, read_messages
from tidekeep.archives.timestamps import make_rules, parse_timestamp

RULES = make_rules("UTC", None, 1_720_000_000_000)


def oracle(data: bytes) -> list[tuple[int | None, str]]:
    """Messages the slow, obvious way: decode, split lines, one timestamp test per line."""
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    messages: list[tuple[int | None, list[str]]] = []
    seen = False
    for line in lines:
        ts = parse_timestamp(line, RULES)
        if ts is not None:
            seen = True
            messages.append((ts, [line]))
        elif seen:
            messages[-1][1].append(line)
        elif line != "":
            messages.append((None, [line]))
    return [(ts, "\n".join(parts).rstrip("\n")) for ts, parts in messages]


line_kinds = st.sampled_from([
    "2024-07-01T12:00:00Z start", "2024-07-01 12:00:01,250 next", "1719835202 epoch", "Jul  1 12:00:03 sys",
    "\tat com.example.C.m(C.java:1)", "continuation", "", "   ", "caf\u00e9 \u2603", "1719835202500 millis",
])
raw_bytes = st.sampled_from([b"\xff\xfe bad utf8", b"\xc3", b"\xe2\x98", b"ok\r"])


@st.composite
def log_files(draw: st.DrawFn) -> bytes:
    parts = draw(st.lists(st.one_of(line_kinds.map(str.encode), raw_bytes), max_size=25))
    endings = draw(st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=len(parts), max_size=len(parts)))
    data = b"".join(p + e for p, e in zip(parts, endings, strict=True))
    if draw(st.booleans()) and data.endswith(b"\n"):
        data = data[:-1]  # the last line without its terminator
    return data


@settings(max_examples=300, deadline=None)
@given(data=log_files(), block=st.integers(1, 64))
def test_messages_match_the_line_by_line_oracle_for_any_block_size(data: bytes, block: int) -> None:
    expected = oracle(data)
    whole = messages_of([data], RULES)
    assert list(zip(whole["timestamp"].to_pylist(), whole["message"].to_pylist(), strict=True)) == expected
    assert whole["seq"].to_pylist() == list(range(len(expected)))
    split = messages_of([data[i:i + block] for i in range(0, len(data), block)], RULES)
    assert split.equals(whole)
    streamed = list(read_messages(io.BytesIO(data), RULES, block_bytes=block))
    assert sum(b.num_rows for b in streamed) == len(expected)


def test_raw_bytes_count_each_line_and_its_terminator() -> None:
    data = b"2024-07-01T12:00:00Z a\r\n\tat x\n2024-07-01T12:00:01Z b\nlast"
    table = messages_of([data], RULES)
    assert table["message"].to_pylist() == ["2024-07-01T12:00:00Z a\n\tat x", "2024-07-01T12:00:01Z b\nlast"]
    assert table["raw_bytes"].to_pylist() == [24 + 6, 23 + 4]
    assert sum(table["raw_bytes"].to_pylist()) == len(data)


def test_lines_before_the_first_timestamp_are_one_message_each_and_blank_ones_drop() -> None:
    table = messages_of([b"banner\n\n  indented\n2024-07-01T12:00:00Z first\n\nafter blank\n\n\n"], RULES)
    assert table.to_pylist() == [
        {"timestamp": None, "message": "banner", "raw_bytes": 7, "seq": 0},
        {"timestamp": None, "message": "  indented", "raw_bytes": 11, "seq": 1},
        {"timestamp": 1719835200000, "message": "2024-07-01T12:00:00Z first\n\nafter blank", "raw_bytes": 42,
         "seq": 2}]


def test_invalid_utf8_becomes_the_replacement_character_even_split_across_blocks() -> None:
    data = "2024-07-01T12:00:00Z caf\u00e9 ".encode() + b"\xff\n"
    for cut in range(1, len(data)):
        table = messages_of([data[:cut], data[cut:]], RULES)
        assert table["message"].to_pylist() == ["2024-07-01T12:00:00Z caf\u00e9 \ufffd"]


def test_a_message_spanning_many_blocks_is_carried_whole() -> None:
    trace = "".join(f"\tat frame{i}\n" for i in range(500))
    data = ("2024-07-01T12:00:00Z boom\n" + trace + "2024-07-01T12:00:01Z ok\n").encode()
    table = messages_of([data[i:i + 100] for i in range(0, len(data), 100)], RULES)
    assert table["message"].to_pylist() == ["2024-07-01T12:00:00Z boom\n" + trace.rstrip("\n"),
                                            "2024-07-01T12:00:01Z ok"]
    assert sum(table["raw_bytes"].to_pylist()) == len(data)
