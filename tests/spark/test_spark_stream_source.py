"""spark.readStream.format("tidekeep"): micro-batches between stream cuts, exactly once across
restarts, per-key order across scaling, the watermark column, acknowledgements that drive
consumption-based retention, truncated checkpoints and bad input. Real Spark, SQLite/PostgreSQL."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

import tidekeep as tk
from tidekeep.streams.watermarks import compare

Row = tuple[int, int, int, str | None, str]  # batch id, segment, offset, routing key, payload


def write_events(client: tk.Client, stream: str, first: int, last: int, keys: int = 7, writer_id: str = "w1") -> None:
    with client.stream(stream).writer(writer_id, batch_size=300) as writer:
        for i in range(first, last):
            writer.write(f"ev{i}".encode(), routing_key=f"k{i % keys}")


def run(spark, client: tk.Client, stream: str, checkpoint: Path, **options: str) -> list[Row]:  # type: ignore[no-untyped-def]
    """One availableNow run of a query into foreachBatch; the rows with their batch ids."""
    seen: list[Row] = []

    def collect(batch, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        seen.extend((batch_id, r.segment, r.offset, r.routing_key, bytes(r.payload).decode())
                    for r in batch.select("segment", "offset", "routing_key", "payload").collect())

    df = spark.readStream.format("tidekeep").option("stream", stream).options(**client.spark_options()) \
        .options(**options).load()
    query = df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint)) \
        .trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(120), "the query did not finish within 120 s"
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()  # type: ignore[misc]
    return seen


def numbers(rows: list[Row]) -> list[int]:
    return sorted(int(r[4][2:]) for r in rows)


def test_reads_everything_once_in_bounded_batches_and_resumes(spark, client: tk.Client, tmp_path: Path) -> None:
    """On SQLite and PostgreSQL: several micro-batches under max_bytes_per_trigger; a second run of
    the same checkpoint reads only what was appended since, once."""
    client.create_stream("iot/a", tk.StreamConfig(segments=2))
    write_events(client, "iot/a", 0, 300)
    rows = run(spark, client, "iot/a", tmp_path / "ck", max_bytes_per_trigger="1KB")
    assert numbers(rows) == list(range(300))
    batches = {r[0] for r in rows}
    assert len(batches) >= 4
    for b in batches:  # each batch within the budget (chunks are ~300 bytes, well below 1 KB)
        assert sum(8 + len(r[4]) for r in rows if r[0] == b) <= 1024

    write_events(client, "iot/a", 300, 360)
    again = run(spark, client, "iot/a", tmp_path / "ck", max_bytes_per_trigger="1KB")
    assert numbers(again) == list(range(300, 360))
    assert min(r[0] for r in again) > max(batches)
    assert run(spark, client, "iot/a", tmp_path / "ck") == []


def test_across_split_and_merge_per_key_order(spark, client: tk.Client, tmp_path: Path) -> None:
    """Rows sorted by (batch, segment, offset) give every key's events in write order: a successor's
    rows come in a later batch than its predecessors'."""
    client.create_stream("iot/scaled", tk.StreamConfig(segments=2))
    write_events(client, "iot/scaled", 0, 150, keys=23)
    client.stream("iot/scaled").split("0.0", 2)
    write_events(client, "iot/scaled", 150, 300, keys=23)
    active = sorted(client.stream("iot/scaled").state().active_segments(), key=lambda s: s.key_low)
    client.stream("iot/scaled").merge([active[1].id, active[2].id])  # 1.3 [.25, .5) and 0.1 [.5, 1)
    write_events(client, "iot/scaled", 300, 450, keys=23)

    rows = run(spark, client, "iot/scaled", tmp_path / "ck")  # no byte limit: only the scaling splits batches
    assert numbers(rows) == list(range(450))
    per_key: dict[str, list[int]] = {}
    for r in sorted(rows):
        per_key.setdefault(str(r[3]), []).append(int(r[4][2:]))
    for key, seq in per_key.items():
        assert seq == sorted(seq), key
    segments = client.stream("iot/scaled").state().segments
    batches_of: dict[int, set[int]] = {}
    for r in rows:
        batches_of.setdefault(r[1], set()).add(r[0])
    assert len(batches_of) == 5  # 0.0, 0.1, the split halves 1.2 and 1.3, the merged 2.4: all hold data
    for seg, batches in batches_of.items():
        for pred in (p for p in batches_of if p < seg and segments[p].overlaps(segments[seg])):
            assert min(batches) > max(batches_of[pred]), (seg, pred)  # successors in later batches only
    assert len({r[0] for r in rows}) >= 3


