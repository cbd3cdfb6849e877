"""The fields a catalog expression can test, one registry for every parser and compiler.

Each field has Stroom's display name (used in the JSON tree form and in Stroom rule files), a
snake_case name for the text syntax, the `catalog_records` column it reads, and a kind that fixes
which conditions and values are allowed. Custom attributes are `attr.<name>`: text, read from the
record's `attributes` JSON object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from ..errors import InvalidInput


class FieldKind(StrEnum):
    TEXT = "text"  # compared as case-sensitive strings
    STATUS = "status"  # UNLOCKED | LOCKED | DELETED (values accepted in any case, stored upper-case)
    INTEGER = "integer"  # whole numbers; sizes also accept units ("1GB")
    DATE = "date"  # ms since the epoch, UTC; values are ISO-8601 or relative dates


@dataclass(frozen=True)
class Field:
    name: str  # Stroom's display name, e.g. "Create Time", or "attr.<name>"
    text_name: str  # the text syntax's name, e.g. "create_time"
    column: str  # the catalog_records column ("attributes" for custom attributes)
    kind: FieldKind
    attribute: str | None = None  # the attribute name for attr.<name>
    sizes: bool = False  # integer values may carry size units


STATUSES = ("UNLOCKED", "LOCKED", "DELETED")

STANDARD_FIELDS: tuple[Field, ...] = (
    Field("Feed", "feed", "feed", FieldKind.TEXT),
    Field("Type", "type", "type", FieldKind.TEXT),
    Field("Status", "status", "status", FieldKind.STATUS),
    Field("Id", "id", "id", FieldKind.INTEGER),
    Field("Parent Id", "parent_id", "parent_id", FieldKind.INTEGER),
    Field("Pipeline", "pipeline", "pipeline", FieldKind.TEXT),
    Field("Create Time", "create_time", "create_time", FieldKind.DATE),
    Field("Effective Time", "effective_time", "effective_time", FieldKind.DATE),
    Field("Status Time", "status_time", "status_time", FieldKind.DATE),
    Field("File Size", "file_size", "file_size", FieldKind.INTEGER, sizes=True),
    Field("Raw Size", "raw_size", "raw_size", FieldKind.INTEGER, sizes=True),
)

ATTRIBUTE_PREFIX = "attr."
ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

_BY_NAME = {f.name.lower(): f for f in STANDARD_FIELDS} | {f.text_name: f for f in STANDARD_FIELDS}


def attribute_field(attribute: str) -> Field:
    if not ATTRIBUTE_NAME.fullmatch(attribute):
        raise InvalidInput(f"invalid attribute name {attribute!r}: expected [A-Za-z0-9_-]{{1,64}}")
    return Field(ATTRIBUTE_PREFIX + attribute, ATTRIBUTE_PREFIX + attribute, "attributes", FieldKind.TEXT, attribute)


def lookup_field(name: str) -> Field:
    """The field for a display name ("Create Time"), a text name ("create_time") or "attr.<name>";
    names are case-insensitive except the attribute name. Unknown names are InvalidInput."""
    if not isinstance(name, str):
        raise InvalidInput(f"unknown field {name!r}")
    if name[: len(ATTRIBUTE_PREFIX)].lower() == ATTRIBUTE_PREFIX:
        return attribute_field(name[len(ATTRIBUTE_PREFIX):])
    field = _BY_NAME.get(name.strip().lower())
    if field is None:
        known = ", ".join(f.name for f in STANDARD_FIELDS)
        raise InvalidInput(f"unknown field {name!r}: expected one of {known} or attr.<name>")
    return field


__all__ = ["ATTRIBUTE_PREFIX", "STANDARD_FIELDS", "STATUSES", "Field", "FieldKind", "attribute_field", "lookup_field"]
