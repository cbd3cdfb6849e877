"""The tidekeep Spark sink (docs/spark.md, "Writing"): df.write / df.writeStream .format("tidekeep").

Real Spark (the shared local[2] session), real SQLite and PostgreSQL, real files. Rows written once
and read back by client.read, per-key order within a partition, one transaction per batch, the
exactly-once batch sequence (a replayed batch id, a restart whose commit log lacks the last batch),
time marks, atomicity of a failing task, a scale between the tasks' writes and the commit, and bad
input refused with typed one-line errors that change nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.errors import AnalysisException, StreamingQueryException
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

import tidekeep as tk
from helpers.procs import worker_env
from helpers.storage import chunk_rows, referenced_paths, stored_files
from tidekeep.spark.partitions import StorageLocation
from tidekeep.spark.sink import (
    NOTE_MAX_EVENT_TIME,
    NOTE_NONE,
    NOTE_PROCESSING_TIME,
    SinkColumns,
    SinkTarget,
    commit_messages,
    note_time_for,
    plan_sink,
    save_to_stream,
    write_stream,
    write_task,
)
from tidekeep.spark.staged import StagedFile, first_mismatch
from tidekeep.store.chunks import ChunkRef, ChunkStorage
from tidekeep.streams.model import Router, Segment
from tidekeep.streams.of_workspace import stream_controller

OUT = "iot/out"
SCHEMA = StructType([
    StructField("body", StringType(), nullable=False),
    StructField("key", StringType(), nullable=True),
    StructField("t", TimestampType(), nullable=True),
])


def rows(first: int, last: int, keys: int = 5) -> list[tuple[str, str | None, object]]:
    """Row i: payload "ev<i>", key k<i % keys> (every 7th row has no key), event time 1_000 + i ms."""
    from datetime import UTC, datetime

    return [(f"ev{i}", None if i % 7 == 3 else f"k{i % keys}", datetime.fromtimestamp((1_000 + i) / 1000, UTC))
            for i in range(first, last)]


def sink_options(client: tk.Client, **extra: str) -> dict[str, str]:
    return {"stream": OUT, "payload_column": "body", "routing_key_column": "key", "event_time_column": "t",
            **client.spark_options(), **extra}


def read_back(client: tk.Client) -> list[tuple[str | None, str]]:
    return [(e.routing_key, e.payload.decode()) for e in client.stream(OUT).read()]


def per_key(events: list[tuple[str | None, str]]) -> dict[str | None, list[str]]:
    """Each routing key's payloads in read order; events without a key go to random segments, so
    theirs are compared as a set (sorted)."""
    keyed: dict[str | None, list[str]] = defaultdict(list)
    for key, payload in events:
        keyed[key].append(payload)
    if None in keyed:
        keyed[None].sort()
    return dict(keyed)


def mark_time(client: tk.Client, writer_id: str) -> int | None:
    return next((m.time_ms for m in client.stream(OUT).watermarks.marks() if m.writer_id == writer_id), None)


def committed(client: tk.Client) -> list[tk.TransactionInfo]:
    return [t for t in client.transactions.list(OUT) if t.state == tk.TxnState.COMMITTED]


@pytest.fixture
def out(client: tk.Client) -> str:
    client.create_stream(OUT, tk.StreamConfig(segments=3))
    return OUT


# ---- batch writes -----------------------------------------------------------------------------------


def test_batch_write_reads_back_in_per_key_order(spark, storage_client: tk.Client) -> None:
    """On SQLite and PostgreSQL, on a local storage root and on S3."""
    client = storage_client
    client.create_stream(OUT, tk.StreamConfig(segments=3))
    data = rows(0, 300)
    df = spark.createDataFrame(data, SCHEMA).coalesce(1)  # one task: its per-key order is the input's
    df.write.format("tidekeep").mode("append").options(**sink_options(client, chunk_size="1KiB")).save()

    events = read_back(client)
    assert sorted(p for _, p in events) == sorted(r[0] for r in data)
    assert per_key(events) == per_key([(r[1], r[0]) for r in data])
    # one transaction, with many chunks (1 KiB per task flush), noted at the maximum event time
    [txn] = client.transactions.list(OUT)
    assert (txn.state, txn.writer_id, txn.events, txn.commit_timestamp) == (tk.TxnState.COMMITTED, "spark-batch",
                                                                           300, 1_299)
    assert len(stream_controller(client.workspace).plan_read(OUT).tasks) > 3
    assert mark_time(client, "spark-batch") == 1_299
    assert stored_files(client) == referenced_paths(client)  # nothing staged is left behind


def test_batch_write_binary_payload_long_event_time_and_no_key(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=2))
    schema = StructType([StructField("payload", BinaryType(), False), StructField("ms", LongType(), True)])
    data = [(bytes([i % 256]) * (i % 9), 5_000 - i) for i in range(120)]
    save_to_stream(spark.createDataFrame(data, schema).repartition(3), OUT, event_time_column="ms",
                   writer_id="loader", **client.spark_options())
    events = list(client.stream(OUT).read())
    assert sorted(e.payload for e in events) == sorted(d[0] for d in data)
    assert {e.routing_key for e in events} == {None} and {e.writer_id for e in events} == {"loader"}
    assert mark_time(client, "loader") == 5_000


def test_note_time_none_and_processing_time(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=1))
    df = spark.createDataFrame(rows(0, 10), SCHEMA)
    df.write.format("tidekeep").mode("append").options(**sink_options(client, note_time="none", writer_id="a")).save()
    assert mark_time(client, "a") is None and client.transactions.list(OUT)[0].commit_timestamp is None
    before = int(time.time() * 1000)
    df.write.format("tidekeep").mode("append").options(
        **sink_options(client, note_time="processing_time", writer_id="b")).save()
    assert before <= (mark_time(client, "b") or 0) <= int(time.time() * 1000)
    assert len(read_back(client)) == 20


def test_empty_batch_write_commits_nothing(spark, sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=2))
    spark.createDataFrame([], SCHEMA).write.format("tidekeep").mode("append").options(**sink_options(client)).save()
    assert client.transactions.list(OUT) == [] and read_back(client) == [] and stored_files(client) == set()


# ---- atomicity ----------------------------------------------------------------------------------------


def _failing_payload(flag: Path):  # type: ignore[no-untyped-def]
    """A UDF that raises on row ev37 while `flag` exists (removing the flag "fixes" the job)."""
    flag_path = str(flag)

    @F.udf(StringType())
    def payload(body):  # type: ignore[no-untyped-def]  # no hints: Spark would read them as a pandas UDF's
        import os

        if body == "ev37" and os.path.exists(flag_path):
            raise ValueError("poisoned row ev37")
        return body

    return payload


def test_failed_task_leaves_nothing_and_rerun_writes_once(spark, storage_client: tk.Client, tmp_path: Path) -> None:
    """On a local storage root and on S3 (where a task's abort deletes objects, not files)."""
    client = storage_client
    client.create_stream(OUT, tk.StreamConfig(segments=3))
    flag = tmp_path / "poison"
    flag.touch()
    df = spark.createDataFrame(rows(0, 200), SCHEMA).repartition(4)
    df = df.withColumn("body", _failing_payload(flag)("body"))
    writer = df.write.format("tidekeep").mode("append").options(**sink_options(client, chunk_size="512B"))
    with pytest.raises(Exception, match="poisoned row ev37"):
        writer.save()
    assert read_back(client) == [] and client.transactions.list(OUT) == []
    # the failing task deleted its files and Spark's abort those of finished tasks; a task Spark was
    # still cancelling may leave some, unreferenced: orphans for the sweep, never visible
    assert referenced_paths(client) == set()

    flag.unlink()
    writer.save()
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(200))
    assert len(committed(client)) == 1
    client.sweep(grace=0)
    assert stored_files(client) == referenced_paths(client)
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(200))


