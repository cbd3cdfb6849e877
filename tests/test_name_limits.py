"""Every accepted name works: scope, stream and writer-id lengths are limited so that each path
component built from them fits the filesystem's 255-byte limit. The longest accepted names write,
read, truncate and delete, through the library and the CLI; one character more is refused at
creation with one line and nothing changed."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import tidekeep as tk
from helpers.cli_runner import InProcess
from tidekeep.names import (
    MAX_SEQUENCE,
    NAME_MAX,
    READER_GROUP_NAME_MAX,
    SCOPE_NAME_MAX,
    STREAM_NAME_MAX,
    WRITER_ID_MAX,
)

SCOPE = "s" * SCOPE_NAME_MAX
STREAM = f"{SCOPE}/{'t' * STREAM_NAME_MAX}"
WRITER = "w" * WRITER_ID_MAX
GROUP = "g" * READER_GROUP_NAME_MAX


def test_the_limits_are_the_documented_numbers() -> None:
    # docs/streams.md "Name rules" states these; a change of layout must change the docs too
    assert (SCOPE_NAME_MAX, STREAM_NAME_MAX, WRITER_ID_MAX, READER_GROUP_NAME_MAX) == (255, 222, 214, 255)


def stored_files(root: Path) -> list[tuple[str, int]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*") if p.is_file())


def longest_component(root: Path) -> int:
    return max(len(os.fsencode(part)) for p in root.rglob("*") for part in p.relative_to(root).parts)


def state_of(client: tk.Client, root: Path) -> tuple[Any, ...]:
    return (client.list_scopes(), [(s.name, s.uid, s.state) for s in client.list_streams()],
            client.list_reader_groups(), stored_files(root))


def test_the_longest_names_write_read_truncate_and_delete(client: tk.Client, tmp_path: Path) -> None:
    data = tmp_path / "data"
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    with client.stream(STREAM).writer(WRITER) as writer:
        writer.write(b"first", routing_key="a")
        writer.flush()
        # the largest sequence gives the longest chunk file name there is
        assert writer.write_batch([(b"second", "b"), (b"third", "a")], sequence=MAX_SEQUENCE)
    assert longest_component(data) == NAME_MAX
    txn_writer = client.stream(STREAM).transactional_writer(WRITER)
    txn = txn_writer.begin()
    txn.write(b"fourth", routing_key="b")
    txn.commit()
    client.stream(STREAM).watermarks.note(WRITER, 1_000)
    assert sorted(e.payload for e in client.stream(STREAM).read()) == [b"first", b"fourth", b"second", b"third"]

    group = client.create_reader_group(GROUP, tk.ReaderGroupConfig([STREAM]))
    with group.reader("r" * NAME_MAX) as reader:
        seen = []
        while (event := reader.read_next_event(timeout_ms=0)).is_event:
            seen.append(event.payload)
    assert sorted(seen) == [b"first", b"fourth", b"second", b"third"]
    client.delete_reader_group(GROUP)

    result = client.stream(STREAM).truncate(client.stream(STREAM).tail_cut(), reason="longest names")
    assert result.bytes_freed > 0 and result.files_left == ()
    assert list(client.stream(STREAM).read()) == []
    deleted = client.stream(STREAM).delete(force=True)
    assert deleted.files_left == ()
    assert [f for f in stored_files(data) if f[0].startswith("streams/")] == []
    client.delete_scope(SCOPE)
    assert SCOPE not in client.list_scopes()


def test_one_character_more_is_refused_and_changes_nothing(client: tk.Client, tmp_path: Path) -> None:
    data = tmp_path / "data"
    client.create_stream("sc/s", tk.StreamConfig(segments=1))
    before = state_of(client, data)
    refusals = [
        (lambda: client.create_stream(f"{SCOPE}s/t"), "invalid scope name", "is 256 characters long (at most 255)"),
        (lambda: client.create_scope(SCOPE + "s"), "invalid scope name", "is 256 characters long (at most 255)"),
        (lambda: client.create_stream(f"sc/{'t' * (STREAM_NAME_MAX + 1)}"), "invalid stream name",
         "is 223 characters long (at most 222)"),
        (lambda: client.stream("sc/s").writer(WRITER + "w"), "invalid writer id",
         "is 215 characters long (at most 214)"),
        (lambda: client.stream("sc/s").transactional_writer(WRITER + "w"), "invalid writer id",
         "is 215 characters long (at most 214)"),
        (lambda: client.stream("sc/s").watermarks.note(WRITER + "w", 1_000), "invalid writer id",
         "is 215 characters long (at most 214)"),
        (lambda: client.create_reader_group(GROUP + "g", tk.ReaderGroupConfig(["sc/s"])), "invalid reader group name",
         "is 256 characters long (at most 255)"),
    ]
    for call, start, reason in refusals:
        with pytest.raises(tk.InvalidName) as refused:
            call()
        message = str(refused.value)
        assert message.startswith(start) and reason in message and "\n" not in message
        assert state_of(client, data) == before
    with client.stream("sc/s").writer("w") as writer, pytest.raises(tk.InvalidInput, match="invalid batch sequence"):
        writer.write_batch([(b"x", None)], sequence=MAX_SEQUENCE + 1)
    assert state_of(client, data) == before


# ---- the CLI (its entry point in the test process: test_cli.py's InProcess) ------------------------


def ok(run: InProcess, *args: str, stdin: bytes = b"") -> str:
    done = run(*args, stdin=stdin)
    assert done.code == 0 and done.stderr == "", f"{args}: exit {done.code}\n{done.stderr}"
    return done.stdout


def cli_snapshot(home: Path) -> tuple[list[str], list[tuple[str, int]]]:
    with sqlite3.connect(home / "metadata.db") as conn:
        dump = list(conn.iterdump())
    return dump, stored_files(home / "data")


def test_the_longest_names_through_the_cli(in_process: InProcess) -> None:
    home = in_process.home
    ok(in_process, "init")
    ok(in_process, "stream", "create", STREAM, "--segments", "2")
    ok(in_process, "stream", "write", STREAM, "--writer-id", WRITER, "--key-field", "1", stdin=b"a,1\nb,2\nc,3\n")
    assert sorted(ok(in_process, "stream", "read", STREAM).splitlines()) == ["a,1", "b,2", "c,3"]
    ok(in_process, "rg", "create", GROUP, "--stream", STREAM)
    assert sorted(ok(in_process, "rg", "read", GROUP, "--reader", "r1", "--timeout", "0").splitlines()) == [
        "a,1", "b,2", "c,3"]
    ok(in_process, "rg", "delete", GROUP)
    tail = ok(in_process, "stream", "tail", STREAM).strip()
    ok(in_process, "stream", "truncate", STREAM, tail, "--reason", "longest names")
    assert ok(in_process, "stream", "read", STREAM) == ""
    ok(in_process, "stream", "delete", STREAM, "--force")
    assert [f for f in stored_files(home / "data") if f[0].startswith("streams/")] == []

    ok(in_process, "stream", "create", "sc/s")
    before = cli_snapshot(home)
    for args, stdin, fragment in [
        (("stream", "create", f"{SCOPE}s/t"), b"", "invalid scope name 'sss"),
        (("stream", "create", f"sc/{'t' * (STREAM_NAME_MAX + 1)}"), b"", "is 223 characters long (at most 222)"),
        (("rg", "create", GROUP + "g", "--stream", "sc/s"), b"", "is 256 characters long (at most 255)"),
        (("stream", "write", "sc/s", "--writer-id", WRITER + "w"), b"x\n", "is 215 characters long (at most 214)"),
    ]:
        done = in_process(*args, stdin=stdin)
        lines = done.stderr.splitlines()
        assert done.code == 2 and len(lines) == 1 and lines[0].startswith("error: invalid "), done.stderr
        assert fragment in lines[0] and done.stdout == ""
        assert cli_snapshot(home) == before


def test_the_spark_sink_takes_the_longest_writer_id_and_refuses_one_more() -> None:
    from tidekeep.spark.sink import parse_sink_options

    assert parse_sink_options({"stream": "sc/s", "writer_id": WRITER}).writer_id == WRITER
    with pytest.raises(tk.InvalidName, match=r"invalid writer id .*is 215 characters long \(at most 214\)"):
        parse_sink_options({"stream": "sc/s", "writer_id": WRITER + "w"})
