"""spark.read.format("tidekeep"): the same rows as client.read, in parallel partitions, with
tidekeep's errors for bad options and damaged chunk files. Real Spark, real SQLite/PostgreSQL."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException, PythonException
from pyspark.sql import functions as F

import tidekeep as tk
from tidekeep.spark.datasource import load_stream
from tidekeep.spark.options import parse_read_options
from tidekeep.spark.partitions import StorageLocation, build_partitions, plan_partitions, read_partition
from tidekeep.store.chunks import ChunkRef
from tidekeep.streams.controller import ReadTask
from tidekeep.streams.of_workspace import stream_controller

Row = tuple[int, int, str | None, bytes, int, str]


def write_events(client: tk.Client, stream: str, first: int, last: int, writer_id: str = "w1",
                 keys: int = 7) -> None:
    """Events "ev<i>" with routing key k<i % keys>; small batches so each segment gets many chunks."""
    with client.stream(stream).writer(writer_id, batch_size=600) as writer:
        for i in range(first, last):
            writer.write(f"ev{i}".encode(), routing_key=f"k{i % keys}")


def client_rows(client: tk.Client, stream: str, start: object = None, end: object = None) -> list[Row]:
    return [(e.segment, e.offset, e.routing_key, e.payload, e.commit_time_ms, e.writer_id)
            for e in client.stream(stream).read(start=start, end=end)]  # type: ignore[arg-type]


def spark_rows(spark, client: tk.Client, stream: str, **options: str) -> list[Row]:  # type: ignore[no-untyped-def]
    df = spark.read.format("tidekeep").option("stream", stream).options(**client.spark_options()) \
        .options(**options).load()
    return rows_of(df, stream)


def rows_of(df, stream: str) -> list[Row]:  # type: ignore[no-untyped-def]
    """Rows sorted by (segment, offset) -- the order client.read yields them in."""
    collected = df.select("stream", "segment", "offset", "routing_key", "payload",
                          F.unix_millis("commit_time").alias("ms"), "writer_id").collect()
    assert {r.stream for r in collected} <= {stream}
    return sorted((r.segment, r.offset, r.routing_key, bytes(r.payload), r.ms, r.writer_id) for r in collected)


def numbers(rows: list[Row]) -> list[int]:
    return sorted(int(r[3][2:]) for r in rows)


# ---- same rows as client.read -------------------------------------------------------------------


def test_head_to_tail_matches_client_read(spark, storage_client: tk.Client) -> None:
    """On SQLite and on PostgreSQL, on a local storage root and on S3 (executors open the chunks by
    the storage URI)."""
    client = storage_client
    client.create_stream("iot/sensors", tk.StreamConfig(segments=3))
    write_events(client, "iot/sensors", 0, 400)
    write_events(client, "iot/sensors", 400, 500, writer_id="w2")
    expected = client_rows(client, "iot/sensors")
    assert numbers(expected) == list(range(500))
    assert spark_rows(spark, client, "iot/sensors") == expected
    assert spark_rows(spark, client, "iot/sensors", start="head", end="tail") == expected
    assert {r[5] for r in expected} == {"w1", "w2"}


def test_cuts_in_the_middle(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("iot/sensors", tk.StreamConfig(segments=2))
    write_events(client, "iot/sensors", 0, 150)
    first = client.stream("iot/sensors").tail_cut()
    write_events(client, "iot/sensors", 150, 300)
    second = client.stream("iot/sensors").tail_cut()
    write_events(client, "iot/sensors", 300, 450)

    middle = spark_rows(spark, client, "iot/sensors", start=str(first), end=second.to_json())
    assert middle == client_rows(client, "iot/sensors", first, second)
    assert numbers(middle) == list(range(150, 300))
    assert numbers(spark_rows(spark, client, "iot/sensors", start=first.to_json())) == list(range(150, 450))
    assert numbers(spark_rows(spark, client, "iot/sensors", end=str(first))) == list(range(150))

    # cut offsets inside chunks (not at chunk boundaries) filter rows within a chunk
    events = client_rows(client, "iot/sensors")
    seg0 = [r for r in events if r[0] == 0]
    seg1 = [r for r in events if r[0] == 1]
    start = f"iot/sensors:0.0={seg0[5][1]},0.1={seg1[17][1]}"
    end = f"iot/sensors:0.0={seg0[-3][1]},0.1={seg1[-11][1]}"
    inside = spark_rows(spark, client, "iot/sensors", start=start, end=end)
    assert inside == client_rows(client, "iot/sensors", start, end)
    assert inside == sorted(seg0[5:-3] + seg1[17:-11])


def test_empty_reads(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("iot/empty", tk.StreamConfig(segments=2))
    assert spark_rows(spark, client, "iot/empty") == []
    write_events(client, "iot/empty", 0, 50)
    tail = str(client.stream("iot/empty").tail_cut())
    assert spark_rows(spark, client, "iot/empty", start=tail, end=tail) == []
    assert spark_rows(spark, client, "iot/empty", start="tail") == []
    assert spark_rows(spark, client, "iot/empty", end="head") == []


def test_across_split_and_merge_keeps_per_key_order(spark, client: tk.Client) -> None:
    """On SQLite and on PostgreSQL: rows sorted by segment then offset give per-key write order."""
    client.create_stream("iot/scaled", tk.StreamConfig(segments=2))
    write_events(client, "iot/scaled", 0, 200, keys=23)
    client.stream("iot/scaled").split("0.0", 2)  # -> 1.2 [0, .25), 1.3 [.25, .5)
    write_events(client, "iot/scaled", 200, 400, keys=23)
    mid = client.stream("iot/scaled").tail_cut()
    client.stream("iot/scaled").merge(["1.3", "0.1"])  # -> 2.4 [.25, 1)
    write_events(client, "iot/scaled", 400, 600, keys=23)

    rows = spark_rows(spark, client, "iot/scaled")
    assert rows == client_rows(client, "iot/scaled")
    assert numbers(rows) == list(range(600))
    assert {r[0] for r in rows} == {0, 1, (1 << 32) | 2, (1 << 32) | 3, (2 << 32) | 4}
    by_key: dict[str | None, list[int]] = defaultdict(list)
    for row in rows:  # sorted by (segment, offset): ascending segment id reads predecessors first
        by_key[row[2]].append(int(row[3][2:]))
    assert all(seq == sorted(seq) for seq in by_key.values())

    after_mid = spark_rows(spark, client, "iot/scaled", start=str(mid))
    assert after_mid == client_rows(client, "iot/scaled", start=mid)
    assert numbers(after_mid) == list(range(400, 600))


def test_after_truncation(spark, storage_client: tk.Client) -> None:
    client = storage_client
    client.create_stream("iot/trunc", tk.StreamConfig(segments=2))
    original_head = str(client.stream("iot/trunc").head_cut())
    write_events(client, "iot/trunc", 0, 200)
    cut = client.stream("iot/trunc").tail_cut()
    write_events(client, "iot/trunc", 200, 300)
    client.stream("iot/trunc").truncate(cut)

    rows = spark_rows(spark, client, "iot/trunc")
    assert rows == client_rows(client, "iot/trunc")
    assert numbers(rows) == list(range(200, 300))
    with pytest.raises(AnalysisException, match=r"TruncatedData: cannot read iot/trunc from .* has been truncated"):
        spark_rows(spark, client, "iot/trunc", start=original_head)
    with pytest.raises(tk.TruncatedData, match="has been truncated"):
        load_stream(spark, "iot/trunc", start=original_head, **client.spark_options())


def test_a_compacted_stream_reads_as_before(spark, storage_client: tk.Client) -> None:
    """On a local root and on S3: compaction's merged files carry each event's writer and commit time,
    and a cut inside a merged chunk still splits the rows where it did."""
    client = storage_client
    client.create_stream("iot/compacted", tk.StreamConfig(segments=2))
    write_events(client, "iot/compacted", 0, 150)
    middle = str(client.stream("iot/compacted").tail_cut())
    write_events(client, "iot/compacted", 150, 300, writer_id="w2")
    whole, second_half = client_rows(client, "iot/compacted"), client_rows(client, "iot/compacted", start=middle)

    result = client.stream("iot/compacted").compact("1MiB")
    assert result.chunks_after == 2 < result.chunks_before

    assert spark_rows(spark, client, "iot/compacted") == whole
    assert spark_rows(spark, client, "iot/compacted", start=middle) == second_half
    assert {r[5] for r in whole} == {"w1", "w2"}


def test_workspace_from_home_option(spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """Without metadata_url/storage, the options resolve from the workspace as connect() does."""
    client = sqlite_client
    client.create_stream("iot/home", tk.StreamConfig(segments=2))
    write_events(client, "iot/home", 0, 80)
    df = spark.read.format("tidekeep").option("stream", "iot/home").option("home", str(tmp_path / "ws")).load()
    assert rows_of(df, "iot/home") == client_rows(client, "iot/home")
    via_helper = load_stream(spark, "iot/home", home=tmp_path / "ws")
    assert rows_of(via_helper, "iot/home") == client_rows(client, "iot/home")
    as_path = spark.read.format("tidekeep").option("home", str(tmp_path / "ws")).load("iot/home")
    assert rows_of(as_path, "iot/home") == client_rows(client, "iot/home")


# ---- partitions ---------------------------------------------------------------------------------


def test_multi_segment_stream_reads_in_several_partitions(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("iot/parts", tk.StreamConfig(segments=4))
    write_events(client, "iot/parts", 0, 800, keys=50)
    base = spark.read.format("tidekeep").option("stream", "iot/parts").options(**client.spark_options())

    df = base.load()
    assert df.rdd.getNumPartitions() == 4  # one per segment: each is far below 64 MiB
    small = base.option("partition_size", "1KiB").load()
    assert small.rdd.getNumPartitions() > 8
    for frame in (df, small):
        per_partition = frame.groupBy(F.spark_partition_id().alias("p")).agg(
            F.countDistinct("segment").alias("segments")).collect()
        assert len(per_partition) == frame.rdd.getNumPartitions()
        assert all(r.segments == 1 for r in per_partition)
    assert rows_of(small, "iot/parts") == client_rows(client, "iot/parts")


def test_executor_read_uses_storage_only(sqlite_client: tk.Client, tmp_path: Path) -> None:
    """Partitions carry all an executor needs: with the metadata database gone they still read."""
    client = sqlite_client
    client.create_stream("iot/exec", tk.StreamConfig(segments=2))
    write_events(client, "iot/exec", 0, 120)
    expected = client_rows(client, "iot/exec")
    partitions = plan_partitions(parse_read_options({"stream": "iot/exec", **client.spark_options()}))
    client.close()
    for name in ("metadata.db", "metadata.db-wal", "metadata.db-shm"):
        (tmp_path / "ws" / name).unlink(missing_ok=True)
    rows = []
    for partition in partitions:
        for batch in read_partition(partition):
            d = batch.to_pydict()
            rows += [(s, o, k, p, t.timestamp() * 1000, w) for s, o, k, p, t, w in zip(
                d["segment"], d["offset"], d["routing_key"], d["payload"], d["commit_time"], d["writer_id"],
                strict=True)]
    assert [(s, o, k, p, round(t), w) for s, o, k, p, t, w in sorted(rows)] == expected


def _task(segment: int, base: int, length: int) -> ReadTask:
    ref = ChunkRef(f"c-{segment}-{base}", segment, base, length, 1, 0, "w")
    return ReadTask(ref, base, base + length)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(1, 50)), max_size=40), st.integers(1, 120))
def test_build_partitions_groups_consecutive_chunks_per_segment(chunks: list[tuple[int, int]], target: int) -> None:
    # tasks as a plan gives them: segments ascending, offsets ascending within a segment
    tasks, next_offset = [], defaultdict(int)
    for segment, length in sorted(chunks, key=lambda c: c[0]):
        tasks.append(_task(segment, next_offset[segment], length))
        next_offset[segment] += length
    location = StorageLocation("/nowhere", "/nowhere")
    partitions = build_partitions("s/t", tasks, location, target)

    # brute-force oracle: walk the tasks, start a new group on a segment change or when the next
    # task would push a non-empty group over the target
    expected: list[list[ReadTask]] = []
    for task in tasks:
        group = expected[-1] if expected else None
        if group and group[0].chunk.segment == task.chunk.segment and \
                sum(t.end - t.start for t in group) + task.end - task.start <= target:
            group.append(task)
        else:
            expected.append([task])
    assert [list(p.tasks) for p in partitions] == expected
    assert all(p.segment == p.tasks[0].chunk.segment and p.location == location for p in partitions)
    assert all(p.logical_bytes <= target or len(p.tasks) == 1 for p in partitions)


# ---- damaged chunk files ------------------------------------------------------------------------


def _chunk_paths(client: tk.Client, stream: str) -> list[str]:
    plan = stream_controller(client.workspace).plan_read(stream)
    return [task.chunk.path for task in plan.tasks]


def test_corrupt_chunk_fails_the_read_naming_the_file(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("iot/bad", tk.StreamConfig(segments=2))
    write_events(client, "iot/bad", 0, 200)
    victim = _chunk_paths(client, "iot/bad")[3]
    Path(client.workspace.storage.full_path(victim)).write_bytes(b"this is not parquet" * 20)
    with pytest.raises(PythonException, match=rf"CorruptChunk: chunk file {re.escape(victim)} is corrupt"):
        spark_rows(spark, client, "iot/bad")


def test_missing_chunk_fails_the_read_naming_the_file(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("iot/gone", tk.StreamConfig(segments=2))
    write_events(client, "iot/gone", 0, 200)
    victim = _chunk_paths(client, "iot/gone")[-1]
    Path(client.workspace.storage.full_path(victim)).unlink()
    with pytest.raises(PythonException, match=rf"ChunkMissing: chunk file {re.escape(victim)} is missing"):
        spark_rows(spark, client, "iot/gone")


# ---- bad options --------------------------------------------------------------------------------


BAD_OPTIONS = [
    ({}, "InvalidInput", "tidekeep read needs a stream"),
    ({"stream": "iot/../x"}, "InvalidName", "invalid stream name 'iot/../x'"),
    ({"stream": "iot/nope"}, "NotFound", "stream 'iot/nope' does not exist"),
    ({"stream": "nope/x"}, "NotFound", "scope 'nope' does not exist"),
    ({"stream": "iot/opts", "start": "iot/opts:0.0=zz"}, "InvalidStreamCut",
     "malformed stream cut 'iot/opts:0.0=zz': bad entry '0.0=zz'"),
    ({"stream": "iot/opts", "end": '{"stream": "iot/opts"'}, "InvalidStreamCut", "malformed stream cut JSON"),
    ({"stream": "iot/opts", "start": "iot/other:0.0=0,0.1=0"}, "InvalidStreamCut",
     "start cut is for 'iot/other', not 'iot/opts'"),
    ({"stream": "iot/opts", "start": "iot/opts:0.0=0,0.7=0"}, "InvalidStreamCut",
     "invalid stream cut for iot/opts: segment 0.7 does not exist"),
    ({"stream": "iot/opts", "start": "iot/opts:0.0=3,0.1=0"}, "InvalidStreamCut",
     "invalid stream cut for iot/opts: offset 3 in segment 0.0 is not at an event boundary"),
    ({"stream": "iot/opts", "start": "tail", "end": "head"}, "InvalidStreamCut",
     "start cut iot/opts:0.0=70,0.1=400 is not at or before end cut iot/opts:0.0=0,0.1=0"),
    ({"stream": "iot/opts", "colour": "red"}, "InvalidInput", "unknown tidekeep read option 'colour'"),
    ({"stream": "iot/opts", "partition_size": "lots"}, "InvalidInput", "invalid size 'lots'"),
]


@pytest.mark.parametrize(("options", "error", "message"), BAD_OPTIONS)
def test_bad_options_fail_at_load_with_tidekeep_errors(spark, sqlite_client: tk.Client, options: dict[str, str],
                                                       error: str, message: str) -> None:
    client = sqlite_client
    client.create_stream("iot/opts", tk.StreamConfig(segments=2))
    write_events(client, "iot/opts", 0, 40)
    before = (client.stream("iot/opts").describe(), client_rows(client, "iot/opts"), client.list_streams())

    reader = spark.read.format("tidekeep").options(**client.spark_options()).options(**options)
    with pytest.raises(AnalysisException) as caught:
        reader.load()
    assert f"tidekeep.errors.{error}: {message}" in str(caught.value)

    if options:  # the typed error itself, through the helper that validates in the caller
        stream = options["stream"]
        extra = {k: v for k, v in options.items() if k != "stream"}
        with pytest.raises(getattr(tk.errors, error)) as typed:
            load_stream(spark, stream, **client.spark_options(), **extra)  # type: ignore[arg-type]
        assert message in str(typed.value)
        assert "\n" not in str(typed.value)
    assert (client.stream("iot/opts").describe(), client_rows(client, "iot/opts"), client.list_streams()) == before


def test_load_stream_accepts_cut_objects(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream("iot/objs", tk.StreamConfig(segments=2))
    write_events(client, "iot/objs", 0, 60)
    cut = client.stream("iot/objs").tail_cut()
    write_events(client, "iot/objs", 60, 100)
    df = load_stream(spark, "iot/objs", start=cut, **client.spark_options())
    assert rows_of(df, "iot/objs") == client_rows(client, "iot/objs", start=cut)
    assert numbers(rows_of(df, "iot/objs")) == list(range(60, 100))
