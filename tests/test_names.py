"""Names become storage paths: each part is [A-Za-z0-9_-]{1,255}, a stream is "scope/stream"; names
of things to create are limited further so that every path component built from them fits 255 bytes."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.errors import InvalidInput, InvalidName
from tidekeep.names import (
    MAX_SEQUENCE,
    NAME_MAX,
    READER_GROUP_NAME_MAX,
    SCOPE_NAME_MAX,
    STREAM_NAME_MAX,
    UID_DIGITS,
    WRITER_ID_MAX,
    check_name,
    check_new_scope_name,
    check_writer_id,
    chunk_file_name,
    split_new_stream_name,
    split_stream_name,
    stream_directory_name,
)

ALLOWED = set(string.ascii_letters + string.digits + "_-")
valid_parts = st.text(alphabet=sorted(ALLOWED), min_size=1, max_size=255)


def refused(call, *args: object) -> str:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidName) as exc:
        call(*args)
    assert isinstance(exc.value, InvalidInput)
    message = str(exc.value)
    assert message and "\n" not in message
    return message


@settings(max_examples=300)
@given(valid_parts, valid_parts)
def test_valid_names(scope: str, stream: str) -> None:
    assert check_name(scope) == scope
    assert split_stream_name(f"{scope}/{stream}") == (scope, stream)


@pytest.mark.parametrize("name", ["a", "A-z_0", "-", "_", "x" * 255, "0123456789"])
def test_edge_valid_names(name: str) -> None:
    assert check_name(name, "scope name") == name


@pytest.mark.parametrize(("name", "reason"), [
    ("", "is empty"),
    ("a/b", "contains '/'"),
    ("a\\b", "contains '\\\\'"),
    ("..", "contains '.'"),
    ("a.b", "contains '.'"),
    ("a b", "contains ' '"),
    ("é", "contains 'é'"),
    ("snow☃", "contains '☃'"),
    ("a\nb", "contains '\\n'"),
    ("a\x00", "contains '\\x00'"),
    ("x" * 256, "is 256 characters long (at most 255)"),
])
def test_invalid_names_are_refused_with_the_reason(name: str, reason: str) -> None:
    message = refused(check_name, name, "stream name")
    assert message.startswith("invalid stream name ")
    assert reason in message
    shown = name if len(name) <= 60 else name[:57] + "..."
    assert repr(shown) in message


@pytest.mark.parametrize("value", [None, 5, b"abc", ["a"], 1.5])
def test_non_strings_are_refused(value: object) -> None:
    message = refused(check_name, value, "writer id")
    assert message == f"invalid writer id {value!r}: must be a string"


@pytest.mark.parametrize(("name", "reason"), [
    ("ab", "expected 'scope/stream'"),
    ("a/b/c", "expected 'scope/stream'"),
    ("", "expected 'scope/stream'"),
    (None, "expected 'scope/stream'"),
    ("/b", "invalid scope name '': is empty"),
    ("a/", "invalid stream name '': is empty"),
    ("../b", "invalid scope name '..'"),
    ("a/..", "invalid stream name '..'"),
    ("a/" + "y" * 300, "is 300 characters long"),
    ("a b/c", "contains ' '"),
])
def test_stream_names(name: object, reason: str) -> None:
    assert reason in refused(split_stream_name, name)


def test_very_long_names_are_shortened_in_the_message() -> None:
    message = refused(split_stream_name, "a/b/" + "z" * 10_000)
    assert len(message) < 200


@settings(max_examples=500)
@given(st.text(max_size=300))
def test_any_text_is_valid_exactly_when_it_matches_the_rule(name: str) -> None:
    ok = 1 <= len(name) <= 255 and set(name) <= ALLOWED
    if ok:
        assert check_name(name) == name
    else:
        refused(check_name, name)


@settings(max_examples=300)
@given(st.text(alphabet=[*sorted(ALLOWED), "/", ".", " ", "é"], max_size=12))
def test_stream_name_fuzz(name: str) -> None:
    parts = name.split("/")
    ok = len(parts) == 2 and all(re.fullmatch(r"[A-Za-z0-9_-]{1,255}", p) for p in parts)
    if ok:
        assert split_stream_name(name) == tuple(parts)
    else:
        refused(split_stream_name, name)


# ---- length limits: every path component built from a name fits 255 bytes ---------------------------


def test_the_longest_names_build_components_of_exactly_the_filesystem_limit() -> None:
    assert len(stream_directory_name("t" * STREAM_NAME_MAX, "f" * UID_DIGITS).encode()) == NAME_MAX
    assert len(chunk_file_name("w" * WRITER_ID_MAX, MAX_SEQUENCE).encode()) == NAME_MAX
    assert SCOPE_NAME_MAX == READER_GROUP_NAME_MAX == NAME_MAX


@settings(max_examples=300)
@given(st.text(alphabet="ab-", max_size=300), st.text(alphabet="ab_", max_size=300))
def test_a_new_stream_name_is_accepted_exactly_when_its_directories_fit(scope: str, stream: str) -> None:
    fits = (scope != "" and len(scope.encode()) <= NAME_MAX and stream != ""
            and len(stream_directory_name(stream, "0" * UID_DIGITS).encode()) <= NAME_MAX)
    if fits:
        assert split_new_stream_name(f"{scope}/{stream}") == (scope, stream)
    else:
        refused(split_new_stream_name, f"{scope}/{stream}")


@settings(max_examples=300)
@given(st.text(alphabet="w-_", max_size=300))
def test_a_writer_id_is_accepted_exactly_when_its_chunk_files_fit(writer_id: str) -> None:
    if writer_id and len(chunk_file_name(writer_id, MAX_SEQUENCE).encode()) <= NAME_MAX:
        assert check_writer_id(writer_id) == writer_id
    else:
        assert "invalid writer id" in refused(check_writer_id, writer_id)


def test_lookups_keep_the_general_limit() -> None:
    # a stream an older version created with a longer name can still be described and deleted
    long_stream = "t" * (STREAM_NAME_MAX + 1)
    assert split_stream_name(f"sc/{long_stream}") == ("sc", long_stream)
    assert "is 223 characters long (at most 222)" in refused(split_new_stream_name, f"sc/{long_stream}")
    assert "is 256 characters long (at most 255)" in refused(check_new_scope_name, "s" * 256)