# ---- streaming ----------------------------------------------------------------------------------------


def _source(spark, tmp_path: Path, parts: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
    """A parquet directory with one file per part (one micro-batch each with maxFilesPerTrigger=1)."""
    source = tmp_path / "source"
    for first, last in parts:
        spark.createDataFrame(rows(first, last), SCHEMA).coalesce(1).write.mode("append").parquet(str(source))
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))


def _run(query) -> None:  # type: ignore[no-untyped-def]
    finished = query.awaitTermination(120)
    assert finished, "the availableNow query did not finish within 120 s"
    if query.exception() is not None:
        raise query.exception()


def test_stream_writes_every_row_once_one_transaction_per_batch(spark, storage_client: tk.Client,
                                                                tmp_path: Path) -> None:
    client = storage_client
    client.create_stream(OUT, tk.StreamConfig(segments=3))
    # the second file's event times are below the first's: the mark never goes back
    sdf = _source(spark, tmp_path, [(100, 150), (0, 50), (150, 200)])
    checkpoint = tmp_path / "ckpt"
    query = (sdf.writeStream.format("tidekeep").options(**sink_options(client))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    _run(query)

    writer_id = f"spark-{query.id}"  # derived from the checkpoint: the query id stays across restarts
    payloads = sorted(p for _, p in read_back(client))
    assert payloads == sorted(f"ev{i}" for i in [*range(0, 50), *range(100, 200)])
    txns = committed(client)
    assert [t.writer_id for t in txns] == [writer_id] * 3
    assert [t.commit_timestamp for t in txns] == [1_149, 1_149, 1_199]
    assert stream_controller(client.workspace).last_sequence(OUT, writer_id)[1] == 3  # batch ids 0..2 -> sequences 1..3
    assert mark_time(client, writer_id) == 1_199
    assert stored_files(client) == referenced_paths(client)


def test_restart_with_a_lost_commit_log_entry_writes_the_batch_once(spark, client: tk.Client, out: str,
                                                                     tmp_path: Path) -> None:
    sdf = _source(spark, tmp_path, [(0, 40), (40, 80)])
    checkpoint = tmp_path / "ckpt"

    def start():  # type: ignore[no-untyped-def]
        return (sdf.writeStream.format("tidekeep").options(**sink_options(client))
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())

    first = start()
    _run(first)
    assert len(read_back(client)) == 80
    # the driver "died" after tidekeep committed batch 1 but before Spark logged it: Spark runs it again
    (checkpoint / "commits" / "1").unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    second = start()
    _run(second)
    assert second.id == first.id and second.lastProgress is not None
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(80))
    txns = client.transactions.list(OUT)
    assert [(t.state, t.end_reason) for t in txns] == [(tk.TxnState.COMMITTED, "committed")] * 2 + [
        (tk.TxnState.ABORTED, "duplicate batch")]
    assert stored_files(client) == referenced_paths(client)  # the replay's files were deleted


