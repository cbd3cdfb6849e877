"""Taking the leading timestamp text out of messages and putting it back
(archives/timestamp_text.py): join(split(m)) == m byte for byte for every input, and the rows whose
text is the canonical rendering of their ms (a datetime/zoneinfo oracle) are the ones split."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tidekeep.archives import timestamp_text
from tidekeep.archives.timestamp_text import join_timestamps, split_timestamps
from tidekeep.archives.timestamps import MAX_MS, make_rules, parse_timestamps
from tidekeep.errors import InvalidInput

ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
PREFIXES = ["", "<34>", "<34>1 ", "[", "<34>[", "<165>1 ["]
DAY_MS = 86_400_000
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# rests that cannot extend the timestamp text (no digit, zone or fraction right after it) ...
SAFE_RESTS = ["", " INFO started", "\tx", "] [main] INFO", " a\nb\n\nc", "\n\tat Foo.bar(Foo.java:12)", " é ✓ 日本"]
# ... and rests that can: the oracle says nothing about them, the round trip still holds
UNSAFE_RESTS = ["5 digits after", "123", "Z", "+02:00 tail", "-0500", ".5", ",7 x", ":00"]


def wall_of(ms: int, zone: str | None, offset_minutes: int = 0) -> dt.datetime:
    """Wall-clock time of an instant in a zone (or at a fixed offset when zone is None)."""
    instant = EPOCH + dt.timedelta(milliseconds=ms)
    if zone is None:
        return (instant + dt.timedelta(minutes=offset_minutes)).replace(tzinfo=None)
    return instant.astimezone(zoneinfo.ZoneInfo(zone)).replace(tzinfo=None)


def fraction_text(ms: int, digits: int, extra: str) -> str:
    """`digits` fraction digits of an instant's ms: the ms truncated, or the ms then `extra`."""
    millis = f"{ms % 1000:03d}"
    return millis[:digits] if digits <= 3 else millis + extra[:digits - 3].ljust(digits - 3, "0")


@dataclass(frozen=True)
class Form:
    """How a timestamp is written: enough to write any instant that way (the oracle)."""

    kind: str  # iso, syslog, epoch_s, epoch_ms
    prefix: str = ""
    sep: str = "T"  # ISO date/time separator
    frac_sep: str = "."
    frac_digits: int = 0
    frac_extra: str = ""  # digits past the ms
    zone: str = ""  # "", "Z", "+02:00", "-0500" (ISO only)
    day_style: str = "space"  # syslog: space (" 7"), zero ("07"), bare ("7"), wide ("  7", "  17")

    def write(self, ms: int, timezone: str) -> str:
        frac = fraction_text(ms, self.frac_digits, self.frac_extra)
        if self.kind == "epoch_ms":
            return f"{self.prefix}{ms:013d}"
        if self.kind == "epoch_s":
            return f"{self.prefix}{ms // 1000:010d}" + (f".{frac}" if self.frac_digits else "")
        if self.kind == "syslog":
            w = wall_of(ms, timezone)
            days = {"space": f"{w.day:2d}", "zero": f"{w.day:02d}", "bare": f"{w.day}", "wide": f" {w.day}"}
            day = days[self.day_style]
            return (f"{self.prefix}{MONTHS[w.month - 1]} {day} {w:%H:%M:%S}"
                    + (f".{frac}" if self.frac_digits else ""))
        offsets = {"": None, "Z": 0, "+02:00": 120, "-0500": -300}
        w = wall_of(ms, timezone) if self.zone == "" else wall_of(ms, None, offsets[self.zone] or 0)
        return (f"{self.prefix}{w.year:04d}-{w.month:02d}-{w.day:02d}{self.sep}{w:%H:%M:%S}"
                + (f"{self.frac_sep}{frac}" if self.frac_digits else "") + self.zone)


