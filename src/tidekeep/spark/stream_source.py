"""The "tidekeep" streaming source: spark.readStream.format("tidekeep").

    spark.readStream.format("tidekeep").option("stream", "iot/sensors")
        .option("reader_group", "dashboards").option("start", "head" | "tail" | cut)
        .option("max_bytes_per_trigger", "1MB").load()

Offsets are stream cuts as self-describing JSON dicts (StreamCut.to_dict(), with key ranges).

- initialOffset: the `start` option; else the reader group's acknowledged cut if it has one; else
  the head.
- latestOffset(start, limit): towards the tail (or, under Trigger.AvailableNow, the tail when the
  query started), bounded by the byte limit, at event boundaries, and never into a successor
  segment in the batch that still reads its predecessors (offsets.py: per-key order across scaling).
- partitions(start, end): the controller's read plan between the cuts, grouped per segment as for
  batch reads (partitions.py); executors read chunk files into Arrow, stamping the watermark column.
- commit(end): with a reader group, `end` becomes the group's acknowledgement cut, so
  consumption-based retention follows the query. The start given to latestOffset is acknowledged
  too: Spark plans a batch only after the previous one reached the sink, and calls commit() for
  it only after planning the next, so this keeps the last batch of a run from staying unacknowledged.
  The group is a MANUAL_RELEASE_AT_USER_STREAMCUT
  subscriber of exactly this stream, created at the query's initial offset on first use. An end
  at or behind the current acknowledgement (a restart from an older Spark checkpoint) is skipped.
- A start before the stream's head (data truncated since the checkpoint) fails with TruncatedData,
  or with on_truncated=skip reads on from the head in the truncated segments (a warning is logged).

Planning runs in the driver's Python worker, which keeps the workspace open for the query (its
connection stays in that process); the reader is also pickled to executors, which use only `read`
(no metadata store access there).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxBytes,
    SupportsTriggerAvailableNow,
)

from ..errors import InvalidInput, NotFound, TruncatedData
from ..names import check_name
from ..streams.config import RetentionType
from ..streams.cuts import CutOrder, StreamCut
from ..streams.readergroup import ReaderGroup
from ..streams.repository import StreamState
from ..streams.subscriber_store import SubscriberStore
from ..streams.subscribers import upper_bound
from ..units import parse_size_bytes
from .offsets import cut_of, next_end, offset_of
from .options import COMMON_OPTIONS, STREAM_ONLY, TAIL, ReadOptions, parse_read_options
from .partitions import ChunkPartition, open_read_workspace, partitions_of, read_partition

if TYPE_CHECKING:
    from .driver_workspace import DriverWorkspace

log = logging.getLogger("tidekeep.spark")

MANUAL = RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT
FAIL, SKIP = "fail", "skip"


@dataclass(frozen=True)
class StreamOptions:
    read: ReadOptions  # stream, start, workspace, partition_size (`end` is refused for streams)
    reader_group: str | None
    max_bytes_per_trigger: int | None
    on_truncated: str
    start_given: bool = False  # without a start option, a reader group's acknowledgement is the start


def parse_stream_options(options: Mapping[str, str]) -> StreamOptions:
    """Check a streaming read's options without touching the workspace."""
    read = parse_read_options(options, COMMON_OPTIONS | STREAM_ONLY)
    lowered = {str(k).lower(): v for k, v in options.items()}
    group = lowered.get("reader_group") or None
    if group is not None:
        check_name(group, "reader group name")
    max_bytes = None
    raw = lowered.get("max_bytes_per_trigger")
    if raw is not None:
        try:
            max_bytes = parse_size_bytes(raw)
        except Exception as exc:  # the units parser's own message, under the option's name
            raise InvalidInput(f"invalid max_bytes_per_trigger {raw!r}: {exc}") from None
        if max_bytes <= 0:
            raise InvalidInput(f"invalid max_bytes_per_trigger {raw!r}: must be greater than zero")
    on_truncated = (lowered.get("on_truncated") or FAIL).strip().lower()
    if on_truncated not in (FAIL, SKIP):
        raise InvalidInput(f"invalid on_truncated {lowered['on_truncated']!r}: use 'fail' or 'skip'")
    start_given = bool((lowered.get("start") or "").strip())
    return StreamOptions(read, group, max_bytes, on_truncated, start_given)


