"""Event writers: batching by size and linger, routing by key, exactly-once batch commits.

A flush is one batch: a chunk file per segment with pending events, written first, then committed
in one metadata transaction together with the writer's batch sequence number. A batch whose
sequence is at or below the writer's last committed one is a duplicate and is dropped, so
retrying a commit whose acknowledgement was lost, or replaying the last unacknowledged batch
after a restart with the same writer id (`write_batch(..., sequence=n)`), never duplicates events.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..clock import Clock
from ..config import MAX_EVENT_SIZE
from ..errors import ConflictError, EventTooLarge, InvalidInput, TidekeepError
from ..faults import fault_point
from ..names import check_name
from ..store.chunks import build_chunk_table
from .controller import PendingChunk, SegmentsSealed, StreamController
from .model import Router, routing_key_position, segment_name

log = logging.getLogger("tidekeep.writer")

_COMMIT_RETRIES = 5


@dataclass
class _SegmentBuffer:
    payloads: list[bytes]
    keys: list[str | None]


class Writer:
    """Appends events to one stream. Use as a context manager, or call close()."""

    def __init__(self, controller: StreamController, stream: str, writer_id: str, batch_size: int,
                 linger_ms: int, clock: Clock) -> None:
        check_name(writer_id, "writer id")
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
        self._buffers: dict[int, _SegmentBuffer] = {}
        self._pending_bytes = 0
        self._pending_since: float | None = None
        self._lock = threading.RLock()
        self._closed = False
        self._background_error: BaseException | None = None
        self._stop = threading.Event()
        self._linger_thread: threading.Thread | None = None
        if linger_ms > 0:
            self._linger_thread = threading.Thread(target=self._linger_loop, name=f"tidekeep-linger-{writer_id}",
                                                   daemon=True)
            self._linger_thread.start()

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
            # the per-event hot path: a cached key costs one dict lookup (None is never cached)
            seg = self._key_segments.get(routing_key)  # type: ignore[arg-type]
            if seg is None:
                seg = self._segment_for(routing_key)
            buf = self._buffers.get(seg)
            if buf is None:
                buf = self._buffers[seg] = _SegmentBuffer([], [])
            buf.payloads.append(payload)
            buf.keys.append(routing_key)
            if self._pending_since is None:
                self._pending_since = time.monotonic()
            self._pending_bytes += len(payload) + 8
            if self._pending_bytes >= self._batch_size:
                self._flush_locked()

    def write_batch(self, events: Iterable[tuple[bytes, str | None]], sequence: int | None = None) -> bool:
        """Commit `events` as one batch now (after flushing anything pending). With an explicit
        `sequence`, a batch at or below `last_sequence` is recognised as already committed and
        skipped: returns False then, True when the events were appended."""
        items = [(_as_bytes(p), k) for p, k in events]
        for payload, key in items:
            if len(payload) > MAX_EVENT_SIZE:
                raise EventTooLarge(f"event of {len(payload)} bytes is above the {MAX_EVENT_SIZE}-byte limit")
            if key is not None and not isinstance(key, str):
                raise InvalidInput(f"routing key must be a string or None, got {type(key).__name__}")
        if sequence is not None and (not isinstance(sequence, int) or isinstance(sequence, bool) or sequence < 1):
            raise InvalidInput(f"invalid batch sequence {sequence!r}: must be an integer >= 1")
        with self._lock:
            self._check_usable()
            self._flush_locked()
            if sequence is not None and sequence <= self._last_sequence:
                return False
            buffers: dict[int, _SegmentBuffer] = {}
            for payload, key in items:
                buf = buffers.setdefault(self._segment_for(key), _SegmentBuffer([], []))
                buf.payloads.append(payload)
                buf.keys.append(key)
            return self._commit(buffers, sequence or self._last_sequence + 1)

    def flush(self) -> None:
        """Write and commit everything pending; returns once it is durable and visible."""
        with self._lock:
            self._check_usable()
            self._flush_locked()

    def close(self) -> None:
        if self._closed:
            return
        self._stop.set()
        if self._linger_thread is not None:
            self._linger_thread.join()
        with self._lock:
            try:
                if self._background_error is None:
                    self._flush_locked()
            finally:
                self._closed = True
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

    def _segment_for(self, routing_key: str | None) -> int:
        if routing_key is None:
            return self._router.segment_for(random.random())
        seg = self._key_segments.get(routing_key)
        if seg is None:
            if len(self._key_segments) > 100_000:
                self._key_segments.clear()
            seg = self._key_segments[routing_key] = self._router.segment_for(routing_key_position(routing_key))
        return seg

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
        if not self._buffers:
            return
        buffers = self._buffers
        self._buffers, self._pending_bytes, self._pending_since = {}, 0, None
        self._commit(buffers, self._last_sequence + 1)

    def _commit(self, buffers: dict[int, _SegmentBuffer], sequence: int) -> bool:
        """Write the batch's chunk files, then commit them with `sequence`; re-route after a scale."""
        while True:
            pending = self._write_files(buffers, sequence)
            fault_point("writer.before_commit")
            try:
                result = self._commit_with_retry(pending, sequence)
            except SegmentsSealed as sealed:
                self._controller.storage.delete(p.path for p in pending)
                state = self._controller.state(self.stream)
                if state.info.uid != self._uid:
                    raise
                if state.info.state != "ACTIVE":
                    raise
                log.info("writer %s: segments %s sealed by a scale, re-routing", self.writer_id,
                         [segment_name(s) for s in sealed.segments])
                self._router = Router(state.active_segments())
                self._key_segments.clear()  # cached segments belong to the old router
                buffers = self._reroute(buffers)
                continue
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

    def _delete_unreferenced(self, pending: Sequence[PendingChunk]) -> None:
        paths = [p.path for p in pending]
        try:
            referenced = self._controller.referenced_paths(paths)
        except Exception:  # the store is unreachable: leave the files to the sweep
            log.warning("writer %s: could not check %d chunk files; the sweep will remove orphans",
                        self.writer_id, len(paths))
            return
        self._controller.storage.delete(p for p in paths if p not in referenced)

    def _reroute(self, buffers: dict[int, _SegmentBuffer]) -> dict[int, _SegmentBuffer]:
        # each old buffer keeps its order, so each key's events stay in write order
        rerouted: dict[int, _SegmentBuffer] = {}
        for seg in sorted(buffers):
            buf = buffers[seg]
            for payload, key in zip(buf.payloads, buf.keys, strict=True):
                target = rerouted.setdefault(self._segment_for(key), _SegmentBuffer([], []))
                target.payloads.append(payload)
                target.keys.append(key)
        return rerouted

    def _write_files(self, buffers: dict[int, _SegmentBuffer], sequence: int) -> list[PendingChunk]:
        pending = []
        for seg, buf in sorted(buffers.items()):
            table, length = build_chunk_table(buf.payloads, buf.keys)
            path = f"{self._dir}/{segment_name(seg)}/{self.writer_id}-{sequence}-{uuid.uuid4().hex[:12]}.parquet"
            self._controller.storage.write_chunk(path, table)
            pending.append(PendingChunk(seg, path, length, table.num_rows))
        return pending

    def _commit_with_retry(self, pending: Sequence[PendingChunk], sequence: int):  # type: ignore[no-untyped-def]
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


def _as_bytes(payload: object) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, (bytearray, memoryview)):
        return bytes(payload)
    raise InvalidInput(f"event payload must be bytes, got {type(payload).__name__}")