def test_watermark_column_equals_the_oracle(spark, client: tk.Client, tmp_path: Path) -> None:
    """Batch and streaming reads stamp each row with the last watermark its position has passed."""
    client.create_stream("iot/wm", tk.StreamConfig(segments=2))
    for step in range(4):
        write_events(client, "iot/wm", step * 40, step * 40 + 40)
        client.stream("iot/wm").watermarks.note("w1", 1_000 * (step + 1))
        assert client.stream("iot/wm").watermarks.compute() is not None
        if step == 1:
            client.stream("iot/wm").split("0.1", 2)
    marks = client.stream("iot/wm").watermarks.list()
    assert len(marks) == 4
    segments = client.stream("iot/wm").state().segments
    df = spark.read.format("tidekeep").option("stream", "iot/wm").options(**client.spark_options()).load()
    rows = df.selectExpr("segment", "offset", "unix_millis(watermark) as wm").collect()
    assert len(rows) == 160
    stamped = 0
    for r in rows:
        passed = [m.lower_time_ms for m in marks if compare({r.segment: r.offset}, m.cut, segments) > 0]
        assert r.wm == (passed[-1] if passed else None), r
        stamped += r.wm is not None
    assert 0 < stamped < 160

    # the streaming read stamps the same values (same code path), batch by batch
    streamed: list[tuple[int, int, int | None]] = []

    def collect(batch, batch_id: int) -> None:  # type: ignore[no-untyped-def]
        streamed.extend((r.segment, r.offset, r.wm) for r in batch.selectExpr(
            "segment", "offset", "unix_millis(watermark) as wm").collect())

    query = spark.readStream.format("tidekeep").option("stream", "iot/wm").option("max_bytes_per_trigger", "2KB") \
        .options(**client.spark_options()).load().writeStream.foreachBatch(collect) \
        .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start()
    assert query.awaitTermination(120)
    assert sorted(streamed) == sorted((r.segment, r.offset, r.wm) for r in rows)


def test_commit_acknowledges_and_retention_follows(spark, client: tk.Client, tmp_path: Path) -> None:
    """The group is created at the query's start; Spark's commits publish acknowledgements, and a
    size policy with minimum 0 truncates up to the acknowledged cut, never beyond it."""
    client.create_stream("iot/ret", tk.StreamConfig(segments=2, retention=tk.RetentionPolicy.by_size(0, "1GB")))
    write_events(client, "iot/ret", 0, 200)
    rows = run(spark, client, "iot/ret", tmp_path / "ck", reader_group="query", max_bytes_per_trigger="1KB")
    assert numbers(rows) == list(range(200))
    (sub,) = client.stream("iot/ret").subscribers()
    assert sub.reader_group == "query" and sub.retention_type == "MANUAL_RELEASE_AT_USER_STREAMCUT"
    assert sub.start_positions == {0: 0, 1: 0}  # created at the query's initial offset, the head
    acknowledged = client.stream("iot/ret").tail_cut()
    assert sub.positions == acknowledged.positions  # every batch the run read
    write_events(client, "iot/ret", 200, 260)  # not read yet
    client.stream("iot/ret").retention.run()
    assert client.stream("iot/ret").head_cut() == acknowledged  # up to the committed cut, not the tail
    assert client.stream("iot/ret").size_between(acknowledged, client.stream("iot/ret").tail_cut()) > 0

    # the next run reads and acknowledges the rest; an older copy of the checkpoint, restarted,
    # re-reads what came after it, and its ends behind the acknowledgement are skipped (no error)
    shutil.copytree(tmp_path / "ck", tmp_path / "old")
    rows = run(spark, client, "iot/ret", tmp_path / "ck", reader_group="query", max_bytes_per_trigger="1KB")
    assert numbers(rows) == list(range(200, 260))
    (later,) = client.stream("iot/ret").subscribers()
    assert later.positions == client.stream("iot/ret").tail_cut().positions
    replayed = run(spark, client, "iot/ret", tmp_path / "old", reader_group="query", max_bytes_per_trigger="1KB")
    assert numbers(replayed) == list(range(200, 260))
    (kept,) = client.stream("iot/ret").subscribers()
    assert kept.positions == later.positions
    client.stream("iot/ret").retention.run()
    assert client.stream("iot/ret").head_cut() == client.stream("iot/ret").tail_cut()


