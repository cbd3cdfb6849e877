"""Transactions on the metadata store (the imperative shell): begin, stage, commit, abort, expire.

Staged chunk files are written under `<stream dir>/txn/<txn id>/` before their rows are inserted,
so a crash leaves at most unreferenced files (the sweep removes them after its grace period);
staged rows keep the files of an open transaction referenced, so the sweep never takes them.
A commit turns every staged chunk into a chunk row at the tail of its segment in ONE metadata
transaction, exactly as a writer batch is appended — readers see all of a transaction or none.
A commit may carry a batch `sequence` for its writer id (the Spark sink passes batchId + 1): it is
checked against and advanced in the `writers` table in that same transaction, as a writer's batch
sequence is, so a replayed batch (sequence at or below the last one) is aborted instead of appended.
Abort and expiry drop the rows first and delete the files after the metadata commit.

The decisions (is the lease over, where does each chunk land) are pure functions at the top.
"""

from __future__ import annotations

import builtins
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from ..errors import (
    ConflictError,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    StreamSealed,
    TransactionClosed,
    TransactionExpired,
)
from ..faults import fault_error, fault_point, pause_point
from ..names import stream_directory_name
from ..store import schema as t
from ..store import schema_transactions as tx
from ..store.audit import AuditEntry, AuditLog
from ..store.database import RETRY_ATTEMPTS, retry_store
from ..store.deletion import FileLeft, warn_files_left
from ..store.fencing import LeaseFence, check_fence
from .controller import PendingChunk, SegmentsSealed, StreamController, merge_positions
from .model import segment_name
from .repository import StreamState, StreamStatus
from .watermark_store import record_mark

log = logging.getLogger("tidekeep.txn")

_TXN_ID = re.compile(r"[0-9a-f]{32}")
_COMMIT_ATTEMPTS = 8

# the re-routing step the client side supplies: (transaction row, staged chunks, active segment ids,
# stream state) -> (the chunks to append, in order; the staged files they replace)
RerouteFn = Callable[[Any, Sequence[PendingChunk], set[int], StreamState], tuple[list[PendingChunk], list[str]]]


class TxnState(StrEnum):
    OPEN = "OPEN"
    COMMITTED = "COMMITTED"
    ABORTED = "ABORTED"


REASON_COMMITTED, REASON_ABORTED, REASON_EXPIRED = "committed", "aborted", "lease expired"
REASON_DUPLICATE = "duplicate batch"


@dataclass(frozen=True)
class TransactionInfo:
    id: str
    stream: str
    writer_id: str
    state: TxnState
    created_ms: int
    lease_ms: int
    lease_expiry_ms: int
    commit_timestamp: int | None
    committed_ms: int | None
    ended_ms: int | None
    end_reason: str | None
    positions: dict[int, int]  # segment -> end offset of the commit (empty unless committed)
    events: int
    staged_chunks: int


@dataclass(frozen=True)
class TxnAbortResult:
    """What `abort` did: `aborted` is False if the transaction was already aborted (the result is
    truthy exactly when it aborted now). `files_left`: staged files the abort could not delete after
    its commit (read-only storage, permissions); unreferenced, so the sweep removes them later."""

    txn_id: str
    aborted: bool
    files_left: tuple[FileLeft, ...] = ()

    def __bool__(self) -> bool:
        return self.aborted


@dataclass(frozen=True)
class TxnCommitResult:
    txn_id: str
    commit_timestamp: int | None
    committed_ms: int
    positions: dict[int, int]  # segment -> end offset: where the transaction landed
    events: int
    # the commit's sequence was at or below the writer's last one: aborted, nothing appended
    duplicate: bool = False


# ---- the pure core -------------------------------------------------------------------------------
def lease_expired(state: str, lease_expiry_ms: int, now_ms: int) -> bool:
    """An open transaction whose lease ran out; the expiry instant itself still belongs to the lease."""
    return state == TxnState.OPEN and now_ms > lease_expiry_ms


def place_chunks(chunks: Sequence[PendingChunk], tails: Mapping[int, int]) -> tuple[list[int], dict[int, int]]:
    """Append `chunks` in order at the segment tails: each chunk's base offset, and the end offset
    of every segment touched (where the transaction landed)."""
    ends = dict(tails)
    bases = []
    for chunk in chunks:
        bases.append(ends[chunk.segment])
        ends[chunk.segment] += chunk.length
    touched = {c.segment for c in chunks}
    return bases, {s: e for s, e in ends.items() if s in touched}


