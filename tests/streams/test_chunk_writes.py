"""A batch split by segment and written as one chunk file per segment, the files in parallel
(streams/chunk_writes.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from tidekeep.store.chunks import ChunkStorage
from tidekeep.streams.chunk_writes import split_by_segment, write_segment_chunks

SEGMENTS = [7, 3, 1 << 32, 5]  # as a router lists them: any order, 64-bit ids


def _batch(targets: list[int]) -> tuple[np.ndarray, pa.Array, pa.Array]:
    payloads = pa.array([f"e{i}".encode() for i in range(len(targets))])
    keys = pa.array([f"k{t}" for t in targets])
    return np.array(targets, dtype=np.int64), payloads, keys


def test_split_keeps_write_order_within_each_segment_in_ascending_segment_order() -> None:
    targets = [5, 3, 5, 1 << 32, 3, 5, 3]
    array, payloads, keys = _batch(targets)
    parts = split_by_segment(array, SEGMENTS, payloads, keys)
    assert [seg for seg, _, _ in parts] == [3, 5, 1 << 32]
    assert {seg: p.to_pylist() for seg, p, _ in parts} == {
        3: [b"e1", b"e4", b"e6"], 5: [b"e0", b"e2", b"e5"], 1 << 32: [b"e3"]}
    assert all(k.to_pylist() == [f"k{seg}"] * len(k) for seg, _, k in parts)


def test_one_segment_is_the_batch_itself() -> None:
    targets, payloads, keys = _batch([7, 7, 7])
    [(seg, got_payloads, got_keys)] = split_by_segment(targets, SEGMENTS, payloads, keys)
    assert seg == 7 and got_payloads is payloads and got_keys is keys


def test_a_target_outside_the_segments_is_refused() -> None:
    with pytest.raises(ValueError, match="routed to segments outside"):
        split_by_segment(*_batch([3, 4])[:1], SEGMENTS, *_batch([3, 4])[1:])  # 4 is no segment


def test_a_failed_file_leaves_none_of_the_batch(tmp_path: Path) -> None:
    storage = ChunkStorage(str(tmp_path / "data"), create=True)
    (tmp_path / "data" / "seg-5").write_bytes(b"a file where the segment's directory goes")
    targets, payloads, keys = _batch([3, 5, 7, 3, 1 << 32])
    with pytest.raises(OSError):
        write_segment_chunks(storage, targets, SEGMENTS, payloads, keys, lambda seg: f"seg-{seg}/c.parquet")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["seg-3", "seg-4294967296", "seg-5", "seg-7"]
    assert not list((tmp_path / "data").glob("seg-*/c.parquet"))  # the files written were discarded

    written = write_segment_chunks(storage, targets, SEGMENTS, payloads, keys, lambda seg: f"ok-{seg}/c.parquet")
    assert [(c.segment, c.event_count) for c in written] == [(3, 2), (5, 1), (7, 1), (1 << 32, 1)]
    assert all(storage.exists(c.path) for c in written)
