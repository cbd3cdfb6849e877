"""Bad input to watermarks (docs/watermarks.md), on SQLite and PostgreSQL: every refusal is the typed error class
with a one-line message naming the problem, and changes nothing — the stream's marks, its watermarks,
its tail and its events are exactly as before. Ends with a fuzz test of the `position` argument of
WatermarkStore.note: it only ever raises tidekeep errors, and never changes anything when it does."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tidekeep as tk
from tidekeep.errors import InvalidInput, InvalidName, InvalidStreamCut, NotFound, TidekeepError
from tidekeep.streams.model import EVENT_HEADER_BYTES, routing_key_position, segment_id
from tidekeep.streams.of_workspace import watermark_store

STREAM, OTHER = "wm/bad", "wm/other"
S0, S1 = segment_id(0, 0), segment_id(0, 1)
PAYLOAD = b"x" * 12  # 20 bytes per event
EVENTS_PER_SEGMENT = 4
TAIL = EVENTS_PER_SEGMENT * (EVENT_HEADER_BYTES + len(PAYLOAD))
BAD_TIMES = [1.5, True, False, "1000", None, 2**63, -(2**63) - 1, 10**30, -1]


@pytest.fixture
def client(tmp_path: Path, metadata_url: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=str(tmp_path / "data"),
                   clock=clock, settings={"writer.linger": 0}, create=True)
    yield c
    c.close()


def key_in(low: float, high: float) -> str:
    return next(k for k in (f"key-{i}" for i in range(100_000)) if low <= routing_key_position(k) < high)


@pytest.fixture
def stream(client: tk.Client, clock: tk.ManualClock) -> str:
    """Two segments with data, a writer `w` noted at 1000 at {0.0: 20} and one watermark: a refusal that
    changed any of it would show."""
    for name in (STREAM, OTHER):
        client.create_stream(name, tk.StreamConfig(segments=2))
        with client.stream(name).writer("loader") as loader:
            for key in (key_in(0.0, 0.5), key_in(0.5, 1.0)):
                for _ in range(EVENTS_PER_SEGMENT):
                    loader.write(PAYLOAD, key)
    assert client.stream(STREAM).state().tail() == {S0: TAIL, S1: TAIL}
    client.stream(STREAM).watermarks.note("w", 1_000, position={S0: 20})
    assert client.stream(STREAM).watermarks.compute() is not None
    clock.advance(5)
    return STREAM


def snapshot(client: tk.Client, stream: str = STREAM) -> tuple[Any, ...]:
    marks = client.stream(stream).watermarks
    return (marks.marks(), [(s.source, s.active) for s in marks.writers()], marks.list(),
            client.stream(stream).state().tail(),
            [(e.segment, e.offset, e.payload) for e in client.stream(stream).read()])


def refused(client: tk.Client, error: type[TidekeepError], match: str, call: Callable[[], object],
            stream: str = STREAM) -> TidekeepError:
    """`call` raises exactly `error`, with a one-line message matching `match`, and changes nothing."""
    before = snapshot(client, stream)
    with pytest.raises(TidekeepError) as info:
        call()
    assert type(info.value) is error, repr(info.value)
    message = info.value.args[0]
    assert "\n" not in message and message == str(info.value), message
    assert info.match(match)
    assert snapshot(client, stream) == before
    return info.value


# ---- time and offsets going backwards ----------------------------------------------------------------------


def test_a_time_going_backwards_is_refused(client: tk.Client, stream: str) -> None:
    refused(client, InvalidInput, r"writer w: time went backwards from 1000 to 999 ms",
            lambda: client.stream(stream).watermarks.note("w", 999))
    writer = client.stream(stream).writer("w")
    refused(client, InvalidInput, r"time went backwards from 1000 to 0 ms", lambda: writer.note_time(0))
    writer.note_time(1_000)  # equal is allowed, and the writer is still usable
    assert [m.time_ms for m in client.stream(stream).watermarks.marks()] == [1_000]
    writer.close()


def test_a_transaction_committing_a_time_below_its_writers_mark_is_refused_and_stays_open(
        client: tk.Client, stream: str) -> None:
    txn = client.stream(stream).transactional_writer("w").begin()
    txn.write(b"in-txn", key_in(0.0, 0.5))
    txn.flush()
    error = refused(client, InvalidInput, r"cannot commit transaction .* with timestamp 999: .*went backwards",
                    lambda: txn.commit(timestamp=999))
    assert txn.id in str(error)
    assert txn.status() == tk.TxnState.OPEN
    txn.commit(timestamp=1_001)
    assert b"in-txn" in [e.payload for e in client.stream(stream).read()]


def test_a_position_offset_going_backwards_is_refused(client: tk.Client, stream: str) -> None:
    client.stream(stream).watermarks.note("w", 1_500, position={S0: 40})
    refused(client, InvalidInput, r"writer w: position in segment 0\.0 went backwards from 40 to 20",
            lambda: client.stream(stream).watermarks.note("w", 2_000, position={S0: 20}))
    refused(client, InvalidInput, r"went backwards from 40 to 0",
            lambda: client.stream(stream).watermarks.note("w", 2_000, position=f"{stream}:0.0=0,0.1=0"))


# ---- positions that are not this stream's -----------------------------------------------------------------


def test_positions_of_another_stream_or_outside_this_one_are_refused(client: tk.Client, stream: str) -> None:
    other_tail = client.stream(OTHER).tail_cut()
    note = watermark_store(client.workspace).note  # takes the stream's name first
    refused(client, InvalidStreamCut, rf"position is for stream '{OTHER}', not '{stream}'",
            lambda: note(stream, "w", 2_000, position=other_tail))
    refused(client, InvalidStreamCut, rf"position is for stream '{OTHER}'",
            lambda: note(stream, "w", 2_000, position=str(other_tail)))
    refused(client, InvalidStreamCut, rf"position is for stream '{OTHER}'",
            lambda: note(stream, "w", 2_000, position=other_tail.to_json()))
    refused(client, InvalidStreamCut, rf"names segment 3\.7, which {stream} does not have",
            lambda: note(stream, "w", 2_000, position={segment_id(3, 7): 0}))
    refused(client, InvalidStreamCut, rf"offset {TAIL + 1} in segment 0\.1 of {stream} is outside \[0, {TAIL}\]",
            lambda: note(stream, "w", 2_000, position={S1: TAIL + 1}))
    refused(client, InvalidStreamCut, r"offset -1 in segment 0\.0 .* is outside",
            lambda: note(stream, "w", 2_000, position={S0: -1}))
    # bools are ints in Python: True (== segment 0.1's id 1) used to be stored as segment "True",
    # after which every read of the stream's marks failed with a ValueError
    for entry in ({True: 3}, {False: 3}, {S1: True}, {"0.1": 3}, {1.0: 3}):
        refused(client, InvalidStreamCut, r"invalid position entry .*: expected segment id -> offset",
                lambda entry=entry: note(stream, "w", 2_000, position=entry))  # type: ignore[misc]
    # an offset inside an event: watermark cuts are used as stream cuts, so only event boundaries
    refused(client, InvalidStreamCut, rf"offset 19 in segment 0\.0 of {stream} is not at an event boundary",
            lambda: note(stream, "w", 2_000, position={S0: 19}))
    # a new writer too: nothing to go backwards from, the stream alone refuses it
    refused(client, InvalidStreamCut, r"outside", lambda: note(stream, "fresh", 1, position={S0: TAIL + 20}))


# ---- writers that may not note ------------------------------------------------------------------------------


def test_noting_on_a_closed_writer_is_refused(client: tk.Client, stream: str) -> None:
    writer = client.stream(stream).writer("closing")
    writer.note_time(5_000)
    writer.close()
    refused(client, InvalidInput, r"writer closing is closed", lambda: writer.note_time(6_000))
    marks = client.stream(stream).watermarks.marks()
    assert [m.time_ms for m in marks if m.writer_id == "closing" and m.closed] == [5_000]


def test_note_time_on_an_automatically_noting_writer_is_refused(client: tk.Client, stream: str) -> None:
    # an interval of an hour: the background note never fires during the test
    writer = client.stream(stream).writer("auto", config=tk.WriterConfig(automatically_note_time=True,
                                                                   note_time_interval="1h"))
    try:
        refused(client, InvalidInput, r"writer auto notes time automatically: note_time is not allowed",
                lambda: writer.note_time(5_000))
    finally:
        writer.close()


# ---- bad times -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", BAD_TIMES, ids=repr)
def test_times_that_are_not_64_bit_integers_are_refused(client: tk.Client, stream: str, value: object) -> None:
    expected = (r"invalid time .*(must be an integer number of milliseconds|outside the 64-bit range"
                r"|must not be negative)")
    refused(client, InvalidInput, expected, lambda: client.stream(stream).watermarks.note("w", value))  # type: ignore[arg-type]
    writer = client.stream(stream).writer("w")
    refused(client, InvalidInput, expected, lambda: writer.note_time(value))  # type: ignore[arg-type]
    writer.close()
    if value is not None:  # a commit without a timestamp is allowed
        txn = client.stream(stream).transactional_writer("t").begin()
        txn.write(b"held", key_in(0.0, 0.5))
        txn.flush()
        refused(client, InvalidInput, r"invalid commit timestamp",
                lambda: txn.commit(timestamp=value))  # type: ignore[arg-type]
        assert txn.status() == tk.TxnState.OPEN
        txn.abort()


def test_a_negative_commit_timestamp_is_refused(client: tk.Client, stream: str) -> None:
    txn = client.stream(stream).transactional_writer("t").begin()
    txn.write(b"held", key_in(0.0, 0.5))
    refused(client, InvalidInput, r"invalid commit timestamp -1: expected milliseconds since the epoch, >= 0",
            lambda: txn.commit(timestamp=-1))
    assert txn.status() == tk.TxnState.OPEN


# ---- bad configuration --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "match"), [
    ("-5s", r"invalid duration '-5s'"),
    (-1, r"invalid duration -1: must not be negative"),
    ("soon", r"invalid duration 'soon'"),
    (None, r"invalid duration None"),
], ids=repr)
def test_a_negative_or_malformed_aggregation_timeout_is_refused(client: tk.Client, value: object, match: str) -> None:
    streams = client.list_streams()
    refused_config(lambda: tk.StreamConfig(timestamp_aggregation_timeout=value), InvalidInput, match)  # type: ignore[arg-type]
    assert client.list_streams() == streams


def refused_config(call: Callable[[], object], error: type[TidekeepError], match: str) -> None:
    with pytest.raises(TidekeepError) as info:
        call()
    assert type(info.value) is error, repr(info.value)
    assert "\n" not in info.value.args[0]
    assert info.match(match)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"note_time_interval": 0}, r"invalid note_time_interval 0: must be greater than zero"),
    ({"note_time_interval": "0s"}, r"invalid note_time_interval '0s': must be greater than zero"),
    ({"note_time_interval": -1}, r"invalid duration -1: must not be negative"),
    ({"note_time_interval": "-1s"}, r"invalid duration '-1s'"),
    ({"automatically_note_time": "yes"}, r"invalid automatically_note_time 'yes': must be a bool"),
    ({"automatically_note_time": 1}, r"invalid automatically_note_time 1: must be a bool"),
    ({"automatically_note_time": None}, r"invalid automatically_note_time None: must be a bool"),
], ids=repr)
def test_bad_writer_configs_are_refused(kwargs: dict[str, object], match: str) -> None:
    refused_config(lambda: tk.WriterConfig(**kwargs), InvalidInput, match)  # type: ignore[arg-type]


def test_a_writer_config_of_the_wrong_type_is_refused(client: tk.Client, stream: str) -> None:
    refused(client, InvalidInput, r"invalid writer config .*: use WriterConfig",
            lambda: client.stream(stream).writer("w", config={"automatically_note_time": True}))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["yes", 1, None], ids=repr)
def test_a_reader_config_with_a_non_bool_is_refused(value: object) -> None:
    refused_config(lambda: tk.ReaderConfig(disable_time_windows=value),  # type: ignore[arg-type]
                   InvalidInput, rf"invalid disable_time_windows {value!r}: must be a bool")


# ---- bad names and limits --------------------------------------------------------------------------------------


def test_an_unknown_stream_or_a_bad_writer_id_or_source_is_refused(client: tk.Client, stream: str) -> None:
    note = watermark_store(client.workspace).note  # takes the stream's name first
    refused(client, NotFound, r"stream 'wm/nope' does not exist", lambda: note("wm/nope", "w", 2_000))
    refused(client, NotFound, r"scope 'nope' does not exist", lambda: note("nope/s", "w", 2_000))
    for bad in ("bad id", "", "x" * 256, "ü"):
        refused(client, InvalidName, r"writer id", lambda bad=bad: note(stream, bad, 2_000))  # type: ignore[misc]
    refused(client, InvalidName, r"writer id", lambda: note(stream, None, 2_000))  # type: ignore[arg-type]
    refused(client, InvalidInput, r"invalid mark source 'manual': one of note, auto, txn",
            lambda: note(stream, "w", 2_000, source="manual"))


@pytest.mark.parametrize("limit", [0, -1, True, 1.5, "3"], ids=repr)
def test_list_and_tail_refuse_a_limit_below_one_or_not_an_integer(
        client: tk.Client, stream: str, limit: object) -> None:
    refused(client, InvalidInput, rf"invalid limit {limit!r}: must be an integer >= 1",
            lambda: client.stream(stream).watermarks.list(limit=limit))  # type: ignore[arg-type]
    refused(client, InvalidInput, rf"invalid limit {limit!r}: must be an integer >= 1",
            lambda: client.stream(stream).watermarks.tail(limit))  # type: ignore[arg-type]


# ---- fuzz: the position parser ------------------------------------------------------------------------------

_offsets = st.one_of(st.integers(-5, TAIL + 5), st.integers(-(2**70), 2**70), st.booleans(), st.none(),
                     st.floats(allow_nan=True), st.text(max_size=4))
_segments = st.one_of(st.sampled_from([S0, S1]), st.integers(-(2**70), 2**70), st.booleans(), st.none(),
                      st.floats(allow_nan=False), st.text(max_size=4), st.sampled_from(["0.0", "0.1", "0", "1"]))
_compact = st.builds(
    lambda stream, entries: f"{stream}:" + ",".join(f"{s}={o}" for s, o in entries),
    st.sampled_from([STREAM, OTHER, "wm", "", "wm/bad/x"]),
    st.lists(st.tuples(st.sampled_from(["0.0", "0.1", "1.2", "x", "", "-1.0", "0"]),
                       st.one_of(st.integers(-5, TAIL + 5), st.sampled_from(["", "x", "1e3", "-0"]))), max_size=3))
_positions = st.one_of(
    st.dictionaries(_segments, _offsets, max_size=3),
    st.dictionaries(st.sampled_from([S0, S1, True, False]), st.integers(-3, TAIL + 3), max_size=2),
    _compact,
    st.text(alphabet=string.printable, max_size=30),
    st.lists(st.integers(), max_size=3),
    st.integers(),
    st.binary(max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(position=_positions)
def test_fuzzed_positions_raise_only_tidekeep_errors_and_change_nothing_on_error(
        client: tk.Client, stream: str, position: object) -> None:
    before = snapshot(client, stream)
    time_ms = max(m.time_ms for m in before[0]) + 1  # the time is fine: only the position is under test
    try:
        mark = client.stream(stream).watermarks.note("w", time_ms, position=position)  # type: ignore[arg-type]
    except TidekeepError as exc:
        assert "\n" not in exc.args[0]
        assert snapshot(client, stream) == before
        return
    # accepted: the stored mark is what was given, with segment ids and offsets as plain ints
    [stored] = client.stream(stream).watermarks.marks()
    assert stored == mark and stored.time_ms == time_ms
    assert all(type(s) is int and type(o) is int and 0 <= o <= TAIL for s, o in stored.positions.items())
    assert set(stored.positions) <= {S0, S1}