forms = st.one_of(
    st.builds(Form, kind=st.just("iso"), prefix=st.sampled_from(PREFIXES), sep=st.sampled_from("T "),
              frac_sep=st.sampled_from(".,"), frac_digits=st.integers(0, 9),
              frac_extra=st.sampled_from(["", "000000", "456789", "000001"]),
              zone=st.sampled_from(["", "Z", "+02:00", "-0500"])),
    st.builds(Form, kind=st.just("syslog"), prefix=st.sampled_from(PREFIXES), frac_digits=st.sampled_from([0, 0, 3, 6]),
              frac_extra=st.sampled_from(["", "000", "123"]),
              day_style=st.sampled_from(["space", "zero", "bare", "wide"])),
    st.builds(Form, kind=st.just("epoch_s"), prefix=st.sampled_from(PREFIXES), frac_digits=st.integers(0, 9),
              frac_extra=st.sampled_from(["", "000000", "456789"])),
    st.builds(Form, kind=st.just("epoch_ms"), prefix=st.sampled_from(PREFIXES)),
)
# instants 1970..9999 (two days short of the end, so every zone's wall clock stays in year 9999)
instants = st.integers(0, MAX_MS - 2 * DAY_MS)
zones = st.sampled_from(ZONES)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


def first_lines(messages: list[str | None]) -> pa.Array:
    return pa.array([None if m is None else m.split("\n")[0] for m in messages], type=pa.string())


def parsed(messages: list[str | None], zone: str, now_ms: int) -> pa.Array:
    """The timestamps exactly as ingest reads them: from each message's first line."""
    return parse_timestamps(first_lines(messages), make_rules(zone, now_ms=now_ms))


def round_trip(messages: pa.Array, timestamps: pa.Array, zone: str) -> tuple[pa.Array, pa.Array]:
    formats, rest = split_timestamps(messages, timestamps, zone)
    assert formats.type == pa.string() and rest.type == pa.string()
    assert len(formats) == len(rest) == len(messages)
    back = join_timestamps(formats, timestamps, rest)
    assert back.type == pa.string()
    assert back.to_pylist() == messages.to_pylist()
    for f, r, m in zip(formats.to_pylist(), rest.to_pylist(), messages.to_pylist(), strict=True):
        if f is None:
            assert r == m
        else:
            assert m.endswith(r) and len(r) < len(m)
    return formats, rest


@dataclass(frozen=True)
class Case:
    ms: int
    zone: str
    form: Form
    rest: str


cases = st.builds(Case, ms=instants, zone=zones, form=forms,
                  rest=st.one_of(st.sampled_from(SAFE_RESTS + UNSAFE_RESTS), text))


@SETTINGS
@given(st.lists(cases, min_size=1, max_size=12), st.integers(-400, 400), zones)
def test_split_join_round_trips_and_splits_canonical_text(batch: list[Case], now_days: int, zone: str) -> None:
    """Every row written in zone `zone` round-trips; a row with a safe rest is split exactly when its
    timestamp text is the oracle's rendering of the ms ingest parsed (same form and widths)."""
    now_ms = min(max(batch[0].ms + now_days * DAY_MS, DAY_MS), MAX_MS - 400 * DAY_MS)
    written = [case.form.write(case.ms, zone) for case in batch]
    messages = [w + case.rest for w, case in zip(written, batch, strict=True)]
    array = pa.array(messages, type=pa.string())
    timestamps = parsed(messages, zone, now_ms)
    formats, _ = round_trip(array, timestamps, zone)
    for case, w, ms, fmt in zip(batch, written, timestamps.to_pylist(), formats.to_pylist(), strict=True):
        if case.rest not in SAFE_RESTS:
            continue
        # the ms's own rendering: digits past the ms are 0
        canonical = ms is not None and replace(case.form, frac_extra="").write(ms, zone) == w
        assert (fmt is not None) == canonical, (w, ms, fmt)
        event(f"{case.form.kind}: {'split' if canonical else 'kept whole'}")


