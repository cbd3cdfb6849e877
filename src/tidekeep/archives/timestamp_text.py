"""Taking a message's leading timestamp text out of the message and putting it back, vectorised with
numpy and pyarrow (pure: no store, storage or Spark).

An archive keeps each message's timestamp as int64 ms (UTC) in a column of its own, so the text of
that timestamp at the start of the message is redundant: `split_timestamps` replaces it with a
short *format* string (a column that dictionary-encodes to a handful of values) and keeps the rest
of the message; `join_timestamps` renders the text back from the format and the ms.

Rules:
- Only the built-in forms of timestamps.py are taken out (ISO-8601 and its log variants, syslog
  `Oct  7 13:55:36`, epoch seconds and epoch milliseconds), with their optional `<PRI>`,
  `<PRI>1 ` and `[` prefix, at the start of the message, exactly where ingest found them (the
  character after the timestamp stays in the rest). A user `--timestamp-format` is not handled:
  ingest keeps those messages whole.
- Lossless by verification: a row is split only if rendering its format from its ms gives back
  its timestamp text byte for byte; every other row keeps its whole message and a null format.
  So whatever the parser did (fractions past milliseconds, a time in a DST gap read with the offset
  before it, a syslog year, a mis-detected 10-digit id), `join_timestamps(*split)` is the message.
  Forms that never split: fractions with a non-zero digit past milliseconds (`.123456`: the ms
  keeps only `.123`), and wall-clock times in a DST gap (02:30 on a spring-forward night renders
  back as 03:30).

Format encoding: `OFFSET|SHAPE`, ASCII.
- SHAPE is the timestamp text (prefix included) with every digit of a date/time field replaced by
  `0` and a syslog month name by `Mmm`; the `<PRI>`/`<PRI>1 ` prefix, `[`, separators (`T` or
  space, `.` or `,`, syslog spaces) and an explicit zone (`Z`, `+02:00`, `-0500`) stay literal,
  since they do not follow from the ms. A field's width is its number of `0`s (a 1-digit syslog day,
  a 7-digit fraction: digits past milliseconds are `0`).
- OFFSET is the wall-clock offset east of UTC the fields are rendered in, `+HH:MM` (`+HH:MM:SS`
  when the zone's offset has seconds), for the forms without an explicit zone (ISO without zone,
  syslog); it is empty for an explicit zone (its literal text gives the offset) and for epoch forms.
  E.g. `+00:00|0000-00-00 00:00:00,000`, `-04:00|Mmm  0 00:00:00`, `|<34>1 0000-00-00T00:00:00.000Z`,
  `|0000000000000`.

Why the offset and not the ingest's zone name: the offset of a zone name comes from the zone
database, which changes (a country drops DST, a correction); a format that depended on it could
render different text after an update, silently changing an archived message. With the offset in
the format, decoding needs no zone data at all and is the same on every machine forever. The cost
is one format per offset in use (two for a zone with DST). The offset of a zone-less timestamp is
the zone's offset at its instant (zoneinfo, looked up once per distinct UTC hour, per minute in an
hour with a change); the verification then rejects the rows it cannot reproduce (DST gaps).
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import re
import zoneinfo
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..civil_dates import civil_from_days
from .arrow_bytes import string_bytes
from .prefix_kernel import Prefixes, prepend
from .timestamp_kernel import ISO, NONE, SYSLOG, match_builtin
from .timestamps import MAX_MS, check_timezone

SPLIT_BLOCK_BYTES = 4 << 20
_MONTH_ALTERNATIVES = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
_PREFIX = r"(?:<\d{1,3}>(?:\d{1,2} )?)?\[?"
_ZONE = r"Z|[+-]\d{2}:?\d{2}"

# the grammar of a format's SHAPE (part of the archive format: keep it stable)
_SHAPE = re.compile(
    rf"(?P<pre>{_PREFIX})(?:"
    r"(?P<iY>0000)-(?P<im>00)-(?P<id>00)[T ](?P<iH>00):(?P<iM>00):(?P<iS>00)(?:[.,](?P<if>0+))?"
    rf"(?P<iz>{_ZONE})?"
    r"|(?P<sb>Mmm) {1,2}(?P<sd>00?) (?P<sH>00):(?P<sM>00):(?P<sS>00)(?:\.(?P<sf>0+))?"
    r"|(?P<es>0{10})(?:\.(?P<ef>0+))?"
    r"|(?P<em>0{13})"
    r")",
    re.ASCII,
)
_OFFSET = re.compile(r"([+-])(\d{2}):(\d{2})(?::(\d{2}))?", re.ASCII)
_ZONE_LITERAL = re.compile(r"Z|([+-])(\d{2}):?(\d{2})", re.ASCII)

DAY_MS = 86_400_000
_MONTH_BYTES = np.frombuffer(_MONTH_ALTERNATIVES.replace("|", "").encode("ascii"), dtype=np.uint8).reshape(12, 3)
_ZERO = ord("0")


# ---- formats -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Format:
    """A parsed format: the bytes to start from and where each field goes."""

    template: np.ndarray  # uint8, the shape's bytes (fields overwritten when rendering)
    kind: str  # "iso", "sys", "es" or "em"
    offset_ms: int  # wall clock = UTC + offset_ms (0 for epoch forms)
    fields: tuple[tuple[str, int, int], ...]  # (field, position, width): Y m d H M S f b e s

    @property
    def width(self) -> int:
        return len(self.template)


def _offset_text(offset_s: int) -> str:
    sign = "-" if offset_s < 0 else "+"
    hours, rest = divmod(abs(offset_s), 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{sign}{hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


@functools.lru_cache(maxsize=4096)
def _parse_format(fmt: str) -> _Format | None:
    """The parsed format, or None when `fmt` is no format of this module."""
    offset_text, bar, shape = fmt.partition("|")
    match = _SHAPE.fullmatch(shape)
    if not bar or match is None:
        return None
    g = match.groupdict()
    names = {"iY": "Y", "im": "m", "id": "d", "iH": "H", "iM": "M", "iS": "S", "if": "f",
             "sb": "b", "sd": "d", "sH": "H", "sM": "M", "sS": "S", "sf": "f", "es": "s", "ef": "f", "em": "s"}
    fields = tuple((names[name], match.start(name), match.end(name) - match.start(name))
                   for name in names if g[name] is not None)
    kind = "iso" if g["iY"] is not None else "sys" if g["sb"] is not None else "es" if g["es"] is not None else "em"
    if kind in ("es", "em") or g["iz"] is not None:
        if offset_text:
            return None
        offset_ms = 0
        if g["iz"] is not None:
            zone = _ZONE_LITERAL.fullmatch(g["iz"])
            assert zone is not None
            if zone.group(1) is not None:
                hours, minutes = int(zone.group(2)), int(zone.group(3))
                if hours > 23 or minutes > 59:
                    return None
                offset_ms = (-1 if zone.group(1) == "-" else 1) * (hours * 3_600_000 + minutes * 60_000)
    else:
        offset = _OFFSET.fullmatch(offset_text)
        if offset is None:
            return None
        hours, minutes, seconds = int(offset.group(2)), int(offset.group(3)), int(offset.group(4) or 0)
        if hours > 23 or minutes > 59 or seconds > 59 or (offset.group(4) is not None and seconds == 0):
            return None
        offset_ms = (-1 if offset.group(1) == "-" else 1) * (hours * 3_600_000 + minutes * 60_000 + seconds * 1000)
        if _offset_text(offset_ms // 1000) != offset_text:
            return None  # one spelling per offset ("-00:00" is "+00:00"), so equal rows get equal formats
    template = np.frombuffer(shape.encode("ascii"), dtype=np.uint8).copy()
    template.flags.writeable = False
    return _Format(template, kind, offset_ms, fields)


# ---- rendering -----------------------------------------------------------------------------------


def _put(out: np.ndarray, position: int, width: int, values: np.ndarray) -> None:
    """Write the last `width` decimal digits of `values` (zero-padded) at a column position."""
    for j in range(width):
        out[:, position + j] = _ZERO + (values // 10 ** (width - 1 - j)) % 10


def _render(fmt: _Format, ms: np.ndarray) -> np.ndarray:
    """The timestamp text of each ms in a format: a (rows, width) uint8 matrix."""
    out = np.empty((len(ms), fmt.width), dtype=np.uint8)
    out[:] = fmt.template
    values: dict[str, np.ndarray]
    if fmt.kind in ("es", "em"):
        values = {"s": ms // 1000 if fmt.kind == "es" else ms, "f": ms % 1000}
    else:
        wall = ms + fmt.offset_ms
        days = wall // DAY_MS
        of_day = wall - days * DAY_MS
        year, month, day = civil_from_days(days)
        values = {"Y": year, "m": month, "d": day, "H": of_day // 3_600_000, "M": of_day // 60_000 % 60,
                  "S": of_day // 1000 % 60, "f": of_day % 1000}
        if fmt.kind == "sys":
            values["b"] = month
    for field, position, width in fmt.fields:
        if field == "b":
            out[:, position:position + 3] = _MONTH_BYTES[values["b"] - 1]
        elif field == "f":
            digits = min(width, 3)  # digits past ms stay the template's 0s
            _put(out, position, digits, values["f"] // 10 ** (3 - digits))
        else:
            _put(out, position, width, values[field])
    return out


# ---- arrays --------------------------------------------------------------------------------------


def _strings(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pa.types.is_dictionary(values.type):
        values = values.dictionary_decode()
    if values.type != pa.string():
        values = values.cast(pa.string())
    return values


def _int64s(values: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(values, valid) of an integer or timestamp array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.type != pa.int64():
        values = values.cast(pa.int64())
    valid = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return np.asarray(pc.fill_null(values, 0).to_numpy(zero_copy_only=False), dtype=np.int64), valid


def _string_array(data: np.ndarray, offsets: np.ndarray, like: pa.Array) -> pa.Array:
    """A pa.string() array of data/offsets, null where `like` is null."""
    if offsets[-1] >= 2**31:
        raise ValueError("timestamp_text: more than 2 GiB of text in one array")
    array = pa.Array.from_buffers(pa.string(), len(offsets) - 1,
                                  [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])
    if like.null_count:
        array = pc.if_else(like.is_valid(), array, pa.scalar(None, pa.string()))
    return array


def _pieces(data: np.ndarray, row_starts: np.ndarray, begin: np.ndarray | int, end: np.ndarray) -> pa.Array:
    """A pa.string() array of data[row_starts + begin : row_starts + end] per row (ASCII pieces:
    a piece is a string whatever its neighbours)."""
    lengths = end - begin
    piece_offsets = np.concatenate([[0], np.cumsum(lengths)])
    positions = np.repeat(row_starts + begin - piece_offsets[:-1], lengths) + np.arange(int(piece_offsets[-1]))
    return _string_array(data[positions], piece_offsets, pa.array([], pa.string()))


def _ranges_mask(size: int, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Boolean mask of `size` bytes, true inside [starts, starts + lengths) (disjoint ranges)."""
    mark = np.zeros(size + 1, dtype=np.int8)
    keep = lengths > 0
    mark[starts[keep]] += 1  # disjoint non-empty ranges: no start repeats, no end repeats
    mark[starts[keep] + lengths[keep]] -= 1
    return np.cumsum(mark[:-1], dtype=np.int8) > 0


