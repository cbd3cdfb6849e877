"""Event writers: batching by size and linger, routing by key, exactly-once batch commits.

A flush is one batch: a chunk file per segment with pending events, written first, then committed
in one metadata transaction together with the writer's batch sequence number. A batch whose
sequence is at or below the writer's last committed one is a duplicate and is dropped, so
retrying a commit whose acknowledgement was lost, or replaying the last unacknowledged batch
after a restart with the same writer id (`write_batch(..., sequence=n)`), never duplicates events.

Events are kept in write order and routed column-wise when a batch is cut (one hash per distinct
key); grouping by segment keeps each segment's events in write order, so each routing key's
events are read in the order they were written.

Watermarks: `note_time(t)` flushes, then records (writer, t, the offsets after this writer's last
committed event) — see watermark_store.py. With `WriterConfig(automatically_note_time=True)` a
background thread notes the clock's time every `note_time_interval` (after flushing) and a manual
`note_time` is refused. `close()` takes the writer out of watermark aggregation, so a closed writer
never holds watermarks back (docs/watermarks.md); its last position still bounds the next watermark's
cut (watermark_store.close_writer).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..clock import Clock
from ..config import MAX_EVENT_SIZE
from ..errors import (
    ConflictError,
    EventTooLarge,
    InvalidInput,
    NotFound,
    StoreUnavailable,
    StreamSealed,
    TidekeepError,
    WriterFenced,
)
from ..faults import fault_point
from ..names import MAX_SEQUENCE, check_writer_id, chunk_file_name
from ..store.database import retry_store
from ..store.deletion import warn_files_left
from ..units import parse_duration_ms
from .chunk_writes import write_segment_chunks
from .controller import CommitResult, PendingChunk, SegmentsSealed, StreamController
from .model import EVENT_HEADER_BYTES, Router, routing_key_position, segment_name
from .repository import StreamStatus
from .watermark_store import WatermarkStore, check_time

log = logging.getLogger("tidekeep.writer")

_PAYLOAD_TYPES = {bytes, bytearray, memoryview}
_KEY_TYPES = {str, type(None)}


@dataclass(frozen=True)
class WriterConfig:
    """How a writer takes part in watermarks. `automatically_note_time` notes the clock's time (ms since
    the epoch) every `note_time_interval` (default 1 s) instead of the application calling note_time."""

    automatically_note_time: bool = False
    note_time_interval: int | str | timedelta = field(default=1_000)

    def __post_init__(self) -> None:
        if not isinstance(self.automatically_note_time, bool):
            raise InvalidInput(f"invalid automatically_note_time {self.automatically_note_time!r}: must be a bool")
        try:
            interval = parse_duration_ms(self.note_time_interval)
        except InvalidInput as exc:
            raise InvalidInput(f"invalid note_time_interval: {exc}") from None
        if interval <= 0:
            raise InvalidInput(f"invalid note_time_interval {self.note_time_interval!r}: must be greater than zero")
        object.__setattr__(self, "note_time_interval", interval)

    @property
    def note_time_interval_ms(self) -> int:
        return cast(int, self.note_time_interval)  # normalised to ms in __post_init__


@dataclass(frozen=True)
class _Batch:
    """Events of one batch in write order, as Arrow columns."""

    payloads: pa.Array
    keys: pa.Array


@dataclass(frozen=True)
class _InDoubt:
    """A batch whose commit failed with an unknown outcome (the store was lost, or stayed busy,
    around the commit). Its files stay until the next flush knows whether they landed."""

    batch: _Batch
    sequence: int
    buffered: int  # the batch is the first `buffered` events of the buffer (0: a write_batch call's own events)
    explicit: bool  # the caller chose the sequence (write_batch(..., sequence=n))
    chunks: list[PendingChunk]


# the commit certainly did not happen: nothing to resolve, the files are nobody's
_NOT_LANDED = (WriterFenced, StreamSealed, NotFound, InvalidInput)


class Writer:
    """Appends events to one stream. Use as a context manager, or call close().

    Opening a writer takes a new epoch of its writer id: an older writer with the same id is fenced
    (its next commit raises WriterFenced). Events stay in the writer until their commit is known to
    have landed: after any error, `unflushed()` lists them and the next `flush()` writes them
    exactly once (docs/streams.md "Failures and retries")."""

    def __init__(self, controller: StreamController, stream: str, writer_id: str, batch_size: int,
                 linger_ms: int, clock: Clock, config: WriterConfig | None = None) -> None:
        check_writer_id(writer_id)
        if config is not None and not isinstance(config, WriterConfig):
            raise InvalidInput(f"invalid writer config {config!r}: use WriterConfig(...)")
        self.config = config or WriterConfig()
        self._marks = WatermarkStore(controller)
        self._noted = False  # whether this writer recorded a mark (close then removes it)
        self._controller = controller
        self.stream = stream
        self.writer_id = writer_id
        self._batch_size = batch_size
        self._linger_s = linger_ms / 1000
        self._clock = clock
        state, self._epoch, self._last_sequence = controller.open_writer(stream, writer_id)
        self._uid = state.info.uid
        self._dir = state.storage_dir()
        self._router = Router(state.active_segments())
        self._key_segments: dict[str, int] = {}  # routing key -> segment of the current router
        # events not yet known to be in the stream, in write order
        self._payloads: list[bytes] = []
        self._keys: list[str | None] = []
        # write() appends through these: the lists are only ever changed in place, never replaced
        self._append_payload = self._payloads.append
        self._append_key = self._keys.append
        self._pending_bytes = 0
        self._pending_since: float | None = None
        self._in_doubt: _InDoubt | None = None
        self._fenced: WriterFenced | None = None
        self._lock = threading.Lock()  # never taken twice by one thread: no re-entrant lock needed
        self._closed = False
        self._background_error: BaseException | None = None
        self._stop = threading.Event()
        self._linger_thread: threading.Thread | None = None
        if linger_ms > 0:
            self._linger_thread = threading.Thread(target=self._linger_loop, name=f"tidekeep-linger-{writer_id}",
                                                   daemon=True)
            self._linger_thread.start()
        self._note_thread: threading.Thread | None = None
        if self.config.automatically_note_time:
            self._note_thread = threading.Thread(target=self._note_loop, name=f"tidekeep-note-time-{writer_id}",
                                                 daemon=True)
            self._note_thread.start()

    # ---- public --------------------------------------------------------------------------------
    @property
    def last_sequence(self) -> int:
        """The highest batch sequence committed by this writer id (0 before the first)."""
        return self._last_sequence

    @property
    def epoch(self) -> int:
        """This writer's epoch of its writer id: a writer opened later with the same id has a higher one."""
        return self._epoch

    def unflushed(self) -> list[tuple[bytes, str | None]]:
        """The events written to this writer that are not known to be in the stream, in write order:
        after an error (a lost store, a fenced writer) they are still here, nothing acknowledged is lost.
        A batch whose commit outcome is unknown is included (the next flush finds out)."""
        with self._lock:
            doubt = self._in_doubt
            own = [] if doubt is None or doubt.buffered else list(zip(
                doubt.batch.payloads.to_pylist(), doubt.batch.keys.to_pylist(), strict=True))
            return own + list(zip(self._payloads, self._keys, strict=True))

    def write(self, payload: bytes, routing_key: str | None = None) -> None:
        """Buffer one event. Events with the same routing key are read in the order written."""
        # the per-event path: one test for the common case (bytes, a str or no key, within the limit);
        # anything else goes through the full checks, which convert or raise the typed error
        if type(payload) is not bytes or len(payload) > MAX_EVENT_SIZE or (
                routing_key is not None and type(routing_key) is not str):
            payload = _checked_event(payload, routing_key)
        with self._lock:
            if self._closed or self._fenced is not None or self._background_error is not None:
                self._check_usable()
            self._append_payload(payload)
            self._append_key(routing_key)
            if self._pending_since is None:
                self._pending_since = time.monotonic()
            self._pending_bytes += len(payload) + EVENT_HEADER_BYTES
            if self._pending_bytes >= self._batch_size:
                self._flush_locked()

    def write_many(self, payloads: Sequence[bytes], routing_keys: Sequence[str | None] | None = None) -> int:
        """Append many events at once, in order — the bulk path: validated column-wise and
        committed in batches of about `batch_size` before returning. Same ordering and exactly-once
        guarantees as write() per event followed by flush(): if a batch fails, it and the events after
        it stay in the writer (`unflushed()`) for the next flush. Returns the number of events written."""
        return self._write_arrays(_Batch(_payload_array(payloads), _key_array(routing_keys, len(payloads))))

    def write_arrow(self, payloads: pa.Array | pa.ChunkedArray,
                    routing_keys: pa.Array | pa.ChunkedArray | None = None) -> int:
        """write_many for events already in Arrow: `payloads` a binary (or large_binary) array
        without nulls, `routing_keys` a string (or large_string, or dictionary of strings) array of
        the same length, nulls for events without a key, or None. The arrays go to the chunk files
        as they are: no Python object is made per event. Bad input (another type, a null payload,
        an event above the size limit, lengths that differ) raises InvalidInput or EventTooLarge
        before anything is written. Returns the number of events written."""
        return self._write_arrays(_arrow_batch(payloads, routing_keys))

    def _write_arrays(self, batch: _Batch) -> int:
        with self._lock:
            self._check_usable()
            self._flush_locked()  # events written earlier come first
            ends = np.cumsum(pc.binary_length(batch.payloads).to_numpy(zero_copy_only=False) + EVENT_HEADER_BYTES)
            start = 0
            while start < len(ends):
                # this batch ends once its size reaches batch_size (it holds at least one event)
                limit = (ends[start - 1] if start else 0) + self._batch_size
                stop = min(len(ends), max(start + 1, int(np.searchsorted(ends, limit, side="left")) + 1))
                try:
                    self._commit(_Batch(batch.payloads[start:stop], batch.keys[start:stop]),
                                 self._last_sequence + 1, buffered=0)
                except BaseException:
                    # what is not in the stream stays in the writer, in order: this batch, unless its
                    # outcome is in doubt (then the next flush resolves it first), and the rest
                    kept = stop if self._in_doubt is not None else start
                    self._buffer_arrays(batch.payloads[kept:], batch.keys[kept:])
                    raise
                start = stop
        return len(ends)

    def write_batch(self, events: Iterable[tuple[bytes, str | None]], sequence: int | None = None) -> bool:
        """Commit `events` as one batch now (after flushing anything pending). With an explicit
        `sequence`, a batch at or below `last_sequence` is recognised as already committed and
        skipped: returns False then, True when the events were appended."""
        items = list(events)
        if not all(isinstance(item, tuple) and len(item) == 2 for item in items):
            raise InvalidInput("write_batch takes (payload, routing_key) pairs")
        batch = _Batch(_payload_array([p for p, _ in items]), _key_array([k for _, k in items], len(items)))
        if sequence is not None and (not isinstance(sequence, int) or isinstance(sequence, bool)
                                     or not 1 <= sequence <= MAX_SEQUENCE):
            raise InvalidInput(f"invalid batch sequence {sequence!r}: must be an integer from 1 to {MAX_SEQUENCE}")
        with self._lock:
            self._check_usable()
            self._flush_locked()
            if sequence is None:
                self._buffer_arrays(batch.payloads, batch.keys)
                return self._commit(batch, self._last_sequence + 1, buffered=len(self._payloads))
            if sequence <= self._last_sequence:
                return False
            return self._commit(batch, sequence, buffered=0, explicit=True)

    def flush(self) -> None:
        """Write and commit everything pending; returns once it is durable and visible. On an error
        the events stay in the writer and the next flush writes them exactly once."""
        with self._lock:
            self._check_usable()
            self._flush_locked()

    def note_time(self, time_ms: int) -> None:
        """Flush, then record that this writer has reached `time_ms` (ms; application-defined, never
        below the previous note) at the end of its committed events. Readers see it in their time
        window once the controller folds it into a watermark."""
        if self.config.automatically_note_time:
            raise InvalidInput(f"writer {self.writer_id} notes time automatically: note_time is not allowed")
        check_time(time_ms)
        with self._lock:
            self._check_usable()
            self._note_locked(time_ms, "note")

    def close(self) -> None:
        """Flush, stop the background threads and leave watermark aggregation. If the final flush
        fails with the store lost or busy, the writer stays open with its events (`unflushed()`):
        call close() or flush() again. If the events can never be written (the writer was fenced, the
        stream sealed or deleted) it closes and raises, leaving them in `unflushed()`."""
        if self._closed:
            return
        self._stop.set()
        for thread in (self._linger_thread, self._note_thread):
            if thread is not None:
                thread.join()
        with self._lock:
            try:
                self._check_usable()
                self._flush_locked()
            except WriterFenced:
                self._closed = True  # a newer writer owns the id (and its watermark mark) now
                raise
            except (StreamSealed, NotFound):
                self._closed = True
                self._leave_watermarks()
                raise
            self._closed = True
            self._leave_watermarks()

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:  # type: ignore[no-untyped-def]
        if exc_type is None:
            self.close()
        else:  # do not mask the original exception with a flush error
            try:
                self.close()
            except TidekeepError:
                log.warning("writer %s: pending events not flushed after an error", self.writer_id)

    # ---- internals -------------------------------------------------------------------------------
    def _check_usable(self) -> None:
        if self._closed:
            raise InvalidInput(f"writer {self.writer_id} is closed")
        if self._fenced is not None:
            raise self._fenced
        if self._background_error is not None:
            error, self._background_error = self._background_error, None
            raise error

    def _buffer_arrays(self, payloads: pa.Array, keys: pa.Array, front: bool = False) -> None:
        if len(payloads):
            if front:
                self._payloads[:0], self._keys[:0] = payloads.to_pylist(), keys.to_pylist()
            else:
                self._payloads.extend(payloads.to_pylist())
                self._keys.extend(keys.to_pylist())
            self._pending_bytes += int(pc.sum(pc.binary_length(payloads)).as_py()) + EVENT_HEADER_BYTES * len(payloads)
            if self._pending_since is None:
                self._pending_since = time.monotonic()

    def _note_locked(self, time_ms: int, source: str) -> None:
        self._flush_locked()  # the mark's position covers every event written before the note
        self._marks.note(self.stream, self.writer_id, time_ms, source=source, epoch=self._epoch)
        self._noted = True

    def _leave_watermarks(self) -> None:
        if not self._noted:
            return
        try:
            self._marks.close_writer(self.stream, self.writer_id, epoch=self._epoch)
        except TidekeepError as exc:  # the stream is gone, the store unreachable or the id taken over
            log.warning("writer %s: could not leave watermark aggregation: %s", self.writer_id, exc)

    def _note_loop(self) -> None:
        interval_s = self.config.note_time_interval_ms / 1000
        last = None
        while not self._stop.wait(interval_s):
            with self._lock:
                if self._closed or self._background_error is not None or self._fenced is not None:
                    return
                # a wall clock stepped back must not make the note fail: time never goes backwards
                now = self._clock.now_ms() if last is None else max(last, self._clock.now_ms())
                try:
                    self._note_locked(now, "auto")
                    last = now
                except (ConflictError, StoreUnavailable) as exc:  # the events stay: the next interval tries again
                    log.warning("writer %s: automatic note skipped: %s", self.writer_id, exc)
                except WriterFenced:
                    return  # raised again by the next call
                except BaseException as exc:  # surfaced on the next call
                    self._background_error = exc
                    return

    def _linger_loop(self) -> None:
        while not self._stop.wait(max(self._linger_s / 2, 0.001)):
            since = self._pending_since
            if since is None or time.monotonic() - since < self._linger_s:
                continue
            with self._lock:
                if self._closed or self._background_error is not None or self._fenced is not None:
                    return
                try:
                    self._flush_locked()
                except (ConflictError, StoreUnavailable) as exc:  # the events stay: the next linger tries again
                    log.warning("writer %s: background flush failed, retrying: %s", self.writer_id, exc)
                    self._pending_since = time.monotonic()
                except WriterFenced:
                    return  # raised again by the next call
                except BaseException as exc:  # surfaced on the next call
                    self._background_error = exc
                    return

    def _flush_locked(self) -> None:
        if self._in_doubt is not None:
            # find out whether that batch landed before any new sequence is taken: never guess
            doubt, self._in_doubt = self._in_doubt, None
            try:
                self._commit(doubt.batch, doubt.sequence, doubt.buffered, doubt.explicit, doubt.chunks)
            except BaseException:
                if self._in_doubt is None and not doubt.buffered and not doubt.explicit:
                    # certainly not in the stream: a bulk batch's events rejoin the buffer, ahead of
                    # everything written after them (an explicit batch belongs to its caller's replay)
                    self._buffer_arrays(doubt.batch.payloads, doubt.batch.keys, front=True)
                raise
        if not self._payloads:
            return
        batch = _Batch(pa.array(self._payloads, type=pa.binary()), pa.array(self._keys, type=pa.string()))
        self._commit(batch, self._last_sequence + 1, buffered=len(self._payloads))

    def _route(self, keys: pa.Array) -> np.ndarray:
        """The target segment of every event: one hash per distinct key, random for null keys."""
        if keys.null_count == len(keys):
            return self._router.segments_for(np.random.random(len(keys)))
        encoded = keys.dictionary_encode()
        per_key = np.array([self._segment_for(k) for k in encoded.dictionary.to_pylist()], dtype=np.int64)
        if not keys.null_count:
            return per_key[encoded.indices.to_numpy()]
        targets = self._router.segments_for(np.random.random(len(keys)))
        has_key = keys.is_valid().to_numpy(zero_copy_only=False)
        indices = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
        targets[has_key] = per_key[indices[has_key]]
        return targets

    def _segment_for(self, routing_key: str) -> int:
        seg = self._key_segments.get(routing_key)
        if seg is None:
            if len(self._key_segments) > 100_000:
                self._key_segments.clear()
            seg = self._key_segments[routing_key] = self._router.segment_for(routing_key_position(routing_key))
        return seg

    def _commit(self, batch: _Batch, sequence: int, buffered: int, explicit: bool = False,
                pending: list[PendingChunk] | None = None) -> bool:
        """Commit the batch with `sequence` (writing its chunk files first unless `pending` already
        holds them); re-route after a scale. Once it is known to have landed, the first `buffered`
        events leave the buffer. Returns whether this batch's events were appended by this writer."""
        if sequence > MAX_SEQUENCE:  # the store keeps sequences as 64-bit integers; nothing is written
            raise InvalidInput(f"writer {self.writer_id!r} has used every batch sequence up to {MAX_SEQUENCE}: "
                               "write with another writer id")
        if pending is None:
            pending = self._write_files(batch, sequence)
        while True:
            fault_point("writer.before_commit")
            try:
                result = self._commit_with_retry(pending, sequence)
            except SegmentsSealed as sealed:
                self._discard(pending)  # certainly not committed
                state = self._controller.state(self.stream)
                if state.info.uid != self._uid or state.info.state is not StreamStatus.ACTIVE:
                    raise
                log.info("writer %s: segments %s sealed by a scale, re-routing", self.writer_id,
                         [segment_name(s) for s in sealed.segments])
                self._router = Router(state.active_segments())
                self._key_segments.clear()  # cached segments belong to the old router
                pending = self._write_files(batch, sequence)  # the batch is routed afresh, still in write order
                continue
            except _NOT_LANDED as exc:
                self._discard(pending)
                if isinstance(exc, WriterFenced):
                    self._fenced = exc
                raise
            except BaseException:
                # the outcome is unknown (the commit may have landed before the error): keep the events
                # and the files; the next flush retries this very batch, which tells (docs/streams.md)
                self._in_doubt = _InDoubt(batch, sequence, buffered, explicit, pending)
                raise
            break
        fault_point("writer.after_commit")
        if result.duplicate and not result.landed_before:
            # the sequence was committed, but not with these files
            self._discard(pending)
            if not explicit:
                # another writer committed under this id without an epoch (a transaction commit with a
                # batch sequence): dropping this batch as its duplicate would lose acknowledged events
                self._fenced = WriterFenced(
                    f"writer {self.writer_id} on {self.stream}: batch sequence {sequence} was committed by "
                    "another writer using the same id; its unflushed events were not written")
                raise self._fenced
            self._last_sequence = max(self._last_sequence, sequence)
            return False  # a replay of a batch this writer id committed before
        self._last_sequence = max(self._last_sequence, sequence)
        self._drop_buffered(buffered)
        return True

    def _drop_buffered(self, count: int) -> None:
        """The first `count` buffered events are in the stream now."""
        if not count:
            return
        if count >= len(self._payloads):
            self._payloads.clear()
            self._keys.clear()
            self._pending_bytes, self._pending_since = 0, None
            return
        del self._payloads[:count], self._keys[:count]
        self._pending_bytes = sum(map(len, self._payloads)) + EVENT_HEADER_BYTES * len(self._payloads)

    def _write_files(self, batch: _Batch, sequence: int) -> list[PendingChunk]:
        name = chunk_file_name(self.writer_id, sequence)
        return write_segment_chunks(self._controller.storage, self._route(batch.keys), self._router.segment_ids,
                                    batch.payloads, batch.keys, lambda seg: f"{self._dir}/{segment_name(seg)}/{name}")

    def _discard(self, pending: Sequence[PendingChunk]) -> None:
        """Delete this writer's own uncommitted chunk files; what cannot go is logged, for the sweep."""
        left = self._controller.storage.discard(p.path for p in pending).failed
        warn_files_left(log, f"writer {self.writer_id}: uncommitted chunk files", left, in_result=False)

    def _commit_with_retry(self, pending: Sequence[PendingChunk], sequence: int) -> CommitResult:
        """Commit, retrying a busy or lost store with the same sequence and files: a retry of a commit
        that did land is recognised by its files (`landed_before`), so retrying never duplicates."""
        return retry_store(lambda: self._controller.commit_batch(self.stream, self._uid, self.writer_id, sequence,
                                                                 pending, epoch=self._epoch),
                           f"writer {self.writer_id}: commit of batch {sequence}")