@SETTINGS
@given(st.lists(st.tuples(instants, st.sampled_from(PREFIXES), st.sampled_from(SAFE_RESTS)), min_size=1, max_size=10))
def test_iso_millis_in_utc_always_splits(rows: list[tuple[int, str, str]]) -> None:
    form = Form("iso", sep=" ", frac_sep=",", frac_digits=3)
    messages = [Form("iso", prefix=p, sep=" ", frac_sep=",", frac_digits=3).write(ms, "UTC") + rest
                for ms, p, rest in rows]
    timestamps = parsed(messages, "UTC", 0)
    assert timestamps.to_pylist() == [ms for ms, _, _ in rows]
    formats, rest = round_trip(pa.array(messages), timestamps, "UTC")
    assert formats.to_pylist() == [f"+00:00|{p}0000-00-00 00:00:00,000" for _, p, _ in rows]
    assert rest.to_pylist() == [r for _, _, r in rows]
    assert form.write(0, "UTC") == "1970-01-01 00:00:00,000"


@SETTINGS
@given(st.lists(st.one_of(st.none(), text, st.builds(lambda c, t: c.form.write(c.ms, c.zone) + t, cases, text)),
                min_size=0, max_size=12),
       zones, instants)
def test_arbitrary_messages_round_trip(messages: list[str | None], zone: str, now_ms: int) -> None:
    """Random text, with and without timestamps (written in any zone, read in another), nulls."""
    round_trip(pa.array(messages, type=pa.string()), parsed(messages, zone, now_ms), zone)


@SETTINGS
@given(st.lists(st.tuples(st.one_of(text, st.builds(lambda c, t: c.form.write(c.ms, c.zone) + t, cases, text)),
                          st.one_of(st.none(), st.integers(-(2**62), 2**62), instants)), min_size=1, max_size=12),
       zones)
def test_any_timestamps_round_trip(rows: list[tuple[str, int | None]], zone: str) -> None:
    """Timestamps that do not belong to the text (a caller's mistake, or a user format's ms): the
    verification keeps those messages whole, and nothing is lost either way."""
    messages, timestamps = zip(*rows, strict=True)
    round_trip(pa.array(list(messages), type=pa.string()), pa.array(list(timestamps), type=pa.int64()), zone)


def split_one(message: str, zone: str, now_ms: int = 0) -> tuple[int | None, str | None, str]:
    timestamps = parsed([message], zone, now_ms)
    formats, rest = round_trip(pa.array([message]), timestamps, zone)
    return timestamps[0].as_py(), formats[0].as_py(), rest[0].as_py()


def test_dst_fold_round_trips_and_splits() -> None:
    """01:30 on the fall-back night happens twice; ingest reads the first (EDT, fold=0), which renders
    back as 01:30: split with the EDT offset. The hour after renders with EST."""
    ms, fmt, rest = split_one("2024-11-03 01:30:00.250 first\nsecond line", "America/New_York")
    assert ms == int(dt.datetime(2024, 11, 3, 5, 30, 0, 250_000, tzinfo=dt.UTC).timestamp() * 1000)
    assert (fmt, rest) == ("-04:00|0000-00-00 00:00:00.000", " first\nsecond line")
    assert split_one("2024-11-03 02:30:00 x", "America/New_York")[1] == "-05:00|0000-00-00 00:00:00"
    # both 01:30s written with explicit offsets are two instants, each split on its literal offset
    assert split_one("2024-11-03T01:30:00-0400 x", "America/New_York")[1:] == ("|0000-00-00T00:00:00-0400", " x")
    assert split_one("2024-11-03T01:30:00-0500 x", "America/New_York")[1:] == ("|0000-00-00T00:00:00-0500", " x")


def test_dst_gap_round_trips_unsplit() -> None:
    """02:30 on the spring-forward night does not exist; ingest reads it with the offset before the
    gap (07:30 UTC), which renders back as 03:30 EDT: the message stays whole."""
    for message in ["2024-03-10 02:30:00 gap", "Mar 10 02:30:00 host gap", "<34>1 [2024-03-10T02:30:00.123] x"]:
        ms, fmt, rest = split_one(message, "America/New_York", now_ms=1_711_000_000_000)
        assert ms is not None and fmt is None and rest == message
    # the minute before and after the gap split, each with its own offset
    assert split_one("2024-03-10 01:59:59 x", "America/New_York")[1] == "-05:00|0000-00-00 00:00:00"
    assert split_one("2024-03-10 03:00:00 x", "America/New_York")[1] == "-04:00|0000-00-00 00:00:00"


