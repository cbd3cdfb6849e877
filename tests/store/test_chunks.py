"""Chunk files: zstd Parquet, verified on read (a missing or damaged file is named, never read as
wrong or missing data), and written before their metadata commit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tidekeep as tk
from helpers.procs import run_worker, worker_env
from helpers.storage import chunk_rows, referenced_paths, stored_files
from tidekeep.faults import FAULT_EXIT_CODE
from tidekeep.store.chunks import CHUNK_COLUMNS, CHUNK_SCHEMA

STREAM = "s/chunks"


def _fill(client: tk.Client, events: int = 60, segments: int = 2) -> list[bytes]:
    client.create_stream(STREAM, tk.StreamConfig(segments=segments))
    payloads = [f"event-{i:03d}".encode() for i in range(events)]
    with client.stream(STREAM).writer("w1", batch_size="256B") as writer:
        for i, payload in enumerate(payloads):
            writer.write(payload, routing_key=f"k{i % 7}")
    return payloads


def _full_path(client: tk.Client, rel: str) -> Path:
    return Path(client.workspace.storage.full_path(rel))


def test_every_committed_chunk_is_a_zstd_parquet_file(client: tk.Client) -> None:
    payloads = _fill(client)
    rows = chunk_rows(client, STREAM)
    assert len(rows) > 2
    total = 0
    for row in rows:
        parquet = pq.ParquetFile(_full_path(client, row.path))
        assert parquet.schema_arrow.equals(CHUNK_SCHEMA)
        assert parquet.metadata.num_rows == row.event_count
        total += row.event_count
        for group in range(parquet.metadata.num_row_groups):
            columns = parquet.metadata.row_group(group)
            assert {columns.column(i).compression for i in range(columns.num_columns)} == {"ZSTD"}
    assert total == len(payloads)
    assert sorted(e.payload for e in client.stream(STREAM).read()) == sorted(payloads)


def _victim(client: tk.Client) -> tuple[str, Path]:
    rows = chunk_rows(client, STREAM)
    row = rows[len(rows) // 2]
    return row.path, _full_path(client, row.path)


def test_missing_chunk_is_reported_by_name(client: tk.Client) -> None:
    _fill(client)
    rel, full = _victim(client)
    full.unlink()
    with pytest.raises(tk.ChunkMissing, match=r"chunk file .* is missing") as info:
        list(client.stream(STREAM).read())
    assert info.value.path == rel
    assert rel in str(info.value)
    with pytest.raises(tk.ChunkMissing):  # the columnar read path too
        list(client.stream(STREAM).read_batches())


def _garbage(full: Path) -> None:
    full.write_bytes(b"this is not a parquet file at all" * 10)


def _truncated(full: Path) -> None:
    data = full.read_bytes()
    full.write_bytes(data[: len(data) // 2])


def _one_row_short(full: Path) -> None:
    table = pq.read_table(full)
    pq.write_table(table.slice(0, table.num_rows - 1), full, compression="zstd")


def _payload_resized(full: Path) -> None:
    # the same number of rows, but the last payload longer: the chunk no longer spans its metadata length
    table = pq.read_table(full)
    payloads = table["payload"].to_pylist()
    payloads[-1] = payloads[-1] + b"!"
    table = table.set_column(2, CHUNK_SCHEMA.field("payload"), pa.array(payloads, pa.binary()))
    pq.write_table(table, full, compression="zstd")


@pytest.mark.parametrize("damage", [_garbage, _truncated, _one_row_short, _payload_resized],
                         ids=["garbage", "truncated", "wrong-row-count", "wrong-length"])
def test_corrupt_chunk_is_reported_by_name(client: tk.Client, damage) -> None:  # type: ignore[no-untyped-def]
    _fill(client)
    rel, full = _victim(client)
    damage(full)
    with pytest.raises(tk.CorruptChunk, match=r"chunk file .* is corrupt") as info:
        list(client.stream(STREAM).read())
    assert info.value.path == rel
    assert rel in str(info.value)
    assert "\n" not in str(info.value)
    with pytest.raises(tk.CorruptChunk):
        list(client.stream(STREAM).read_batches())


def test_undamaged_chunks_still_read_before_the_damaged_one(client: tk.Client) -> None:
    # an error stops the read at the damaged chunk; everything yielded before it is correct data
    payloads = _fill(client, segments=1)
    rows = chunk_rows(client, STREAM)
    _garbage(_full_path(client, rows[-1].path))
    got: list[bytes] = []
    with pytest.raises(tk.CorruptChunk):
        for event in client.stream(STREAM).read():
            got.append(event.payload)
    assert got == payloads[: len(got)]
    assert len(got) == sum(r.event_count for r in rows[:-1])


def test_chunk_file_is_written_before_its_metadata_commit(client: tk.Client, metadata_url: str,
                                                         tmp_path: Path) -> None:
    client.create_stream(STREAM, tk.StreamConfig(segments=2))
    env = worker_env(metadata_url, tmp_path / "data", tmp_path / "ws", fault="writer.before_commit")
    done = run_worker(["write-batches", "--stream", STREAM, "--writer", "w1", "--first-seq", "1",
                       "--per-batch", "20"], env)
    assert done.returncode == FAULT_EXIT_CODE, done.stderr
    files = stored_files(client)
    assert files  # the chunk files are on storage ...
    assert all(f.endswith(".parquet") and "/w1-1-" in f for f in files)
    assert referenced_paths(client) == set()  # ... and no chunk row references them
    assert list(client.stream(STREAM).read()) == []  # readers see nothing
    assert all(offset == 0 for offset in client.stream(STREAM).tail_cut().positions.values())
    with client.stream(STREAM).writer("w1") as writer:
        assert writer.last_sequence == 0


def test_chunk_columns_name_the_schema_in_order() -> None:
    """Reading a chunk orders the columns it asks for by CHUNK_COLUMNS, which must stay the schema's."""
    assert list(CHUNK_COLUMNS) == CHUNK_SCHEMA.names
