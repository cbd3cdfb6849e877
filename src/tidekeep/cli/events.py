"""Lines in, events out: how `stream write` turns input lines into events with routing keys, and
how `stream read --json` turns events into JSON records. Pure functions, tested with hypothesis.

Input: one event per line; the payload is the line's bytes without its line terminator ("\\n",
or "\\r\\n"). A line may be empty (an empty event). The routing key, when asked for, comes from
the line itself: field N split by a delimiter (`--key-field`), or a top-level field of a JSON
object (`--key-json`).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import EventTooLarge, InvalidInput
from ..printable import printable
from .output import iso_utc

if TYPE_CHECKING:
    from ..streams.reader import Event

KeyExtractor = Callable[[bytes], str | None]


def strip_line_end(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
    return line


def field_key(field_number: int, delimiter: str) -> KeyExtractor:
    """Routing key = field `field_number` (1-based) of the line split by `delimiter`."""
    if field_number < 1:
        raise InvalidInput(f"invalid --key-field {field_number}: fields are numbered from 1")
    if not delimiter:
        raise InvalidInput("invalid --delimiter '': it must not be empty")
    separator = delimiter.encode("utf-8")

    def extract(payload: bytes) -> str:
        parts = payload.split(separator, field_number)
        if len(parts) < field_number:
            raise InvalidInput(f"has {len(parts)} field(s) split by {delimiter!r}, no field {field_number}")
        return _decode_key(parts[field_number - 1])

    return extract


def json_key(field_name: str) -> KeyExtractor:
    """Routing key = the top-level field `field_name` of a JSON object line; it must be a string
    or a number (numbers are keyed by their JSON text, so 7 and "7" share a key)."""
    if not field_name:
        raise InvalidInput("invalid --key-json '': give the name of a top-level field")

    def extract(payload: bytes) -> str:
        try:
            document = json.loads(payload)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"is not valid JSON ({_reason(exc)})") from None
        if not isinstance(document, dict):
            raise InvalidInput("is not a JSON object")
        if field_name not in document:
            raise InvalidInput(f"has no field {field_name!r}")
        value = document[field_name]
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return json.dumps(value)
        raise InvalidInput(f"has {field_name!r} = {json.dumps(value)[:40]}, which is not a string or number")

    return extract


def _reason(exc: Exception) -> str:
    return exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"


def _decode_key(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("has a key field that is not valid UTF-8") from None


@dataclass(frozen=True)
class LineEvent:
    line_number: int  # 1-based, for error messages
    payload: bytes
    routing_key: str | None


def parse_lines(lines: Iterable[bytes], key_of: KeyExtractor | None) -> Iterator[LineEvent]:
    """Events from input lines; a bad line raises InvalidInput naming its line number."""
    from ..config import MAX_EVENT_SIZE

    for number, raw in enumerate(lines, start=1):
        payload = strip_line_end(raw)
        if len(payload) > MAX_EVENT_SIZE:
            raise EventTooLarge(f"line {number}: event of {len(payload)} bytes is above the "
                                f"{MAX_EVENT_SIZE}-byte limit")
        key = None
        if key_of is not None:
            try:
                key = key_of(payload)
            except InvalidInput as exc:
                raise InvalidInput(f"line {number} {exc}") from None
        yield LineEvent(number, payload, key)


# ---- events out -------------------------------------------------------------------------------


def payload_fields(payload: bytes) -> dict[str, str]:
    """The payload as JSON text: UTF-8 when it decodes, else base64; `payload_encoding` says which."""
    try:
        return {"payload": payload.decode("utf-8"), "payload_encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"payload": base64.b64encode(payload).decode("ascii"), "payload_encoding": "base64"}


def decode_payload(record: dict[str, Any]) -> bytes:
    """The payload bytes of a `read --json` record (the inverse of payload_fields)."""
    if record["payload_encoding"] == "base64":
        return base64.b64decode(record["payload"], validate=True)
    return str(record["payload"]).encode("utf-8")


def event_record(event: Event) -> dict[str, Any]:
    from ..streams.model import segment_name

    return {
        **payload_fields(event.payload),
        "routing_key": event.routing_key,
        "segment": segment_name(event.segment),
        "offset": event.offset,
        "commit_time": iso_utc(event.commit_time_ms),
        "writer_id": event.writer_id,
    }


def event_text(event: Event) -> bytes:
    """The text form of an event: its payload as UTF-8, invalid bytes replaced by U+FFFD, control
    characters escaped (docs/cli.md), so every event is exactly one line."""
    return printable(event.payload.decode("utf-8", "replace")).encode("utf-8") + b"\n"
