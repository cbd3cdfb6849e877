"""StreamCut as a value: JSON and compact forms, operators, and malformed input."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies import stream_names, streams_with_cuts
from tidekeep.errors import InvalidStreamCut
from tidekeep.streams.cuts import CutOrder, StreamCut, compare_cuts
from tidekeep.streams.model import segment_id

FAST = settings(max_examples=150, deadline=None)

segment_ids = st.builds(segment_id, st.integers(0, 2**31 - 1), st.integers(0, 2**32 - 1))
offsets = st.integers(0, 2**63 - 1)
unit_floats = st.floats(0.0, 1.0, allow_nan=False)


@st.composite
def key_ranges(draw: st.DrawFn) -> tuple[float, float]:
    low = draw(st.floats(0.0, 1.0, exclude_max=True, allow_nan=False))
    high = draw(st.floats(low, 1.0, exclude_min=True, allow_nan=False))
    return low, high


uids = st.text("0123456789abcdef", min_size=32, max_size=32)
UID = "0123456789abcdef0123456789abcdef"
OTHER_UID = "fedcba9876543210fedcba9876543210"


@st.composite
def stream_cuts(draw: st.DrawFn, with_ranges: bool | None = None) -> StreamCut:
    positions = draw(st.dictionaries(segment_ids, offsets, min_size=1, max_size=8))
    if with_ranges is None:
        with_ranges = draw(st.booleans())
    ranges = {s: draw(key_ranges()) for s in positions} if with_ranges else None
    return StreamCut(draw(stream_names), positions, ranges, draw(st.none() | uids))


def one_line(exc: pytest.ExceptionInfo[BaseException]) -> str:
    message = str(exc.value)
    assert message and "\n" not in message
    return message


# ---- forms ----------------------------------------------------------------------------------------


@FAST
@given(stream_cuts())
def test_json_form_round_trips_with_and_without_ranges(cut: StreamCut) -> None:
    back = StreamCut.parse(cut.to_json())
    assert back == cut
    assert back.stream == cut.stream and back.positions == cut.positions
    assert back.ranges == cut.ranges and back.uid == cut.uid
    assert ("uid" in json.loads(cut.to_json())) == (cut.uid is not None)
    assert StreamCut.from_dict(json.loads(cut.to_json())).ranges == cut.ranges
    assert StreamCut.parse("  " + cut.to_json() + "\n") == cut


@FAST
@given(stream_cuts())
def test_compact_form_round_trips_positions(cut: StreamCut) -> None:
    text = str(cut)
    assert text.startswith(cut.stream + ":")
    assert text == cut.display() + ("" if cut.uid is None else "@" + cut.uid)
    back = StreamCut.parse(text)
    assert back == cut and back.positions == cut.positions and back.uid == cut.uid
    assert back.ranges is None  # the compact form does not carry key ranges
    assert str(back) == text
    assert StreamCut.parse(cut.display()).uid is None  # the form for messages leaves the uid out


def test_compact_form_spells_segments_as_epoch_dot_number() -> None:
    cut = StreamCut("iot/sensors", {segment_id(1, 4): 55, segment_id(0, 0): 120, segment_id(0, 1): 0})
    assert str(cut) == "iot/sensors:0.0=120,0.1=0,1.4=55"
    assert json.loads(cut.to_json()) == {"stream": "iot/sensors", "positions": [
        {"segment": "0.0", "offset": 120}, {"segment": "0.1", "offset": 0}, {"segment": "1.4", "offset": 55}]}
    assert StreamCut.parse(" iot/sensors:0.0=120, 0.1=0 ,1.4=55 ") == cut


def test_the_uid_follows_the_positions_in_both_forms() -> None:
    cut = StreamCut("iot/sensors", {segment_id(0, 0): 120, segment_id(0, 1): 0}, {0: (0.0, 0.5), 1: (0.5, 1.0)}, UID)
    assert str(cut) == f"iot/sensors:0.0=120,0.1=0@{UID}"
    assert cut.display() == "iot/sensors:0.0=120,0.1=0"
    assert json.loads(cut.to_json()) == {"stream": "iot/sensors", "uid": UID, "positions": [
        {"segment": "0.0", "offset": 120, "range": [0.0, 0.5]}, {"segment": "0.1", "offset": 0, "range": [0.5, 1.0]}]}
    assert StreamCut.parse(f" iot/sensors:0.0=120, 0.1=0 @ {UID} ").uid == UID
    # a cut written by an older client has no uid and still parses (only the stream's segments check it)
    old = StreamCut.parse('{"stream": "iot/sensors", "positions": [{"segment": "0.0", "offset": 120, '
                          '"range": [0, 0.5]}, {"segment": "0.1", "offset": 0, "range": [0.5, 1]}]}')
    assert old == cut and old.uid is None and old.ranges == cut.ranges


def test_cuts_of_different_incarnations_do_not_compare() -> None:
    a = StreamCut("a/b", {0: 1}, {0: (0.0, 1.0)}, UID)
    b = StreamCut("a/b", {0: 2}, {0: (0.0, 1.0)}, OTHER_UID)
    with pytest.raises(InvalidStreamCut) as exc:
        _ = a <= b
    assert one_line(exc) == (f"cannot compare cuts of different incarnations of stream a/b (uid {UID} and "
                             f"uid {OTHER_UID})")
    # a cut without a uid compares with either
    assert StreamCut("a/b", {0: 0}, {0: (0.0, 1.0)}) < a and a < StreamCut("a/b", {0: 2}, {0: (0.0, 1.0)})


def test_equality_and_hash_ignore_ranges_uid_and_key_order() -> None:
    a = StreamCut("a/b", {2: 5, 1: 3}, {1: (0.0, 0.5), 2: (0.5, 1.0)}, UID)
    b = StreamCut("a/b", {1: 3, 2: 5})
    assert a == b and hash(a) == hash(b)
    assert list(a.positions) == [1, 2]
    assert a != StreamCut("a/c", {1: 3, 2: 5})
    assert a != StreamCut("a/b", {1: 3, 2: 6})


# ---- operators ------------------------------------------------------------------------------------


@FAST
@given(streams_with_cuts(count=2), stream_names)
def test_operators_follow_compare_on_resolved_cuts(stream_and_cuts, name: str) -> None:
    stream, (pa, pb) = stream_and_cuts
    a = StreamCut(name, pa, {s: stream.ranges[s] for s in pa})
    b = StreamCut(name, pb, {s: stream.ranges[s] for s in pb})
    order = compare_cuts(pa, pb, stream.ranges)
    assert a.compare(b) is order
    assert (a <= b) == (order in (CutOrder.BEFORE, CutOrder.EQUAL))
    assert (a >= b) == (order in (CutOrder.AFTER, CutOrder.EQUAL))
    assert (a < b) == (order is CutOrder.BEFORE)
    assert (a > b) == (order is CutOrder.AFTER)
    assert a.overlaps(b) == (order is CutOrder.OVERLAPS) == b.overlaps(a)
    assert (a <= b) == (b >= a) and (a < b) == (b > a)
    # exactly one relation holds
    assert [a < b, a > b, a == b, a.overlaps(b)].count(True) == 1
    # the forms keep what comparison needs
    assert StreamCut.parse(a.to_json()).compare(StreamCut.parse(b.to_json())) is order


def test_operators_need_key_ranges() -> None:
    bare = StreamCut("a/b", {0: 10})
    resolved = StreamCut("a/b", {0: 5}, {0: (0.0, 1.0)})
    for left, right in ((bare, resolved), (resolved, bare), (bare, bare)):
        for op in (lambda x, y: x <= y, lambda x, y: x >= y, lambda x, y: x < y, lambda x, y: x > y,
                   lambda x, y: x.overlaps(y)):
            with pytest.raises(InvalidStreamCut) as exc:
                op(left, right)
            message = one_line(exc)
            assert "carries no key ranges" in message and "resolve" in message and "a/b:0.0=10" in message


def test_comparing_cuts_of_different_streams_raises() -> None:
    a = StreamCut("a/b", {0: 1}, {0: (0.0, 1.0)})
    b = StreamCut("a/c", {0: 1}, {0: (0.0, 1.0)})
    with pytest.raises(InvalidStreamCut) as exc:
        _ = a <= b
    message = one_line(exc)
    assert "'a/b'" in message and "'a/c'" in message and "different streams" in message
    with pytest.raises(InvalidStreamCut):
        a.overlaps(b)


# ---- malformed input ------------------------------------------------------------------------------

MALFORMED_COMPACT = [
    ("", "expected 'scope/stream:E.N=OFFSET"),
    ("a/b", "expected 'scope/stream:E.N=OFFSET"),
    ("a/b:", "bad entry ''"),
    ("a:0.0=1", "'a' is not a 'scope/stream' name"),
    ("a/b/c:0.0=1", "is not a 'scope/stream' name"),
    ("../b:0.0=1", "is not a 'scope/stream' name"),
    ("a/b:0.0", "bad entry '0.0'"),
    ("a/b:0=1", "bad entry '0=1'"),
    ("a/b:0.0=", "bad entry '0.0='"),
    ("a/b:0.0=-1", "bad entry '0.0=-1'"),
    ("a/b:0.0=1.5", "bad entry '0.0=1.5'"),
    ("a/b:0.x=1", "bad entry '0.x=1'"),
    ("a/b:0.0=1,,0.1=2", "bad entry ''"),
    ("a/b:0.0=1,0.0=2", "segment 0.0 appears twice"),
    ("a/b:0.0=9223372036854775808", "offset 9223372036854775808 is out of range"),
    ("a/b:0.0=99999999999999999999", "bad entry"),
    ("a/b:2147483648.0=0", "segment 2147483648.0 is out of range"),
    ("a/b:0.4294967296=0", "segment 0.4294967296 is out of range"),
    ("a/b:0.0=1;0.1=2", "bad entry"),
    ("a/b:٠.٠=٥", "bad entry"),  # non-ASCII digits are not digits here
    (f"a/b:0.0=1@{UID[:31]}", f"uid '{UID[:31]}' is not 32 lowercase hex digits"),
    (f"a/b:0.0=1@{UID}0", "is not 32 lowercase hex digits"),
    (f"a/b:0.0=1@{UID.upper()}", "is not 32 lowercase hex digits"),
    ("a/b:0.0=1@", "uid '' is not 32 lowercase hex digits"),
    (f"a/b:0.0=1@{UID}@{UID}", "is not 32 lowercase hex digits"),
    (f"a/b:@{UID}", "bad entry ''"),
    (f"a/b@{UID}:0.0=1", "is not a 'scope/stream' name"),
]


@pytest.mark.parametrize(("text", "reason"), MALFORMED_COMPACT)
def test_malformed_compact_strings_are_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidStreamCut) as exc:
        StreamCut.parse(text)
    message = one_line(exc)
    assert message.startswith("malformed stream cut")
    assert reason in message


def entry(segment: object = "0.0", offset: object = 0, **extra: object) -> dict[str, object]:
    return {"segment": segment, "offset": offset, **extra}


def doc(positions: object = None, stream: object = "a/b", **extra: object) -> str:
    body: dict[str, object] = {"stream": stream, "positions": [entry()] if positions is None else positions}
    return json.dumps({**body, **extra})


MALFORMED_JSON = [
    ("{", "malformed stream cut JSON: Expecting property name"),
    ('{"stream": "a/b"}', "the keys 'stream' and 'positions' (and optionally 'uid')"),
    (doc(extra_key=1), "the keys 'stream' and 'positions' (and optionally 'uid')"),
    (doc(uid=5), "uid 5 is not 32 lowercase hex digits"),
    (doc(uid=None), "uid None is not 32 lowercase hex digits"),
    (doc(uid=UID.upper()), f"uid '{UID.upper()}' is not 32 lowercase hex digits"),
    ("[1, 2]", "malformed stream cut"),
    (doc(stream="ab"), "'ab' is not a 'scope/stream' name"),
    (doc(stream=5), "5 is not a 'scope/stream' name"),
    (doc(stream=None), "None is not a 'scope/stream' name"),
    (doc(positions=[]), "'positions' must be a non-empty list"),
    (doc(positions={"0.0": 1}), "'positions' must be a non-empty list"),
    (doc(positions=[5]), "each position needs 'segment' and 'offset'"),
    (doc(positions=[{"segment": "0.0"}]), "each position needs 'segment' and 'offset'"),
    (doc(positions=[entry(colour="red")]), "each position needs 'segment' and 'offset'"),
    (doc(positions=[entry(segment="0")]), "segment '0' is not 'epoch.number'"),
    (doc(positions=[entry(segment=0)]), "segment 0 is not 'epoch.number'"),
    (doc(positions=[entry(segment="0.0.0")]), "segment '0.0.0' is not 'epoch.number'"),
    (doc(positions=[entry(offset=-1)]), "offset -1 of segment 0.0 is not a non-negative integer"),
    (doc(positions=[entry(offset="5")]), "offset '5' of segment 0.0 is not a non-negative integer"),
    (doc(positions=[entry(offset=1.5)]), "offset 1.5 of segment 0.0 is not a non-negative integer"),
    (doc(positions=[entry(offset=True)]), "offset True of segment 0.0 is not a non-negative integer"),
    (doc(positions=[entry(offset=None)]), "offset None of segment 0.0 is not a non-negative integer"),
    (doc(positions=[entry(offset=10**30)]), f"offset {10**30} is out of range"),
    (doc(positions=[entry(), entry(offset=3)]), "segment 0.0 appears twice"),
    (doc(positions=[entry(range=[0.5, 0.25])]), "range [0.5, 0.25] of segment 0.0 is not [low, high)"),
    (doc(positions=[entry(range=[0, 2])]), "range [0, 2] of segment 0.0"),
    (doc(positions=[entry(range=[-0.5, 1])]), "range [-0.5, 1] of segment 0.0"),
    (doc(positions=[entry(range=["0", 1])]), "range ['0', 1] of segment 0.0"),
    (doc(positions=[entry(range=[True, 1])]), "range [True, 1] of segment 0.0"),
    (doc(positions=[entry(range=[0, 0.5, 1])]), "range [0, 0.5, 1] of segment 0.0"),
    (doc(positions=[entry(range=0.5)]), "range 0.5 of segment 0.0"),
    (doc(positions=[entry(range=[0, 0.5]), entry(segment="0.1")]), "either every position has a 'range'"),
    ('{"stream": "a/b", "positions": [{"segment": "0.0", "offset": 0, "range": [NaN, 1]}]}', "range [nan, 1]"),
]


@pytest.mark.parametrize(("text", "reason"), MALFORMED_JSON)
def test_malformed_json_is_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidStreamCut) as exc:
        StreamCut.parse(text)
    message = one_line(exc)
    assert message.startswith("malformed stream cut")
    assert reason in message


def test_deeply_nested_json_is_refused_cleanly() -> None:
    text = '{"stream": "a/b", "positions": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(InvalidStreamCut) as exc:
        StreamCut.parse(text)
    assert one_line(exc).startswith("malformed stream cut JSON")


def test_non_strings_are_refused() -> None:
    for value in (None, 5, b"a/b:0.0=1", {"stream": "a/b"}):
        with pytest.raises(InvalidStreamCut) as exc:
            StreamCut.parse(value)  # type: ignore[arg-type]
        assert "expected a string" in one_line(exc)
    with pytest.raises(InvalidStreamCut, match="the keys 'stream' and 'positions'"):
        StreamCut.from_dict(["a/b"])


def test_long_malformed_text_is_shortened_in_the_message() -> None:
    text = "a/b:" + "0.0=1," * 100 + "x"
    with pytest.raises(InvalidStreamCut) as exc:
        StreamCut.parse(text)
    assert len(one_line(exc)) < 250


CUT_ALPHABET = st.sampled_from([*'0123456789.=,:/ab_-{}[]" \n@', "stream", "positions", "segment", "offset", "range",
                                "a/b:", "0.1=", "uid", UID])
cut_like_text = st.one_of(
    st.text(),
    st.lists(CUT_ALPHABET, max_size=40).map("".join),
    st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                 lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                     st.sampled_from(["stream", "positions", "segment", "offset", "range", "uid", "x"]), inner,
                     max_size=4),
                 max_leaves=12).map(json.dumps),
)


@settings(max_examples=400, deadline=None)
@given(cut_like_text)
def test_parse_fuzz_gives_a_cut_or_invalid_stream_cut(text: str) -> None:
    try:
        cut = StreamCut.parse(text)
    except InvalidStreamCut as exc:
        assert "\n" not in str(exc)
        return
    assert isinstance(cut, StreamCut) and cut.positions
    assert all(isinstance(o, int) and 0 <= o < 2**63 for o in cut.positions.values())
    assert StreamCut.parse(str(cut)) == cut and StreamCut.parse(str(cut)).uid == cut.uid
    assert StreamCut.parse(cut.to_json()).uid == cut.uid
