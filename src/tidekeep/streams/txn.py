"""Transactional writers: events that become visible all at once, or never.

    tw = client.stream("s/orders").transactional_writer("billing-1")
    txn = tw.begin()
    txn.write(b"...", routing_key="order-17")
    txn.commit(timestamp=event_time_ms)   # or txn.abort()

Events are buffered, then staged (flush) as chunk files under the stream's directory that no
reader sees; the commit appends every staged chunk at the segment tails in one metadata
transaction. Events are routed when staged; chunks staged in segments a scale has sealed since
are re-routed at commit with the current epoch's router, keeping each routing key's events in
write order. Commit is idempotent: a handle from `tw.transaction(txn_id)` (e.g. after a crash)
commits again safely.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import MAX_EVENT_SIZE
from ..errors import EventTooLarge, InvalidInput, NotFound, TransactionClosed
from ..names import check_writer_id
from ..store.chunks import ChunkRef
from .chunk_writes import write_segment_chunks
from .controller import PendingChunk
from .model import EVENT_HEADER_BYTES, Router, routing_key_position, segment_name
from .repository import StreamState
from .txn_store import TransactionInfo, TransactionStore, TxnCommitResult, TxnState, check_txn_id


def route_events(router: Router, keys: pa.Array) -> np.ndarray:
    """The target segment of every event: one hash per distinct key, random for null keys (as the
    Writer routes)."""
    targets = router.segments_for(np.random.random(len(keys)))
    if keys.null_count == len(keys):
        return targets
    encoded = keys.dictionary_encode()
    per_key = np.array([router.segment_for(routing_key_position(k)) for k in encoded.dictionary.to_pylist()],
                       dtype=np.int64)
    has_key = keys.is_valid().to_numpy(zero_copy_only=False)
    indices = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
    targets[has_key] = per_key[indices[has_key]]
    return targets


def write_chunks(controller: Any, directory: str, router: Router, payloads: pa.Array,
                 keys: pa.Array) -> list[PendingChunk]:
    """Route events and write one chunk file per target segment (write order kept within each)."""
    return write_segment_chunks(controller.storage, route_events(router, keys), router.segment_ids, payloads, keys,
                                lambda seg: f"{directory}/{segment_name(seg)}-{uuid.uuid4().hex[:12]}.parquet")


class TransactionalWriter:
    """Begins transactions on one stream for one writer id."""

    def __init__(self, store: TransactionStore, stream: str, writer_id: str, lease_ms: int, batch_size: int) -> None:
        check_writer_id(writer_id)
        if lease_ms <= 0:
            raise InvalidInput(f"invalid lease {lease_ms} ms: must be greater than zero")
        store.controller.state(stream)  # the stream must exist
        self._store = store
        self.stream = stream
        self.writer_id = writer_id
        self.lease_ms = lease_ms
        self._batch_size = batch_size

    def begin(self) -> Transaction:
        info = self._store.begin(self.stream, self.writer_id, self.lease_ms)
        return Transaction(self._store, info, self._batch_size)

    def transaction(self, txn_id: str) -> Transaction:
        """A handle to an existing transaction of this stream (to commit or abort it after a crash)."""
        info = self._store.info(check_txn_id(txn_id))
        if info.stream != self.stream:
            raise InvalidInput(f"transaction {txn_id} belongs to stream {info.stream!r}, not {self.stream!r}")
        return Transaction(self._store, info, self._batch_size)


class Transaction:
    """One transaction. write() buffers; flush() stages; commit() makes everything visible at once."""

    def __init__(self, store: TransactionStore, info: TransactionInfo, batch_size: int) -> None:
        self._store = store
        self.id = info.id
        self.stream = info.stream
        self.writer_id = info.writer_id
        self._batch_size = batch_size
        self._closed_as: TxnState | None = None if info.state == TxnState.OPEN else info.state
        self._payloads: list[bytes] = []
        self._keys: list[str | None] = []
        self._pending_bytes = 0
        # files of buffered events whose staging had an unknown outcome, and how many events they hold
        self._in_doubt: tuple[list[PendingChunk], int] | None = None
        self._lock = threading.Lock()

    # ---- public --------------------------------------------------------------------------------
    def write(self, payload: bytes, routing_key: str | None = None) -> None:
        """Buffer one event of the transaction (same checks as Writer.write)."""
        if type(payload) is not bytes:
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise InvalidInput(f"event payload must be bytes, got {type(payload).__name__}")
            payload = bytes(payload)
        if len(payload) > MAX_EVENT_SIZE:
            raise EventTooLarge(f"event of {len(payload)} bytes is above the {MAX_EVENT_SIZE}-byte limit")
        if routing_key is not None and type(routing_key) is not str:
            raise InvalidInput(f"routing key must be a string or None, got {type(routing_key).__name__}")
        with self._lock:
            self._check_open("write to")
            self._payloads.append(payload)
            self._keys.append(routing_key)
            self._pending_bytes += len(payload) + EVENT_HEADER_BYTES
            if self._pending_bytes >= self._batch_size:
                self._flush_locked()

    def flush(self) -> None:
        """Stage the buffered events (durable, still invisible to readers)."""
        with self._lock:
            self._check_open("write to")
            self._flush_locked()

    def commit(self, timestamp: int | None = None, sequence: int | None = None) -> TxnCommitResult:
        """Flush, then append everything staged atomically. `timestamp` (ms since the epoch) is the
        writer's event time for watermarking; it is stored with the writer id and landing positions.
        Committing a committed transaction returns the earlier result and changes nothing.
        `sequence` makes the commit exactly-once per batch of this writer id (TransactionStore.commit):
        a sequence at or below the writer's last aborts the transaction (`result.duplicate`)."""
        with self._lock:
            if self._closed_as is None:
                self._flush_locked()
            elif self._payloads:
                raise TransactionClosed(f"cannot commit transaction {self.id}: it is {self._closed_as.lower()}")
            result = self._store.commit(self.id, timestamp, self._reroute, sequence)
            self._closed_as = TxnState.ABORTED if result.duplicate else TxnState.COMMITTED
            return result

    def abort(self) -> bool:
        """Discard the transaction and its staged data. False if it was already aborted."""
        with self._lock:
            self._payloads, self._keys, self._pending_bytes, self._in_doubt = [], [], 0, None
            aborted = self._store.abort(self.id).aborted  # files it could not delete: logged, swept later
            self._closed_as = TxnState.ABORTED
            return aborted

    def status(self) -> TxnState:
        return self._store.info(self.id).state

    def info(self) -> TransactionInfo:
        return self._store.info(self.id)

    def ping(self) -> int:
        """Extend the lease by its length from now; returns the new expiry (ms)."""
        return self._store.ping(self.id)

    # ---- internals -------------------------------------------------------------------------------
    def _check_open(self, action: str) -> None:
        if self._closed_as is not None:
            raise TransactionClosed(f"cannot {action} transaction {self.id}: it is {self._closed_as.lower()}")

    def _directory(self, state: StreamState) -> str:
        return f"{state.storage_dir()}/txn/{self.id}"

    def _flush_locked(self) -> None:
        if self._in_doubt is not None:
            # staging is idempotent by file: staging the same files again settles an unknown outcome
            chunks, count = self._in_doubt
            self._stage_locked(chunks, count)
        if not self._payloads:
            return
        controller = self._store.controller
        state = controller.state(self.stream)
        payloads, keys = pa.array(self._payloads, type=pa.binary()), pa.array(self._keys, type=pa.string())
        chunks = write_chunks(controller, self._directory(state), Router(state.active_segments()), payloads, keys)
        self._stage_locked(chunks, len(self._payloads))

    def _stage_locked(self, chunks: list[PendingChunk], count: int) -> None:
        """Stage `chunks`, the files of the first `count` buffered events; the events leave the buffer
        only once staging is known to have landed."""
        self._in_doubt = None
        try:
            self._store.stage(self.id, chunks)
        except TransactionClosed:
            # the buffered events can never be staged now; remember a final state for later calls
            self._payloads, self._keys, self._pending_bytes = [], [], 0
            state_now = self._store.info(self.id).state
            self._closed_as = None if state_now == TxnState.OPEN else state_now
            raise
        except NotFound:
            raise  # the stream or transaction is gone: the events stay, the files were deleted
        except BaseException:
            self._in_doubt = (chunks, count)  # may have landed: the next flush stages the same files
            raise
        del self._payloads[:count], self._keys[:count]
        self._pending_bytes = sum(map(len, self._payloads)) + EVENT_HEADER_BYTES * len(self._payloads)

    def _reroute(self, row: Any, staged: Sequence[PendingChunk], active: set[int],
                 state: StreamState) -> tuple[list[PendingChunk], list[str]]:
        """Replace each chunk staged in a sealed segment, in place, by chunks routed with the current
        epoch's router: every key then lands in one current segment, in staging order."""
        if all(c.segment in active for c in staged):
            return list(staged), []
        controller = self._store.controller
        router = Router(state.active_segments())
        chunks: list[PendingChunk] = []
        replaced: list[str] = []
        for chunk in staged:
            if chunk.segment in active:
                chunks.append(chunk)
                continue
            table = controller.storage.read_chunk(ChunkRef(chunk.path, chunk.segment, 0, chunk.length,
                                                           chunk.event_count, 0, row.writer_id))
            chunks.extend(write_chunks(controller, self._directory(state), router,
                                       table["payload"].combine_chunks(), table["routing_key"].combine_chunks()))
            replaced.append(chunk.path)
        return chunks, replaced