def check_txn_id(txn_id: object) -> str:
    if not isinstance(txn_id, str) or not _TXN_ID.fullmatch(txn_id):
        raise InvalidInput(f"invalid transaction id {txn_id!r}: expected 32 lowercase hex digits")
    return txn_id


def check_commit_timestamp(timestamp: object) -> int | None:
    if timestamp is None:
        return None
    if not isinstance(timestamp, int) or isinstance(timestamp, bool) or not 0 <= timestamp < 2**63:
        raise InvalidInput(f"invalid commit timestamp {timestamp!r}: expected milliseconds since the epoch, >= 0")
    return timestamp


def check_sequence(sequence: object) -> int | None:
    if sequence is None:
        return None
    if not isinstance(sequence, int) or isinstance(sequence, bool) or not 0 < sequence < 2**63:
        raise InvalidInput(f"invalid batch sequence {sequence!r}: expected an integer greater than zero")
    return sequence


def closed_error(txn_id: str, state: str, end_reason: str | None, action: str) -> TransactionClosed:
    if end_reason == REASON_EXPIRED:
        return TransactionExpired(f"cannot {action} transaction {txn_id}: its lease expired and it was aborted")
    return TransactionClosed(f"cannot {action} transaction {txn_id}: it is {state.lower()}")


# ---- the shell -----------------------------------------------------------------------------------
class _StagingChanged(Exception):
    """Internal: the staged chunks changed between planning a commit and applying it."""


@dataclass(frozen=True)
class _Duplicate:
    """Internal: _apply_commit aborted a replayed batch; its staged files are to be deleted."""

    result: TxnCommitResult
    paths: list[str]


