"""Names of scopes, streams, writers and reader groups. Names become storage paths, so the rule is
strict: each part matches [A-Za-z0-9_-]; a stream is named "scope/stream".

Lengths are limited so that every path component built from a name fits the filesystem's limit on
one name, 255 bytes (names are ASCII, so characters are bytes). The builders of those components
live here, and each limit is derived from the longest component its name goes into
(docs/streams.md "Name rules"):

- a scope is a directory of its own, `streams/<scope>/`: 255;
- a stream is the directory `<stream>-<uid>` (the 32 hex digits of its incarnation): 222;
- a writer id starts each chunk file name, `<writer id>-<sequence>-<12 hex>.parquet`, with a
  sequence of up to 19 digits (2^63 - 1, the metadata's 64-bit column): 214;
- reader groups, reader ids, checkpoint names and dataset names are never longer parts of a path
  than themselves: 255 (the metadata columns' width).

Creating anything refuses a longer name (InvalidName); looking something up accepts the general
limit of 255, so a stream created by an older version with a longer name can still be described,
sealed and deleted.
"""

from __future__ import annotations

import re
import uuid

from .errors import InvalidName

NAME_MAX = 255  # bytes in one path component (NAME_MAX of Linux, macOS and Windows filesystems)
UID_DIGITS = 32  # a stream incarnation's uid: uuid4 hex
CHUNK_TOKEN_DIGITS = 12  # the random part of a chunk file name: two writers never share a file
MAX_SEQUENCE = 2**63 - 1  # a writer's batch sequence, a 64-bit column in the metadata store

_PART = re.compile(r"[A-Za-z0-9_-]+")


def stream_directory_name(stream: str, uid: str) -> str:
    """The directory of one incarnation of a stream, under `streams/<scope>/`."""
    return f"{stream}-{uid}"


def chunk_file_name(writer_id: str, sequence: int, token: str | None = None) -> str:
    """The file name of a writer's chunk, in `<stream directory>/<epoch.number>/`."""
    if token is None:
        token = uuid.uuid4().hex[:CHUNK_TOKEN_DIGITS]
    return f"{writer_id}-{sequence}-{token}.parquet"


def compacted_chunk_file_name(base_offset: int) -> str:
    """The file name of a chunk compaction wrote (streams/compaction_store.py), beside the chunks it
    replaces. Writer ids have no '.', so it never meets a writer's file name."""
    return f"compacted.{base_offset}.{uuid.uuid4().hex[:CHUNK_TOKEN_DIGITS]}.parquet"


SCOPE_NAME_MAX = NAME_MAX
STREAM_NAME_MAX = NAME_MAX - len(stream_directory_name("", "0" * UID_DIGITS))
WRITER_ID_MAX = NAME_MAX - len(chunk_file_name("", MAX_SEQUENCE, "0" * CHUNK_TOKEN_DIGITS))
READER_GROUP_NAME_MAX = NAME_MAX


def _shown(name: str) -> str:
    return name if len(name) <= 60 else name[:57] + "..."


def check_name(name: object, what: str = "name", limit: int = NAME_MAX) -> str:
    """`name` if it is a valid part of at most `limit` characters; InvalidName (one line) otherwise."""
    if not isinstance(name, str):
        raise InvalidName(f"invalid {what} {name!r}: must be a string")
    if not _PART.fullmatch(name) or len(name) > limit:
        if not name:
            reason = "is empty"
        elif len(name) > limit:
            reason = f"is {len(name)} characters long (at most {limit})"
        else:
            bad = next(ch for ch in name if not _PART.fullmatch(ch))
            reason = f"contains {bad!r}"
        raise InvalidName(f"invalid {what} {_shown(name)!r}: {reason}; use letters, digits, '_' and '-' "
                          f"(1-{limit})")
    return name


def check_new_scope_name(scope: object) -> str:
    """A scope name to create."""
    return check_name(scope, "scope name", SCOPE_NAME_MAX)


def check_writer_id(writer_id: object) -> str:
    """A writer id that will write chunk files (every writer id accepted from a caller)."""
    return check_name(writer_id, "writer id", WRITER_ID_MAX)


def check_reader_group_name(name: object) -> str:
    return check_name(name, "reader group name", READER_GROUP_NAME_MAX)


def split_stream_name(name: object) -> tuple[str, str]:
    """("scope", "stream") from "scope/stream", validating both parts (to look a stream up)."""
    if not isinstance(name, str) or name.count("/") != 1:
        shown = name if not isinstance(name, str) else _shown(name)
        raise InvalidName(f"invalid stream name {shown!r}: expected 'scope/stream'")
    scope, stream = name.split("/")
    return check_name(scope, "scope name"), check_name(stream, "stream name")


def split_new_stream_name(name: object) -> tuple[str, str]:
    """`split_stream_name` for a stream to create: its parts also fit the storage layout."""
    scope, stream = split_stream_name(name)
    return check_new_scope_name(scope), check_name(stream, "stream name", STREAM_NAME_MAX)