def _groups(formats: pa.Array, rows: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """(format, row numbers) per distinct non-null format among `rows` of `formats`."""
    if not len(rows):
        return []
    encoded = pc.dictionary_encode(formats.take(pa.array(rows)))
    indices = np.asarray(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    order = np.argsort(indices, kind="stable")
    bounds = np.searchsorted(indices[order], np.arange(len(encoded.dictionary) + 1))
    names = encoded.dictionary.to_pylist()
    return [(names[k], rows[order[bounds[k]:bounds[k + 1]]]) for k in range(len(names)) if bounds[k + 1] > bounds[k]]


def _shape_of(body: pa.Array, syslog: np.ndarray) -> pa.Array:
    """The bodies (timestamp text without prefix and zone: only field digits, separators and a
    syslog month) with every digit made `0` and the syslog month `Mmm` (numpy on the bytes: a
    regex replacement per digit costs ten times more)."""
    data, offsets = string_bytes(body)
    shape = np.where((data >= ord("0")) & (data <= ord("9")), np.uint8(_ZERO), data)
    shape[offsets[:-1][syslog][:, None] + np.arange(3)] = np.frombuffer(b"Mmm", dtype=np.uint8)
    return _string_array(shape, offsets, body)


# ---- zone offsets --------------------------------------------------------------------------------

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@functools.lru_cache(maxsize=65_536)
def _offset_s(timezone: str, utc_second: int) -> int:
    """The zone's UTC offset (s) at an instant; 0 where datetime cannot hold it."""
    try:
        offset = (_EPOCH + dt.timedelta(seconds=utc_second)).astimezone(zoneinfo.ZoneInfo(timezone)).utcoffset()
    except (OverflowError, ValueError):
        return 0
    return 0 if offset is None else int(offset.total_seconds())


def _offsets_s(timezone: str, ms: np.ndarray) -> np.ndarray:
    """The zone's offset (s) at each instant: looked up per distinct UTC hour, and per minute in an
    hour whose two ends differ (a change mid-minute is caught by the verification)."""
    if timezone == "UTC" or not len(ms):
        return np.zeros(len(ms), dtype=np.int64)
    hours, inverse = np.unique(ms // 3_600_000, return_inverse=True)
    inverse = inverse.reshape(-1)
    first = np.array([_offset_s(timezone, int(h) * 3600) for h in hours], dtype=np.int64)
    last = np.array([_offset_s(timezone, int(h) * 3600 + 3599) for h in hours], dtype=np.int64)
    out = first[inverse]
    changing = (first != last)[inverse]
    if changing.any():
        minutes, at = np.unique(ms[changing] // 60_000, return_inverse=True)
        per_minute = np.array([_offset_s(timezone, int(m) * 60) for m in minutes], dtype=np.int64)
        out[changing] = per_minute[at.reshape(-1)]
    return out


# ---- split and join ------------------------------------------------------------------------------


def text_characters(fmt: str) -> frozenset[str]:
    """Every character a timestamp text of this format can hold: its SHAPE's literal characters,
    digits for its `0`s and the month names' letters for `Mmm` (a search rules rows out by it)."""
    shape = fmt.split("|", 1)[-1]
    literal = shape.replace("Mmm", "")
    allowed = set(literal.replace("0", ""))
    if "0" in literal:
        allowed |= set("0123456789")
    if "Mmm" in shape:
        allowed |= set(_MONTH_ALTERNATIVES.replace("|", ""))
    return frozenset(allowed)


def split_timestamps(messages: pa.Array, timestamps: pa.Array, timezone: str) -> tuple[pa.Array, pa.Array]:
    """(formats, rest): for each message whose timestamp (non-null ms in `timestamps`, as ingest
    parsed it with the built-in forms in `timezone`) is written at its start in a built-in form that
    renders back byte for byte from the ms, formats[i] is a short format string (the same for every
    message written the same way) and rest[i] the message after the timestamp text; otherwise
    formats[i] is null and rest[i] the whole message. Both pa.string().

    A column is split SPLIT_BLOCK_BYTES of text at a time: the numpy steps make temporaries several
    times the text, and blocks of that size reuse memory where a 64 MiB row group at once would
    take fresh pages from the system for each (2-3x slower, docs/benchmarks.md, "Ingest")."""
    zone = check_timezone(timezone)
    text = _strings(messages)
    if isinstance(timestamps, pa.ChunkedArray):
        timestamps = timestamps.combine_chunks()
    if len(timestamps) != len(text):
        raise ValueError(f"split_timestamps: {len(text)} messages but {len(timestamps)} timestamps")
    bounds = _block_bounds(text, SPLIT_BLOCK_BYTES)
    if len(bounds) <= 2:  # one block, or no rows
        return _split_block(text, timestamps, zone)
    parts = [_split_block(text.slice(start, end - start), timestamps.slice(start, end - start), zone)
             for start, end in itertools.pairwise(bounds.tolist())]
    return pa.concat_arrays([part[0] for part in parts]), pa.concat_arrays([part[1] for part in parts])


def _block_bounds(text: pa.Array, block_bytes: int) -> np.ndarray:
    """Row numbers cutting `text` into blocks of about `block_bytes` (at least one row each),
    from 0 to its length."""
    _, offsets = string_bytes(text)
    cuts = np.searchsorted(offsets[:-1], np.arange(block_bytes, int(offsets[-1]), block_bytes), side="left")
    return np.unique(np.concatenate([[0], cuts, [len(text)]]))


def _split_block(text: pa.Array, timestamps: pa.Array, zone: str) -> tuple[pa.Array, pa.Array]:
    ms, has_ms = _int64s(timestamps)
    n = len(text)
    null_formats = pa.nulls(n, pa.string())
    candidate = has_ms & (ms >= 0) & (ms <= MAX_MS)
    if not candidate.any():
        return null_formats, text
    data, starts = string_bytes(text)
    found = match_builtin(data, starts)
    candidate &= found.kind != NONE
    rows = np.flatnonzero(candidate)
    if not len(rows):
        return null_formats, text

    # the prefix, the form without its zone and the ISO zone: ASCII at the start of each message
    prefix_end, form_end, zone_end = (found.spans[rows, column] for column in range(3))
    row_starts = starts[rows]
    pre = _pieces(data, row_starts, 0, prefix_end)
    body = _pieces(data, row_starts, prefix_end, form_end)
    zone_text = _pieces(data, row_starts, form_end, zone_end)
    kinds = found.kind[rows]
    syslog = kinds == SYSLOG
    wall = syslog | ((kinds == ISO) & (zone_end == form_end))
    shape = _shape_of(body, syslog)
    offsets = np.where(wall, _offsets_s(zone, ms[rows]), 0)
    distinct, which = np.unique(offsets, return_inverse=True)
    texts = pa.array([_offset_text(int(o)) for o in distinct], type=pa.string())
    offset_text = pc.if_else(pa.array(wall), texts.take(pa.array(which.reshape(-1))), pa.scalar(""))
    formats = pc.binary_join_element_wise(offset_text, "|", pre, shape, zone_text, "")
    span_length = zone_end

    split = np.zeros(n, dtype=bool)
    for fmt_text, group in _groups(formats, np.arange(len(rows))):
        fmt = _parse_format(fmt_text)
        if fmt is None:
            continue
        members = rows[group[span_length[group] == fmt.width]]  # always all: a shape is as long as its text
        rendered = _render(fmt, ms[members])
        written = data[starts[members][:, None] + np.arange(fmt.width)]
        split[members] = (rendered == written).all(axis=1)

    if not split.any():
        return null_formats, text
    kept = np.flatnonzero(split[rows])
    scatter = np.full(n, -1, dtype=np.int64)
    scatter[rows[kept]] = kept
    out_formats = formats.take(pa.array(scatter, mask=scatter < 0))
    cut = np.zeros(n, dtype=np.int64)
    cut[rows] = np.where(split[rows], span_length, 0)
    rest_data = data[~_ranges_mask(len(data), starts[:-1], cut)]
    rest_offsets = starts - np.concatenate([[0], np.cumsum(cut)])
    return out_formats, _string_array(rest_data, rest_offsets, text)


def join_timestamps(formats: pa.Array, timestamps: pa.Array, rest: pa.Array) -> pa.Array:
    """The messages back (pa.string()): the timestamp text rendered from formats[i] and
    timestamps[i] followed by rest[i] where formats[i] is non-null, rest[i] elsewhere. ValueError
    when a format is not one of this module's or has no timestamp."""
    text = _strings(rest)
    prefixes = timestamp_prefixes(formats, timestamps, len(text))
    if prefixes is None:
        return text
    if text.null_count and not np.asarray(text.is_valid().to_numpy(zero_copy_only=False), dtype=bool)[
            prefixes.width > 0].all():
        raise ValueError("join_timestamps: a message has a timestamp format but no text")
    out, out_offsets = prepend(prefixes, *string_bytes(text))
    return _string_array(out, out_offsets, text)


def timestamp_prefixes(formats: pa.Array | pa.ChunkedArray, timestamps: pa.Array | pa.ChunkedArray,
                       count: int) -> Prefixes | None:
    """The timestamp text of each of `count` rows, rendered from its format and ms (none where the
    format is null); None when no row has a format. ValueError as `join_timestamps` raises it."""
    ms, has_ms = _int64s(timestamps)
    if isinstance(formats, pa.ChunkedArray):
        formats = formats.combine_chunks()
    if len(formats) != count or len(ms) != count:
        raise ValueError(f"join_timestamps: {len(formats)} formats, {len(ms)} timestamps and {count} rests")
    if formats.null_count == count:
        return None
    codes, names = _format_codes(formats)
    rows = np.flatnonzero(codes >= 0)
    if not has_ms[rows].all():
        raise ValueError("join_timestamps: a message has a timestamp format but no timestamp")
    # each format's texts rendered as one (rows, width) block; a row's text is found by where it starts
    width = np.zeros(count, dtype=np.int64)
    text_at = np.zeros(count, dtype=np.int64)
    blocks, rendered_bytes = [], 0
    order = np.argsort(codes[rows], kind="stable")
    bounds = np.searchsorted(codes[rows][order], np.arange(len(names) + 1))
    for code, name in enumerate(names):
        if bounds[code + 1] == bounds[code]:
            continue
        fmt = _parse_format(name)
        if fmt is None:
            raise ValueError(f"join_timestamps: not a timestamp format: {name!r}")
        members = rows[order[bounds[code]:bounds[code + 1]]]
        width[members] = fmt.width
        text_at[members] = rendered_bytes + np.arange(len(members)) * fmt.width
        blocks.append(_render(fmt, ms[members]).reshape(-1))
        rendered_bytes += len(members) * fmt.width
    return Prefixes(np.concatenate(blocks), text_at, width)


def _format_codes(formats: pa.Array) -> tuple[np.ndarray, list[str]]:
    """Each row's format as a number (-1: none) and the format each number stands for; a
    dictionary array's indices are used as they are (an archive's formats are read so)."""
    if not pa.types.is_dictionary(formats.type):
        formats = pc.dictionary_encode(_strings(formats))
    names = formats.dictionary.cast(pa.string()).to_pylist()
    codes = np.asarray(pc.fill_null(formats.indices, -1).to_numpy(zero_copy_only=False), dtype=np.int64)
    missing = [code for code, name in enumerate(names) if name is None]
    if missing:
        codes[np.isin(codes, missing)] = -1
    return codes, [name or "" for name in names]


__all__ = ["join_timestamps", "split_timestamps", "text_characters", "timestamp_prefixes"]
