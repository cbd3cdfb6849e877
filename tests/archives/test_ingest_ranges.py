"""Ingest in one pass (archives/ingest_ranges.py): time ranges cut from a sample split the bytes
evenly; each range's label lands in its own Spark partition; a real ingest parses every file once
and still gives every message exactly once, in order."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import archive_rows
from tidekeep.archives.ingest_ranges import FileSpan, bucket_labels, bucket_of, key_bounds, spans_over_time


def byte_shares(files: list[FileSpan], bounds: list[int]) -> list[float]:
    """Brute force: each file's bytes spread one per millisecond of its span, counted per range."""
    shares = [0.0] * (len(bounds) + 1)
    for begin, end, size in spans_over_time(files):
        per_ms = size / (end + 1 - begin)
        for t in range(begin, end + 1):
            shares[bucket_of(t, bounds)] += per_ms
    return shares


spans = st.builds(lambda size, first, length, tail, directory: FileSpan(
    size, first, (first + length) if tail else None, directory),
    st.integers(1, 10_000), st.integers(0, 2_000), st.integers(0, 300), st.booleans(), st.sampled_from("ab"))


@given(st.lists(spans, min_size=1, max_size=8), st.integers(1, 6))
def test_the_ranges_split_the_bytes_evenly(files: list[FileSpan], partitions: int) -> None:
    bounds = key_bounds(files, partitions)
    if partitions == 1:
        assert bounds == []
        return
    assert len(bounds) == partitions - 1 and bounds == sorted(bounds)
    shares = byte_shares(files, bounds)
    total = sum(shares)
    densest_ms = sum(size / (end + 1 - begin) for begin, end, size in spans_over_time(files))
    # each range gets its share, give or take the bytes of the millisecond each of its two bounds is
    # rounded into
    for share in shares:
        assert abs(share - total / partitions) <= 2 * densest_ms + 1e-6 * total


def test_a_gzip_file_spans_until_the_next_file_of_its_directory() -> None:
    files = [FileSpan(100, 0, None, "web"), FileSpan(100, 1000, 1999, "web"), FileSpan(50, 5000, None, "auth"),
             FileSpan(10, None, None, "backup")]
    assert spans_over_time(files) == [(5000, 5000, 50), (0, 1000, 100), (1000, 1999, 100)]
    assert key_bounds(files, 1) == [] and key_bounds([FileSpan(9, None, None, "x")], 4) == []


@pytest.mark.parametrize("partitions", [1, 2, 3, 5, 8])
def test_each_range_label_lands_in_its_own_partition(spark, partitions: int) -> None:
    labels = bucket_labels(partitions)
    frame = spark.createDataFrame([(label,) for label in labels], "bucket INT").repartition(partitions, "bucket")
    placed = {row["bucket"]: row["p"] for row in frame.selectExpr("bucket", "spark_partition_id() AS p").collect()}
    assert [placed[label] for label in labels] == list(range(partitions))


def test_an_ingest_parses_every_file_once(tmp_path: Path, spark) -> None:
    client = tk.connect(home=tmp_path / "ws", settings={"archives.target_size": 4000}, create=True)
    try:
        base = int(dt.datetime(2024, 7, 1, tzinfo=dt.UTC).timestamp() * 1000)
        files = []
        for name in ("a", "b", "c"):
            lines = [f"{dt.datetime.fromtimestamp((base + i * 1000) / 1000, dt.UTC).isoformat()} {name}-{i} x={i}"
                     for i in range(3000)]
            path = tmp_path / "logs" / f"{name}.log"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + "\n")
            files.append(path)
        report = client.archives.ingest("web", [tmp_path / "logs"])
        tracker = spark.sparkContext.statusTracker()
        jobs = tracker.getJobIdsForGroup(f"tidekeep-ingest-_ingest-{report.ingest_id}")
        stages = {s: tracker.getStageInfo(s) for j in jobs for s in tracker.getJobInfo(j).stageIds}
        ran = sorted(stage.numCompletedTasks for stage in stages.values() if stage.numCompletedTasks)
        # one parse task per file, then one write task per range, and no job sampling the keys first
        # (adaptive execution runs the parse stage as a job of its own and skips it in the next)
        assert len(ran) == 2 and ran.count(len(files)) >= 1, ran
        assert sum(ran) - len(files) > 1  # more than one range: the cut was used
        rows = [r for a in report.archives for r in archive_rows(client, a)]
        assert sorted((r["timestamp"], r["message"]) for r in rows) == sorted(
            (base + i * 1000, line) for path in files
            for i, line in enumerate(path.read_text().splitlines()))
        for archive in report.archives:  # each archive in timestamp order, ranges apart
            stamps = [r["timestamp"] for r in archive_rows(client, archive)]
            assert min(stamps) == archive.begin_ts and max(stamps) == archive.end_ts
    finally:
        client.close()
