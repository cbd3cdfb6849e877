"""Meta records: the catalog's description of one stored data item (Stroom's `meta` row).

Pure: values in, values (or a typed error) out. `record_from_mapping` is the one gate every way in
(`client.catalog.add`, the CLI, the Spark importer, the generator's tests) goes through, so a record
in the store always satisfies the same rules:

- feed and type: non-empty text, at most 255 characters;
- times: epoch milliseconds (int) or ISO-8601 text (a value without an offset is UTC), between
  1970-01-01 and the end of year 9999; effective_time and status_time default to create_time;
- status: UNLOCKED (default), LOCKED or DELETED, in any case;
- id, parent_id: positive integers; file_size, raw_size: integers >= 0;
- attributes: names [A-Za-z0-9_-]{1,64}, values text (numbers are converted to text), given either
  as an `attributes` mapping or as flat `attr.<name>` keys;
- any other key is an error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from ..errors import InvalidInput

MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
MAX_TEXT = 255
ATTRIBUTE_PREFIX = "attr."
ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_DIGITS = re.compile(r"[+-]?\d+")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Status(StrEnum):
    UNLOCKED = "UNLOCKED"
    LOCKED = "LOCKED"
    DELETED = "DELETED"


# the catalog_records columns, in table order
COLUMNS: tuple[str, ...] = (
    "id", "feed", "type", "create_time", "effective_time", "status", "status_time", "parent_id",
    "pipeline", "file_size", "raw_size", "location", "attributes",
)
TIME_FIELDS = ("create_time", "effective_time", "status_time")
ID_FIELDS = ("id", "parent_id")
SIZE_FIELDS = ("file_size", "raw_size")
REQUIRED_FIELDS = ("feed", "type", "create_time")


def _frozen(attributes: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(sorted(attributes.items())))


@dataclass(frozen=True, kw_only=True)
class MetaRecord:
    id: int | None = None  # assigned by the database when absent
    feed: str
    type: str
    create_time: int
    effective_time: int | None = None
    status: str = Status.UNLOCKED.value
    status_time: int | None = None
    parent_id: int | None = None
    pipeline: str | None = None
    file_size: int | None = None
    raw_size: int | None = None
    location: str | None = None
    attributes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a frozen record holds a read-only, key-sorted copy, so two equal records compare equal
        object.__setattr__(self, "attributes", _frozen(self.attributes))
        if self.status_time is None:
            object.__setattr__(self, "status_time", self.create_time)

    def to_row(self) -> dict[str, Any]:
        """The catalog_records row (without `id` when the database is to assign it)."""
        row: dict[str, Any] = {name: getattr(self, name) for name in COLUMNS if name != "attributes"}
        row["attributes"] = attributes_json(self.attributes)
        if self.id is None:
            del row["id"]
        return row

    def to_dict(self) -> dict[str, Any]:
        """Plain values, attributes as a dict (for JSON output)."""
        out: dict[str, Any] = {name: getattr(self, name) for name in COLUMNS}
        out["attributes"] = dict(self.attributes)
        return out


def attributes_json(attributes: Mapping[str, str]) -> str | None:
    """The stored form: compact JSON with sorted keys, or NULL for no attributes."""
    if not attributes:
        return None
    return json.dumps(dict(attributes), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_from_row(row: Any) -> MetaRecord:
    """A MetaRecord from a catalog_records row (trusted: it passed validation on the way in)."""
    attributes = json.loads(row.attributes) if row.attributes else {}
    return MetaRecord(
        id=row.id, feed=row.feed, type=row.type, create_time=row.create_time, effective_time=row.effective_time,
        status=row.status, status_time=row.status_time, parent_id=row.parent_id, pipeline=row.pipeline,
        file_size=row.file_size, raw_size=row.raw_size, location=row.location, attributes=attributes,
    )


# ---- validation -----------------------------------------------------------------------------------


def _fail(where: str, name: str, problem: str) -> InvalidInput:
    return InvalidInput(f"{where}: field {name!r} {problem}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def parse_time_ms(value: Any, where: str, name: str) -> int:
    """Epoch ms from an int, a string of digits or ISO-8601 text; naive ISO times are UTC."""
    if isinstance(value, bool):
        raise _fail(where, name, f"is not a time: {_shown(value)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int):
        ms = value
    elif isinstance(value, str):
        text = value.strip()
        if _DIGITS.fullmatch(text):
            ms = int(text)
        else:
            try:
                parsed = datetime.fromisoformat(text)
            except ValueError:
                raise _fail(where, name, f"is not a time (epoch ms or ISO-8601): {_shown(value)}") from None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=UTC)
            delta = parsed - _EPOCH
            ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    elif isinstance(value, datetime):
        parsed = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        delta = parsed - _EPOCH
        ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    else:
        raise _fail(where, name, f"is not a time (epoch ms or ISO-8601): {_shown(value)}")
    if not 0 <= ms <= MAX_TIME_MS:
        raise _fail(where, name, f"is out of range (1970-01-01 to 9999-12-31): {_shown(value)}")
    return ms


def _integer(value: Any, where: str, name: str, minimum: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, name, f"is not an integer: {_shown(value)}")
    if value < minimum:
        raise _fail(where, name, f"must be at least {minimum}: got {value}")
    if value > 2**63 - 1:
        raise _fail(where, name, f"is too large: {value}")
    return value


def _text(value: Any, where: str, name: str, required: bool) -> str | None:
    if value is None:
        if required:
            raise _fail(where, name, "is required")
        return None
    if not isinstance(value, str):
        raise _fail(where, name, f"is not text: {_shown(value)}")
    if required and not value.strip():
        raise _fail(where, name, "is empty")
    if len(value) > MAX_TEXT and name != "location":
        raise _fail(where, name, f"is {len(value)} characters long (at most {MAX_TEXT})")
    return value


def _status(value: Any, where: str) -> str:
    if isinstance(value, str) and value.strip().upper() in Status.__members__:
        return value.strip().upper()
    raise _fail(where, "status", f"is not one of UNLOCKED, LOCKED, DELETED: {_shown(value)}")


def _attribute(name: Any, value: Any, where: str) -> tuple[str, str]:
    if not isinstance(name, str) or not ATTRIBUTE_NAME.fullmatch(name):
        raise InvalidInput(f"{where}: invalid attribute name {_shown(name)}: expected [A-Za-z0-9_-]{{1,64}}")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidInput(f"{where}: attribute {name!r} is not text: {_shown(value)}")
    return name, value if isinstance(value, str) else str(value)


def record_from_mapping(m: Mapping[str, Any], where: str = "record") -> MetaRecord:
    """Validate one record given as a mapping; `where` names it in errors ("record 3", "line 7 of
    a.csv"). Missing keys and None values are "not given"."""
    if isinstance(m, MetaRecord):
        m = m.to_dict()
    if not isinstance(m, Mapping):
        raise InvalidInput(f"{where}: expected an object with feed, type and create_time, got {_shown(m)}")
    values: dict[str, Any] = {}
    attributes: dict[str, str] = {}
    for key, value in m.items():
        if not isinstance(key, str):
            raise InvalidInput(f"{where}: unknown field {_shown(key)}")
        if key.startswith(ATTRIBUTE_PREFIX):
            if value is not None:
                name, text = _attribute(key[len(ATTRIBUTE_PREFIX):], value, where)
                attributes[name] = text
        elif key == "attributes":
            if value is None:
                continue
            if isinstance(value, str):  # the stored JSON form, e.g. from a CSV column
                try:
                    value = json.loads(value) if value.strip() else {}
                except ValueError:
                    raise _fail(where, "attributes", "is not a JSON object") from None
            if not isinstance(value, Mapping):
                raise _fail(where, "attributes", f"is not an object: {_shown(value)}")
            for name, text in value.items():
                if text is not None:
                    attributes.update([_attribute(name, text, where)])
        elif key in COLUMNS:
            if value is not None:
                values[key] = value
        else:
            raise InvalidInput(f"{where}: unknown field {_shown(key)}: expected one of "
                               f"{', '.join(COLUMNS)} or attr.<name>")
    for name in REQUIRED_FIELDS:
        if name not in values:
            raise _fail(where, name, "is required")
    feed = _text(values["feed"], where, "feed", True)
    type_ = _text(values["type"], where, "type", True)
    times = {name: parse_time_ms(values[name], where, name) for name in TIME_FIELDS if name in values}
    ids = {name: _integer(values[name], where, name, 1) for name in ID_FIELDS if name in values}
    sizes = {name: _integer(values[name], where, name, 0) for name in SIZE_FIELDS if name in values}
    create_time = times["create_time"]
    return MetaRecord(
        id=ids.get("id"),
        feed=feed or "",
        type=type_ or "",
        create_time=create_time,
        effective_time=times.get("effective_time", create_time),
        status=_status(values["status"], where) if "status" in values else Status.UNLOCKED.value,
        status_time=times.get("status_time", create_time),
        parent_id=ids.get("parent_id"),
        pipeline=_text(values.get("pipeline"), where, "pipeline", False),
        file_size=sizes.get("file_size"),
        raw_size=sizes.get("raw_size"),
        location=_text(values.get("location"), where, "location", False),
        attributes=attributes,
    )


def records_from_mappings(items: Any) -> list[MetaRecord]:
    """Validate many records; the first bad one raises, naming it "record <n>" (1-based)."""
    return [record_from_mapping(m, f"record {i}") for i, m in enumerate(items, start=1)]


__all__ = [
    "COLUMNS", "MAX_TIME_MS", "MetaRecord", "Status", "attributes_json", "parse_time_ms",
    "record_from_mapping", "record_from_row", "records_from_mappings",
]
