"""The stream data paths' thread pools in a forked child: it has none of its parent's threads, so it
must make its own pools instead of queueing work that never runs."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import tidekeep as tk

STREAM = "s/fork"


def _write_and_read(home: str) -> None:
    client = tk.connect(home=home, settings={"writer.linger": 0})
    with client.stream(STREAM).writer("child") as writer:
        writer.write_many([f"c{i}".encode() for i in range(400)], [f"k{i % 9}" for i in range(400)])
    assert sum(1 for e in client.stream(STREAM).read() if e.writer_id == "child") == 400
    client.close()


def test_a_forked_child_writes_and_reads_with_pools_of_its_own(sqlite_client: tk.Client, tmp_path: Path) -> None:
    sqlite_client.create_stream(STREAM, tk.StreamConfig(segments=4))
    with sqlite_client.stream(STREAM).writer("parent") as writer:  # the parent's pools now have threads
        writer.write_many([f"p{i}".encode() for i in range(400)], [f"k{i % 9}" for i in range(400)])
    assert len(list(sqlite_client.stream(STREAM).read())) == 400
    child = multiprocessing.get_context("fork").Process(target=_write_and_read, args=(str(tmp_path / "ws"),))
    child.start()
    child.join(timeout=120)
    if child.exitcode is None:  # waiting on a pool thread that does not exist in the child
        child.kill()
    assert child.exitcode == 0
    assert sorted(e.writer_id for e in sqlite_client.stream(STREAM).read()) == ["child"] * 400 + ["parent"] * 400