def test_initial_offset_from_the_groups_acknowledgement(spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    """A new query without `start` begins at its group's acknowledged cut; `start` overrides it."""
    client = sqlite_client
    client.create_stream("iot/init", tk.StreamConfig(segments=2))
    client.create_reader_group("svc", tk.ReaderGroupConfig(
        ["iot/init"], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    write_events(client, "iot/init", 0, 40)
    client.reader_group("svc").update_retention_stream_cut({"iot/init": client.stream("iot/init").tail_cut()})
    write_events(client, "iot/init", 40, 70)
    assert numbers(run(spark, client, "iot/init", tmp_path / "a", reader_group="svc")) == list(range(40, 70))
    assert numbers(run(spark, client, "iot/init", tmp_path / "b", reader_group="svc", start="head")) == \
        list(range(70))
    assert run(spark, client, "iot/init", tmp_path / "c", start="tail") == []


def test_truncated_checkpoint_fails_or_skips(spark, sqlite_client: tk.Client, tmp_path: Path) -> None:
    client = sqlite_client
    client.create_stream("iot/tr", tk.StreamConfig(segments=1))
    write_events(client, "iot/tr", 0, 50)
    assert numbers(run(spark, client, "iot/tr", tmp_path / "ck")) == list(range(50))
    write_events(client, "iot/tr", 50, 100)
    # everything the checkpoint has not read yet and some more is truncated away
    middle = next(e for e in client.stream("iot/tr").read() if e.payload == b"ev80")
    client.stream("iot/tr").truncate(f"iot/tr:0.0={middle.offset}")
    with pytest.raises(StreamingQueryException, match=r"TruncatedData.*iot/tr.*before the head"):
        run(spark, client, "iot/tr", tmp_path / "ck")
    rows = run(spark, client, "iot/tr", tmp_path / "ck", on_truncated="skip")
    assert numbers(rows) == list(range(80, 100))


def test_a_checkpoint_of_a_deleted_stream_is_refused_by_the_recreated_one(spark, sqlite_client: tk.Client,
                                                                           tmp_path: Path) -> None:
    """Offsets carry the stream's uid: a query restarted from its checkpoint after the stream was
    deleted and re-created (same segments, same writes, so the same offsets) fails instead of
    reading the new stream from the old positions; a new checkpoint reads it all."""
    client = sqlite_client
    client.create_stream("iot/again", tk.StreamConfig(segments=2))
    write_events(client, "iot/again", 0, 40)
    old_uid = client.stream("iot/again").state().info.uid
    assert numbers(run(spark, client, "iot/again", tmp_path / "ck")) == list(range(40))
    client.stream("iot/again").delete(force=True)
    client.create_stream("iot/again", tk.StreamConfig(segments=2))
    write_events(client, "iot/again", 0, 60)
    new_uid = client.stream("iot/again").state().info.uid
    refusal = (rf"InvalidStreamCut.*cut of an earlier incarnation of stream iot/again \(uid {old_uid}\), the "
               rf"stream now has uid {new_uid}")
    with pytest.raises(StreamingQueryException, match=refusal):
        run(spark, client, "iot/again", tmp_path / "ck")
    assert numbers(run(spark, client, "iot/again", tmp_path / "new")) == list(range(60))


@pytest.mark.parametrize(("options", "message"), [
    ({"stream": "iot/nope"}, "stream 'iot/nope' does not exist"),
    ({"stream": "iot/bad", "start": "iot/bad:0.0=x"}, "malformed stream cut"),
    ({"stream": "iot/bad", "max_bytes_per_trigger": "lots"}, "invalid max_bytes_per_trigger 'lots'"),
    ({"stream": "iot/bad", "max_bytes_per_trigger": "0"}, "must be greater than zero"),
    ({"stream": "iot/bad", "on_truncated": "ignore"}, "invalid on_truncated 'ignore'"),
    ({"stream": "iot/bad", "reader_group": "other"}, "reads iot/other, not only 'iot/bad'"),
    ({"stream": "iot/bad", "reader_group": "plain"}, "has retention type NONE"),
    ({"stream": "iot/bad", "reader_group": "x", "colour": "red"}, "unknown tidekeep streaming read option 'colour'"),
])
def test_bad_input_fails_at_load(spark, sqlite_client: tk.Client, options: dict[str, str], message: str) -> None:
    client = sqlite_client
    client.create_stream("iot/bad", tk.StreamConfig(segments=1))
    client.create_stream("iot/other", tk.StreamConfig(segments=1))
    client.create_reader_group("other", tk.ReaderGroupConfig(
        ["iot/other"], retention_type=tk.RetentionType.MANUAL_RELEASE_AT_USER_STREAMCUT))
    client.create_reader_group("plain", tk.ReaderGroupConfig(["iot/bad"]))
    groups = client.list_reader_groups()
    with pytest.raises(AnalysisException, match=message):
        spark.readStream.format("tidekeep").options(**client.spark_options()).options(**options).load()
    assert client.list_reader_groups() == groups  # nothing created


def test_stream_only_option_refused_by_batch_read_and_end_by_stream(spark, sqlite_client: tk.Client,
                                                                    tmp_path: Path) -> None:
    client = sqlite_client
    client.create_stream("iot/opt", tk.StreamConfig(segments=1))
    write_events(client, "iot/opt", 0, 5)
    with pytest.raises(Exception, match="unknown tidekeep read option 'reader_group'"):
        spark.read.format("tidekeep").option("stream", "iot/opt").option("reader_group", "g") \
            .options(**client.spark_options()).load().collect()
    with pytest.raises(Exception, match="unknown tidekeep streaming read option 'end'"):
        run(spark, client, "iot/opt", tmp_path / "ck", end="tail")
