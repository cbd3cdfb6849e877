"""Names become storage paths: each part is [A-Za-z0-9_-]{1,255}, a stream is "scope/stream"."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tidekeep.errors import InvalidInput, InvalidName
from tidekeep.names import check_name, split_stream_name

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
