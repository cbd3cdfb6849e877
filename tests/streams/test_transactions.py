"""Transactional writers on real SQLite and PostgreSQL, real files and real processes: events are
invisible until commit and then all visible at once, commits after a scale land in the current
segments in per-key order, commit is idempotent (also after a crash), abort and lease expiry leave
neither data nor files, and bad input is refused with a typed one-line error and no change."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers import HELPERS_DIR
from helpers.procs import worker_env
from helpers.storage import referenced_paths, stored_files
from helpers.txn_workers import txn_events
from tidekeep.cli.main import main as cli_main
from tidekeep.config import MAX_EVENT_SIZE
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.store import schema_transactions as tx
from tidekeep.streams.controller import PendingChunk
from tidekeep.streams.txn_store import lease_expired, place_chunks

STREAM = "s/txn"
TXN_WORKERS = HELPERS_DIR / "txn_workers.py"


def _payloads(client: tk.Client, stream: str = STREAM) -> list[bytes]:
    return [e.payload for e in client.stream(stream).read()]


def _tails(client: tk.Client, stream: str = STREAM) -> dict[int, int]:
    return client.stream(stream).state().tail()


def _staged_rows(client: tk.Client) -> int:
    with client.workspace.db.read() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(tx.transaction_chunks)).scalar_one())


def _per_key(events: list[tk.Event]) -> dict[str | None, list[bytes]]:
    keyed: dict[str | None, list[bytes]] = defaultdict(list)
    for event in events:
        keyed[event.routing_key].append(event.payload)
    return keyed


@pytest.fixture
def client(storage_client: tk.Client) -> tk.Client:
    """Every transaction test on local storage and on S3 (workers and the CLI get the same URI)."""
    return storage_client


@pytest.fixture
def stream(client: tk.Client) -> str:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    return STREAM


@pytest.fixture
def clocked(tmp_path: Path, metadata_url: str, storage_uri: str, clock: tk.ManualClock) -> Iterator[tk.Client]:
    """A client on a manual clock (for leases), on both backends and both storages."""
    c = tk.connect(home=tmp_path / "ws", metadata_url=metadata_url, storage=storage_uri, clock=clock,
                   settings={"writer.linger": 0}, create=True)
    c.create_stream(STREAM, tk.StreamConfig(segments=2))
    yield c
    c.close()


# ---- visibility and what is stored ----------------------------------------------------------------
def test_events_are_invisible_until_commit_then_all_visible(client: tk.Client, stream: str) -> None:
    with client.stream(stream).writer("plain") as writer:
        writer.write(b"before", "k0")
    txn = client.stream(stream).transactional_writer("tw1").begin()
    events = [(f"e{i}".encode(), f"k{i % 4}") for i in range(50)]
    for payload, key in events:
        txn.write(payload, key)
    txn.flush()
    tails_before = _tails(client)
    assert _payloads(client) == [b"before"]
    assert _tails(client) == tails_before
    info = txn.info()
    assert (info.state, info.events, info.writer_id, info.stream) == (tk.TxnState.OPEN, 50, "tw1", stream)
    assert info.staged_chunks >= 1
    assert info.lease_ms == 120_000 and info.lease_expiry_ms == info.created_ms + 120_000  # the default lease
    assert client.sweep(grace=0).files_deleted == 0  # staged files are referenced: the sweep keeps them

    result = txn.commit(timestamp=1_234_567)
    read = list(client.stream(stream).read())
    assert sorted(e.payload for e in read) == sorted([b"before"] + [p for p, _ in events])
    expected: dict[str | None, list[bytes]] = defaultdict(list, {"k0": [b"before"]})
    for payload, key in events:
        expected[key].append(payload)
    assert _per_key(read) == expected
    assert result.events == 50 and result.commit_timestamp == 1_234_567
    assert result.positions == {s: e for s, e in _tails(client).items() if e != tails_before[s]}
    stored = txn.info()
    assert (stored.state, stored.commit_timestamp, stored.writer_id) == (tk.TxnState.COMMITTED, 1_234_567, "tw1")
    assert stored.positions == result.positions and stored.committed_ms == result.committed_ms
    assert {e.writer_id for e in read if e.payload != b"before"} == {"tw1"}
    assert _staged_rows(client) == 0
    assert stored_files(client) == referenced_paths(client)


def test_commit_without_timestamp_stores_none_and_writes_flush_at_batch_size(client: tk.Client, stream: str) -> None:
    txn = client.stream(stream).transactional_writer("tw1", batch_size=100).begin()
    for i in range(30):
        txn.write(b"x" * 20, f"k{i}")  # 28 bytes each: several automatic stagings
    assert txn.info().staged_chunks >= 3
    assert _payloads(client) == []
    result = txn.commit()
    assert result.commit_timestamp is None and txn.info().commit_timestamp is None
    assert len(_payloads(client)) == 30


def test_an_empty_transaction_commits_and_changes_no_segment(client: tk.Client, stream: str) -> None:
    tails = _tails(client)
    result = client.stream(stream).transactional_writer("tw1").begin().commit(timestamp=5)
    assert result.positions == {} and result.events == 0
    assert _tails(client) == tails


def test_concurrent_reader_never_sees_part_of_a_transaction(client: tk.Client, stream: str) -> None:
    per_txn, txns = 60, 12
    done = threading.Event()
    problems: list[str] = []
    passes = [0]

    def reader() -> None:
        while not done.is_set():
            seen: dict[str, int] = defaultdict(int)
            for event in client.stream(stream).read():
                seen[event.payload.split(b":")[0].decode()] += 1
            partial = {t: n for t, n in seen.items() if n != per_txn}
            if partial:
                problems.append(f"pass {passes[0]} saw part of a transaction: {partial}")
            passes[0] += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        tw = client.stream(stream).transactional_writer("tw1", batch_size=400)  # several staged chunks per txn
        for n in range(txns):
            txn = tw.begin()
            for i in range(per_txn):
                txn.write(f"t{n}:{i}".encode(), f"k{i % 7}")
            if n == txns // 2:
                txn.flush()
                client.stream(stream).split(client.stream(stream).state().active_segments()[0].id)  # commit re-routes
            txn.commit(timestamp=n)
    finally:
        done.set()
        thread.join()
    assert problems == []
    assert passes[0] >= 2
    assert len(_payloads(client)) == per_txn * txns


def test_reader_never_sees_part_of_a_transaction_committed_by_another_process(
        client: tk.Client, stream: str, metadata_url: str, tmp_path: Path) -> None:
    per_txn, txns = 60, 10
    env = worker_env(metadata_url, client.workspace.storage.location(), tmp_path / "ws")
    worker = subprocess.Popen([sys.executable, str(TXN_WORKERS), "commit-many", "--stream", stream, "--writer",
                               "tw1", "--txns", str(txns), "--per-txn", str(per_txn)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sizes: list[int] = []
    try:
        while True:
            finished = worker.poll() is not None
            seen: dict[str, int] = defaultdict(int)
            for event in client.stream(stream).read():
                seen[event.payload.split(b":")[0].decode()] += 1
            assert all(n == per_txn for n in seen.values()), f"a read saw part of a transaction: {dict(seen)}"
            sizes.append(len(seen))
            if finished:
                break
    finally:
        if worker.poll() is None:
            worker.kill()
        output = worker.communicate()[0].decode()
    assert worker.returncode == 0, output
    assert sizes == sorted(sizes) and sizes[-1] == txns  # passes never go back, and the last sees them all


def test_a_sweep_running_during_commits_never_takes_a_staged_or_committed_file(client: tk.Client,
                                                                                stream: str) -> None:
    tw = client.stream(stream).transactional_writer("tw1", batch_size=200)
    txns = []
    for n in range(20):  # staged before the sweeper starts: a file between its write and its row is
        txn = tw.begin()  # protected by the grace period only, and this sweep has none
        for i in range(20):
            txn.write(f"t{n}:{i}".encode(), f"k{i % 3}")
        txn.flush()
        txns.append(txn)
    done = threading.Event()

    def sweeper() -> None:
        while not done.is_set():
            client.sweep(grace=0)

    thread = threading.Thread(target=sweeper)
    thread.start()
    try:
        for txn in txns:  # each commit moves its paths from staged rows to chunk rows
            txn.commit()
    finally:
        done.set()
        thread.join()
    assert len(_payloads(client)) == 400
    assert stored_files(client) == referenced_paths(client)


# ---- scaling -------------------------------------------------------------------------------------
def test_commit_after_scale_lands_everything_in_current_segments_in_key_order(client: tk.Client,
                                                                               stream: str) -> None:
    keys = [f"key-{i}" for i in range(40)]
    txn = client.stream(stream).transactional_writer("tw1").begin()
    written: dict[str, list[bytes]] = defaultdict(list)

    def write_round(r: int) -> None:
        for key in keys:
            payload = f"{key}:{r}".encode()
            txn.write(payload, key)
            written[key].append(payload)
        txn.flush()

    write_round(0)
    client.stream(stream).split(0, 3)  # round 0 is staged in a segment that is now sealed
    write_round(1)
    state = client.stream(stream).state()
    by_range = sorted(state.active_segments(), key=lambda s: s.key_low)
    client.stream(stream).merge([s.id for s in by_range][:2])  # round 1 is partly staged in sealed segments too
    write_round(2)
    txn.write(b"no key")
    result = txn.commit(timestamp=99)

    state = client.stream(stream).state()
    active = {s.id for s in state.active_segments()}
    assert set(result.positions) <= active
    with client.workspace.db.read() as conn:
        from tidekeep.store import schema as t

        rows = conn.execute(sa.select(t.chunks.c.segment_id).where(t.chunks.c.writer_id == "tw1")).scalars().all()
    assert set(rows) <= active
    events = list(client.stream(stream).read())
    assert {k: v for k, v in _per_key(events).items() if k is not None} == written
    assert _per_key(events)[None] == [b"no key"]
    assert {e.segment for e in events} <= active
    assert stored_files(client) == referenced_paths(client)  # the re-routed originals are gone


# ---- idempotence and crashes ---------------------------------------------------------------------
def test_commit_is_idempotent(client: tk.Client, stream: str) -> None:
    tw = client.stream(stream).transactional_writer("tw1")
    txn = tw.begin()
    for payload, key in txn_events(20):
        txn.write(payload, key)
    first = txn.commit(timestamp=10)
    tails = _tails(client)
    assert txn.commit(timestamp=77) == first  # the earlier result; the new timestamp changes nothing
    assert tw.transaction(txn.id).commit() == first
    assert _tails(client) == tails and len(_payloads(client)) == 20
    assert txn.info().commit_timestamp == 10


def _run_txn_worker(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TXN_WORKERS), *args], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.parametrize("split", [False, True])
def test_crash_after_commit_then_commit_again_by_id(client: tk.Client, stream: str, metadata_url: str,
                                                     tmp_path: Path, split: bool) -> None:
    env = worker_env(metadata_url, client.workspace.storage.location(), tmp_path / "ws", fault="txn.after_commit")
    id_file = tmp_path / "txn-id"
    args = ["commit", "--stream", stream, "--writer", "tw1", "--events", "40", "--timestamp", "555",
            "--id-file", str(id_file)] + (["--split-before-commit"] if split else [])
    done = _run_txn_worker(args, env)
    assert done.returncode == FAULT_EXIT_CODE, done.stderr
    txn_id = id_file.read_text()
    info = client.stream(stream).transactional_writer("tw1").transaction(txn_id).info()
    assert info.state == tk.TxnState.COMMITTED and info.commit_timestamp == 555
    tails = _tails(client)
    result = client.stream(stream).transactional_writer("tw1").transaction(txn_id).commit()
    assert result.positions == info.positions and _tails(client) == tails
    assert sorted(_payloads(client)) == sorted(p for p, _ in txn_events(40))
    # a crash right after the commit may leave the re-routed originals: unreferenced, swept
    client.sweep(grace=0)
    assert stored_files(client) == referenced_paths(client)


@pytest.mark.parametrize("split", [False, True])
def test_crash_before_commit_leaves_it_open_and_a_later_commit_lands_it_once(
        client: tk.Client, stream: str, metadata_url: str, tmp_path: Path, split: bool) -> None:
    env = worker_env(metadata_url, client.workspace.storage.location(), tmp_path / "ws", fault="txn.before_commit")
    id_file = tmp_path / "txn-id"
    args = ["commit", "--stream", stream, "--writer", "tw1", "--events", "40", "--id-file", str(id_file)]
    done = _run_txn_worker(args + (["--split-before-commit"] if split else []), env)
    assert done.returncode == FAULT_EXIT_CODE, done.stderr
    handle = client.stream(stream).transactional_writer("tw1").transaction(id_file.read_text())
    assert handle.status() == tk.TxnState.OPEN
    assert _payloads(client) == []
    handle.commit(timestamp=1)
    handle.commit(timestamp=1)
    events = list(client.stream(stream).read())
    assert sorted(e.payload for e in events) == sorted(p for p, _ in txn_events(40))
    expected: dict[str | None, list[bytes]] = defaultdict(list)
    for payload, key in txn_events(40):
        expected[key].append(payload)
    assert _per_key(events) == expected
    client.sweep(grace=0)  # the crashed attempt's re-routed files are orphans
    assert stored_files(client) == referenced_paths(client)


def test_crash_between_abort_and_file_deletion_leaves_only_orphans_for_the_sweep(
        client: tk.Client, stream: str, metadata_url: str, tmp_path: Path) -> None:
    txn = client.stream(stream).transactional_writer("tw1").begin()
    for payload, key in txn_events(30):
        txn.write(payload, key)
    txn.flush()
    staged = stored_files(client)
    assert staged and referenced_paths(client) == set()
    env = worker_env(metadata_url, client.workspace.storage.location(), tmp_path / "ws", fault="txn.abort.after_commit")
    done = _run_txn_worker(["abort", "--txn", txn.id], env)
    assert done.returncode == FAULT_EXIT_CODE, done.stderr
    assert txn.status() == tk.TxnState.ABORTED
    assert stored_files(client) == staged  # the rows are gone, the files not yet
    assert client.sweep(grace=0).files_deleted == len(staged)
    assert stored_files(client) == set()


# ---- abort and leases ----------------------------------------------------------------------------
def test_abort_leaves_no_data_and_no_files(client: tk.Client, stream: str) -> None:
    with client.stream(stream).writer("plain") as writer:
        writer.write(b"kept", "k")
    tails = _tails(client)
    txn = client.stream(stream).transactional_writer("tw1", batch_size=64).begin()
    for payload, key in txn_events(30):
        txn.write(payload, key)
    txn.flush()
    assert len(stored_files(client)) > len(referenced_paths(client))
    assert txn.abort() is True
    assert txn.abort() is False  # already aborted
    assert txn.status() == tk.TxnState.ABORTED and txn.info().end_reason == "aborted"
    assert _payloads(client) == [b"kept"] and _tails(client) == tails
    assert _staged_rows(client) == 0
    assert stored_files(client) == referenced_paths(client)


def test_lease_expiry_aborts_and_deletes_staged_data(clocked: tk.Client, clock: tk.ManualClock) -> None:
    tw = clocked.stream(STREAM).transactional_writer("tw1", lease="10s")
    abandoned, pinged = tw.begin(), tw.begin()
    for txn in (abandoned, pinged):
        for payload, key in txn_events(10):
            txn.write(payload, key)
        txn.flush()
    clock.advance(6_000)
    assert pinged.ping() == clock.now_ms() + 10_000
    clock.advance(4_000)
    assert clocked.transactions.expire() == []  # exactly at the expiry the lease still holds
    clock.advance(1)
    staged_before = stored_files(clocked)
    with pytest.raises(tk.TransactionExpired, match="lease expired"):
        abandoned.commit()
    assert abandoned.status() == tk.TxnState.OPEN and stored_files(clocked) == staged_before  # nothing changed
    assert clocked.transactions.expire() == [abandoned.id]
    info = abandoned.info()
    assert (info.state, info.end_reason) == (tk.TxnState.ABORTED, "lease expired")
    with pytest.raises(tk.TransactionExpired, match=f"cannot commit transaction {abandoned.id}: its lease expired"):
        tw.transaction(abandoned.id).commit()
    assert pinged.commit(timestamp=3).events == 10
    assert sorted(_payloads(clocked)) == sorted(p for p, _ in txn_events(10))
    assert stored_files(clocked) == referenced_paths(clocked)
    with pytest.raises(tk.TransactionExpired):
        abandoned.ping()


def test_writing_to_an_expired_transaction_stages_nothing(clocked: tk.Client, clock: tk.ManualClock) -> None:
    txn = clocked.stream(STREAM).transactional_writer("tw1", lease=1000).begin()
    txn.write(b"late", "k")
    clock.advance(1001)
    with pytest.raises(tk.TransactionExpired, match="cannot write to"):
        txn.flush()
    assert stored_files(clocked) == set() and _staged_rows(clocked) == 0


def test_deleting_the_stream_removes_its_transactions_and_staged_files(client: tk.Client, stream: str) -> None:
    tw = client.stream(stream).transactional_writer("tw1")
    committed, staged = tw.begin(), tw.begin()
    committed.write(b"a", "k")
    committed.commit()
    staged.write(b"b", "k")
    staged.flush()
    client.stream(stream).seal()
    client.stream(stream).delete()
    assert client.transactions.list() == [] and _staged_rows(client) == 0
    assert stored_files(client) == set()
    with pytest.raises(tk.NotFound, match=f"transaction {staged.id} does not exist"):
        staged.commit()


# ---- bad input -----------------------------------------------------------------------------------
def test_committing_an_aborted_transaction_fails_and_changes_nothing(client: tk.Client, stream: str) -> None:
    tw = client.stream(stream).transactional_writer("tw1")
    txn = tw.begin()
    txn.write(b"a", "k")
    txn.abort()
    for handle in (txn, tw.transaction(txn.id)):
        with pytest.raises(tk.TransactionClosed, match=f"^cannot commit transaction {txn.id}: it is aborted$"):
            handle.commit()
    assert txn.status() == tk.TxnState.ABORTED and _payloads(client) == []
    assert tk.TransactionClosed.exit_code == 2 and issubclass(tk.TransactionClosed, tk.InvalidInput)


def test_writing_after_commit_or_abort_fails(client: tk.Client, stream: str) -> None:
    tw = client.stream(stream).transactional_writer("tw1")
    committed = tw.begin()
    committed.write(b"a", "k")
    committed.commit()
    with pytest.raises(tk.TransactionClosed, match=f"^cannot write to transaction {committed.id}: it is committed$"):
        committed.write(b"b", "k")
    with pytest.raises(tk.TransactionClosed, match="it is committed"):
        tw.transaction(committed.id).write(b"b", "k")
    with pytest.raises(tk.TransactionClosed, match=f"^cannot abort transaction {committed.id}: it is committed$"):
        committed.abort()
    with pytest.raises(tk.TransactionClosed, match=f"^cannot ping transaction {committed.id}: it is committed$"):
        committed.ping()
    aborted = tw.begin()
    aborted.abort()
    with pytest.raises(tk.TransactionClosed, match="it is aborted"):
        aborted.write(b"c")
    assert _payloads(client) == [b"a"]
    assert committed.status() == tk.TxnState.COMMITTED


def test_bad_input_is_refused_with_typed_errors(client: tk.Client, stream: str) -> None:
    tw = client.stream(stream).transactional_writer("tw1")
    txn = tw.begin()
    with pytest.raises(tk.InvalidInput, match="event payload must be bytes, got str"):
        txn.write("text")  # type: ignore[arg-type]
    with pytest.raises(tk.InvalidInput, match="routing key must be a string or None, got int"):
        txn.write(b"x", 5)  # type: ignore[arg-type]
    with pytest.raises(tk.EventTooLarge, match=f"above the {MAX_EVENT_SIZE}-byte limit"):
        txn.write(b"x" * (MAX_EVENT_SIZE + 1))
    with pytest.raises(tk.InvalidInput, match="invalid commit timestamp -1"):
        txn.commit(timestamp=-1)
    with pytest.raises(tk.InvalidInput, match="invalid commit timestamp True"):
        txn.commit(timestamp=True)  # type: ignore[arg-type]
    assert txn.status() == tk.TxnState.OPEN and txn.info().events == 0  # nothing was buffered or staged
    txn.write(b"ok", "k")
    txn.commit()
    assert _payloads(client) == [b"ok"]

    unknown = "0" * 32
    with pytest.raises(tk.NotFound, match=f"^transaction {unknown} does not exist$"):
        tw.transaction(unknown)
    with pytest.raises(tk.NotFound, match="does not exist"):
        client.transactions.abort(unknown)
    with pytest.raises(tk.InvalidInput, match="invalid transaction id 'nope'"):
        tw.transaction("nope")
    with pytest.raises(tk.NotFound, match="stream 's/missing' does not exist"):
        client.stream("s/missing").transactional_writer("tw1")
    with pytest.raises(tk.InvalidName):
        client.stream(stream).transactional_writer("bad id!")
    with pytest.raises(tk.InvalidInput, match="invalid lease 0 ms"):
        client.stream(stream).transactional_writer("tw1", lease=0)
    client.create_stream("s/other")
    with pytest.raises(tk.InvalidInput, match="belongs to stream 's/txn', not 's/other'"):
        client.stream("s/other").transactional_writer("tw1").transaction(txn.id)
    client.stream("s/other").seal()
    with pytest.raises(tk.StreamSealed):
        client.stream("s/other").transactional_writer("tw1").begin()
    assert [i.id for i in client.transactions.list(stream)] == [txn.id]


def test_a_transaction_on_a_stream_sealed_meanwhile_cannot_commit(client: tk.Client, stream: str) -> None:
    txn = client.stream(stream).transactional_writer("tw1").begin()
    txn.write(b"a", "k")
    txn.flush()
    client.stream(stream).seal()
    with pytest.raises(tk.StreamSealed, match="is sealed"):
        txn.commit()
    assert txn.status() == tk.TxnState.OPEN and _payloads(client) == []
    txn.abort()
    assert stored_files(client) == set()


# ---- the pure core -------------------------------------------------------------------------------
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 50)), max_size=20),
       st.lists(st.integers(0, 1000), min_size=4, max_size=4))
def test_place_chunks_appends_in_order_at_the_tails(chunks: list[tuple[int, int]], tails: list[int]) -> None:
    pending = [PendingChunk(seg, f"p{i}", length, 1) for i, (seg, length) in enumerate(chunks)]
    start = dict(enumerate(tails))
    bases, ends = place_chunks(pending, start)
    # oracle: walk byte by byte per segment
    cursor = dict(start)
    for chunk, base in zip(pending, bases, strict=True):
        assert base == cursor[chunk.segment]
        cursor[chunk.segment] += chunk.length
    assert ends == {s: cursor[s] for s in {seg for seg, _ in chunks}}


@given(st.sampled_from(["OPEN", "COMMITTED", "ABORTED"]), st.integers(0, 100), st.integers(0, 100))
def test_lease_expired_only_for_open_transactions_past_their_expiry(state: str, expiry: int, now: int) -> None:
    assert lease_expired(state, expiry, now) == (state == "OPEN" and now > expiry)


# ---- CLI -----------------------------------------------------------------------------------------
def _cli(tmp_path: Path, metadata_url: str, storage: str, *args: str,
         capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    argv = ["--home", str(tmp_path / "ws"), "--metadata-url", metadata_url, "--storage", storage, *args]
    try:
        cli_main(argv)
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_lists_and_aborts_transactions(client: tk.Client, stream: str, metadata_url: str, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    storage = client.workspace.storage.location()
    tw = client.stream(stream).transactional_writer("tw1")
    done = tw.begin()
    done.write(b"a", "k")
    done.commit(timestamp=42)
    open_txn = tw.begin()
    open_txn.write(b"b", "k")
    open_txn.flush()

    code, out, err = _cli(tmp_path, metadata_url, storage, "txn", "list", "--stream", stream, "--json", capsys=capsys)
    assert (code, err) == (0, "")
    records = json.loads(out)
    assert [(r["id"], r["state"], r["writer_id"], r["commit_timestamp"]) for r in records] == [
        (done.id, "COMMITTED", "tw1", 42), (open_txn.id, "OPEN", "tw1", None)]
    assert records[0]["positions"] and records[1]["staged_chunks"] == 1

    code, out, err = _cli(tmp_path, metadata_url, storage, "txn", "list", capsys=capsys)
    assert code == 0 and done.id in out and open_txn.id in out and "COMMITTED" in out

    code, out, err = _cli(tmp_path, metadata_url, storage, "txn", "abort", open_txn.id, "--json", capsys=capsys)
    assert (code, err) == (0, "") and json.loads(out) == {"id": open_txn.id, "aborted": True,
                                                            "files_left": []}
    assert open_txn.status() == tk.TxnState.ABORTED and stored_files(client) == referenced_paths(client)

    code, out, err = _cli(tmp_path, metadata_url, storage, "txn", "abort", done.id, capsys=capsys)
    assert code == 2 and out == "" and err == f"error: cannot abort transaction {done.id}: it is committed\n"
    code, out, err = _cli(tmp_path, metadata_url, storage, "txn", "abort", "f" * 32, capsys=capsys)
    assert code == 3 and err == f"error: transaction {'f' * 32} does not exist\n"
    code, out, err = _cli(tmp_path, metadata_url, storage, "txn", "list", "--stream", "s/none", capsys=capsys)
    assert code == 3 and err == "error: stream 's/none' does not exist\n"
    assert done.status() == tk.TxnState.COMMITTED
