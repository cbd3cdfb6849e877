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
never holds watermarks back (Pravega's #7387); its last position still bounds the next watermark's
cut (watermark_store.close_writer).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..clock import Clock
from ..config import MAX_EVENT_SIZE
from ..errors import ConflictError, EventTooLarge, InvalidInput, TidekeepError
from ..faults import fault_point
from ..names import check_name
from ..store.chunks import build_chunk_table
from ..units import parse_duration_ms
from .controller import CommitResult, PendingChunk, SegmentsSealed, StreamController
from .model import EVENT_HEADER_BYTES, Router, routing_key_position, segment_name
from .watermark_store import WatermarkStore, check_time

log = logging.getLogger("tidekeep.writer")

_COMMIT_RETRIES = 5
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
        return int(self.note_time_interval)  # normalised to ms in __post_init__


@dataclass(frozen=True)
class _Batch:
    """Events of one batch in write order, as Arrow columns."""

    payloads: pa.Array
    keys: pa.Array


class Writer:
    """Appends events to one stream. Use as a context manager, or call close()."""

    def __init__(self, controller: StreamController, stream: str, writer_id: str, batch_size: int,
                 linger_ms: int, clock: Clock, config: WriterConfig | None = None) -> None:
        check_name(writer_id, "writer id")
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
        state, self._last_sequence = controller.last_sequence(stream, writer_id)
        self._uid = state.info.uid
        self._dir = state.storage_dir()
        self._router = Router(state.active_segments())
        self._key_segments: dict[str, int] = {}  # routing key -> segment of the current router
        self._payloads: list[bytes] = []
        self._keys: list[str | None] = []
        self._pending_bytes = 0
        self._pending_since: float | None = None
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

    def write(self, payload: bytes, routing_key: str | None = None) -> None:
        """Buffer one event. Events with the same routing key are read in the order written."""
        if type(payload) is not bytes:
            payload = _as_bytes(payload)
        if len(payload) > MAX_EVENT_SIZE:
            raise EventTooLarge(f"event of {len(payload)} bytes is above the {MAX_EVENT_SIZE}-byte limit")
        if routing_key is not None and type(routing_key) is not str:
            raise InvalidInput(f"routing key must be a string or None, got {type(routing_key).__name__}")
        with self._lock:
            if self._closed or self._background_error is not None:
                self._check_usable()
            self._payloads.append(payload)
            self._keys.append(routing_key)
            if self._pending_since is None:
                self._pending_since = time.monotonic()
            self._pending_bytes += len(payload) + EVENT_HEADER_BYTES
            if self._pending_bytes >= self._batch_size:
                self._flush_locked()

    def write_many(self, payloads: Sequence[bytes], routing_keys: Sequence[str | None] | None = None) -> int:
        """Append many events at once, in order — the bulk path: validated column-wise and
        committed in batches of about `batch_size` before returning. Same ordering and exactly-once
        guarantees as write() per event followed by flush(). Returns the number of events written."""
        batch = _Batch(_payload_array(payloads), _key_array(routing_keys, len(payloads)))
        with self._lock:
            self._check_usable()
            self._flush_locked()  # events written earlier come first
            ends = np.cumsum(pc.binary_length(batch.payloads).to_numpy(zero_copy_only=False) + EVENT_HEADER_BYTES)
            start = 0
            while start < len(ends):
                # this batch ends once its size reaches batch_size (it holds at least one event)
                limit = (ends[start - 1] if start else 0) + self._batch_size
                stop = min(len(ends), max(start + 1, int(np.searchsorted(ends, limit, side="left")) + 1))
                self._commit(_Batch(batch.payloads[start:stop], batch.keys[start:stop]), self._last_sequence + 1)
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
        if sequence is not None and (not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 1):
            raise InvalidInput(f"invalid batch sequence {sequence!r}: must be an integer >= 1")
        with self._lock:
            self._check_usable()
            self._flush_locked()
            if sequence is not None and sequence <= self._last_sequence:
                return False
            return self._commit(batch, sequence or self._last_sequence + 1)

    def flush(self) -> None:
        """Write and commit everything pending; returns once it is durable and visible."""
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
        """Flush, stop the background threads and leave watermark aggregation."""
        if self._closed:
            return
        self._stop.set()
        for thread in (self._linger_thread, self._note_thread):
            if thread is not None:
                thread.join()
        with self._lock:
            try:
                if self._background_error is None:
                    self._flush_locked()
            finally:
                self._closed = True
                self._leave_watermarks()
        if self._background_error is not None:
            raise self._background_error

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
        if self._background_error is not None:
            error, self._background_error = self._background_error, None
            raise error

    def _note_locked(self, time_ms: int, source: str) -> None:
        self._flush_locked()  # the mark's position covers every event written before the note
        self._marks.note(self.stream, self.writer_id, time_ms, source=source)
        self._noted = True

    def _leave_watermarks(self) -> None:
        if not self._noted:
            return
        try:
            self._marks.close_writer(self.stream, self.writer_id)
        except TidekeepError as exc:  # the stream is gone or the store unreachable: the timeout drops it
            log.warning("writer %s: could not leave watermark aggregation: %s", self.writer_id, exc)

    def _note_loop(self) -> None:
        interval_s = self.config.note_time_interval_ms / 1000
        last = None
        while not self._stop.wait(interval_s):
            with self._lock:
                if self._closed or self._background_error is not None:
                    return
                # a wall clock stepped back must not make the note fail: time never goes backwards
                now = self._clock.now_ms() if last is None else max(last, self._clock.now_ms())
                try:
                    self._note_locked(now, "auto")
                    last = now
                except ConflictError as exc:  # the store was busy: the next interval notes again
                    log.warning("writer %s: automatic note skipped: %s", self.writer_id, exc)
                except BaseException as exc:  # surfaced on the next call
                    self._background_error = exc
                    return

    def _linger_loop(self) -> None:
        while not self._stop.wait(max(self._linger_s / 2, 0.001)):
            since = self._pending_since
            if since is None or time.monotonic() - since < self._linger_s:
                continue
            with self._lock:
                if self._closed or self._background_error is not None:
                    return
                try:
                    self._flush_locked()
                except BaseException as exc:  # surfaced on the next call
                    self._background_error = exc
                    return

    def _flush_locked(self) -> None:
        if not self._payloads:
            return
        batch = _Batch(pa.array(self._payloads, type=pa.binary()), pa.array(self._keys, type=pa.string()))
        self._payloads, self._keys, self._pending_bytes, self._pending_since = [], [], 0, None
        self._commit(batch, self._last_sequence + 1)

    def _route(self, keys: pa.Array) -> np.ndarray:
        """The target segment of every event: one hash per distinct key, random for null keys."""
        targets = self._router.segments_for(np.random.random(len(keys)))
        if keys.null_count == len(keys):
            return targets
        encoded = keys.dictionary_encode()
        per_key = np.array([self._segment_for(k) for k in encoded.dictionary.to_pylist()], dtype=np.int64)
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

    def _commit(self, batch: _Batch, sequence: int) -> bool:
        """Write the batch's chunk files, then commit them with `sequence`; re-route after a scale."""
        while True:
            pending = self._write_files(batch, sequence)
            fault_point("writer.before_commit")
            try:
                result = self._commit_with_retry(pending, sequence)
            except SegmentsSealed as sealed:
                self._controller.storage.delete(p.path for p in pending)  # certainly not committed
                state = self._controller.state(self.stream)
                if state.info.uid != self._uid or state.info.state != "ACTIVE":
                    raise
                log.info("writer %s: segments %s sealed by a scale, re-routing", self.writer_id,
                         [segment_name(s) for s in sealed.segments])
                self._router = Router(state.active_segments())
                self._key_segments.clear()  # cached segments belong to the old router
                continue  # the batch is routed afresh, still in write order
            except BaseException:
                # the outcome is unknown (the commit may have landed before the error): only files
                # that are certainly unreferenced go now; anything else is left to the sweep
                self._delete_unreferenced(pending)
                raise
            fault_point("writer.after_commit")
            self._last_sequence = max(self._last_sequence, sequence)
            if result.duplicate:
                # a duplicate of a replay has its own files, but a duplicate of our own retry (the
                # first attempt landed, its acknowledgement was lost) is referenced by that commit
                self._delete_unreferenced(pending)
                return False
            return True

    def _write_files(self, batch: _Batch, sequence: int) -> list[PendingChunk]:
        targets = self._route(batch.keys)
        pending = []
        for seg in np.unique(targets).tolist():
            rows = pa.array(np.flatnonzero(targets == seg))  # ascending: write order within the segment
            table, length = build_chunk_table(batch.payloads.take(rows), batch.keys.take(rows))
            path = f"{self._dir}/{segment_name(seg)}/{self.writer_id}-{sequence}-{uuid.uuid4().hex[:12]}.parquet"
            self._controller.storage.write_chunk(path, table)
            pending.append(PendingChunk(seg, path, length, table.num_rows))
        return pending

    def _delete_unreferenced(self, pending: Sequence[PendingChunk]) -> None:
        paths = [p.path for p in pending]
        try:
            referenced = self._controller.referenced_paths(paths)
        except Exception:  # the store is unreachable: leave the files to the sweep
            log.warning("writer %s: could not check %d chunk files; the sweep will remove orphans",
                        self.writer_id, len(paths))
            return
        self._controller.storage.delete(p for p in paths if p not in referenced)

    def _commit_with_retry(self, pending: Sequence[PendingChunk], sequence: int) -> CommitResult:
        delay = 0.05
        for attempt in range(_COMMIT_RETRIES):
            try:
                return self._controller.commit_batch(self.stream, self._uid, self.writer_id, sequence, pending)
            except ConflictError:
                # the commit may or may not have landed; retrying with the same sequence is safe
                if attempt == _COMMIT_RETRIES - 1:
                    raise
                time.sleep(delay)
                delay *= 2
        raise AssertionError("unreachable")


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


def _as_bytes(payload: object) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    raise InvalidInput(f"event payload must be bytes, got {type(payload).__name__}")