def _payload_array(payloads: Sequence[bytes]) -> pa.Array:
    if isinstance(payloads, (bytes, str)) or not isinstance(payloads, Sequence):
        raise InvalidInput("write_many takes a sequence of bytes payloads")
    # one C-level pass over the types: Arrow alone would quietly encode str payloads as UTF-8
    if not set(map(type, payloads)) <= _PAYLOAD_TYPES:
        bad = next(p for p in payloads if type(p) not in _PAYLOAD_TYPES)
        raise InvalidInput(f"event payload must be bytes, got {type(bad).__name__}")
    array = pa.array(payloads, type=pa.binary())
    if len(array):
        largest = pc.max(pc.binary_length(array)).as_py()
        if largest > MAX_EVENT_SIZE:
            raise EventTooLarge(f"event of {largest} bytes is above the {MAX_EVENT_SIZE}-byte limit")
    return array


def _arrow_batch(payloads: object, routing_keys: object) -> _Batch:
    """write_arrow's input checked and as one binary and one string array (ChunkedArrays combined)."""
    payload_array = _one_arrow_array(payloads, "payloads")
    if not (pa.types.is_binary(payload_array.type) or pa.types.is_large_binary(payload_array.type)):
        raise InvalidInput(f"write_arrow payloads must be a binary Arrow array, got {payload_array.type}")
    if payload_array.null_count:
        raise InvalidInput(f"write_arrow payloads hold {payload_array.null_count} nulls: every event needs a payload")
    if len(payload_array):
        largest = pc.max(pc.binary_length(payload_array)).as_py()
        if largest > MAX_EVENT_SIZE:
            raise EventTooLarge(f"event of {largest} bytes is above the {MAX_EVENT_SIZE}-byte limit")
    payload_array = _cast(payload_array, pa.binary(), "payloads")
    if routing_keys is None:
        return _Batch(payload_array, pa.nulls(len(payload_array), pa.string()))
    key_array = _one_arrow_array(routing_keys, "routing_keys")
    key_type = key_array.type.value_type if pa.types.is_dictionary(key_array.type) else key_array.type
    if not (pa.types.is_string(key_type) or pa.types.is_large_string(key_type)):
        raise InvalidInput(f"write_arrow routing_keys must be a string Arrow array, got {key_array.type}")
    if len(key_array) != len(payload_array):
        raise InvalidInput(f"got {len(payload_array)} payloads but {len(key_array)} routing keys")
    return _Batch(payload_array, _cast(key_array, pa.string(), "routing_keys"))