def test_stream_task_failure_then_restart_writes_once(spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=2))
    flag = tmp_path / "poison"
    flag.touch()
    sdf = _source(spark, tmp_path, [(0, 30), (30, 60)])
    sdf = sdf.withColumn("body", _failing_payload(flag)("body"))
    checkpoint = tmp_path / "ckpt"

    def start():  # type: ignore[no-untyped-def]
        return (sdf.writeStream.format("tidekeep").options(**sink_options(client))
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())

    with pytest.raises(StreamingQueryException, match="poisoned row ev37"):
        _run(start())
    # batch 0 committed; batch 1 (holding ev37) left nothing
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(30))
    assert stored_files(client) == referenced_paths(client)
    flag.unlink()
    _run(start())
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(60))
    assert len(committed(client)) == 2


# ---- the driver commit, called as Spark calls it ---------------------------------------------------


def _task_batches(data: list[tuple[str, str | None, object]]) -> list[pa.RecordBatch]:
    table = pa.table({"body": [d[0] for d in data], "key": pa.array([d[1] for d in data], pa.string()),
                      "t": pa.array([d[2] for d in data], pa.timestamp("us", tz="UTC"))})
    return table.to_batches(max_chunksize=25)


def test_commit_twice_with_the_same_batch_id_writes_once(client: tk.Client, out: str) -> None:
    options = sink_options(client, writer_id="q1", chunk_size="300B")
    plan = plan_sink(options, SCHEMA, overwrite=False, streaming=True)
    messages = [write_task(plan.target, iter(_task_batches(rows(0, 60)))),
                write_task(plan.target, iter(_task_batches(rows(60, 100))))]
    first = commit_messages(plan, messages, sequence=8)
    assert (first.rows, first.duplicate) == (100, False)
    # Spark calls commit again with the same messages: nothing is staged twice or deleted
    again = commit_messages(plan, messages, sequence=8)
    assert again.duplicate and again.txn_id is None
    # the batch re-executed (new task files), same batch id: the transaction aborts as a duplicate
    replay = [write_task(plan.target, iter(_task_batches(rows(0, 100))))]
    dup = commit_messages(plan, replay, sequence=8)
    assert dup.duplicate and dup.rows == 0
    assert client.transactions.info(dup.txn_id or "").end_reason == "duplicate batch"
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(100))
    assert stored_files(client) == referenced_paths(client)
    # an older batch id is a duplicate too; the next one commits
    assert commit_messages(plan, [write_task(plan.target, iter(_task_batches(rows(0, 5))))], 3).duplicate
    nxt = commit_messages(plan, [write_task(plan.target, iter(_task_batches(rows(100, 110))))], 9)
    assert (nxt.rows, nxt.duplicate) == (10, False)
    assert stream_controller(client.workspace).last_sequence(OUT, "q1")[1] == 9 and len(read_back(client)) == 110


def test_scale_between_task_writes_and_commit_reroutes_every_row(client: tk.Client, out: str) -> None:
    plan = plan_sink(sink_options(client, writer_id="q2", chunk_size="400B"), SCHEMA, overwrite=False,
                     streaming=True)
    data = rows(0, 150)
    messages = [write_task(plan.target, iter(_task_batches(data)))]
    staged_in = {c.segment for m in messages for c in m.chunks}
    client.stream(OUT).split(0, 2)
    client.stream(OUT).merge([1, 2])
    result = commit_messages(plan, messages, sequence=1)

    state = client.stream(OUT).state()
    active = {s.id for s in state.active_segments()}
    assert staged_in.isdisjoint(active)  # every staged chunk had to move
    assert set(result.positions) <= active
    events = read_back(client)
    assert per_key(events) == per_key([(d[1], d[0]) for d in data])  # all rows, per-key order kept
    assert stored_files(client) == referenced_paths(client)  # the replaced staged files are gone


def test_mark_never_goes_back_below_the_previous_note(client: tk.Client, out: str) -> None:
    plan = plan_sink(sink_options(client, writer_id="q3"), SCHEMA, overwrite=False, streaming=True)
    commit_messages(plan, [write_task(plan.target, iter(_task_batches(rows(400, 410))))], 1)
    assert mark_time(client, "q3") == 1_409
    older = commit_messages(plan, [write_task(plan.target, iter(_task_batches(rows(0, 10))))], 2)
    assert (older.rows, older.note_time_ms, mark_time(client, "q3")) == (10, 1_409, 1_409)
    newer = commit_messages(plan, [write_task(plan.target, iter(_task_batches(rows(500, 501))))], 3)
    assert newer.note_time_ms == 1_500 == mark_time(client, "q3")


