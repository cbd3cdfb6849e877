"""Ingest in one pass (archives/ingest_ranges.py): time ranges cut from a sample split the bytes
evenly; each range's label lands in its own Spark partition; a real ingest parses every file once
and still gives every message exactly once, in order."""

from __future__ import annotations

import datetime as dt
import gzip
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tidekeep as tk
from helpers.archives import archive_rows
from tidekeep.archives.ingest import SAMPLE_BYTES, survey_input
from tidekeep.archives.ingest_ranges import FileSpan, bucket_labels, bucket_of, key_bounds, spans_over_time
from tidekeep.archives.timestamps import make_rules
from tidekeep.store.inputs import InputFile, InputOpener, list_inputs


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


class CountingOpener(InputOpener):
    """The real opener, counting the files it opens (the driver's survey is meant to open each once)."""

    def __init__(self) -> None:
        super().__init__()
        self.opened: list[str] = []

    def stream(self, file: InputFile) -> Any:
        self.opened.append(file.name)
        return super().stream(file)

    def random_access(self, file: InputFile) -> Any:
        self.opened.append(file.name)
        return super().random_access(file)


def stamped_lines(base_ms: int, count: int, step_ms: int) -> list[tuple[int, str]]:
    return [(base_ms + i * step_ms,
             f"{dt.datetime.fromtimestamp((base_ms + i * step_ms) / 1000, dt.UTC).isoformat(timespec='milliseconds')}"
             f" req={i} path=/api/{i % 7}") for i in range(count)]


@pytest.mark.parametrize("count", [0, 1, 40, 5_000])
@pytest.mark.parametrize("compressed", [False, True])
def test_the_survey_opens_each_file_once_and_finds_its_span_and_size(tmp_path: Path, count: int,
                                                                     compressed: bool) -> None:
    base = int(dt.datetime(2024, 7, 1, tzinfo=dt.UTC).timestamp() * 1000)
    lines = stamped_lines(base, count, 1500)
    text = "".join(f"{line}\n" for _, line in lines).encode()
    path = tmp_path / ("app.log.gz" if compressed else "app.log")
    path.write_bytes(gzip.compress(text, mtime=0) if compressed else text)
    [file] = list_inputs([str(path)])
    opener = CountingOpener()
    survey = survey_input(file, opener, make_rules("UTC", None), "logs")
    assert opener.opened == [file.name]
    size = path.stat().st_size
    assert survey.raw_bytes == (max(len(text), 3 * size) if compressed else size)
    first = lines[0][0] if lines else None
    # a plain file's tail gives its last timestamp; a gzip file's end is not read
    last = None if compressed or not lines else lines[-1][0]
    assert survey.span == FileSpan(survey.raw_bytes, first, last, "logs")
    if count == 5_000:
        assert len(text) > 2 * SAMPLE_BYTES  # the head and the tail are different reads


def test_a_file_that_cannot_be_gunzipped_goes_without_a_span(tmp_path: Path) -> None:
    path = tmp_path / "broken.log.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(range(256)) * 4)
    [file] = list_inputs([str(path)])
    survey = survey_input(file, CountingOpener(), make_rules("UTC", None), "logs")
    assert survey.span.first_ts is None and survey.span.last_ts is None