@pytest.mark.parametrize(("message", "zone", "fmt", "rest"), [
    ("2024-07-01T12:00:00Z", "UTC", "|0000-00-00T00:00:00Z", ""),
    ("2024-07-01 12:00:00,123 INFO x", "Asia/Kolkata", "+05:30|0000-00-00 00:00:00,000", " INFO x"),
    ("[2024-07-01T12:00:00.1230000+02:00] x", "UTC", "|[0000-00-00T00:00:00.0000000+02:00", "] x"),
    ("<34>1 Oct  7 13:55:36 host", "Europe/Berlin", "+02:00|<34>1 Mmm  0 00:00:00", " host"),
    ("Oct 17 13:55:36 host", "Australia/Lord_Howe", "+11:00|Mmm 00 00:00:00", " host"),
    ("Jan 07 13:55:36.5 host", "Australia/Lord_Howe", "+11:00|Mmm 00 00:00:00.0", " host"),
    ("1719835200 x", "America/New_York", "|0000000000", " x"),
    ("1719835200.123000 x", "UTC", "|0000000000.000000", " x"),
    ("1719835200123\n{}", "UTC", "|0000000000000", "\n{}"),
])
def test_format_examples(message: str, zone: str, fmt: str, rest: str) -> None:
    assert split_one(message, zone, now_ms=1_728_950_400_000)[1:] == (fmt, rest)


@pytest.mark.parametrize("message", [
    "2024-07-01T12:00:00.123456Z x",  # digits past the ms are not in the ms
    "1719835200.1234 x",
    "Oct  7 13:55:36.0001 host",
    "2024-07-01T12:00:00+2400 x",  # no timestamp at all
    "2024-07-01 12:00:001 x",
    "12345678901234 x",
    "x 2024-07-01T12:00:00Z",
])
def test_unsplit_examples(message: str) -> None:
    assert split_one(message, "UTC", now_ms=1_728_950_400_000)[1:] == (None, message)


def test_arrow_shapes() -> None:
    """Chunked, large_string, sliced and null inputs; dictionary and chunked formats to join."""
    messages = ["2024-07-01T12:00:00Z a", "no", None, "2024-07-01 12:00:00 b", "", "1719835200 c\nd"]
    timestamps = parsed(messages, "Europe/Berlin", 0)
    expected_formats, expected_rest = split_timestamps(pa.array(messages), timestamps, "Europe/Berlin")
    assert expected_formats.to_pylist() == ["|0000-00-00T00:00:00Z", None, None, "+02:00|0000-00-00 00:00:00", None,
                                            "|0000000000"]
    assert expected_rest.to_pylist() == [" a", "no", None, " b", "", " c\nd"]
    chunked = pa.chunked_array([pa.array(messages[:2], pa.large_string()), pa.array(messages[2:], pa.large_string())])
    formats, rest = split_timestamps(chunked, pa.chunked_array([timestamps.slice(0, 3), timestamps.slice(3)]),
                                     "Europe/Berlin")
    assert formats.equals(expected_formats) and rest.equals(expected_rest)
    padded = pa.array(["x", *messages, "y"]).slice(1, len(messages))
    formats, rest = split_timestamps(padded, timestamps, "Europe/Berlin")
    assert formats.equals(expected_formats) and rest.equals(expected_rest)
    for f in [formats.dictionary_encode(), pa.chunked_array([formats.slice(0, 4), formats.slice(4)]),
              formats.cast(pa.large_string())]:
        assert join_timestamps(f, timestamps, rest).to_pylist() == messages
    sliced = join_timestamps(formats.slice(3), timestamps.slice(3), rest.slice(3))
    assert sliced.to_pylist() == messages[3:]
    empty = pa.array([], type=pa.string())
    f, r = split_timestamps(empty, pa.array([], type=pa.int64()), "UTC")
    assert len(f) == len(r) == 0 and join_timestamps(f, pa.array([], type=pa.int64()), r).to_pylist() == []