class TransactionStore:
    def __init__(self, controller: StreamController) -> None:
        self.controller = controller
        self.db = controller.db
        self.storage = controller.storage
        self.clock = controller.clock

    # ---- loading -------------------------------------------------------------------------------
    def _row(self, conn: Connection, txn_id: str, lock: bool = False) -> Any:
        query = (sa.select(tx.transactions, t.streams.c.scope, t.streams.c.name.label("stream_name"),
                           t.streams.c.uid)
                 .join(t.streams, t.streams.c.id == tx.transactions.c.stream_id)
                 .where(tx.transactions.c.id == txn_id))
        if lock:
            query = query.with_for_update(of=tx.transactions)
        row = conn.execute(query).one_or_none()
        if row is None:
            raise NotFound(f"transaction {txn_id} does not exist")
        return row

    @staticmethod
    def _staged(conn: Connection, txn_id: str) -> list[PendingChunk]:
        rows = conn.execute(sa.select(tx.transaction_chunks).where(tx.transaction_chunks.c.txn_id == txn_id)
                            .order_by(tx.transaction_chunks.c.seq)).all()
        return [PendingChunk(r.segment_id, r.path, r.length, r.event_count) for r in rows]

    @staticmethod
    def _info(row: Any, staged: int) -> TransactionInfo:
        positions = {} if row.positions is None else row.positions
        return TransactionInfo(row.id, f"{row.scope}/{row.stream_name}", row.writer_id, TxnState(row.state),
                               row.created_ms, row.lease_ms, row.lease_expiry_ms, row.commit_timestamp,
                               row.committed_ms, row.ended_ms, row.end_reason, positions, row.events, staged)

    def info(self, txn_id: str) -> TransactionInfo:
        check_txn_id(txn_id)
        with self.db.read() as conn:
            row = self._row(conn, txn_id)
            return self._info(row, len(self._staged(conn, txn_id)))

    def list(self, stream: str | None = None) -> list[TransactionInfo]:
        with self.db.read() as conn:
            query = (sa.select(tx.transactions, t.streams.c.scope, t.streams.c.name.label("stream_name"))
                     .join(t.streams, t.streams.c.id == tx.transactions.c.stream_id)
                     .order_by(tx.transactions.c.created_ms, tx.transactions.c.id))
            if stream is not None:
                query = query.where(tx.transactions.c.stream_id == self.controller.repository.row(conn, stream).id)
            counts: dict[str, int] = dict(conn.execute(sa.select(tx.transaction_chunks.c.txn_id, sa.func.count())
                                       .group_by(tx.transaction_chunks.c.txn_id)).all())
            return [self._info(r, counts.get(r.id, 0)) for r in conn.execute(query)]

    # ---- lifecycle -------------------------------------------------------------------------------
    def begin(self, stream: str, writer_id: str, lease_ms: int) -> TransactionInfo:
        now = self.clock.now_ms()
        txn_id = uuid.uuid4().hex
        with self.db.write() as conn:
            row = self.controller.repository.row(conn, stream)
            if row.state == StreamStatus.SEALED:
                raise StreamSealed(f"stream {stream!r} is sealed; it takes no transactions")
            conn.execute(sa.insert(tx.transactions).values(
                id=txn_id, stream_id=row.id, writer_id=writer_id, state=TxnState.OPEN.value, created_ms=now,
                lease_ms=lease_ms, lease_expiry_ms=now + lease_ms, events=0))
        log.info("began transaction %s on %s for writer %s", txn_id, stream, writer_id)
        return self.info(txn_id)

    def _open_row(self, conn: Connection, txn_id: str, action: str) -> Any:
        """The locked row of an open transaction whose lease still runs; a typed error otherwise."""
        row = self._row(conn, txn_id, lock=True)
        if row.state != TxnState.OPEN:
            raise closed_error(txn_id, row.state, row.end_reason, action)
        if lease_expired(row.state, row.lease_expiry_ms, self.clock.now_ms()):
            raise TransactionExpired(f"cannot {action} transaction {txn_id}: its lease expired")
        return row

    def ping(self, txn_id: str) -> int:
        """Extend the lease by its length from now; returns the new expiry."""
        with self.db.write() as conn:
            row = self._open_row(conn, txn_id, "ping")
            expiry = self.clock.now_ms() + row.lease_ms
            conn.execute(sa.update(tx.transactions).where(tx.transactions.c.id == txn_id)
                         .values(lease_expiry_ms=expiry))
        return expiry

    def stage(self, txn_id: str, chunks: Sequence[PendingChunk]) -> None:
        """Record chunk files already written under the transaction's directory, after those staged
        before. Staging the same files again changes nothing (a retry after an unknown outcome: file
        names are unique), and a busy or lost store is retried. If the transaction is no longer open
        the files are deleted and the error raised."""
        try:
            retry_store(lambda: self._stage(txn_id, chunks), f"staging in transaction {txn_id}")
        except (TransactionClosed, NotFound):
            left = self.storage.discard(c.path for c in chunks).failed  # certainly unreferenced
            warn_files_left(log, f"transaction {txn_id}: staging refused", left, in_result=False)
            raise

    def _stage(self, txn_id: str, chunks: Sequence[PendingChunk]) -> None:
        with self.db.write() as conn:
            row = self._open_row(conn, txn_id, "write to")
            staged = self._staged(conn, txn_id)
            known = {c.path for c in staged}
            fresh = [c for c in chunks if c.path not in known]
            if not fresh:
                return
            last = conn.execute(sa.select(sa.func.max(tx.transaction_chunks.c.seq))
                                .where(tx.transaction_chunks.c.txn_id == txn_id)).scalar()
            first = 0 if last is None else last + 1
            conn.execute(sa.insert(tx.transaction_chunks), [
                dict(txn_id=txn_id, seq=first + i, segment_id=c.segment, path=c.path, length=c.length,
                     event_count=c.event_count) for i, c in enumerate(fresh)])
            conn.execute(sa.update(tx.transactions).where(tx.transactions.c.id == txn_id)
                         .values(events=row.events + sum(c.event_count for c in fresh)))
        fault_error("txn.stage.lost_ack", StoreUnavailable, "connection lost after staging")

    def abort(self, txn_id: str, reason: str = REASON_ABORTED) -> TxnAbortResult:
        """Abort an open transaction and delete its staged data. The result is falsy if it was
        already aborted, and names the staged files it could not delete (left for the sweep)."""
        check_txn_id(txn_id)
        self.storage.require_deletable()  # before the metadata changes: the files go after it
        with self.db.write() as conn:
            row = self._row(conn, txn_id, lock=True)
            if row.state == TxnState.ABORTED:
                return TxnAbortResult(txn_id, False)
            if row.state == TxnState.COMMITTED:
                raise TransactionClosed(f"cannot abort transaction {txn_id}: it is committed")
            staged = self._staged(conn, txn_id)
            paths = self._end(conn, [txn_id], reason)
            # an abort deletes data: audited, by whom, as every deletion is (docs/transactions.md)
            AuditLog(self.clock, self.controller.actor).append(conn, AuditEntry(
                "txn_abort", f"{row.scope}/{row.stream_name}", reason, sum(c.length for c in staged),
                {"txn": txn_id, "writer_id": row.writer_id, "events": row.events, "staged_chunks": len(staged)}))
        fault_point("txn.abort.after_commit")
        left = self._delete_staged(paths, [row])
        log.info("aborted transaction %s (%s)", txn_id, reason)
        warn_files_left(log, f"aborted transaction {txn_id}", left)
        return TxnAbortResult(txn_id, True, left)

    def expire(self, fence: LeaseFence | None = None) -> builtins.list[str]:
        """Abort every open transaction whose lease ran out; returns their ids. With a `fence` (the
        service's sweep lease) nothing is aborted once another process has taken it over (LeaseLost)."""
        now = self.clock.now_ms()
        self.storage.require_deletable()
        with self.db.write() as conn:
            check_fence(conn, fence)
            rows = conn.execute(
                sa.select(tx.transactions.c.id, tx.transactions.c.stream_id, t.streams.c.scope,
                          t.streams.c.name.label("stream_name"), t.streams.c.uid)
                .join(t.streams, t.streams.c.id == tx.transactions.c.stream_id)
                .where(tx.transactions.c.state == TxnState.OPEN.value, tx.transactions.c.lease_expiry_ms < now)
                .order_by(tx.transactions.c.id).with_for_update(of=tx.transactions)).all()
            paths = self._end(conn, [r.id for r in rows], REASON_EXPIRED)
        left = self._delete_staged(paths, rows)
        if rows:
            log.info("expired %d transactions whose lease ran out", len(rows))
        # the ids stay the result (housekeeping reads them); the files left are the log's to tell
        warn_files_left(log, f"expired {len(rows)} transaction(s)", left, in_result=False)
        return [r.id for r in rows]

    def _delete_staged(self, paths: Sequence[str], rows: Sequence[Any]) -> tuple[FileLeft, ...]:
        """After the commit that ended them: the transactions' staged files, then their directories.
        Returns the files that could not be deleted."""
        outcome = self.storage.delete(paths)
        for row in rows:
            outcome += self.storage.delete_dir(self._txn_dir(row))
        return outcome.failed

    def _end(self, conn: Connection, txn_ids: Sequence[str], reason: str) -> builtins.list[str]:
        """Mark transactions aborted and drop their staged rows; returns the files to delete."""
        if not txn_ids:
            return []
        staged = tx.transaction_chunks.c.txn_id.in_(list(txn_ids))
        paths = list(conn.execute(sa.select(tx.transaction_chunks.c.path).where(staged)).scalars())
        conn.execute(sa.delete(tx.transaction_chunks).where(staged))
        conn.execute(sa.update(tx.transactions).where(tx.transactions.c.id.in_(list(txn_ids))).values(
            state=TxnState.ABORTED.value, ended_ms=self.clock.now_ms(), end_reason=reason))
        return paths

    @staticmethod
    def _txn_dir(row: Any) -> str:
        return f"streams/{row.scope}/{stream_directory_name(row.stream_name, row.uid)}/txn/{row.id}"

    # ---- commit --------------------------------------------------------------------------------
    def commit(self, txn_id: str, timestamp: int | None, reroute: RerouteFn,
               sequence: int | None = None) -> TxnCommitResult:
        """Append every staged chunk atomically and mark the transaction committed. Chunks staged in
        segments a scale has sealed are re-routed first (`reroute` writes new files). Committing a
        committed transaction returns its earlier result and changes nothing.

        With a `sequence`, the commit is also the writer id's batch `sequence`: if the writer's last
        sequence is at or above it, the batch was committed before, so the transaction is aborted and
        its files deleted instead, and the result says `duplicate` (committing it again says so too)."""
        check_txn_id(txn_id)
        timestamp = check_commit_timestamp(timestamp)
        sequence = check_sequence(sequence)
        lost = 0  # attempts that met a busy or lost store
        for _ in range(_COMMIT_ATTEMPTS + RETRY_ATTEMPTS):
            try:
                result = self._commit_once(txn_id, timestamp, reroute, sequence)
            except (ConflictError, StoreUnavailable) as exc:
                # the outcome is unknown: the next attempt reads the transaction's state first, so a
                # commit that landed is returned as committed and never applied twice
                lost += 1
                if lost == RETRY_ATTEMPTS:
                    raise
                log.info("transaction %s: commit failed (%s), trying again", txn_id, exc)
                time.sleep(0.05 * 2 ** (lost - 1))
                continue
            if result is not None:
                return result
        raise ConflictError(f"cannot commit transaction {txn_id}: the stream kept scaling during the commit, try again")

    def _commit_once(self, txn_id: str, timestamp: int | None, reroute: RerouteFn,
                     sequence: int | None) -> TxnCommitResult | None:
        """One attempt; None: the staged chunks or the segments changed meanwhile, plan again."""
        with self.db.read() as conn:
            row = self._row(conn, txn_id)
            staged = self._staged(conn, txn_id)
        if row.state == TxnState.COMMITTED:
            return _result(row)
        if row.state == TxnState.ABORTED and row.end_reason == REASON_DUPLICATE:
            return _result(row, duplicate=True)
        if row.state != TxnState.OPEN:
            raise closed_error(txn_id, row.state, row.end_reason, "commit")
        if lease_expired(row.state, row.lease_expiry_ms, self.clock.now_ms()):
            raise TransactionExpired(f"cannot commit transaction {txn_id}: its lease expired")
        state = self.controller.state(f"{row.scope}/{row.stream_name}")
        active = {s.id for s in state.active_segments()}
        chunks, replaced = reroute(row, staged, active, state)
        fault_point("txn.before_commit")
        try:
            result = self._apply_commit(txn_id, [c.path for c in staged], chunks, timestamp, sequence)
        except (SegmentsSealed, _StagingChanged) as exc:
            self._delete_new_files(chunks, staged)
            log.info("transaction %s: %s; planning the commit again", txn_id, exc)
            return None
        except BaseException:
            self._delete_new_files(chunks, staged, check_referenced=True)
            raise
        fault_point("txn.after_commit")
        if result is None:  # committed meanwhile by someone else: ours are unneeded copies
            self._delete_new_files(chunks, staged)
            with self.db.read() as conn:
                return _result(self._row(conn, txn_id))
        if isinstance(result, _Duplicate):
            self._delete_new_files(chunks, staged)
            # the transaction's own files, unreferenced
            outcome = self.storage.discard(result.paths) + self.storage.discard_dir(self._txn_dir(row))
            warn_files_left(log, f"transaction {txn_id}: duplicate batch aborted", outcome.failed, in_result=False)
            log.info("transaction %s: batch sequence %s of writer %s was committed before; aborted",
                     txn_id, sequence, row.writer_id)
            return result.result
        left = self.storage.discard(replaced).failed  # re-routed away: no row refers to them any more
        warn_files_left(log, f"committed transaction {txn_id}", left, in_result=False)
        log.info("committed transaction %s: %d events", txn_id, result.events)
        return result

    def _delete_new_files(self, chunks: Iterable[PendingChunk], staged: Sequence[PendingChunk],
                          check_referenced: bool = False) -> None:
        old = {c.path for c in staged}
        new = [c.path for c in chunks if c.path not in old]
        if check_referenced and new:
            try:
                keep = self.controller.referenced_paths(new)
            except Exception:  # the outcome is unknown and the store unreachable: the sweep decides
                return
            new = [p for p in new if p not in keep]
        left = self.storage.discard(new).failed
        warn_files_left(log, "transaction commit: re-routed copies", left, in_result=False)

    @staticmethod
    def _advance_sequence(conn: Connection, row: Any, writer: Any, sequence: int, positions: Mapping[int, int],
                          now: int) -> None:
        """Record `sequence` as the writer's last batch, and where the transaction landed as its
        committed position (what a note without a position records), as a writer's batch does."""
        merged = merge_positions(None if writer is None else writer.positions, positions)
        if writer is not None:
            conn.execute(sa.update(t.writers).where(
                t.writers.c.stream_id == row.stream_id, t.writers.c.writer_id == row.writer_id
            ).values(last_sequence=sequence, updated_ms=now, positions=merged))
            return
        try:
            conn.execute(sa.insert(t.writers).values(stream_id=row.stream_id, writer_id=row.writer_id,
                                                     last_sequence=sequence, updated_ms=now, positions=merged))
        except sa.exc.IntegrityError:
            # a concurrent first commit of the same writer id won: this whole metadata transaction
            # rolls back and the commit is planned again (it then sees that writer's sequence)
            raise _StagingChanged(f"writer {row.writer_id} committed concurrently") from None

    def _apply_commit(self, txn_id: str, planned_from: Sequence[str], chunks: Sequence[PendingChunk],
                      timestamp: int | None, sequence: int | None = None) -> TxnCommitResult | _Duplicate | None:
        now = self.clock.now_ms()
        with self.db.write() as conn:
            row = self._row(conn, txn_id, lock=True)
            if row.state == TxnState.COMMITTED:
                return None
            if row.state != TxnState.OPEN:
                raise closed_error(txn_id, row.state, row.end_reason, "commit")
            if lease_expired(row.state, row.lease_expiry_ms, now):
                raise TransactionExpired(f"cannot commit transaction {txn_id}: its lease expired")
            if [c.path for c in self._staged(conn, txn_id)] != list(planned_from):
                raise _StagingChanged("its staged chunks changed")
            writer = None
            if sequence is not None:
                writer = conn.execute(sa.select(t.writers.c.last_sequence, t.writers.c.positions).where(
                    t.writers.c.stream_id == row.stream_id, t.writers.c.writer_id == row.writer_id)
                    .with_for_update()).first()
                pause_point("txn.sequence_checked")  # tests: two commits both past the check
                if writer is not None and sequence <= writer.last_sequence:
                    paths = self._end(conn, [txn_id], REASON_DUPLICATE)
                    # files a committed chunk refers to stay: the same files staged again by a retry
                    committed = self.controller.repository.referenced_paths(conn, paths)
                    return _Duplicate(TxnCommitResult(txn_id, None, now, {}, row.events, duplicate=True),
                                      [p for p in paths if p not in committed])
            stream = conn.execute(sa.select(t.streams).where(t.streams.c.id == row.stream_id)).one()
            if stream.state == StreamStatus.SEALED:
                raise StreamSealed(f"cannot commit transaction {txn_id}: stream {row.scope}/{row.stream_name} "
                                   "is sealed")
            targets = {c.segment for c in chunks}
            seg_rows = {r.segment_id: r for r in self.controller.repository.lock_segments(conn, row.stream_id, targets)}
            sealed = sorted(s for s in targets if s not in seg_rows or seg_rows[s].sealed)
            if sealed:
                raise SegmentsSealed(sealed)
            bases, positions = place_chunks(chunks, {s: r.tail for s, r in seg_rows.items()})
            if chunks:
                conn.execute(sa.insert(t.chunks), [
                    dict(stream_id=row.stream_id, segment_id=c.segment, base_offset=base, length=c.length,
                         event_count=c.event_count, path=c.path, writer_id=row.writer_id, sequence=0,
                         committed_ms=now) for c, base in zip(chunks, bases, strict=True)])
            for seg, end in positions.items():
                conn.execute(sa.update(t.segments).where(
                    t.segments.c.stream_id == row.stream_id, t.segments.c.segment_id == seg).values(tail=end))
            if sequence is not None:
                self._advance_sequence(conn, row, writer, sequence, positions, now)
            conn.execute(sa.delete(tx.transaction_chunks).where(tx.transaction_chunks.c.txn_id == txn_id))
            conn.execute(sa.update(tx.transactions).where(tx.transactions.c.id == txn_id).values(
                state=TxnState.COMMITTED.value, commit_timestamp=timestamp, committed_ms=now, ended_ms=now,
                end_reason=REASON_COMMITTED,
                positions=positions))
            if timestamp is not None:
                # the writer's mark at the offsets where the transaction landed, with the data (a time
                # below the writer's last mark is refused here, leaving the transaction open)
                state = self.controller.repository.load(conn, f"{row.scope}/{row.stream_name}")
                try:
                    record_mark(conn, state, row.writer_id, timestamp, positions, "txn", now, merge_previous=True)
                except InvalidInput as exc:
                    raise InvalidInput(
                        f"cannot commit transaction {txn_id} with timestamp {timestamp}: {exc}") from None
        fault_error("txn.commit.lost_ack", StoreUnavailable, "connection lost after the commit")
        return TxnCommitResult(txn_id, timestamp, now, positions, row.events)


def _result(row: Any, duplicate: bool = False) -> TxnCommitResult:
    positions = {} if row.positions is None else row.positions
    committed_ms = row.ended_ms if duplicate else row.committed_ms
    return TxnCommitResult(row.id, row.commit_timestamp, committed_ms, positions, row.events, duplicate)


def describe_positions(positions: Mapping[int, int]) -> str:
    return ",".join(f"{segment_name(s)}={e}" for s, e in sorted(positions.items()))