# ---- the transaction store's batch sequence ----------------------------------------------------------


def test_transaction_sequence_commits_once(client: tk.Client, out: str) -> None:
    tw = client.stream(OUT).transactional_writer("seq-writer")
    first = tw.begin()
    first.write(b"a", routing_key="k")
    assert not first.commit(sequence=1).duplicate
    second = tw.begin()
    second.write(b"b", routing_key="k")
    second.flush()
    staged = stored_files(client) - referenced_paths(client)
    assert staged
    result = second.commit(sequence=1)
    assert result.duplicate and result.positions == {}
    assert second.status() == tk.TxnState.ABORTED
    assert not (stored_files(client) & staged)  # the duplicate's files are deleted
    assert client.transactions.commit(second.id, None, lambda *a: ([], []), sequence=1).duplicate  # idempotent
    third = tw.begin()
    third.write(b"c", routing_key="k")
    assert not third.commit(timestamp=7, sequence=2).duplicate
    assert [e.payload for e in client.stream(OUT).read()] == [b"a", b"c"]
    assert stream_controller(client.workspace).last_sequence(OUT, "seq-writer")[1] == 2


@pytest.mark.parametrize("sequence", [0, -1, True, "1", 2**63])
def test_transaction_bad_sequence_is_refused_and_changes_nothing(sqlite_client: tk.Client, sequence: object) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=1))
    txn = client.stream(OUT).transactional_writer("w").begin()
    txn.write(b"x")
    txn.flush()
    with pytest.raises(tk.errors.InvalidInput, match=r"invalid batch sequence .*: expected an integer greater"):
        txn.commit(sequence=sequence)  # type: ignore[arg-type]
    assert txn.status() == tk.TxnState.OPEN and list(client.stream(OUT).read()) == []
    txn.commit(sequence=1)
    assert [e.payload for e in client.stream(OUT).read()] == [b"x"]


# ---- the note time decision (pure) -----------------------------------------------------------------


@given(st.lists(st.tuples(st.none() | st.integers(0, 10**6), st.integers(0, 10**6)), max_size=12),
       st.sampled_from([NOTE_MAX_EVENT_TIME, NOTE_PROCESSING_TIME, NOTE_NONE]))
def test_note_time_is_the_running_maximum(batches: list[tuple[int | None, int]], mode: str) -> None:
    """Folding note_time_for over commits notes the maximum so far of the mode's times (oracle: the
    max over every prefix); a noted time never goes down; `none` never notes."""
    mark = None
    for i, (batch_max, now) in enumerate(batches):
        noted = note_time_for(mode, mark, batch_max, now)
        seen = [b if mode == NOTE_MAX_EVENT_TIME else n for b, n in batches[: i + 1]]
        seen = [s for s in seen if s is not None]
        if mode == NOTE_NONE:
            assert noted is None
            continue
        assert noted == (max(seen) if seen else None)
        assert mark is None or (noted is not None and noted >= mark)
        mark = noted


# ---- bad input --------------------------------------------------------------------------------------


BAD_INPUT = [
    ({"stream": "iot/nope"}, SCHEMA, "NotFound", "stream 'iot/nope' does not exist"),
    ({"stream": "iot/../x"}, SCHEMA, "InvalidName", "invalid stream name 'iot/../x'"),
    ({"payload_column": "missing"}, SCHEMA, "InvalidInput",
     "payload column 'missing' is not in the input (columns: body, key, t)"),
    ({"payload_column": None}, SCHEMA, "InvalidInput", "payload column 'payload' is not in the input"),
    ({"payload_column": "n"}, StructType([StructField("n", LongType()), *SCHEMA.fields]), "InvalidInput",
     "payload column 'n' is bigint; expected binary or string"),
    ({"routing_key_column": "n"}, StructType([StructField("n", LongType()), *SCHEMA.fields]), "InvalidInput",
     "routing key column 'n' is bigint; expected string"),
    ({"event_time_column": "key"}, SCHEMA, "InvalidInput",
     "event time column 'key' is string; expected timestamp or long"),
    ({"note_time": "sometimes"}, SCHEMA, "InvalidInput",
     "invalid note_time 'sometimes': one of max_event_time, processing_time, none"),
    ({"event_time_column": None, "note_time": "max_event_time"}, SCHEMA, "InvalidInput",
     'note_time "max_event_time" needs an event time'),
    ({"colour": "red"}, SCHEMA, "InvalidInput", "unknown tidekeep write option 'colour'"),
    ({"writer_id": "a b"}, SCHEMA, "InvalidName", "invalid writer id 'a b'"),
    ({"chunk_size": "0"}, SCHEMA, "InvalidInput", "invalid chunk_size '0': must be greater than zero"),
]