def _one_arrow_array(values: object, what: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return _combined(values, what)
    if not isinstance(values, pa.Array):
        raise InvalidInput(f"write_arrow {what} must be a pyarrow Array or ChunkedArray, got {type(values).__name__}")
    return values


def _combined(values: pa.ChunkedArray, what: str) -> pa.Array:
    if values.num_chunks == 1:
        return values.chunk(0)
    try:
        return values.combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowCapacityError) as exc:  # above 2 GiB in one binary array
        raise InvalidInput(f"write_arrow {what} too large for one call ({exc}): write them in parts") from None


def _cast(values: pa.Array, target: pa.DataType, what: str) -> pa.Array:
    if values.type == target:
        return values
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowCapacityError) as exc:  # large_binary above 2 GiB
        raise InvalidInput(f"write_arrow {what} too large for one call ({exc}): write them in parts") from None


def _key_array(routing_keys: Sequence[str | None] | None, count: int) -> pa.Array:
    if routing_keys is None:
        return pa.nulls(count, pa.string())
    if isinstance(routing_keys, (bytes, str)) or not isinstance(routing_keys, Sequence):
        raise InvalidInput("routing_keys must be a sequence of strings or None")
    if len(routing_keys) != count:
        raise InvalidInput(f"got {count} payloads but {len(routing_keys)} routing keys")
    if not set(map(type, routing_keys)) <= _KEY_TYPES:
        bad = next(k for k in routing_keys if type(k) not in _KEY_TYPES)
        raise InvalidInput(f"routing key must be a string or None, got {type(bad).__name__}")
    return pa.array(routing_keys, type=pa.string())


def _checked_event(payload: object, routing_key: object) -> bytes:
    """write()'s checks in full: the payload as bytes, or the typed error."""
    if isinstance(payload, (bytearray, memoryview)) or (isinstance(payload, bytes) and type(payload) is not bytes):
        payload = bytes(payload)
    elif not isinstance(payload, bytes):
        raise InvalidInput(f"event payload must be bytes, got {type(payload).__name__}")
    if len(payload) > MAX_EVENT_SIZE:
        raise EventTooLarge(f"event of {len(payload)} bytes is above the {MAX_EVENT_SIZE}-byte limit")
    if routing_key is not None and type(routing_key) is not str:
        raise InvalidInput(f"routing key must be a string or None, got {type(routing_key).__name__}")
    return payload