def test_many_rows_many_formats() -> None:
    """A larger batch mixing every form and zone offset (grouping by format, scatter back)."""
    rng = np.random.default_rng(7)
    ms_values = rng.integers(0, 4_102_444_800_000, size=3000)
    form_list = [Form("iso", sep=" ", frac_sep=",", frac_digits=3), Form("iso", zone="Z", frac_digits=6),
                 Form("syslog", prefix="<13>"), Form("epoch_ms"), Form("epoch_s", frac_digits=2),
                 Form("iso", prefix="[", zone="+02:00")]
    messages = [form_list[i % len(form_list)].write(int(ms), "Europe/Berlin") + f" m{i}\nx" * (i % 3)
                for i, ms in enumerate(ms_values)]
    timestamps = parsed(messages, "Europe/Berlin", 4_102_444_800_000)
    formats, _ = round_trip(pa.array(messages), timestamps, "Europe/Berlin")
    split = np.asarray(formats.is_valid())
    assert split.mean() > 0.95
    assert len(set(formats.drop_null().to_pylist())) <= 12  # CET and CEST per zone-less form


def test_a_dictionary_of_formats_is_read_by_its_indices() -> None:
    """Entries no row uses are not parsed; a row whose entry is null has no timestamp text."""
    formats = pa.DictionaryArray.from_arrays(pa.array([2, None, 1, 2], pa.int32()),
                                             pa.array(["not a format", None, "|0000000000"]))
    joined = join_timestamps(formats, pa.array([1_719_835_200_000, None, 5, 1_000], pa.int64()),
                             pa.array([" a", "b", "c", ""]))
    assert joined.to_pylist() == ["1719835200 a", "b", "c", "0000000001"]


def test_join_rejects_bad_input() -> None:
    rest = pa.array([" x"])
    with pytest.raises(ValueError, match="not a timestamp format"):
        join_timestamps(pa.array(["UTC|0000-00-00 00:00:00"]), pa.array([0], pa.int64()), rest)
    with pytest.raises(ValueError, match="not a timestamp format"):
        join_timestamps(pa.array(["|0000-00-00 00:00:00"]), pa.array([0], pa.int64()), rest)
    with pytest.raises(ValueError, match="no timestamp"):
        join_timestamps(pa.array(["|0000000000000"]), pa.array([None], pa.int64()), rest)
    with pytest.raises(ValueError):
        join_timestamps(pa.array(["|0000000000000"]), pa.array([0, 1], pa.int64()), rest)
    with pytest.raises(InvalidInput):
        split_timestamps(rest, pa.array([0], pa.int64()), "Mars/Olympus")


@SETTINGS
@given(st.lists(st.one_of(st.none(), text, st.builds(lambda c, t: c.form.write(c.ms, c.zone) + t, cases, text)),
                min_size=0, max_size=12),
       zones, instants, st.integers(1, 200))
def test_a_column_split_in_blocks_is_split_as_a_whole(messages: list[str | None], zone: str, now_ms: int,
                                                      block_bytes: int) -> None:
    """Blocks of a few bytes (at least one row each) give exactly what one block does."""
    column, timestamps = pa.array(messages, type=pa.string()), parsed(messages, zone, now_ms)
    whole = timestamp_text.split_timestamps(column, timestamps, zone)
    original = timestamp_text.SPLIT_BLOCK_BYTES
    timestamp_text.SPLIT_BLOCK_BYTES = block_bytes
    try:
        blocks = timestamp_text.split_timestamps(column, pa.chunked_array([timestamps]), zone)
    finally:
        timestamp_text.SPLIT_BLOCK_BYTES = original
    assert blocks[0].equals(whole[0]) and blocks[1].equals(whole[1])