def check_group(opened: DriverWorkspace, group: str, stream: str) -> bool:
    """True if the group exists (and fits: a MANUAL subscriber of exactly `stream`), False if absent."""
    from ..streams.rg_store import ReaderGroupStore

    try:
        config = ReaderGroupStore(opened.streams).load(group).config
    except NotFound:
        return False
    streams = sorted(config["streams"])
    if streams != [stream]:
        raise InvalidInput(f"reader group {group!r} reads {', '.join(streams)}, not only {stream!r}: a tidekeep "
                           "streaming query needs a group of its own stream")
    if config["retention_type"] != MANUAL:
        raise InvalidInput(f"reader group {group!r} has retention type {config['retention_type']}: a tidekeep "
                           f"streaming query acknowledges through a {MANUAL} group")
    return True


def check_stream_options(options: Mapping[str, str]) -> None:
    """The load()-time check: options, the stream, the start cut, the reader group."""
    parsed = parse_stream_options(options)
    opened = open_read_workspace(parsed.read)
    try:
        state = opened.streams.state(parsed.read.stream)
        if isinstance(parsed.read.start, StreamCut):
            opened.streams.to_positions(state, parsed.read.start)
        if parsed.reader_group is not None:
            check_group(opened, parsed.reader_group, parsed.read.stream)
    finally:
        opened.close()


def clamp_to_head(positions: dict[int, int], state: StreamState, on_truncated: str, what: str) -> dict[int, int]:
    """`positions` itself if at or after the head; else TruncatedData, or with on_truncated=skip the
    head in the truncated segments (the pointwise later of the two, per routing key)."""
    order = state.topology().compare(state.head, positions)
    if order in (CutOrder.BEFORE, CutOrder.EQUAL):
        return positions
    if on_truncated != SKIP:
        raise TruncatedData(f"cannot read {state.name} from {what} {state.shown(positions)}: data before the head "
                            f"{state.shown(state.head)} has been truncated (.option(\"on_truncated\", \"skip\") "
                            "reads on from the head)")
    log.warning("stream %s: %s %s lies before the head %s (truncated); reading on from the head", state.name,
                what, state.cut(positions), state.cut(state.head))
    return upper_bound([positions, state.head], state.segments)


def byte_budget(limit: ReadLimit) -> int | None:
    """The bytes one batch may read under Spark's limit (None: everything available)."""
    if isinstance(limit, ReadMaxBytes):
        return int(limit.max_bytes)
    if isinstance(limit, ReadAllAvailable):
        return None
    raise InvalidInput(f"the tidekeep source does not support the read limit {limit!r}")


class TidekeepStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring. Cheap to build (executors build it too): the workspace is opened on
    the first driver-side call."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = parse_stream_options(options)
        self.stream = self.options.read.stream
        self._opened: DriverWorkspace | None = None
        self._group_checked = False
        self._target: dict[int, int] | None = None  # the Trigger.AvailableNow bound

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_opened"] = None  # an open workspace (engine, pool) stays in the process that opened it
        return state

    @property
    def opened(self) -> DriverWorkspace:
        if self._opened is None:
            self._opened = open_read_workspace(self.options.read)
        return self._opened

    # ---- offsets -----------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        state = self.opened.streams.state(self.stream)
        start = self.options.read.start
        if isinstance(start, StreamCut):
            positions = self.opened.streams.to_positions(state, start)
        elif start == TAIL:
            positions = state.tail()
        elif self.options.start_given or self.options.reader_group is None:
            positions = dict(state.head)
        else:
            acknowledged = self._acknowledged()
            positions = dict(state.head) if acknowledged is None else clamp_to_head(
                acknowledged, state, self.options.on_truncated, "the acknowledged cut")
        self._ensure_group(state.cut(positions))
        return offset_of(state.cut(positions))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_bytes_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxBytes(self.options.max_bytes_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        # the data there is now: later appends wait for the next run of the query
        self._target = self.opened.streams.state(self.stream).tail()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        budget = byte_budget(limit)
        state = self.opened.streams.state(self.stream)
        start_cut = cut_of(start, self.stream)
        first = clamp_to_head(self.opened.streams.to_positions(state, start_cut), state,
                              self.options.on_truncated, "the batch start")
        # Spark asks for the next batch only once the previous one is committed to the sink, so its
        # end (this start) is consumed: acknowledge it now rather than when Spark calls commit() for
        # it, which it does only after planning yet another batch (never, at the end of an
        # availableNow run)
        self._acknowledge(start_cut, state)
        bound = self._target if self._target is not None else state.tail()
        if state.topology().compare(first, bound) in (CutOrder.AFTER, CutOrder.OVERLAPS):
            bound = upper_bound([first, bound], state.segments)  # a start past an old target: nothing more
        plan = self.opened.streams.plan_read(self.stream, state.cut(first), state.cut(bound))
        boundaries: dict[int, list[int]] = {}
        for task in plan.tasks:
            boundaries.setdefault(task.chunk.segment, []).append(task.end)
        end = next_end(first, bound, state.segments, boundaries, budget)
        return offset_of(state.cut(end))

    def reportLatestOffset(self) -> dict[str, Any] | None:
        state = self.opened.streams.state(self.stream)
        return offset_of(state.cut(state.tail()))

    # ---- reading -----------------------------------------------------------------------------
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        state = self.opened.streams.state(self.stream)
        first = clamp_to_head(self.opened.streams.to_positions(state, cut_of(start, self.stream)), state,
                              self.options.on_truncated, "the batch start")
        last = self.opened.streams.to_positions(state, cut_of(end, self.stream))
        if state.topology().compare(state.head, last) not in (CutOrder.BEFORE, CutOrder.EQUAL):
            last = upper_bound([last, state.head], state.segments)
        plan = self.opened.streams.plan_read(self.stream, state.cut(first), state.cut(last))
        return partitions_of(self.opened, plan, self.options.read.partition_size)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ChunkPartition):
            return iter(())
        return read_partition(partition)

    # ---- acknowledgement ---------------------------------------------------------------------
    def commit(self, end: dict[str, Any]) -> None:
        if self.options.reader_group is not None:
            self._acknowledge(cut_of(end, self.stream), self.opened.streams.state(self.stream))

    def _acknowledge(self, cut: StreamCut, state: StreamState) -> None:
        """Publish `cut` as the group's acknowledgement unless it is not after the current one."""
        group = self.options.reader_group
        if group is None:
            return
        self._ensure_group(cut)
        acknowledged = self._acknowledged()
        if acknowledged is not None:
            order = state.topology().compare(cut.positions, acknowledged)
            if order is not CutOrder.AFTER:
                if order is not CutOrder.EQUAL:
                    log.warning("reader group %s: %s is not after the acknowledgement %s (restart from an older "
                                "checkpoint?); kept the acknowledgement", group, cut, state.cut(acknowledged))
                return
        ReaderGroup(self.opened.streams, group).update_retention_stream_cut({self.stream: cut})

    def _acknowledged(self) -> dict[int, int] | None:
        for sub in SubscriberStore(self.opened.streams).list(self.stream):
            if sub.reader_group == self.options.reader_group:
                return None if sub.positions is None else dict(sub.positions)
        return None

    def _ensure_group(self, start: StreamCut) -> None:
        """Check the group fits the query, creating it at `start` if absent (once per reader)."""
        group = self.options.reader_group
        if group is None or self._group_checked:
            return
        if not check_group(self.opened, group, self.stream):
            from ..streams.readergroup import ReaderGroupConfig, RetentionType

            try:
                ReaderGroup.create(self.opened.streams, group, ReaderGroupConfig(
                    {self.stream: (start, None)}, retention_type=RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
                log.info("created reader group %s for the streaming query on %s at %s", group, self.stream, start)
            except Exception:
                if not check_group(self.opened, group, self.stream):  # another query created it meanwhile?
                    raise
        self._group_checked = True

    def stop(self) -> None:
        if self._opened is not None:
            self._opened.close()
            self._opened = None


__all__ = ["StreamOptions", "TidekeepStreamReader", "check_group", "check_stream_options", "parse_stream_options"]