@pytest.mark.parametrize(("changes", "schema", "error", "message"), BAD_INPUT)
def test_bad_input_fails_before_writing_with_a_typed_error(spark, sqlite_client: tk.Client, changes: dict,
                                                           schema: StructType, error: str, message: str) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=2))
    options = {k: v for k, v in {**sink_options(client), **changes}.items() if v is not None}
    data = [tuple(1 if f.dataType == LongType() else r[SCHEMA.names.index(f.name)] for f in schema.fields)
            for r in rows(0, 5)]
    df = spark.createDataFrame(data, schema)
    before = (client.stream(OUT).describe(), client.list_streams(), stored_files(client))

    with pytest.raises(AnalysisException) as caught:
        df.write.format("tidekeep").mode("append").options(**options).save()
    assert f"tidekeep.errors.{error}: {message}" in str(caught.value)
    stream = options.pop("stream")
    with pytest.raises(getattr(tk.errors, error)) as typed:
        save_to_stream(df, stream, **options)
    assert message in str(typed.value) and "\n" not in str(typed.value)

    assert (client.stream(OUT).describe(), client.list_streams(), stored_files(client)) == before
    assert client.transactions.list() == []


def test_bad_input_in_a_streaming_query_fails_at_start(spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=2))
    sdf = _source(spark, tmp_path, [(0, 10)])
    query = (sdf.writeStream.format("tidekeep").options(**sink_options(client, payload_column="nope"))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    with pytest.raises(StreamingQueryException, match=r"tidekeep\.errors\.InvalidInput: payload column 'nope' is not"):
        _run(query)
    with pytest.raises(tk.errors.InvalidInput, match="event time column 'body' is string"):
        options = {k: v for k, v in sink_options(client).items() if k != "stream"}
        write_stream(sdf, OUT, **{**options, "event_time_column": "body"})
    with pytest.raises(tk.errors.InvalidInput, match="tidekeep streams are append-only"):
        plan_sink(sink_options(client), SCHEMA, overwrite=True, streaming=True)
    with pytest.raises(AnalysisException, match='InvalidInput: tidekeep streams are append-only: write with mode'):
        spark.createDataFrame(rows(0, 3), SCHEMA).write.format("tidekeep").mode("overwrite") \
            .options(**sink_options(client)).save()
    with pytest.raises(tk.errors.InvalidInput, match="tidekeep stream sink needs a writer id"):
        plan_sink(sink_options(client), SCHEMA, overwrite=False, streaming=True)
    with pytest.raises(tk.errors.InvalidInput, match="cannot derive a writer id from checkpoint"):
        plan_sink(sink_options(client, checkpointLocation=str(tmp_path / "empty")), SCHEMA, False, True)
    assert read_back(client) == [] and client.transactions.list() == [] and stored_files(client) == set()


def test_executor_refuses_null_payloads_and_negative_times(sqlite_client: tk.Client) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=1))
    plan = plan_sink(sink_options(client, writer_id="x"), SCHEMA, overwrite=False, streaming=True)
    nulls = pa.record_batch({"body": pa.array(["a", None]), "key": pa.array(["k", "k"]),
                             "t": pa.array([1, 2], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(tk.errors.InvalidInput, match="payload column 'body' has a null value"):
        write_task(plan.target, iter([*_task_batches(rows(0, 30)), nulls]))
    early = pa.record_batch({"body": pa.array(["a"]), "key": pa.array(["k"]),
                             "t": pa.array([-5_000], pa.timestamp("us", tz="UTC"))})
    with pytest.raises(tk.errors.InvalidInput, match="has a time before 1970"):
        write_task(plan.target, iter([early]))
    assert stored_files(client) == set()  # the failed tasks removed what they had written


def test_concurrent_commits_of_one_sequence_append_once(client: tk.Client, out: str, monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    """Two drivers commit the same batch (a zombie and its replacement): one appends, the other is
    a duplicate, also when the writer has no row yet (on PostgreSQL both pass the check, held there
    by a pause point, and both insert it; the loser's unique violation makes it plan again)."""
    gate = tmp_path / "sequence-checked"  # each commit waits past its check until the gate opens
    gate.touch()
    monkeypatch.setenv("TIDEKEEP_PAUSE", f"txn.sequence_checked=@{gate}")
    caplog.set_level("INFO", logger="tidekeep.txn")
    tw = client.stream(OUT).transactional_writer("racer")
    txns = []
    for payload in (b"one", b"two"):
        txn = tw.begin()
        txn.write(payload, routing_key="k")
        txn.flush()
        txns.append(txn)
    barrier = threading.Barrier(2)
    results: list[object] = [None, None]

    def commit(i: int) -> None:
        barrier.wait()
        try:
            results[i] = txns[i].commit(sequence=1)
        except Exception as exc:  # reported by the assertion below
            results[i] = exc

    threads = [threading.Thread(target=commit, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    # PostgreSQL: both commits pass the check before either inserts; SQLite serialises the two write
    # transactions, so only one is past the check while the other waits for the lock
    arrivals = 2 if client.settings.metadata_url.startswith("postgresql") else 1
    reached = Path(f"{gate}.reached")
    while not (reached.exists() and len(reached.read_text().splitlines()) >= arrivals):
        assert all(thread.is_alive() for thread in threads), results  # a commit ended before the gate
        time.sleep(0.01)
    gate.unlink()
    for thread in threads:
        thread.join(120)
    assert all(isinstance(r, tk.TxnCommitResult) for r in results), results
    assert sorted(r.duplicate for r in results) == [False, True]  # type: ignore[union-attr]
    assert len(list(client.stream(OUT).read())) == 1
    if client.settings.metadata_url.startswith("postgresql"):  # SQLite serialises the two write transactions
        assert any("writer racer committed concurrently" in r.getMessage() for r in caplog.records)
    assert stored_files(client) == referenced_paths(client)


def test_each_micro_batch_routes_with_the_segments_current_at_its_planning(spark, sqlite_client: tk.Client,
                                                                          tmp_path: Path) -> None:
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=2))
    source = tmp_path / "source"
    spark.createDataFrame(rows(0, 40), SCHEMA).coalesce(1).write.parquet(str(source))
    query = (spark.readStream.schema(SCHEMA).parquet(str(source)).writeStream.format("tidekeep")
             .options(**sink_options(client)).option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        query.processAllAvailable()
        client.stream(OUT).split(0, 2)
        client.stream(OUT).split(1, 2)
        spark.createDataFrame(rows(40, 80), SCHEMA).coalesce(1).write.mode("append").parquet(str(source))
        query.processAllAvailable()
    finally:
        query.stop()
    second = committed(client)[1]
    state = client.stream(OUT).state()
    assert set(second.positions) <= {s.id for s in state.active_segments()}
    # routed by the tasks, not re-routed by the commit: the chunks stayed in the tasks' directories
    assert all("/txn/spark-" in path for path in referenced_paths(client))
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(80))


_QUERY_PROCESS = """
import json, sys
from tidekeep.spark.session import build_spark
options, source, checkpoint = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
spark = build_spark("local[1]", "tidekeep-sink-crash")
schema = "body string, key string, t timestamp"
query = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(source)
         .writeStream.format("tidekeep").options(**options).option("checkpointLocation", checkpoint)
         .trigger(availableNow=True).start())
query.awaitTermination(300)
sys.exit(0 if query.exception() is None else 3)
"""


def test_query_dying_between_tidekeep_commit_and_spark_log_restarts_exactly_once(
        spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """A query runs two batches; a second process continues it from the checkpoint and dies (kill -9
    at the fault point) right after tidekeep committed its first batch, before Spark logged it; the
    restarted query replays that batch as a duplicate and finishes: every input row exactly once."""

    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=3))
    sdf = _source(spark, tmp_path, [(0, 20), (20, 40)])
    checkpoint = tmp_path / "ckpt"

    def start():  # type: ignore[no-untyped-def]
        return (sdf.writeStream.format("tidekeep").options(**sink_options(client))
                .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())

    _run(start())
    for first, last in [(40, 60), (60, 80), (80, 100)]:
        spark.createDataFrame(rows(first, last), SCHEMA).coalesce(1).write.mode("append") \
            .parquet(str(tmp_path / "source"))

    env = worker_env(client.settings.metadata_url, client.settings.storage_uri, tmp_path / "ws",
                     fault="txn.after_commit")
    crashed = subprocess.run([sys.executable, "-c", _QUERY_PROCESS, json.dumps(sink_options(client)),
                              str(tmp_path / "source"), str(checkpoint)], env=env, capture_output=True,
                             text=True, timeout=300, check=False)
    assert crashed.returncode != 0, crashed.stdout[-2000:] + crashed.stderr[-2000:]
    assert len(committed(client)) == 3  # tidekeep committed batch 2 ...
    assert not (checkpoint / "commits" / "2").exists()  # ... Spark never logged it

    _run(start())
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(100))
    assert len(committed(client)) == 5
    assert [t.end_reason for t in client.transactions.list(OUT)].count("duplicate batch") == 1
    assert stream_controller(client.workspace).last_sequence(OUT, committed(client)[0].writer_id)[1] == 5
    # Spark aborted the batch whose commit "failed": the files tidekeep had committed were kept
    assert stored_files(client) == referenced_paths(client)


def test_a_batch_commit_whose_answer_is_lost_is_resolved_not_replayed(
        spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """Every micro-batch's tidekeep commit lands and its answer is lost (the fault point raises
    StoreUnavailable after the commit): the driver's commit finds the transaction committed instead
    of failing the batch, so nothing is aborted, replayed or dropped as a duplicate."""
    client = sqlite_client
    client.create_stream(OUT, tk.StreamConfig(segments=3))
    _source(spark, tmp_path, [(0, 20), (20, 40), (40, 60)])
    env = worker_env(client.settings.metadata_url, client.settings.storage_uri, tmp_path / "ws")
    env["TIDEKEEP_FAULT_RAISE"] = "txn.commit.lost_ack"
    done = subprocess.run([sys.executable, "-c", _QUERY_PROCESS, json.dumps(sink_options(client)),
                           str(tmp_path / "source"), str(tmp_path / "ckpt")], env=env, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(60))
    batches = committed(client)
    assert len(batches) == 3
    assert [t.end_reason for t in client.transactions.list(OUT)].count("duplicate batch") == 0
    assert stream_controller(client.workspace).last_sequence(OUT, batches[0].writer_id)[1] == 3
    assert stored_files(client) == referenced_paths(client)


# ---- no silent loss: the driver commits only files it can see --------------------------------------

_PRIVATE_PROCESS = """
import json, sys
from tidekeep.spark.session import build_spark
batch_options, stream_options, source, checkpoint = json.loads(sys.argv[1]), json.loads(sys.argv[2]), *sys.argv[3:]
spark = build_spark("local[2]", "tidekeep-sink-private")
schema = "body string, key string, t timestamp"
outcome = {}
try:
    spark.read.schema(schema).parquet(source).write.format("tidekeep").mode("append").options(**batch_options).save()
    outcome["batch"] = None
except Exception as exc:
    outcome["batch"] = str(exc)
query = (spark.readStream.schema(schema).parquet(source).writeStream.format("tidekeep").options(**stream_options)
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
try:
    query.awaitTermination(300)
    outcome["stream"] = None if query.exception() is None else str(query.exception())
except Exception as exc:
    outcome["stream"] = str(exc)
print("OUTCOME " + json.dumps(outcome), flush=True)
"""


def test_a_task_writing_to_a_private_directory_fails_the_batch_and_commits_nothing(
        spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """A Spark process whose tasks write their chunk files into a directory private to their worker
    (the fault seam sink.private_storage, read by the executors) runs a batch write and a streaming
    query: both fail at the driver's commit with StagedFileMissing naming the file, the task and the
    storage root, and nothing is committed. Without the fault, the same batch write and the same
    query restarted from its checkpoint write every row exactly once."""
    client = sqlite_client
    streams = {"batch": OUT, "stream": "iot/out-stream"}
    for name in streams.values():
        client.create_stream(name, tk.StreamConfig(segments=3))
    source = tmp_path / "source"
    spark.createDataFrame(rows(0, 90), SCHEMA).repartition(3).write.parquet(str(source))
    tails = {name: client.stream(name).tail_cut() for name in streams.values()}
    options = {which: sink_options(client, stream=name) for which, name in streams.items()}
    checkpoint = tmp_path / "ckpt"
    private = tmp_path / "private"  # the executors' temporary directory: where their "own disks" are
    private.mkdir()

    env = worker_env(client.settings.metadata_url, client.settings.storage_uri, tmp_path / "ws",
                     fault="sink.private_storage")
    env["TMPDIR"] = str(private)
    run = subprocess.run([sys.executable, "-c", _PRIVATE_PROCESS, json.dumps(options["batch"]),
                          json.dumps(options["stream"]), str(source), str(checkpoint)], env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    lines = [line for line in run.stdout.splitlines() if line.startswith("OUTCOME ")]
    assert run.returncode == 0 and lines, run.stdout[-2000:] + run.stderr[-3000:]
    outcome = json.loads(lines[0].removeprefix("OUTCOME "))
    root = client.workspace.storage.root
    for which in streams:
        error = outcome[which]
        assert error is not None, f"the {which} write committed files the driver cannot see"
        assert "tidekeep.errors.StagedFileMissing: staged file streams/" in error
        assert f"is missing from storage {root}" in error and "written by partition " in error

    for name in streams.values():  # nothing committed, nothing visible, nothing left in the storage
        assert client.stream(name).tail_cut() == tails[name]
        assert chunk_rows(client, name) == []
        assert [t for t in client.transactions.list(name) if t.state == tk.TxnState.COMMITTED] == []
        assert list(client.stream(name).read()) == []
    assert stored_files(client) == set()
    assert list(private.rglob("*.parquet"))  # the tasks did write: on their private disks

    # the fault gone: the batch write again, and the query restarted from its checkpoint
    spark.read.schema(SCHEMA).parquet(str(source)).write.format("tidekeep").mode("append") \
        .options(**options["batch"]).save()
    query = (spark.readStream.schema(SCHEMA).parquet(str(source)).writeStream.format("tidekeep")
             .options(**options["stream"]).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    _run(query)
    for name in streams.values():
        assert sorted(e.payload.decode() for e in client.stream(name).read()) == sorted(f"ev{i}" for i in range(90))
        assert len([t for t in client.transactions.list(name) if t.state == tk.TxnState.COMMITTED]) == 1
    assert stored_files(client) == referenced_paths(client)


@pytest.mark.parametrize("damage", ["deleted", "shorter", "longer"])
def test_a_staged_file_missing_or_of_another_size_fails_the_commit_and_commits_nothing(
        client: tk.Client, out: str, damage: str) -> None:
    """Between the tasks' writes and the driver's commit a staged file disappears or changes size:
    the commit raises StagedFileMissing naming it and the storage root, begins no transaction, and
    deletes the files that are there; the batch written again commits every row once."""
    plan = plan_sink(sink_options(client, writer_id="q3", chunk_size="300B"), SCHEMA, overwrite=False,
                     streaming=True)
    messages = [write_task(plan.target, iter(_task_batches(rows(0, 60)))),
                write_task(plan.target, iter(_task_batches(rows(60, 100))))]
    victim = messages[1].chunks[-1].path
    full = Path(client.workspace.storage.full_path(victim))
    if damage == "deleted":
        full.unlink()
    else:
        data = full.read_bytes()
        full.write_bytes(data[:-7] if damage == "shorter" else data + b"garbage")
    found = f"has {full.stat().st_size} bytes" if full.exists() else "is missing"
    tail = client.stream(OUT).tail_cut()

    with pytest.raises(tk.StagedFileMissing) as failure:
        commit_messages(plan, messages, sequence=1)
    assert failure.value.path == victim
    message = str(failure.value)
    assert f"staged file {victim} " in message and f"storage {client.workspace.storage.root}" in message
    assert found in message
    assert client.stream(OUT).tail_cut() == tail and chunk_rows(client, OUT) == []
    assert client.transactions.list(OUT) == []
    assert stream_controller(client.workspace).last_sequence(OUT, "q3")[1] == 0
    assert stored_files(client) == set()  # the files that were there are deleted, as an abort does

    again = [write_task(plan.target, iter(_task_batches(rows(0, 100))))]
    result = commit_messages(plan, again, sequence=1)
    assert (result.rows, result.duplicate) == (100, False)
    assert sorted(p for _, p in read_back(client)) == sorted(f"ev{i}" for i in range(100))
    assert stored_files(client) == referenced_paths(client)


# ---- the executor side (property) -------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 300), st.sampled_from(["a", "b", "c", None]), st.integers(0, 10**6)),
                min_size=1, max_size=80),
       st.integers(1, 2_000), st.integers(1, 30))
def test_task_chunks_keep_every_row_in_order(tmp_path_factory: pytest.TempPathFactory,
                                             events: list[tuple[int, str | None, int]], chunk_size: int,
                                             batch_rows: int) -> None:
    """Oracle: the task's chunks, read back segment by segment in message order, hold every row once;
    each key's rows in input order (all in one segment); no chunk much above chunk_size (a flush is
    cut between rows, so at most one row over); the maximum event time is the input's."""
    root = tmp_path_factory.mktemp("task")
    segments = [Segment(i, i / 3, (i + 1) / 3) for i in range(3)]
    target = SinkTarget("s/x", "streams/s/x-0", StorageLocation(str(root), str(root)), Router(segments),
                        SinkColumns("body", "key", "ms"), chunk_size)
    payloads = [f"{i:04d}".encode() + b"x" * size for i, (size, _, _) in enumerate(events)]
    table = pa.table({"body": pa.array(payloads, pa.binary()), "key": pa.array([e[1] for e in events], pa.string()),
                      "ms": pa.array([e[2] for e in events], pa.int64())})
    message = write_task(target, iter(table.to_batches(max_chunksize=batch_rows)))

    storage = ChunkStorage(str(root))
    read: list[tuple[int, bytes, str | None]] = []
    for chunk in message.chunks:
        assert chunk.length <= chunk_size + max(len(p) for p in payloads) + 8
        data = storage.read_chunk(ChunkRef(chunk.path, chunk.segment, 0, chunk.length, chunk.event_count, 0, "w"))
        read.extend((chunk.segment, p, k) for p, k in zip(data["payload"].to_pylist(), data["routing_key"].to_pylist(),
                                                          strict=True))
    assert sorted(p for _, p, _ in read) == sorted(payloads)
    for key in ("a", "b", "c"):
        mine = [(s, p) for s, p, k in read if k == key]
        assert [p for _, p in mine] == [p for p, e in zip(payloads, events, strict=True) if e[1] == key]
        assert len({s for s, _ in mine}) <= 1
    assert (message.rows, message.max_event_time_ms) == (len(events), max(e[2] for e in events))


@given(st.lists(st.tuples(st.sampled_from(["d1/a", "d1/b", "d2/c", "d3/d"]), st.integers(0, 3)), max_size=4,
                unique_by=lambda f: f[0]),
       st.dictionaries(st.sampled_from(["d1/a", "d1/b", "d2/c", "d3/d", "d4/e"]), st.integers(0, 3)))
def test_the_first_staged_file_not_found_at_its_size_is_reported(files: list[tuple[str, int]],
                                                                 found: dict[str, int]) -> None:
    """Oracle: scanning the files in order, the first whose path is absent from what the driver found
    or found at another size, with the size found (None when absent)."""
    staged = [StagedFile(path, size, f"task {i}") for i, (path, size) in enumerate(files)]
    expected = None
    for file in staged:
        if file.path not in found or found[file.path] != file.size:
            expected = (file, found.get(file.path))
            break
    assert first_mismatch(staged, found) == expected
