"""Turning the lines of a log file into messages, block by block, vectorised with pyarrow (pure:
no store, storage or Spark).

Rules:
- A line whose start holds a timestamp (timestamps.py) begins a message; every following line
  without one is attached to it (joined with "\\n"), so a Java stack trace stays with the line
  that logged it. Blank lines inside a message are kept; trailing newlines of a message are not.
- Lines before the first timestamp of a file have nothing to attach to: each is a message of its
  own without a timestamp (one message per line, like grep sees them). Empty lines there are
  dropped. A file without any timestamp is therefore one message per non-empty line.
- Lines end with "\\n" or "\\r\\n" (the "\\r" is dropped); the last line may lack its terminator.
- Bytes that are not UTF-8 are replaced with U+FFFD; a block boundary never splits a character
  because blocks are cut after their last "\\n".
- `raw_bytes` of a message is the UTF-8 size of its lines with their terminators, as decoded.

The open message at the end of a block is carried into the next block, so reading a file in
blocks gives exactly the messages reading it in one piece would.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .timestamps import TimestampRules, parse_timestamps

BLOCK_BYTES = 8 << 20

MESSAGE_SCHEMA = pa.schema([
    pa.field("timestamp", pa.int64()),
    pa.field("message", pa.string(), nullable=False),
    pa.field("raw_bytes", pa.int64(), nullable=False),
    pa.field("seq", pa.int64(), nullable=False),  # the message's position in its file
])


def _lines_of(text: str) -> tuple[pa.Array, np.ndarray]:
    """The lines of text that ends with "\\n" (without terminators) and their raw sizes."""
    pieces = pc.list_flatten(pc.split_pattern(pa.array([text[:-1]], type=pa.large_string()), "\n"))
    pieces = pieces.cast(pa.string()) if len(text) < (1 << 30) else pieces
    sizes = np.asarray(pc.binary_length(pieces).to_numpy(zero_copy_only=False), dtype=np.int64) + 1
    ends_cr = pc.ends_with(pieces, "\r")
    if pc.any(ends_cr).as_py():
        pieces = pc.replace_substring_regex(pieces, "\r$", "")
    return pieces, sizes


def _join(lines: pa.Array, starts: np.ndarray, end: int) -> pa.Array:
    """Lines[starts[k]:starts[k+1]] joined with "\\n", one string per start (zero-copy offsets)."""
    offsets = pa.array(np.append(starts, end).astype(np.int32), type=pa.int32())
    grouped = pa.ListArray.from_arrays(offsets, lines)
    return pc.utf8_rtrim(pc.binary_join(grouped, "\n"), characters="\n")


class MessageAssembler:
    """Feed it blocks of a file's bytes; it yields record batches (MESSAGE_SCHEMA) of complete
    messages in file order."""

    def __init__(self, rules: TimestampRules) -> None:
        self.rules = rules
        self.partial = b""  # bytes after the last newline seen
        self.pending: list[bytes] = []  # blocks without a newline, after `partial`
        self.seen_timestamp = False
        self.open_parts: list[pa.Array] = []  # lines of the message still open (first one timestamped)
        self.open_ts: int | None = None
        self.open_raw = 0
        self.seq = 0

    def feed(self, block: bytes) -> pa.RecordBatch | None:
        if b"\n" not in block:
            # no line ends here: keep the pieces and join them once (a huge line costs linear time)
            self.pending.append(block)
            return None
        if self.pending:
            block = b"".join([*self.pending, block])
            self.pending = []
        data = self.partial + block if self.partial else block
        cut = data.rfind(b"\n")
        self.partial = data[cut + 1:]
        return self._lines(data[:cut + 1].decode("utf-8", "replace"))

    def finish(self) -> pa.RecordBatch | None:
        """The messages still held: the last line without a terminator and the open message."""
        batches = []
        if self.pending:
            self.partial = b"".join([self.partial, *self.pending])
            self.pending = []
        if self.partial:
            text = self.partial.decode("utf-8", "replace")
            self.partial = b""
            batch = self._lines(text + "\n", last_unterminated=True)
            if batch is not None:
                batches.append(batch)
        closed = self._close_open()
        if closed is not None:
            batches.append(closed)
        if not batches:
            return None
        return pa.Table.from_batches(batches, MESSAGE_SCHEMA).combine_chunks().to_batches()[0]

    def _close_open(self) -> pa.RecordBatch | None:
        if not self.open_parts:
            return None
        lines = pa.concat_arrays(self.open_parts)
        message = pc.utf8_rtrim(pc.binary_join(pa.array([lines.to_pylist()], type=pa.list_(pa.string())), "\n"),
                                characters="\n")
        batch = pa.RecordBatch.from_arrays(
            [pa.array([self.open_ts], pa.int64()), message, pa.array([self.open_raw], pa.int64()),
             pa.array([self.seq], pa.int64())], schema=MESSAGE_SCHEMA)
        self.seq += 1
        self.open_parts, self.open_ts, self.open_raw = [], None, 0
        return batch

    def _lines(self, text: str, last_unterminated: bool = False) -> pa.RecordBatch | None:
        lines, sizes = _lines_of(text)
        if last_unterminated:
            sizes[-1] -= 1
        n = len(lines)
        timestamps = parse_timestamps(lines, self.rules)
        starts = np.flatnonzero(np.asarray(timestamps.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
        first = int(starts[0]) if len(starts) else n
        out: list[pa.RecordBatch] = []
        if not self.seen_timestamp:
            # lines before the file's first timestamp: one message each, without a timestamp
            lead = lines.slice(0, first)
            keep = np.flatnonzero(np.asarray(pc.not_equal(lead, "").to_numpy(zero_copy_only=False), dtype=bool))
            if len(keep):
                count = len(keep)
                out.append(pa.RecordBatch.from_arrays(
                    [pa.nulls(count, pa.int64()), pc.take(lead, pa.array(keep)), pa.array(sizes[keep]),
                     pa.array(np.arange(self.seq, self.seq + count, dtype=np.int64))], schema=MESSAGE_SCHEMA))
                self.seq += count
        elif first:
            # continuation lines of the message left open by the previous block
            self.open_parts.append(lines.slice(0, first))
            self.open_raw += int(sizes[:first].sum())
        if len(starts):
            self.seen_timestamp = True
            closed = self._close_open()
            if closed is not None:
                out.append(closed)
            complete = starts[:-1]
            if len(complete):
                count = len(complete)
                bounds = np.append(starts, n)
                cumulative = np.concatenate([[0], np.cumsum(sizes)])
                raw = cumulative[bounds[1:count + 1]] - cumulative[bounds[:count]]
                out.append(pa.RecordBatch.from_arrays(
                    [pc.take(timestamps, pa.array(complete)), _join(lines, starts, n).slice(0, count),
                     pa.array(raw, type=pa.int64()),
                     pa.array(np.arange(self.seq, self.seq + count, dtype=np.int64))], schema=MESSAGE_SCHEMA))
                self.seq += count
            last = int(starts[-1])
            self.open_parts = [lines.slice(last)]
            self.open_ts = timestamps[last].as_py()
            self.open_raw = int(sizes[last:].sum())
        if not out:
            return None
        if len(out) == 1:
            return out[0]
        return pa.Table.from_batches(out, MESSAGE_SCHEMA).combine_chunks().to_batches()[0]


def read_messages(stream: BinaryIO, rules: TimestampRules, block_bytes: int = BLOCK_BYTES) -> Iterator[pa.RecordBatch]:
    """Messages of a binary stream, in file order, in record batches of about a block each."""
    assembler = MessageAssembler(rules)
    while True:
        block = stream.read(block_bytes)
        if not block:
            break
        batch = assembler.feed(block)
        if batch is not None and batch.num_rows:
            yield batch
    batch = assembler.finish()
    if batch is not None and batch.num_rows:
        yield batch


def messages_of(blocks: Iterable[bytes], rules: TimestampRules) -> pa.Table:
    """All messages of a sequence of blocks, as one table (for tests and small inputs)."""
    assembler = MessageAssembler(rules)
    batches = [b for b in (assembler.feed(block) for block in blocks) if b is not None]
    tail = assembler.finish()
    if tail is not None:
        batches.append(tail)
    return pa.Table.from_batches(batches, MESSAGE_SCHEMA)


__all__ = ["BLOCK_BYTES", "MESSAGE_SCHEMA", "MessageAssembler", "messages_of", "read_messages"]
