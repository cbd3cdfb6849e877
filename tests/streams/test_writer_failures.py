"""Writers never lose acknowledged events: one live writer per id (epochs), events kept after any
failed flush, and commits whose outcome is unknown resolved before the next sequence is taken.

The failures are real: a second process opening the same writer id, SQLite's write lock held by
another connection, PostgreSQL backends terminated at the commit, and a connection lost after the
server committed (a proxy that swallows the COMMIT's answer)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy import event

import tidekeep as tk
from helpers.pgproxy import CommitDroppingProxy
from helpers.procs import start_worker, worker_env
from helpers.storage import referenced_paths, stored_files
from tidekeep.streams.of_workspace import stream_controller

STREAM = "s/w"


def payload_counts(client: tk.Client) -> Counter[bytes]:
    return Counter(e.payload for e in client.stream(STREAM).read())


def events(tag: str, count: int) -> list[tuple[bytes, str]]:
    return [(f"{tag}:{i}".encode(), f"k{i % 3}") for i in range(count)]


def write_all(writer: tk.Writer, items: list[tuple[bytes, str]]) -> None:
    for payload, key in items:
        writer.write(payload, routing_key=key)


# ---- one writer id, one live writer ---------------------------------------------------------------
def test_a_newer_writer_with_the_same_id_fences_the_older_one(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    older = client.stream(STREAM).writer("shared")
    newer = client.stream(STREAM).writer("shared")
    assert newer.epoch == older.epoch + 1
    write_all(older, events("old", 5))
    write_all(newer, events("new", 5))
    with pytest.raises(tk.WriterFenced, match=r"writer shared on s/w was fenced: a newer writer opened"):
        older.flush()
    assert older.unflushed() == events("old", 5)  # nothing of it landed, and it still has every event
    newer.flush()  # before epochs, this batch had the older one's sequence and was dropped as its duplicate
    assert payload_counts(client) == Counter(p for p, _ in events("new", 5))
    with pytest.raises(tk.WriterFenced):  # a fenced writer stays fenced
        older.write(b"more")
    with pytest.raises(tk.WriterFenced):
        older.close()
    newer.close()
    assert stored_files(client) == referenced_paths(client)  # the fenced attempt left no file


def test_the_older_writer_hands_its_events_to_a_new_writer(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    first = client.stream(STREAM).writer("w")
    write_all(first, events("a", 3))
    first.flush()
    write_all(first, events("b", 4))
    second = client.stream(STREAM).writer("w")
    with pytest.raises(tk.WriterFenced):
        first.flush()
    write_all(second, first.unflushed())
    second.close()
    assert payload_counts(client) == Counter(p for p, _ in events("a", 3) + events("b", 4))
    assert second.last_sequence == 2


def test_a_fenced_writer_cannot_move_or_close_the_newer_writers_time_mark(client: tk.Client) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=1))
    older = client.stream(STREAM).writer("w")
    newer = client.stream(STREAM).writer("w")
    newer.note_time(2_000)
    with pytest.raises(tk.WriterFenced, match="its time mark is not recorded"):
        older.note_time(5_000)
    older._noted = True  # as if it had noted before being fenced: closing must still leave the mark alone
    older.close()  # nothing was pending; leaving the aggregation is refused (logged)
    (mark,) = client.stream(STREAM).watermarks.marks()
    assert (mark.time_ms, mark.closed) == (2_000, False)
    newer.close()
    assert client.stream(STREAM).watermarks.marks()[0].closed


def test_two_processes_sharing_a_writer_id_lose_no_acknowledged_event(tmp_path: Path, metadata_url: str) -> None:
    """Two processes write under one writer id, each reopening when fenced (so they fence each other
    over and over). Every event a flush acknowledged is in the stream exactly once."""
    home, storage = tmp_path / "ws", tmp_path / "data"
    with tk.connect(home=home, metadata_url=metadata_url, storage=str(storage), create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
    env = worker_env(metadata_url, storage, home)
    go = tmp_path / "go"
    procs = {}
    for tag in ("p1", "p2"):
        procs[tag] = start_worker(["shared-writer", "--stream", STREAM, "--writer", "shared", "--tag", tag,
                                   "--events", "40", "--ack-file", str(tmp_path / f"{tag}.acks"),
                                   "--ready-file", str(tmp_path / f"{tag}.ready"), "--go-file", str(go),
                                   "--report", str(tmp_path / f"{tag}.json")], env, tmp_path / f"{tag}.log")
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"{tag}.ready").exists() for tag in procs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs.values()), \
            [(tmp_path / f"{t}.log").read_text() for t in procs]
        time.sleep(0.01)
    go.touch()  # both have opened: the one that opened first is fenced at its first commit
    for tag, proc in procs.items():
        assert proc.wait(timeout=300) == 0, (tmp_path / f"{tag}.log").read_text()
    acknowledged = [line for tag in procs for line in (tmp_path / f"{tag}.acks").read_text().split()]
    assert len(acknowledged) == 80
    with tk.connect(home=home, metadata_url=metadata_url, storage=str(storage), create=True) as client:
        counts = payload_counts(client)
        assert counts == Counter(a.encode() for a in acknowledged)  # each acknowledged event exactly once
        assert stored_files(client) == referenced_paths(client)
    fenced = sum(json.loads((tmp_path / f"{tag}.json").read_text())["fenced"] for tag in procs)
    assert fenced >= 1


# ---- a failed flush keeps its events ---------------------------------------------------------------
def test_a_flush_that_meets_a_busy_store_keeps_its_events_and_the_next_writes_them_once(tmp_path: Path) -> None:
    database = tmp_path / "metadata.db"
    client = tk.connect(home=tmp_path / "ws", metadata_url=f"sqlite:///{database}", storage=str(tmp_path / "data"),
                        settings={"writer.linger": 0, "metadata.busy_timeout": "50ms"}, create=True)
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w")
    write_all(writer, events("a", 6))
    blocker = sqlite3.connect(database, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds SQLite's write lock
    try:
        with pytest.raises(tk.ConflictError, match="busy"):
            writer.flush()
        assert writer.unflushed() == events("a", 6)
        write_all(writer, events("b", 2))  # written after the failure: comes after, in order
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    writer.flush()
    assert writer.unflushed() == []
    assert payload_counts(client) == Counter(p for p, _ in events("a", 6) + events("b", 2))
    writer.close()
    assert stored_files(client) == referenced_paths(client)
    client.close()


def test_write_many_keeps_the_failed_batch_and_the_rest(tmp_path: Path) -> None:
    database = tmp_path / "metadata.db"
    client = tk.connect(home=tmp_path / "ws", metadata_url=f"sqlite:///{database}", storage=str(tmp_path / "data"),
                        settings={"writer.linger": 0, "metadata.busy_timeout": "50ms"}, create=True)
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w", batch_size=64)
    items = events("m", 20)
    blocker = sqlite3.connect(database, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(tk.ConflictError):
            writer.write_many([p for p, _ in items], [k for _, k in items])
        assert writer.unflushed() == items
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    writer.close()
    assert payload_counts(client) == Counter(p for p, _ in items)
    client.close()


# ---- unknown commit outcomes (PostgreSQL) ----------------------------------------------------------
@pytest.fixture
def pg_admin(pg_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_url)
    yield engine
    engine.dispose()


@contextlib.contextmanager
def stream_writer(tmp_path: Path, url: str) -> Iterator[tuple[tk.Client, tk.Writer]]:
    """A workspace on `url` with STREAM and a writer holding the events "a:0".."a:4", not yet flushed."""
    with tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"),
                    settings={"writer.linger": 0}, create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        writer = client.stream(STREAM).writer("w")
        write_all(writer, events("a", 5))
        yield client, writer


def assert_written_once(client: tk.Client, *batches: list[tuple[bytes, str]]) -> None:
    """Every event of the batches is in the stream exactly once, and no file is left unreferenced."""
    assert payload_counts(client) == Counter(p for batch in batches for p, _ in batch)
    assert stored_files(client) == referenced_paths(client)


class BackendKiller:
    """Terminates the backend of this client's next `times` transactions just before they commit
    (only once `armed()` says so)."""

    def __init__(self, client: tk.Client, admin: sa.Engine, times: int,
                 armed: Callable[[], bool] = lambda: True) -> None:
        self.admin = admin
        self.remaining = times
        self.armed = armed
        self.killed: list[int] = []
        event.listen(client.workspace.db.engine, "commit", self._kill)

    def _kill(self, conn: sa.Connection) -> None:
        if self.remaining > 0 and self.armed():
            self.remaining -= 1
            pid = conn.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
            with self.admin.connect() as other:
                other.execute(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
            self.killed.append(pid)


def test_a_terminated_backend_at_commit_is_retried_and_writes_once(tmp_path: Path, pg_url: str,
                                                                    pg_admin: sa.Engine) -> None:
    with stream_writer(tmp_path, pg_url) as (client, writer):
        killer = BackendKiller(client, pg_admin, times=1)
        writer.flush()  # the retry on a new connection lands it
        assert len(killer.killed) == 1
        write_all(writer, events("b", 5))
        writer.close()
        assert_written_once(client, events("a", 5), events("b", 5))


def test_a_store_lost_at_every_commit_attempt_keeps_the_events(tmp_path: Path, pg_url: str,
                                                                pg_admin: sa.Engine) -> None:
    with stream_writer(tmp_path, pg_url) as (client, writer):
        killer = BackendKiller(client, pg_admin, times=1_000)
        with pytest.raises(tk.StoreUnavailable, match="metadata store unavailable"):
            writer.flush()
        assert len(killer.killed) >= 2  # retried before giving up
        assert writer.unflushed() == events("a", 5)
        killer.remaining = 0  # the store is back
        writer.flush()
        write_all(writer, events("b", 3))
        writer.close()
        assert_written_once(client, events("a", 5), events("b", 3))


@pytest.fixture
def proxied(pg_url: str) -> Iterator[tuple[CommitDroppingProxy, str]]:
    proxy, url = CommitDroppingProxy.for_url(pg_url)
    yield proxy, url
    proxy.close()


def test_a_connection_lost_after_the_server_committed_is_resolved_not_guessed(
        tmp_path: Path, proxied: tuple[CommitDroppingProxy, str]) -> None:
    """The server commits the batch and the connection drops before the answer arrives. The writer
    finds out that its batch landed (retrying it with the same sequence and files) before it takes
    the next sequence: nothing is written twice and the next batch is not dropped as a duplicate."""
    proxy, url = proxied
    with stream_writer(tmp_path, url) as (client, writer):
        proxy.arm(1)
        writer.flush()
        assert proxy.dropped == 1
        assert writer.last_sequence == 1
        write_all(writer, events("b", 5))
        writer.flush()
        assert writer.last_sequence == 2
        writer.close()
        assert_written_once(client, events("a", 5), events("b", 5))


def test_an_unknown_outcome_the_writer_could_not_resolve_is_resolved_by_the_next_flush(
        tmp_path: Path, proxied: tuple[CommitDroppingProxy, str], pg_admin: sa.Engine) -> None:
    """The batch lands but its answer is lost, and every retry then loses the store too: the flush
    fails with StoreUnavailable (outcome unknown). The next flush learns that the batch landed and
    drops it from the writer instead of writing it again; the batch after gets a new sequence."""
    proxy, url = proxied
    with stream_writer(tmp_path, url) as (client, writer):
        proxy.arm(1)
        killer = BackendKiller(client, pg_admin, times=1_000, armed=lambda: proxy.dropped > 0)
        with pytest.raises(tk.StoreUnavailable):
            writer.flush()
        assert proxy.dropped == 1 and killer.killed
        assert writer.unflushed() == events("a", 5)  # in doubt: kept until known
        killer.remaining = 0
        writer.flush()
        assert writer.unflushed() == [] and writer.last_sequence == 1
        write_all(writer, events("b", 2))
        writer.close()
        assert writer.last_sequence == 2
        assert_written_once(client, events("a", 5), events("b", 2))


# ---- the lost-acknowledgement fault point, both stores ---------------------------------------------
def test_a_lost_acknowledgement_never_makes_the_next_batch_a_duplicate(
        client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    writer = client.stream(STREAM).writer("w")
    write_all(writer, events("a", 4))
    monkeypatch.setenv("TIDEKEEP_FAULT_RAISE", "commit.lost_ack")
    writer.flush()  # landed, answer lost, retried: recognised by its files
    write_all(writer, events("b", 4))
    writer.flush()  # lands too (the fault fires again and is resolved again)
    monkeypatch.delenv("TIDEKEEP_FAULT_RAISE")
    writer.close()
    assert writer.last_sequence == 2
    assert payload_counts(client) == Counter(p for p, _ in events("a", 4) + events("b", 4))
    assert stored_files(client) == referenced_paths(client)


# ---- transactions ----------------------------------------------------------------------------------
def stage_and_commit(client: tk.Client, items: list[tuple[bytes, str]]) -> tk.TxnCommitResult:
    txn = client.stream(STREAM).transactional_writer("t").begin()
    write_all(txn, items)  # type: ignore[arg-type]
    txn.flush()
    return txn.commit()


def test_transaction_staging_and_commit_whose_answers_are_lost_land_once(
        tmp_path: Path, proxied: tuple[CommitDroppingProxy, str]) -> None:
    """PostgreSQL commits the staging (and later the transaction commit), the answers are lost: the
    retries find them landed. Staging the same events twice would put them in the transaction twice."""
    proxy, url = proxied
    with tk.connect(home=tmp_path / "ws", metadata_url=url, storage=str(tmp_path / "data"), create=True) as client:
        client.create_stream(STREAM, tk.StreamConfig(segments=2))
        txn = client.stream(STREAM).transactional_writer("t").begin()
        write_all(txn, events("t", 6))  # type: ignore[arg-type]
        proxy.arm(1)
        txn.flush()  # staging's COMMIT answer is lost
        assert proxy.dropped == 1
        assert txn.info().events == 6
        proxy.arm(1)
        result = txn.commit()  # the commit's answer is lost
        assert proxy.dropped == 2
        assert result.events == 6 and not result.duplicate
        assert txn.status() is tk.TxnState.COMMITTED
        assert payload_counts(client) == Counter(p for p, _ in events("t", 6))
        assert stored_files(client) == referenced_paths(client)


def test_transaction_lost_acknowledgements_at_the_fault_points(
        client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    monkeypatch.setenv("TIDEKEEP_FAULT_RAISE", "txn.stage.lost_ack,txn.commit.lost_ack")
    result = stage_and_commit(client, events("t", 5))
    monkeypatch.delenv("TIDEKEEP_FAULT_RAISE")
    assert result.events == 5 and not result.duplicate
    assert payload_counts(client) == Counter(p for p, _ in events("t", 5))
    assert stored_files(client) == referenced_paths(client)


def test_a_sequenced_transaction_commit_with_a_lost_answer_is_not_a_duplicate(
        client: tk.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Spark sink commits each micro-batch with its batch sequence: a lost answer must not turn the
    landed batch into a "duplicate" (aborted) nor let the next sequence be skipped."""
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    tw = client.stream(STREAM).transactional_writer("sink")
    monkeypatch.setenv("TIDEKEEP_FAULT_RAISE", "txn.commit.lost_ack")
    first = tw.begin()
    write_all(first, events("one", 3))  # type: ignore[arg-type]
    assert not first.commit(sequence=1).duplicate
    second = tw.begin()
    write_all(second, events("two", 3))  # type: ignore[arg-type]
    assert not second.commit(sequence=2).duplicate
    monkeypatch.delenv("TIDEKEEP_FAULT_RAISE")
    replay = tw.begin()
    write_all(replay, events("two", 3))  # type: ignore[arg-type]
    assert replay.commit(sequence=2).duplicate
    assert stream_controller(client.workspace).last_sequence(STREAM, "sink")[1] == 2
    assert payload_counts(client) == Counter(p for p, _ in events("one", 3) + events("two", 3))
